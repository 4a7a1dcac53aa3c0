//! The job's seccomp filter, a classic BPF program written out here:
//!
//! - a foreign syscall ABI (another architecture, x32) kills the job;
//! - an allowlist ([`ALLOWED`]): the calls ordinary programs make (Python, bash, the command
//!   line tools, pytest: files, memory, processes and threads, signals, clocks, polling,
//!   sockets). Everything else fails with `ENOSYS`, as on a kernel without it, so libraries
//!   fall back — including every call added to kernels after this list was written, and
//!   `clone3` (whose flags a filter cannot read; libc falls back to `clone`). Among them:
//!   SysV IPC, POSIX message queues and Linux AIO ([`NOT_IMPLEMENTED`]: their memory and counts
//!   are bounded host-wide or not at all, not by the job's rlimits);
//! - calls a program may try and should hear "not permitted" from ([`DENIED`], `EPERM`):
//!   io_uring (which would open sockets behind the filter's back), namespace and mount calls, keyrings, `bpf`, `perf_event_open`, `userfaultfd`, `ptrace`,
//!   `process_vm_*`, `pidfd_getfd`, `process_madvise`, `kcmp`, fanotify, file handles,
//!   quotas, setting clocks, swap, reboot, kernel modules and `kexec`;
//! - of the allowed, `clone` with any namespace flag fails with `EPERM`, and `socket` and
//!   `socketpair` only for `AF_UNIX`, `AF_INET`, `AF_INET6` (the job's network namespace is
//!   empty and its filesystem private, so these reach nothing); every other family
//!   (`AF_NETLINK`, `AF_VSOCK`, `AF_PACKET`, `AF_ALG`, …) fails with `EAFNOSUPPORT`.
//!
//! Written by hand rather than with `seccompiler`: the program is a few dozen lines over
//! three tables, two of its rules read arguments (clone flags, socket families) in ways
//! seccompiler's rule language would express no more plainly, and the tests below run it
//! in an interpreter of its own, instruction by instruction, for every table entry. Its
//! length costs nothing at run time: the kernel caches the verdict of every call whose
//! verdict does not depend on its arguments (Linux 5.11, "constant action bitmaps").

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

