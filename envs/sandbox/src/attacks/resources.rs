//! Kernel resources a job could hold beyond its rlimits (issue #50): SysV shared memory that
//! outlives its detach, host-wide async-I/O contexts, the memory of many processes at once,
//! another process's descriptors; and what `/proc/self/mountinfo` shows of the host.

use std::time::Duration;

use arl_core::{Job, JobFile, Limits, Sandbox};

use super::support::{assert_nothing_outlived, lines, run, run_with, sandbox};

/// Job code with a `libc` of ctypes and `sys(nr, *args)`: a raw system call's result, or
/// minus its errno.
const SYSCALL: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sys(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r if r >= 0 else -ctypes.get_errno()
"#;

/// Issue #50, hole 1: one job created, filled and detached 64 MiB segments one at a time and
/// pinned 1.25 GiB of host memory beyond its 512 MiB `RLIMIT_AS`: a fresh IPC namespace has the
/// kernel's unlimited `shmmax`/`shmall`. Here the job asks for 8 segments of 32 MiB (more
/// than its 128 MiB address space) and gets none; SysV queues and semaphores and POSIX
/// queues are refused alike.
#[test]
fn attack_sysv_shared_memory_cannot_pin_memory_beyond_the_job() {
    let code = format!(
        "{SYSCALL}\npinned = 0\nfirst = None\nfor i in range(8):\n    sid = sys({shmget}, 0, 32 << 20, 0o1000 | 0o600)\n    first = sid if first is None else first\n    if sid < 0:\n        break\n    addr = sys({shmat}, sid, 0, 0)\n    if addr < 0 and addr > -4096:\n        break\n    ctypes.memset(addr, 1, 32 << 20)\n    sys({shmdt}, addr)\n    pinned += 32 << 20\nprint(pinned >> 20, first)\nprint(sys({msgget}, 0, 0o1000 | 0o600), sys({semget}, 0, 1, 0o1000 | 0o600), sys({mq_open}, 0, 0, 0, 0))\n",
        shmget = libc::SYS_shmget,
        shmat = libc::SYS_shmat,
        shmdt = libc::SYS_shmdt,
        msgget = libc::SYS_msgget,
        semget = libc::SYS_semget,
        mq_open = libc::SYS_mq_open,
    );
    let out =
        run_with(&code, Limits { memory_bytes: 128 << 20, wall_timeout: Duration::from_secs(10), cpu_seconds: 5, ..Limits::default() });
    let enosys = -libc::ENOSYS;
    assert_eq!(lines(&out), [format!("0 {enosys}"), format!("{enosys} {enosys} {enosys}")], "{out:?}");
}

/// Issue #50, hole 8: `io_setup` reserves from the host-wide `fs.aio-max-nr` (65536 events):
/// one job could hold all of it while it runs.
#[test]
fn attack_async_io_contexts_are_refused() {
    let code = format!("{SYSCALL}\nctx = ctypes.c_ulong(0)\nprint(sys({}, 65536, ctypes.addressof(ctx)))\n", libc::SYS_io_setup);
    let out = run(&code);
    assert_eq!(out.stdout, format!("{}\n", -libc::ENOSYS), "{out:?}");
}

/// Issue #50, hole 7: a process of the job took its PID 1's stderr (the Bash runner's report
/// pipe) with `pidfd_getfd`. No job process may take another's descriptors.
#[test]
fn attack_pidfd_getfd_cannot_take_another_process_descriptor() {
    let code = format!(
        "{SYSCALL}\nimport sys as _s\n_s.stdout.flush()\npid = os.fork()\nif pid == 0:\n    fd = sys({open}, 1, 0)\n    print('pidfd', fd >= 0, flush=True)\n    print('getfd', sys({getfd}, fd, 2, 0), flush=True)\n    os._exit(0)\nos.waitpid(pid, 0)\n",
        open = libc::SYS_pidfd_open,
        getfd = libc::SYS_pidfd_getfd,
    );
    let out = run_with(&code, Limits { processes: 4, wall_timeout: Duration::from_secs(5), ..Limits::default() });
    assert_eq!(lines(&out), ["pidfd True".to_string(), format!("getfd {}", -libc::EPERM)], "{out:?}");
}

/// Issue #50: `RLIMIT_AS` bounds each process, not a job of many: 5 processes of 160 MiB each
/// would hold 800 MiB. Where the host gives the sandbox a memory cgroup, the job as a whole
/// holds at most its limit (its address space, its tmpfs, a little slack); the kernel kills
/// what goes beyond.
#[test]
fn attack_many_processes_cannot_hold_more_memory_than_one_may() {
    let s = sandbox();
    if let Err(why) = s.memory_cgroup() {
        arl_core::testing::skip(&format!("no memory cgroup here ({why})"));
        return;
    }
    // Each child holds its 160 MiB until a common moment, then says so: the ones alive then
    // hold their memory at the same time (the kernel may kill any of them, the first ones
    // included, when a later one allocates).
    let code = "import os, time, sys\nsys.stdout.flush()\nat = time.time() + 3\nkids = []\nfor i in range(5):\n    pid = os.fork()\n    if pid == 0:\n        b = b'x' * (160 << 20)\n        time.sleep(max(0, at - time.time()))\n        print('held', i, len(b), flush=True)\n        os._exit(0)\n    kids.append(pid)\nfor pid in kids:\n    os.waitpid(pid, 0)\n";
    let limits =
        Limits { processes: 8, memory_bytes: 256 << 20, wall_timeout: Duration::from_secs(15), cpu_seconds: 10, ..Limits::default() };
    let out = run_with(code, limits);
    let held = lines(&out).iter().filter(|l| l.starts_with("held")).count();
    assert!(held <= 2, "{held} processes held 160 MiB each at once: {out:?}");
}

/// A job's memory cgroup is its own: the job sees it as `/`, and it is gone after the job.
#[test]
fn the_memory_cgroup_is_the_jobs_own_and_goes_with_it() {
    let s = sandbox();
    let Ok(how) = s.memory_cgroup() else {
        arl_core::testing::skip("no memory cgroup here");
        return;
    };
    let limits = Limits { processes: 2, wall_timeout: Duration::from_secs(5), ..Limits::default() };
    let out = run_with("print(open('/proc/self/cgroup').read().split())\n", limits);
    assert!(out.stdout.contains(":/'") && !out.stdout.contains("arl-sandbox"), "{out:?}");
    let dir = how.split("under ").nth(1).and_then(|d| d.split([',', ')']).next()).expect("a directory").to_string();
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("job-")).collect();
    // Other tests run jobs at the same time; none of ours may stay for long.
    std::thread::sleep(Duration::from_millis(200));
    let still: Vec<_> = left.iter().filter(|e| e.path().exists()).map(|e| e.path()).collect();
    assert!(still.len() <= 4, "job cgroups left behind: {still:?}");
}

