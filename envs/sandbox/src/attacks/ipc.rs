//! SysV shared memory and message queues (and POSIX message queues): each job has its own
//! IPC namespace, so nothing it creates outlives it or reaches another job.

use std::time::Duration;

use super::support::{lines, run, run_with};

/// Job code that defines `shm(key)` and `msg(key)` through ctypes (the stdlib has no SysV IPC).
const IPC: &str = r#"
import ctypes, os
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT, IPC_EXCL = 0o1000, 0o2000
def shm(key, create):
    flags = (IPC_CREAT | IPC_EXCL | 0o666) if create else 0o666
    sid = libc.shmget(key, 1 << 20, flags)
    return sid if sid >= 0 else -ctypes.get_errno()
def msg(key, create):
    flags = (IPC_CREAT | IPC_EXCL | 0o666) if create else 0o666
    q = libc.msgget(key, flags)
    return q if q >= 0 else -ctypes.get_errno()
class Msg(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]
"#;

/// Host-side count of SysV objects of a kind (`shm`, `msg`, `sem`) with this key.
fn host_objects(kind: &str, key: u32) -> usize {
    let text = std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default();
    text.lines().skip(1).filter(|l| l.split_whitespace().next().and_then(|k| k.parse::<i64>().ok()) == Some(key as i64)).count()
}

#[test]
fn attack_sysv_objects_vanish_with_the_job_and_never_reach_a_later_one() {
    let key = 0x5a00_0000 | (std::process::id() & 0xffff);
    // The first job creates a 1 MiB segment and a queue holding a message, and leaves them.
    let first = format!(
        "{IPC}\nprint(shm({key}, True) >= 0, msg({key}, True) >= 0)\nm = Msg(1, b'the answer is 9')\nprint(libc.msgsnd(msg({key}, False), ctypes.byref(m), 64, 0))\n"
    );
    let out = run(&first);
    assert_eq!(lines(&out), ["True True", "0"], "the job could make them in its own namespace: {out:?}");
    assert_eq!((host_objects("shm", key), host_objects("msg", key)), (0, 0), "nothing reached the host's IPC namespace");
    // A later job (another uid, as root) finds neither.
    let second = format!("{IPC}\nprint(shm({key}, False), msg({key}, False))\n");
    let out = run(&second);
    assert_eq!(out.stdout, format!("{} {}\n", -libc::ENOENT, -libc::ENOENT), "{out:?}");
}

#[test]
fn attack_a_concurrent_job_cannot_see_a_living_jobs_ipc() {
    let key = 0x5b00_0000 | (std::process::id() & 0xffff);
    std::thread::scope(|scope| {
        let holder = scope.spawn(|| {
            let code = format!("{IPC}\nprint(shm({key}, True) >= 0, msg({key}, True) >= 0, flush=True)\nimport time\ntime.sleep(1.5)\n");
            run_with(&code, arl_core::Limits { wall_timeout: Duration::from_secs(5), ..arl_core::Limits::default() })
        });
        std::thread::sleep(Duration::from_millis(700));
        let out = run(&format!("{IPC}\nprint(shm({key}, False), msg({key}, False))\nimport os\nprint(sorted(os.listdir('/dev')))\n"));
        assert_eq!(lines(&out).first().copied(), Some(format!("{} {}", -libc::ENOENT, -libc::ENOENT).as_str()), "{out:?}");
        let holder = holder.join().unwrap();
        assert_eq!(holder.stdout, "True True\n", "{holder:?}");
    });
}

#[test]
fn attack_a_posix_message_queue_stays_in_the_job() {
    let code = "import ctypes\nlibc = ctypes.CDLL('libc.so.6', use_errno=True)\nq = libc.mq_open(b'/arl-leak', 0o100 | 0o2, 0o666, None)\nprint(q >= 0 or -ctypes.get_errno())\n";
    let out = run(code);
    // Created or not, it lived in the job's IPC namespace, which is gone.
    assert!(out.stdout == "True\n" || out.stdout.starts_with('-'), "{out:?}");
    let out = run(
        "import ctypes\nlibc = ctypes.CDLL('libc.so.6', use_errno=True)\nprint(libc.mq_open(b'/arl-leak', 0o2, 0, None), -ctypes.get_errno())\n",
    );
    assert_eq!(out.stdout, format!("-1 {}\n", -libc::ENOENT), "{out:?}");
}
