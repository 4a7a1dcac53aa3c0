//! SysV shared memory, message queues and semaphores, and POSIX message queues: refused
//! (`ENOSYS`, the seccomp filter), since a fresh IPC namespace bounds none of their memory
//! (issue #50; `resources.rs` has the attack that pinned host memory). Each job still has its
//! own IPC namespace, so nothing could reach another job even if they were allowed.

use super::support::run;

/// Job code that defines `shm(key)` and `msg(key)` through ctypes (the stdlib has no SysV IPC).
const IPC: &str = r#"
import ctypes, os
libc = ctypes.CDLL("libc.so.6", use_errno=True)
IPC_CREAT, IPC_EXCL = 0o1000, 0o2000
def shm(key, create):
    flags = (IPC_CREAT | IPC_EXCL | 0o666) if create else 0o666
    sid = libc.shmget(key, 1 << 20, flags)
    return sid if sid >= 0 else -ctypes.get_errno()
def msg(key, create):
    flags = (IPC_CREAT | IPC_EXCL | 0o666) if create else 0o666
    q = libc.msgget(key, flags)
    return q if q >= 0 else -ctypes.get_errno()
def sem(key):
    s = libc.semget(key, 1, IPC_CREAT | 0o666)
    return s if s >= 0 else -ctypes.get_errno()
"#;

/// Host-side count of SysV objects of a kind (`shm`, `msg`, `sem`) with this key.
fn host_objects(kind: &str, key: u32) -> usize {
    let text = std::fs::read_to_string(format!("/proc/sysvipc/{kind}")).unwrap_or_default();
    text.lines().skip(1).filter(|l| l.split_whitespace().next().and_then(|k| k.parse::<i64>().ok()) == Some(key as i64)).count()
}

#[test]
fn attack_sysv_objects_are_refused_and_nothing_reaches_the_host() {
    let key = 0x5a00_0000 | (std::process::id() & 0xffff);
    let out = run(&format!("{IPC}\nprint(shm({key}, True), msg({key}, True), sem({key}))\n"));
    let e = -libc::ENOSYS;
    assert_eq!(out.stdout, format!("{e} {e} {e}\n"), "{out:?}");
    assert_eq!((host_objects("shm", key), host_objects("msg", key), host_objects("sem", key)), (0, 0, 0));
}

#[test]
fn attack_a_posix_message_queue_is_refused() {
    let code = "import ctypes\nlibc = ctypes.CDLL('libc.so.6', use_errno=True)\nq = libc.mq_open(b'/arl-leak', 0o100 | 0o2, 0o666, None)\nprint(q, -ctypes.get_errno())\n";
    let out = run(code);
    assert_eq!(out.stdout, format!("-1 {}\n", -libc::ENOSYS), "{out:?}");
}