/// The calls a job may make (see the module's docs); every other one is `ENOSYS`.
const ALLOWED: &[libc::c_long] = &[
    // Files, descriptors, pipes, extended attributes, inotify, memfd.
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_close,
    libc::SYS_fstat,
    libc::SYS_lseek,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_sendfile,
    libc::SYS_fcntl,
    libc::SYS_flock,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_truncate,
    libc::SYS_ftruncate,
    libc::SYS_getdents64,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_fchmod,
    libc::SYS_fchown,
    libc::SYS_umask,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_mkdirat,
    libc::SYS_mknodat,
    libc::SYS_fchownat,
    libc::SYS_newfstatat,
    libc::SYS_unlinkat,
    libc::SYS_renameat2,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_readlinkat,
    libc::SYS_fchmodat,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_utimensat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_fallocate,
    libc::SYS_fadvise64,
    libc::SYS_readahead,
    libc::SYS_sync,
    libc::SYS_syncfs,
    libc::SYS_copy_file_range,
    libc::SYS_splice,
    libc::SYS_tee,
    libc::SYS_vmsplice,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_pipe2,
    libc::SYS_close_range,
    libc::SYS_ioctl,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_fgetxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_flistxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    libc::SYS_memfd_create,
    libc::SYS_getrandom,
    // Memory (mlock is bounded by RLIMIT_MEMLOCK and the memory cgroup).
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_mlock,
    libc::SYS_mlock2,
    libc::SYS_munlock,
    libc::SYS_mlockall,
    libc::SYS_munlockall,
    libc::SYS_mbind,
    libc::SYS_set_mempolicy,
    libc::SYS_get_mempolicy,
    libc::SYS_set_mempolicy_home_node,
    libc::SYS_migrate_pages,
    libc::SYS_move_pages,
    libc::SYS_pkey_mprotect,
    libc::SYS_pkey_alloc,
    libc::SYS_pkey_free,
    libc::SYS_membarrier,
    libc::SYS_mseal,
    // Processes, threads, scheduling, limits, self-restriction.
    libc::SYS_clone,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_getppid,
    libc::SYS_getpgid,
    libc::SYS_setpgid,
    libc::SYS_getsid,
    libc::SYS_setsid,
    libc::SYS_set_tid_address,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_rseq,
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    libc::SYS_prctl,
    libc::SYS_seccomp,
    libc::SYS_personality,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    libc::SYS_process_mrelease,
    libc::SYS_sched_yield,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_setparam,
    libc::SYS_sched_getparam,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_sched_rr_get_interval,
    libc::SYS_sched_setattr,
    libc::SYS_sched_getattr,
    libc::SYS_getpriority,
    libc::SYS_setpriority,
    libc::SYS_ioprio_set,
    libc::SYS_ioprio_get,
    libc::SYS_getcpu,
    libc::SYS_prlimit64,
    libc::SYS_getrusage,
    libc::SYS_times,
    libc::SYS_sysinfo,
    libc::SYS_uname,
    libc::SYS_capget,
    libc::SYS_capset,
    libc::SYS_landlock_create_ruleset,
    libc::SYS_landlock_add_rule,
    libc::SYS_landlock_restrict_self,
    // Ids (without capabilities a job can only keep or drop its own).
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_getgroups,
    libc::SYS_setuid,
    libc::SYS_setgid,
    libc::SYS_setreuid,
    libc::SYS_setregid,
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_setgroups,
    // Signals.
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigpending,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_rt_sigsuspend,
    libc::SYS_sigaltstack,
    libc::SYS_signalfd4,
    libc::SYS_restart_syscall,
    // Clocks and timers (reading; setting is denied).
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_getitimer,
    libc::SYS_setitimer,
    libc::SYS_timer_create,
    libc::SYS_timer_settime,
    libc::SYS_timer_gettime,
    libc::SYS_timer_getoverrun,
    libc::SYS_timer_delete,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    // Polling and events.
    libc::SYS_ppoll,
    libc::SYS_pselect6,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_eventfd2,
    // Sockets (`socket`/`socketpair` families checked before this list).
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_shutdown,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    // The x86_64 forms of calls aarch64 has only as their `*at` and newer versions.
    #[cfg(target_arch = "x86_64")]
    libc::SYS_open,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_stat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lstat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_poll,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_access,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pipe,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_select,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_dup2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pause,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_alarm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getdents,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rename,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mkdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rmdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_creat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_link,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_unlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_symlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_readlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getpgrp,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mknod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_time,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_create,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_wait,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_inotify_init,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_signalfd,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_eventfd,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_arch_prctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getrlimit,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_setrlimit,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_renameat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_sync_file_range,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fchmodat2,
];

/// `io_pgetevents`, which the libc crate does not name.
#[allow(dead_code)]
#[cfg(target_arch = "x86_64")]
const SYS_IO_PGETEVENTS: libc::c_long = 333;
#[allow(dead_code)]
#[cfg(target_arch = "aarch64")]
const SYS_IO_PGETEVENTS: libc::c_long = 292;

/// Kernel objects a job has no use for, whose limits are host-wide or outside its rlimits:
/// not in [`ALLOWED`], so `ENOSYS`, as a kernel without them answers, and libraries fall
/// back. Named here for the tests and the reader.
///
/// - SysV shared memory, message queues and semaphores: a fresh IPC namespace starts with
///   the kernel's unlimited `shmmax`/`shmall`, and segments outlive the process that
///   detaches them, so one job could pin host memory beyond its `RLIMIT_AS`;
/// - POSIX message queues (their memory is `RLIMIT_MSGQUEUE`, per user);
/// - Linux AIO (`io_setup` reserves from the host-wide `fs.aio-max-nr`).
#[allow(dead_code)]
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
            // A match jumps past the remaining checks and the refusal to the reload below,
            // then on through the allowlist, which holds the call.
            p.push(jump(JEQ, *family as u32, n - i as u8, 0));
        }
        p.push(stmt(RET, errno(libc::EAFNOSUPPORT)));
        p.push(stmt(LD, NR));
    }
    for &nr in ALLOWED {
        p.push(jump(JEQ, nr as u32, 0, 1));
        p.push(stmt(RET, ALLOW));
    }
    p.push(stmt(RET, errno(libc::ENOSYS)));
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
        for &nr in ALLOWED {
            assert!(!DENIED.contains(&nr) && !NOT_IMPLEMENTED.contains(&nr), "{nr} is both allowed and not");
            assert_eq!(check(nr, libc::AF_UNIX), ALLOW, "{nr}");
        }
        // Calls the list does not name, and numbers no kernel has yet, are not implemented.
        for nr in [libc::SYS_remap_file_pages, 453, 470, 1000] {
            assert_eq!(check(nr, 0), errno(libc::ENOSYS), "{nr}");
        }
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
