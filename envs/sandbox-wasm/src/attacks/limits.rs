//! The `wasm` sandbox's own blind spots, closed: a directory whose host path is too long
//! for an absolute walk, descriptor exhaustion (every guest open is a trainer fd), a single
//! huge write, and inodes.

use std::time::Duration;

use arl_core::Limits;

use super::{last_job, lines, run, run_with};
use crate::watch::{JOB_INODES, MAX_OPEN_FILES};

/// Nested directories whose guest path is 4080 bytes long: the host path of the innermost
/// (the job dir's ~20 bytes in front) is longer than PATH_MAX (4096), so an absolute walk
/// cannot even name it, though every guest path stays just under the limit.
const DEEP: &str = "import os\nparts = ['d' * 200] * 20 + ['e' * 60]\npath = ''\nfor p in parts:\n    path = p if not path else path + '/' + p\n    os.mkdir(path)\n";

#[test]
fn attack_a_big_file_under_a_host_path_longer_than_path_max_is_still_stopped() {
    let code = format!(
        "{DEEP}print(len(path), flush=True)\nwith open(path + '/big', 'wb') as f:\n    for _ in range(64):\n        f.write(b'x' * (256 << 10))\n        f.flush()\nprint('wrote 16 MiB')\n"
    );
    let limits = Limits { wall_timeout: Duration::from_secs(10), cpu_seconds: 5, ..Limits::default() };
    let out = run_with(&code, limits);
    assert!(lines(&out).first().is_some_and(|n| n.parse::<usize>().unwrap() + last_job().dir.as_os_str().len() > 4096), "{out:?}");
    assert!(!out.stdout.contains("wrote"), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "{out:?}");
    let big = last_job().size("big");
    assert!(big > 0 && big <= (1 << 20) + (256 << 10), "overshoot of at most one write: {big} bytes");
}

#[test]
fn attack_exhausting_descriptors_hits_the_per_job_cap_and_the_watch_still_works() {
    let code = "import os\nfiles = []\ntry:\n    while len(files) < 100000:\n        files.append(open(f'f{len(files)}', 'w'))\nexcept OSError as e:\n    print('stopped', e.errno, len(files))\nwith open('big', 'wb') as f:\n    pass\n";
    // After the cap the job cannot even open `big`: it ends with the OSError. Then the same
    // job, cap reached, writes a big file through an already open descriptor.
    let out = run(code);
    let l = lines(&out);
    assert_eq!(l.first().copied(), Some(format!("stopped 33 {MAX_OPEN_FILES}").as_str()), "EMFILE (WASI numbering) at the cap: {out:?}");
    let out = run(
        "import os\nfiles = []\ntry:\n    while True:\n        files.append(open(f'f{len(files)}', 'wb'))\nexcept OSError:\n    pass\nfor _ in range(40):\n    files[0].write(b'x' * (64 << 10))\n    files[0].flush()\nprint('wrote 2.5 MiB')\n",
    );
    assert!(!out.stdout.contains("wrote"), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "{out:?}");
}

#[test]
fn attack_a_single_huge_write_lands_nothing() {
    let out = run("with open('big', 'wb') as f:\n    f.write(b'x' * (64 << 20))\nprint('wrote 64 MiB')\n");
    assert!(!out.stdout.contains("wrote"), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "{out:?}");
    assert!(out.stderr.contains("file size limit"), "{out:?}");
    assert_eq!(last_job().size("big"), 0, "the write was refused before it happened");
    // Growing a file by truncate, or by writing at a far offset, is stopped the same way.
    for code in [
        "import os\nf = open('big', 'wb')\nf.truncate(1 << 30)\nprint('grew')\n",
        "import os\nfd = os.open('big', os.O_WRONLY | os.O_CREAT)\nos.pwrite(fd, b'x', 1 << 30)\nprint('grew')\n",
    ] {
        let out = run(code);
        assert!(!out.stdout.contains("grew") && out.signal == Some(libc::SIGXFSZ), "{code}: {out:?}");
        assert_eq!(last_job().size("big"), 0, "{code}");
    }
}

#[test]
fn attack_many_writes_to_many_files_stop_at_the_job_dirs_room() {
    let out = run("for i in range(40):\n    with open(f'f{i}', 'wb') as f:\n        f.write(b'x' * (900 << 10))\nprint('wrote 36 MB')\n");
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "{out:?}");
    assert!(!out.stdout.contains("wrote"), "{out:?}");
}

#[test]
fn attack_exhausting_inodes_is_stopped_and_the_next_job_runs() {
    // The tick's walk grows with the directory and runs on the job's CPU clock (spaced to a
    // tenth of it): 10 s of CPU, the test sandbox's ceiling being 20.
    let limits = Limits { wall_timeout: Duration::from_secs(20), cpu_seconds: 10, ..Limits::default() };
    let out = run_with("n = 0\nwhile n < 100000:\n    open(f'f{n}', 'w').close()\n    n += 1\nprint('made', n)\n", limits);
    assert!(!out.stdout.contains("made"), "{out:?}");
    assert_eq!(out.signal, Some(libc::SIGXFSZ), "{out:?}");
    assert!(out.stderr.contains(&format!("more than {}", JOB_INODES + 1)), "{out:?}");
    assert_eq!(run("print('next')\n").stdout, "next\n");
}

#[test]
fn the_limits_match_rlimits() {
    assert_eq!(crate::watch::JOB_INODES, arl_sandbox::JOB_INODES);
    assert_eq!(crate::watch::JOB_ROOM_FILES, arl_sandbox::JOB_ROOM_FILES);
}
