//! The attack classes of arl-sandbox's suite (reach, IPC, sockets, leftovers, processes,
//! pipes, uids), as they look from a WASI guest.

use std::time::{Duration, Instant};

use arl_core::Limits;

use super::{last_job, lines, run, run_with};

#[test]
fn attack_the_checkout_the_binary_and_proc_do_not_exist() {
    let exe = std::env::current_exe().unwrap().display().to_string();
    let bank = concat!(env!("CARGO_MANIFEST_DIR"), "/../tasks/bank/minmax.txt");
    let code = format!(
        "import os\nfor p in [{exe:?}, {bank:?}, {:?}, '/proc', '/proc/self/cmdline', '/sys', '/dev/null', '/etc/passwd', '/usr/bin/python3']:\n    try:\n        os.stat(p)\n        print('exists', p)\n    except OSError as e:\n        print('absent', e.errno)\nprint(hasattr(os, 'getppid'), hasattr(os, 'getpid'))\n",
        std::env::current_dir().unwrap().display().to_string()
    );
    let out = run(&code);
    let l = lines(&out);
    assert_eq!(l.len(), 10, "{out:?}");
    assert!(l[..9].iter().all(|l| l.starts_with("absent")), "{out:?}");
    assert_eq!(l[9], "False True", "no parent to look up: {out:?}");
}

#[test]
fn attack_no_host_process_is_visible() {
    let out = run(
        "import os\ntry:\n    print(os.listdir('/proc'))\nexcept OSError as e:\n    print('refused', e.errno)\nprint(hasattr(os, 'kill'), hasattr(os, 'fork'), hasattr(os, 'system'))\n",
    );
    assert_eq!(lines(&out), ["refused 44", "False False False"], "ENOENT (WASI numbering): {out:?}");
}

#[test]
fn attack_sysv_ipc_and_raw_system_calls_are_out_of_reach() {
    // The stdlib has no SysV IPC; the way in would be ctypes, which WASI CPython lacks.
    let out = run(
        "try:\n    import ctypes\n    print('ctypes')\nexcept ImportError as e:\n    print('refused', type(e).__name__)\nimport os\nprint(hasattr(os, 'mkfifo'), hasattr(os, 'memfd_create'))\n",
    );
    assert_eq!(lines(&out).first().copied(), Some("refused ModuleNotFoundError"), "{out:?}");
}

#[test]
fn attack_unix_sockets_vsock_and_every_family_fail() {
    let path = std::env::temp_dir().join(format!("arl-wasm-daemon-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let code = format!(
        "import socket\nfor family, addr in [(getattr(socket, 'AF_UNIX', 1), {:?}), (40, (2, 1234)), (16, (0, 0)), (socket.AF_INET, ('127.0.0.1', 9))]:\n    try:\n        s = socket.socket(family, socket.SOCK_STREAM)\n        s.connect(addr)\n        print('connected', family)\n    except Exception as e:\n        print('refused', type(e).__name__)\n",
        path.display().to_string()
    );
    let out = run(&code);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(lines(&out).len(), 4, "{out:?}");
    assert!(lines(&out).iter().all(|l| l.starts_with("refused")), "{out:?}");
    assert!(listener.accept().is_err(), "the host listener saw a connection");
}

#[test]
fn attack_files_in_host_world_writable_dirs_land_in_the_job_dir_or_nowhere() {
    let marker = format!("arl-wasm-leftover-{}", std::process::id());
    let dirs = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/lock"];
    let code = format!(
        "import os\nfor d in {dirs:?}:\n    try:\n        open(os.path.join(d, {marker:?}), 'w').write('x')\n        print('wrote', d)\n    except OSError as e:\n        print('refused', d, e.errno)\n"
    );
    let out = run(&code);
    assert!(lines(&out).iter().all(|l| l.starts_with("refused")), "no such directories in the guest: {out:?}");
    for d in dirs {
        assert!(!std::path::Path::new(d).join(&marker).exists(), "{d}/{marker} landed on the host");
    }
}

#[test]
fn attack_renaming_the_job_dir_is_refused_and_it_is_still_removed() {
    let out = run(
        "import os\nfor src, dst in [('/', '/x'), ('.', '../elsewhere'), ('/', '../../moved')]:\n    try:\n        os.rename(src, dst)\n        print('renamed', src)\n    except OSError as e:\n        print('refused', e.errno)\nos.mkdir('sub')\nos.rename('sub', 'sub2')\nprint(os.listdir('/'))\n",
    );
    assert_eq!(lines(&out).iter().filter(|l| l.starts_with("refused")).count(), 3, "{out:?}");
    assert!(!last_job().dir.exists());
}

#[test]
fn attack_handing_the_output_to_a_concurrent_job_is_impossible_and_the_caller_does_not_wait() {
    // No socket, no fd passing, no shared directory: a job cannot give its stdout to another.
    let limits = Limits { wall_timeout: Duration::from_secs(10), ..Limits::default() };
    // The process's one-time set-up (the compiled module) first, so that the quick job's
    // wait below is its own.
    run_with("pass\n", limits.clone());
    std::thread::scope(|scope| {
        // 6 s, 20 times a quick job's usual run: a caller that waited for it would return after it.
        let slow = scope.spawn(|| run_with("import time\ntime.sleep(6)\nprint('slow done')\n", limits.clone()));
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        let quick = run_with("import os\nprint(hasattr(os, 'dup2'), os.listdir('/'))\n", limits.clone());
        let waited = t.elapsed();
        assert!(!slow.is_finished(), "the caller returned with the quick job, not with the slow one: {waited:?}");
        assert!(quick.wall_ms as u128 + 50 >= waited.as_millis(), "wall_ms covers the wait: {quick:?}");
        assert_eq!(lines(&quick).get(1).copied(), None, "{quick:?}");
        assert_eq!(slow.join().unwrap().stdout, "slow done\n");
    });
}
