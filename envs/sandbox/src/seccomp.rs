//! The job's seccomp filter, a classic BPF program written out by hand (no library):
//!
//! - a foreign syscall ABI (another architecture, x32) kills the job;
//! - `socket` and `socketpair` only for `AF_UNIX`, `AF_INET`, `AF_INET6` (the job's network
//!   namespace is empty and its filesystem private, so these reach nothing); every other
//!   family (`AF_NETLINK`, `AF_VSOCK`, `AF_PACKET`, `AF_ALG`, …) fails with `EAFNOSUPPORT`;
//! - `io_uring_*` (which would open sockets behind the filter's back), namespace and mount
//!   calls, keyrings, `bpf`, `perf_event_open`, `userfaultfd`, `ptrace`,
//!   `process_vm_*`, kernel modules and `kexec` fail with `EPERM`; `clone` with any
//!   namespace flag fails with `EPERM`; `clone3` (whose flags a filter cannot read) with
//!   `ENOSYS`, so libc falls back to `clone`.
//!
//! - SysV IPC, POSIX message queues and Linux AIO fail with `ENOSYS` ([`NOT_IMPLEMENTED`]):
//!   their memory and counts are bounded host-wide or not at all, not by the job's rlimits;
//! - `pidfd_getfd`, `process_madvise`, `kcmp`, fanotify, file handles, quotas, clocks,
//!   swap, reboot and the like fail with `EPERM` ([`DENIED`]).

use libc::sock_filter;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;

const LD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

const DENIED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    // A job's descriptors and memory are its own: no taking another process's descriptor
    // (the Bash runner's report pipe), advising its memory or comparing its kernel objects.
    libc::SYS_pidfd_getfd,
    libc::SYS_process_madvise,
    libc::SYS_kcmp,
    // The host's filesystems, clocks, accounting and power: nothing a job may touch.
    libc::SYS_fanotify_init,
    libc::SYS_fanotify_mark,
    libc::SYS_name_to_handle_at,
    libc::SYS_open_by_handle_at,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_kexec_file_load,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_lookup_dcookie,
    // Unswappable memory outside the job's accounting.
    libc::SYS_memfd_secret,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ustat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS__sysctl,
];

/// `io_pgetevents`, which the libc crate does not name.
#[cfg(target_arch = "x86_64")]
const SYS_IO_PGETEVENTS: libc::c_long = 333;
#[cfg(target_arch = "aarch64")]
const SYS_IO_PGETEVENTS: libc::c_long = 292;

/// Kernel objects a job has no use for, whose limits are host-wide or outside its rlimits:
/// `ENOSYS`, as a kernel without them answers, so libraries fall back.
///
/// - SysV shared memory, message queues and semaphores: a fresh IPC namespace starts with
///   the kernel's unlimited `shmmax`/`shmall`, and segments outlive the process that
///   detaches them, so one job could pin host memory beyond its `RLIMIT_AS`;
/// - POSIX message queues (their memory is `RLIMIT_MSGQUEUE`, per user);
/// - Linux AIO (`io_setup` reserves from the host-wide `fs.aio-max-nr`).
const NOT_IMPLEMENTED: &[libc::c_long] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
    libc::SYS_io_setup,
    libc::SYS_io_destroy,
    libc::SYS_io_submit,
    libc::SYS_io_cancel,
    libc::SYS_io_getevents,
    SYS_IO_PGETEVENTS,
];

const FAMILIES: [i32; 3] = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];

