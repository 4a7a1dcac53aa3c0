//! The attack suite: each test is one thing a policy (or a bug) might do from inside a job.
//! Every one must be contained, none may hang, and after each nothing of the job may be left
//! (`support::assert_nothing_outlived`, run by every `run`). Forged *result* lines are the
//! grader's business and are tested in `arl-tasks` (grade.rs); the answer-key hunt across
//! both gyms is in the integration tests (`tests/integration/answer_key.rs`). The attacks
//! every sandbox must contain are written once (`crate::conformance`); the same classes
//! against `wasm` are in arl-sandbox-wasm's attacks.

mod ipc;
mod leftovers;
mod network;
mod output;
mod reach;
mod resources;
mod startup;
pub mod support;
mod unprivileged;

use std::time::Duration;

use arl_core::{Job, JobFile, Limits, Sandbox};

use support::{is_root, lines, run, run_with, sandbox};

// The attacks every sandbox must contain (`crate::conformance`).
crate::conformance_tests!(run, run_with);

#[test]
fn stdin_reaches_the_job_and_files_sit_beside_it() {
    let job = Job {
        stdin: Some("41".into()),
        ..Job::python(
            "main.py",
            vec![
                JobFile { path: "main.py".into(), contents: "import os, sys\nsys.path.insert(0, os.getcwd())  # -I keeps the script's directory off sys.path\nimport helper, pkg.deep\nprint(helper.inc(int(input())), pkg.deep.X)\nprint(sorted(os.listdir('.')))\ntry:\n    os.write(0, b'x')\n    print('stdin writable')\nexcept OSError as e:\n    print('stdin read-only', e.errno)\n".into() },
                JobFile { path: "helper.py".into(), contents: "def inc(x):\n    return x + 1\n".into() },
                JobFile { path: "pkg/deep.py".into(), contents: "X = 'deep'\n".into() },
            ],
        )
    };
    let out = sandbox().run(&job).unwrap();
    support::assert_nothing_outlived();
    assert_eq!(lines(&out), ["42 deep", "['helper.py', 'main.py', 'pkg']", "stdin read-only 9"], "{out:?}");
}

#[test]
fn the_job_runs_unprivileged_in_its_own_small_tmpfs() {
    let out = run(
        "import os\nprint(os.getuid(), os.getgid(), os.getcwd(), os.environ['HOME'], os.path.realpath('/tmp'))\nst = os.statvfs('.')\nprint(st.f_files <= 5000, st.f_blocks * st.f_frsize <= 64 << 20)\nprint([l.split()[8] for l in open('/proc/self/mountinfo') if l.split()[4] == '/job'])\nfor l in open('/proc/self/status'):\n    if l.split(':')[0] in ('CapEff', 'CapPrm', 'NoNewPrivs', 'Seccomp'):\n        print(l.split()[0], l.split()[1])\n",
    );
    let l = lines(&out);
    assert_eq!(l.len(), 7, "{out:?}");
    let ids: Vec<&str> = l[0].split(' ').collect();
    if is_root() {
        assert!(ids[0].parse::<u64>().unwrap() >= 1 << 31 && ids[0] == ids[1], "a fresh uid/gid: {out:?}");
    } else {
        assert_eq!(&ids[..2], ["1000", "1000"], "{out:?}");
    }
    assert_eq!(&ids[2..], ["/job", "/job", "/job"], "{out:?}");
    assert_eq!(l[1], "True True", "the job dir is a small tmpfs: {out:?}");
    assert_eq!(l[2], "['tmpfs']", "{out:?}");
    assert_eq!(&l[3..], ["CapPrm: 0000000000000000", "CapEff: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2"], "{out:?}");
}

#[test]
fn attack_fork_is_refused() {
    let out = run("import os\ntry:\n    pid = os.fork()\n    print('forked', pid)\nexcept OSError as e:\n    print('refused', e.errno)\n");
    assert!(out.stdout.starts_with("refused"), "{out:?}");
}

#[test]
fn attack_a_ten_billion_element_list_hits_the_memory_limit() {
    let out = run("x = [0] * 10**10\nprint('allocated')\n");
    assert!(!out.stdout.contains("allocated"), "{out:?}");
    assert!(out.stderr.contains("MemoryError"), "{out:?}");
}