/// Issue #50 (minor): `/proc/self/mountinfo` showed host paths (where the pytest the shell
/// root binds lives on the host). Every mount's root must be `/` or its own place in the job's
/// root, and nothing of the trainer's home, working directory or binary may show.
#[test]
fn attack_mountinfo_shows_no_host_path() {
    for processes in [0, 2] {
        let job = Job {
            limits: Limits { processes, ..Limits::default() },
            ..Job::python(
                "main.py",
                vec![JobFile { path: "main.py".into(), contents: "print(open('/proc/self/mountinfo').read())\n".into() }],
            )
        };
        let out = sandbox().run(&job).unwrap();
        assert_nothing_outlived();
        let text = out.stdout.clone();
        assert!(text.lines().count() > 5, "{out:?}");
        for line in text.lines().filter(|l| !l.is_empty()) {
            let fields: Vec<&str> = line.split(' ').collect();
            let (root, at) = (fields[3], fields[4]);
            assert!(root == "/" || root == at || at.ends_with(root), "a mount shows where it comes from on the host: {line}");
        }
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let cwd = std::env::current_dir().unwrap().display().to_string();
        for host in [home.as_str(), cwd.as_str(), "/oldroot", "/.cache/"] {
            assert!(!text.contains(host), "mountinfo names `{host}`: {text}");
        }
    }
}