const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP) as u32;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The filter program.
pub fn filter() -> Vec<sock_filter> {
    let mut p = vec![stmt(LD, ARCH), jump(JEQ, AUDIT_ARCH, 1, 0), stmt(RET, KILL), stmt(LD, NR)];
    #[cfg(target_arch = "x86_64")]
    {
        // x32 syscalls carry bit 30; their numbers alias the x86_64 ones the filter checks.
        p.push(jump(JGE, 0x4000_0000, 0, 1));
        p.push(stmt(RET, KILL));
    }
    for &nr in DENIED {
        p.push(jump(JEQ, nr as u32, 0, 1));
        p.push(stmt(RET, errno(libc::EPERM)));
    }
    for &nr in NOT_IMPLEMENTED {
        p.push(jump(JEQ, nr as u32, 0, 1));
        p.push(stmt(RET, errno(libc::ENOSYS)));
    }
    p.push(jump(JEQ, libc::SYS_clone3 as u32, 0, 1));
    p.push(stmt(RET, errno(libc::ENOSYS)));
    // clone: arg 0 holds the flags (on both architectures).
    p.extend([jump(JEQ, libc::SYS_clone as u32, 0, 3), stmt(LD, ARG0), jump(JSET, NAMESPACE_FLAGS, 0, 1), stmt(RET, errno(libc::EPERM))]);
    // After the clone block A may hold arg 0: reload the number before the socket checks.
    p.push(stmt(LD, NR));
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        let n = FAMILIES.len() as u8;
        // Not this call: skip the family block (LD, n JEQs, RET errno, LD NR).
        p.push(jump(JEQ, nr as u32, 0, n + 3));
        p.push(stmt(LD, ARG0));
        for (i, family) in FAMILIES.iter().enumerate() {
            // A match jumps past the remaining checks and the refusal to `RET ALLOW`'s
            // stand-in: the reload below, then falls through to the final allow.
            p.push(jump(JEQ, *family as u32, n - i as u8, 0));
        }
        p.push(stmt(RET, errno(libc::EAFNOSUPPORT)));
        p.push(stmt(LD, NR));
    }
    p.push(stmt(RET, ALLOW));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions the filter uses.
    fn eval(prog: &[sock_filter], arch: u32, nr: u32, arg0: u32) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            match i.code {
                LD => {
                    a = match i.k {
                        NR => nr,
                        ARCH => arch,
                        ARG0 => arg0,
                        k => panic!("load of offset {k}"),
                    }
                }
                JEQ | JGE | JSET => {
                    let taken = match i.code {
                        JEQ => a == i.k,
                        JGE => a >= i.k,
                        _ => a & i.k != 0,
                    };
                    pc += if taken { i.jt } else { i.jf } as usize;
                }
                RET => return i.k,
                c => panic!("opcode {c}"),
            }
            pc += 1;
        }
    }

    fn check(nr: libc::c_long, arg0: i32) -> u32 {
        eval(&filter(), AUDIT_ARCH, nr as u32, arg0 as u32)
    }

    #[test]
    fn only_three_socket_families_are_allowed() {
        for call in [libc::SYS_socket, libc::SYS_socketpair] {
            for family in FAMILIES {
                assert_eq!(check(call, family), ALLOW, "{call} {family}");
            }
            for family in [libc::AF_NETLINK, libc::AF_VSOCK, libc::AF_PACKET, libc::AF_ALG, libc::AF_BLUETOOTH, libc::AF_KEY, 0, 255] {
                assert_eq!(check(call, family), errno(libc::EAFNOSUPPORT), "{call} {family}");
            }
        }
    }

    #[test]
    fn denied_calls_fail_and_the_rest_pass() {
        for &nr in DENIED {
            assert_eq!(check(nr, 0), errno(libc::EPERM), "{nr}");
        }
        for &nr in NOT_IMPLEMENTED {
            assert_eq!(check(nr, 0), errno(libc::ENOSYS), "{nr}");
        }
        assert_eq!(check(libc::SYS_clone3, 0), errno(libc::ENOSYS));
        assert_eq!(check(libc::SYS_clone, libc::SIGCHLD), ALLOW, "a plain fork");
        assert_eq!(check(libc::SYS_clone, libc::CLONE_NEWUSER | libc::SIGCHLD), errno(libc::EPERM));
        assert_eq!(check(libc::SYS_clone, libc::CLONE_VM | libc::CLONE_THREAD), ALLOW, "a thread");
        for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_openat, libc::SYS_execve, libc::SYS_mmap, libc::SYS_exit_group] {
            assert_eq!(check(nr, libc::AF_VSOCK), ALLOW, "{nr}");
        }
    }

    #[test]
    fn a_foreign_abi_is_killed() {
        assert_eq!(eval(&filter(), 0x4000_0003, libc::SYS_read as u32, 0), KILL, "i386");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(eval(&filter(), AUDIT_ARCH, 0x4000_0000 | libc::SYS_socket as u32, libc::AF_VSOCK as u32), KILL, "x32");
    }
}