#[test]
fn attack_an_infinite_loop_hits_the_cpu_limit() {
    let out = run("while True:\n    pass\n");
    assert!(!out.success(), "{out:?}");
    assert!(out.signal == Some(libc::SIGXCPU) || out.signal == Some(libc::SIGKILL), "{out:?}");
    assert!(!out.timed_out, "the CPU limit (1 s) fires before the wall clock (3 s): {out:?}");
}

#[test]
fn attack_sleeping_past_the_timeout_is_killed() {
    let limits = Limits { wall_timeout: Duration::from_millis(700), ..Limits::default() };
    // Plan the roots first (start-up discovery is not part of the job's time).
    support::sandbox();
    let job = Job {
        limits,
        ..Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: "import time\ntime.sleep(60)\nprint('woke')\n".into() }])
    };
    let t = std::time::Instant::now();
    let out = sandbox().run(&job).unwrap();
    // Taken before the scan for survivors, which takes its own time on a busy host.
    let elapsed = t.elapsed().as_millis() as u64;
    support::assert_nothing_outlived();
    assert!(out.timed_out && out.signal == Some(libc::SIGKILL), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(out.wall_ms < 5_000, "killed promptly, took {} ms", out.wall_ms);
    assert!(out.wall_ms + 50 >= elapsed, "wall_ms is taken at the end ({elapsed} ms in all): {out:?}");
}

#[test]
fn attack_a_large_file_is_capped_at_the_file_size_limit() {
    let code = "import os\ntry:\n    with open('big', 'wb') as f:\n        f.write(b'x' * (8 << 20))\nexcept OSError as e:\n    print('refused', e.errno)\nprint(os.path.getsize('big'))\n";
    let out = run(code);
    let l = lines(&out);
    assert!(l.first().is_some_and(|l| l.starts_with("refused")), "{out:?}");
    assert!(l[1].parse::<u64>().unwrap() <= 1 << 20, "{out:?}");
}

#[test]
fn attack_the_parents_environment_is_out_of_reach() {
    let code = "import os\nprint(sorted(os.environ), os.getppid())\ntry:\n    print(open(f'/proc/{os.getppid()}/environ', 'rb').read()[:40])\nexcept OSError as e:\n    print('refused', e.errno)\n";
    let out = run(code);
    let l = lines(&out);
    assert!(l[0] == "['HOME', 'LANG', 'PATH'] 0" || l[0] == "['HOME', 'LANG', 'LC_CTYPE', 'PATH'] 0", "{out:?}");
    assert_eq!(l[1], "refused 2", "no parent in the job's PID namespace: {out:?}");
}

#[test]
fn attack_signalling_anything_outside_is_impossible() {
    // PID 1 is the job itself; its parent is outside its PID namespace (getppid is 0), and
    // kill(-1) reaches only its own namespace. The trainer and its neighbours live on.
    let code = "import os, signal\nprint(os.getpid(), os.getppid())\nfor pid in [os.getppid(), -1]:\n    try:\n        os.kill(pid, signal.SIGKILL)\n        print('sent', pid)\n    except OSError as e:\n        print('refused', e.errno)\nprint('alive')\n";
    std::thread::scope(|scope| {
        let neighbour = scope.spawn(|| run("import time\ntime.sleep(0.6)\nprint('fine')\n"));
        std::thread::sleep(Duration::from_millis(100));
        let out = run(code);
        // kill(0, …) and kill(-1, …) signal only the job's own namespace, where PID 1 (the job)
        // ignores a signal it has no handler for.
        assert_eq!(lines(&out).first().copied(), Some("1 0"), "{out:?}");
        assert!(out.stdout.ends_with("alive\n") || out.signal == Some(libc::SIGKILL), "{out:?}");
        assert_eq!(neighbour.join().unwrap().stdout, "fine\n");
    });
}

#[test]
fn a_bad_job_file_path_is_refused_before_anything_runs() {
    for path in ["../escape.py", "/etc/x.py", ""] {
        let job = Job::python("main.py", vec![JobFile { path: path.into(), contents: String::new() }]);
        let err = sandbox().run(&job).unwrap_err().to_string();
        assert!(err.contains("must be relative"), "{path}: {err}");
    }
}
