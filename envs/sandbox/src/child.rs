//! What the job's first process does between `clone` and `exec`, before any job code
//! exists: it is PID 1 of fresh mount, PID, IPC, UTS, network and cgroup namespaces (and a
//! user namespace when the trainer is not root), and it builds the job's root and fences
//! itself in:
//!
//! 0. (where the host allows one) join the job's memory cgroup, then enter a new cgroup
//!    namespace rooted there;
//! 1. (user namespace) map the caller's uid/gid to 1000 inside;
//! 2. make every mount private, mount a small tmpfs as the new root, `pivot_root` into it
//!    with the old root at `/oldroot`;
//! 3. recreate the planned entries ([`crate::root::RootPlan`]): directories, symlinks,
//!    binds of host files taken from `/oldroot`;
//! 4. mount `/proc` (this PID namespace's), `/dev` (a tmpfs with binds of the host's
//!    `null`, `zero` and `urandom`), point `/tmp` at `/job`; detach the old root;
//! 5. make the whole tree read-only, then mount the job's tmpfs at `/job` (byte and inode
//!    limits), the one writable place;
//! 6. (root) drop to the job's own unprivileged uid/gid;
//! 7. write the job's files and its stdin (an unlinked, read-only file as fd 0), put the
//!    output pipes on fds 1 and 2, close every other inherited descriptor, start a new
//!    session, set the rlimits, `PR_SET_PDEATHSIG`, `PR_SET_NO_NEW_PRIVS`, the seccomp
//!    filter, and `execve` the interpreter.
//!
//! This runs in a `clone` of a possibly multi-threaded parent, so it only makes system
//! calls on values prepared beforehand (no allocation, no locks, and no libc wrapper that
//! coordinates threads: glibc's `set*id` would wait forever for threads this process does
//! not have). A failing step is
//! reported to the parent through `report` and the child exits, so a job never runs
//! half-fenced.

use std::ffi::{CStr, CString};

use libc::{c_char, c_int, c_ulong, c_void};

/// A step of the set-up, reported when it fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    IdMap = 1,
    Private,
    BaseRoot,
    PivotRoot,
    RootEntry,
    Proc,
    Dev,
    DetachOldRoot,
    ReadOnly,
    JobDir,
    Hostname,
    DropUid,
    Stdin,
    JobFiles,
    Fds,
    Rlimits,
    Privileges,
    Seccomp,
    Exec,
    Cgroup,
}

impl Step {
    pub fn from_u32(v: u32) -> Option<Step> {
        use Step::*;
        [
            IdMap,
            Private,
            BaseRoot,
            PivotRoot,
            RootEntry,
            Proc,
            Dev,
            DetachOldRoot,
            ReadOnly,
            JobDir,
            Hostname,
            DropUid,
            Stdin,
            JobFiles,
            Fds,
            Rlimits,
            Privileges,
            Seccomp,
            Exec,
            Cgroup,
        ]
        .into_iter()
        .find(|s| *s as u32 == v)
    }

    pub fn what(self) -> &'static str {
        match self {
            Step::IdMap => "writing the user namespace's uid/gid maps",
            Step::Private => "making the mount namespace private",
            Step::BaseRoot => "mounting the new root's tmpfs",
            Step::PivotRoot => "pivot_root into the new root",
            Step::RootEntry => "building the root",
            Step::Proc => "mounting /proc",
            Step::Dev => "building /dev",
            Step::DetachOldRoot => "detaching the old root",
            Step::ReadOnly => "making the root read-only",
            Step::JobDir => "mounting the job's tmpfs",
            Step::Hostname => "setting the hostname",
            Step::DropUid => "dropping to the job's uid",
            Step::Stdin => "writing the job's stdin",
            Step::JobFiles => "writing the job's files",
            Step::Fds => "setting up the job's descriptors",
            Step::Rlimits => "setting rlimits",
            Step::Privileges => "dropping privileges",
            Step::Seccomp => "installing the seccomp filter",
            Step::Exec => "executing the interpreter",
            Step::Cgroup => "joining the job's memory cgroup",
        }
    }
}

/// One entry of the root, as the child creates it (paths inside the new root).
pub enum Op {
    Dir {
        path: CString,
    },
    Symlink {
        target: CString,
        path: CString,
    },
    /// `src` is the host path under `/oldroot`; `noexec` is kept on the read-only remount.
    Bind {
        src: CString,
        path: CString,
        dir: bool,
        noexec: bool,
    },
    /// A host directory shown at another place (`src` under `/oldroot`): a read-only overlay
    /// of it (and of an empty directory) whose layers are named by descriptor, so that
    /// `/proc/self/mountinfo` shows neither where it lies on the host (a bind's root would)
    /// nor the path it was mounted from. A bind where the kernel has no overlayfs.
    Overlay {
        src: CString,
        path: CString,
    },
}

/// Who the job runs as.
pub enum Identity {
    /// The trainer is root: no user namespace; drop to this uid/gid after the mounts.
    Root { uid: u32, gid: u32 },
    /// The trainer is not root: a user namespace mapping its uid/gid to 1000.
    UserNs { uid_map: CString, gid_map: CString },
}

/// Everything the child needs, prepared by the parent.
pub struct ChildPlan<'a> {
    pub identity: &'a Identity,
    pub ops: &'a [Op],
    pub base_opts: &'a CStr,
    pub job_opts: CString,
    pub dirs: Vec<CString>,
    pub files: Vec<(CString, &'a [u8])>,
    pub stdin: Option<&'a [u8]>,
    pub python: &'a CStr,
    pub argv: Vec<*const c_char>,
    pub envp: Vec<*const c_char>,
    pub stdout: c_int,
    pub stderr: c_int,
    pub report: c_int,
    /// (resource, limit) pairs, soft = hard; `RLIMIT_NPROC` comes last and separately.
    pub rlimits: [(i32, u64); 5],
    pub nproc: u64,
    pub seccomp: &'a [libc::sock_filter],
    /// The job's memory cgroup (`cgroup.procs`, open for writing), joined first, after which
    /// the child enters a new cgroup namespace; -1: none (the clone made the namespace).
    pub cgroup: c_int,
}

/// The failure a child reports: the step, which entry (for `RootEntry`), the errno.
pub type Failure = (Step, u32, c_int);

/// Symlinks in `/dev`, as a system has them.
const DEV_LINKS: [(&CStr, &CStr); 4] = [
    (c"/dev/fd", c"/proc/self/fd"),
    (c"/dev/stdin", c"/proc/self/fd/0"),
    (c"/dev/stdout", c"/proc/self/fd/1"),
    (c"/dev/stderr", c"/proc/self/fd/2"),
];

const DEVICES: [(&CStr, &CStr); 3] =
    [(c"/dev/null", c"/oldroot/dev/null"), (c"/dev/zero", c"/oldroot/dev/zero"), (c"/dev/urandom", c"/oldroot/dev/urandom")];
const STDIN_NAME: &CStr = c".arl-stdin";

/// Run the child: returns only on failure (after reporting it), so the caller `_exit`s.
pub fn run(plan: &ChildPlan) {
    if let Err((step, index, errno)) = setup(plan) {
        let mut msg = [0u8; 12];
        msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
        msg[4..8].copy_from_slice(&index.to_ne_bytes());
        msg[8..].copy_from_slice(&errno.to_ne_bytes());
        // SAFETY: a valid buffer; the parent reads exactly these 12 bytes.
        unsafe { libc::write(plan.report, msg.as_ptr().cast(), msg.len()) };
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// `r < 0` (or `!= 0` for calls that return 0 on success) becomes the step's failure.
fn check(r: c_int, step: Step, index: u32) -> Result<(), Failure> {
    if r < 0 { Err((step, index, errno())) } else { Ok(()) }
}

fn write_file(path: &CStr, data: &[u8], step: Step) -> Result<(), Failure> {
    // SAFETY: valid C strings and buffers throughout.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(fd, step, 0)?;
        let r = write_all(fd, data);
        libc::close(fd);
        r.map_err(|e| (step, 0, e))
    }
}

fn write_all(fd: c_int, mut data: &[u8]) -> Result<(), c_int> {
    while !data.is_empty() {
        // SAFETY: a valid buffer of the given length.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        data = &data[n as usize..];
    }
    Ok(())
}

fn mount(src: Option<&CStr>, target: &CStr, fstype: Option<&CStr>, flags: c_ulong, data: Option<&CStr>) -> c_int {
    let p = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: valid C strings or nulls.
    unsafe { libc::mount(p(src), target.as_ptr(), p(fstype), flags, data.map_or(std::ptr::null(), |d| d.as_ptr().cast::<c_void>())) }
}

/// Create an empty file to bind a file over.
fn touch(path: &CStr, mode: libc::mode_t) -> c_int {
    // SAFETY: a valid C string.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, mode);
        if fd >= 0 {
            libc::close(fd);
        }
        fd
    }
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: c_int = 0x8000;

fn setup(plan: &ChildPlan) -> Result<(), Failure> {
    use Step::*;
    // SAFETY (whole block): system calls on prepared C strings, buffers and descriptors.
    unsafe {
        // 0. The memory cgroup before anything is allocated, then a cgroup namespace rooted
        //    at it (so the job sees `/`).
        if plan.cgroup >= 0 {
            crate::cgroup::join(plan.cgroup).map_err(|e| (Cgroup, 0, e))?;
            libc::close(plan.cgroup);
            check(libc::unshare(libc::CLONE_NEWCGROUP), Cgroup, 1)?;
        }
        if let Identity::UserNs { uid_map, gid_map } = plan.identity {
            write_file(c"/proc/self/setgroups", b"deny", IdMap)?;
            write_file(c"/proc/self/gid_map", gid_map.to_bytes(), IdMap)?;
            write_file(c"/proc/self/uid_map", uid_map.to_bytes(), IdMap)?;
        }
        // Signals as a fresh process has them: nothing blocked, SIGPIPE default.
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);

        // 2. A private tree, a tmpfs root, the old root at /oldroot.
        check(mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None), Private, 0)?;
        check(mount(Some(c"tmpfs"), c"/tmp", Some(c"tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(plan.base_opts)), BaseRoot, 0)?;
        check(libc::chdir(c"/tmp".as_ptr()), PivotRoot, 0)?;
        check(libc::mkdir(c"oldroot".as_ptr(), 0o700), PivotRoot, 0)?;
        check(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c"oldroot".as_ptr()) as c_int, PivotRoot, 0)?;
        check(libc::chdir(c"/".as_ptr()), PivotRoot, 0)?;

        // 3. The planned entries.
        for (i, op) in plan.ops.iter().enumerate() {
            let i = i as u32;
            match op {
                Op::Dir { path } => check(libc::mkdir(path.as_ptr(), 0o755), RootEntry, i)?,
                Op::Symlink { target, path } => check(libc::symlink(target.as_ptr(), path.as_ptr()), RootEntry, i)?,
                Op::Bind { src, path, dir, .. } => {
                    check(if *dir { libc::mkdir(path.as_ptr(), 0o755) } else { touch(path, 0o644) }, RootEntry, i)?;
                    check(mount(Some(src), path, None, libc::MS_BIND, None), RootEntry, i)?;
                }
                // Mounted once /proc is there (its layers are named through /proc/self/fd).
                Op::Overlay { path, .. } => check(libc::mkdir(path.as_ptr(), 0o755), RootEntry, i)?,
            }
        }

        // 4. /proc, /dev, /tmp; the old root goes.
        for dir in [c"/job", c"/proc", c"/dev"] {
            check(libc::mkdir(dir.as_ptr(), 0o755), RootEntry, u32::MAX)?;
        }
        check(libc::symlink(c"/job".as_ptr(), c"/tmp".as_ptr()), RootEntry, u32::MAX)?;
        let fenced = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        check(mount(Some(c"proc"), c"/proc", Some(c"proc"), fenced, None), Proc, 0)?;
        for (i, op) in plan.ops.iter().enumerate() {
            if let Op::Overlay { src, path } = op {
                overlay(src, path).map_err(|e| (RootEntry, i as u32, e))?;
            }
        }
        check(
            mount(Some(c"tmpfs"), c"/dev", Some(c"tmpfs"), libc::MS_NOSUID | libc::MS_NOEXEC, Some(c"size=4k,nr_inodes=16,mode=0755")),
            Dev,
            0,
        )?;
        for (i, (dev, host)) in DEVICES.iter().enumerate() {
            check(touch(dev, 0o666), Dev, i as u32)?;
            check(mount(Some(host), dev, None, libc::MS_BIND, None), Dev, i as u32)?;
        }
        // The usual links into the job's own /proc (bash's `<(…)` needs /dev/fd).
        for (i, (link, target)) in DEV_LINKS.iter().enumerate() {
            check(libc::symlink(target.as_ptr(), link.as_ptr()), Dev, (DEVICES.len() + i) as u32)?;
        }
        check(libc::umount2(c"/oldroot".as_ptr(), libc::MNT_DETACH), DetachOldRoot, 0)?;
        check(libc::rmdir(c"/oldroot".as_ptr()), DetachOldRoot, 0)?;

        // 5. Everything read-only, then the one writable place.
        read_only(plan)?;
        check(mount(Some(c"tmpfs"), c"/job", Some(c"tmpfs"), libc::MS_NOSUID | libc::MS_NODEV, Some(&plan.job_opts)), JobDir, 0)?;
        check(libc::sethostname(c"sandbox".as_ptr(), 7), Hostname, 0)?;

        // 6. The job's own uid.
        // Raw system calls: glibc's set*id wrappers signal every thread glibc believes
        // exists and wait for them, and this clone has none of the parent's threads.
        if let Identity::Root { uid, gid } = plan.identity {
            check(libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) as c_int, DropUid, 0)?;
            check(libc::syscall(libc::SYS_setresgid, *gid, *gid, *gid) as c_int, DropUid, 0)?;
            check(libc::syscall(libc::SYS_setresuid, *uid, *uid, *uid) as c_int, DropUid, 0)?;
        }

        // 7. Files, descriptors, limits, the filter, exec.
        check(libc::chdir(c"/job".as_ptr()), JobFiles, 0)?;
        let stdin = match plan.stdin {
            Some(data) => {
                let fd = libc::open(STDIN_NAME.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o400);
                check(fd, Stdin, 0)?;
                let written = write_all(fd, data);
                libc::close(fd);
                written.map_err(|e| (Stdin, 0, e))?;
                let fd = libc::open(STDIN_NAME.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                check(fd, Stdin, 0)?;
                check(libc::unlink(STDIN_NAME.as_ptr()), Stdin, 0)?;
                fd
            }
            None => libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC),
        };
        check(stdin, Stdin, 0)?;
        for (i, dir) in plan.dirs.iter().enumerate() {
            check(libc::mkdir(dir.as_ptr(), 0o755), JobFiles, i as u32)?;
        }
        for (i, (path, data)) in plan.files.iter().enumerate() {
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            let fd = libc::open(path.as_ptr(), flags, 0o644);
            check(fd, JobFiles, i as u32)?;
            let written = write_all(fd, data);
            libc::close(fd);
            written.map_err(|e| (JobFiles, i as u32, e))?;
        }
        check(libc::dup2(stdin, 0), Fds, 0)?;
        check(libc::dup2(plan.stdout, 1), Fds, 1)?;
        check(libc::dup2(plan.stderr, 2), Fds, 2)?;
        close_others(plan.report);
        check(libc::setsid(), Fds, 3)?;

        for (i, (resource, limit)) in plan.rlimits.iter().enumerate() {
            let r = libc::rlimit { rlim_cur: *limit, rlim_max: *limit };
            check(libc::setrlimit(*resource as _, &r), Rlimits, i as u32)?;
        }
        // NPROC after the uid change: set before it, the kernel would count the new uid as
        // over its limit at setuid and refuse the exec itself.
        let r = libc::rlimit { rlim_cur: plan.nproc, rlim_max: plan.nproc };
        check(libc::setrlimit(libc::RLIMIT_NPROC, &r), Rlimits, 5)?;
        // After the uid change, which clears it: the job dies with the trainer.
        check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0), Privileges, 0)?;
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), Privileges, 1)?;
        let prog = libc::sock_fprog { len: plan.seccomp.len() as u16, filter: plan.seccomp.as_ptr() as *mut _ };
        check(libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog, 0, 0), Seccomp, 0)?;
        libc::execve(plan.python.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
        Err((Exec, 0, errno()))
    }
}

/// `src` read-only at `path` as an overlay whose lower layers are `src` and the root's
/// still empty `/job`, both given as `/proc/self/fd/N` (the options are built on the stack:
/// no allocation after `clone`); a read-only bind where the overlay is refused.
unsafe fn overlay(src: &CStr, path: &CStr) -> Result<(), c_int> {
    let dir = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
    // SAFETY: valid C strings; the descriptors are closed below.
    let (lower, empty) = unsafe { (libc::open(src.as_ptr(), dir), libc::open(c"/job".as_ptr(), dir)) };
    let result = if lower < 0 || empty < 0 {
        Err(errno())
    } else {
        let mut opts = StackStr::<96>::new();
        opts.push(b"ro,lowerdir=/proc/self/fd/");
        opts.push_int(lower);
        opts.push(b":/proc/self/fd/");
        opts.push_int(empty);
        match opts.as_cstr() {
            Some(opts) if mount(Some(c"overlay"), path, Some(c"overlay"), libc::MS_RDONLY, Some(opts)) == 0 => Ok(()),
            _ => {
                if mount(Some(src), path, None, libc::MS_BIND, None) == 0 {
                    Ok(())
                } else {
                    Err(errno())
                }
            }
        }
    };
    // SAFETY: closing descriptors this function opened (a negative one is left alone).
    unsafe {
        for fd in [lower, empty] {
            if fd >= 0 {
                libc::close(fd);
            }
        }
    }
    result
}

/// A NUL-terminated string built in a fixed buffer (text that does not fit is dropped, and
/// the result is then `None`).
struct StackStr<const N: usize> {
    buf: [u8; N],
    len: usize,
    overflow: bool,
}

impl<const N: usize> StackStr<N> {
    fn new() -> Self {
        Self { buf: [0; N], len: 0, overflow: false }
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() >= N {
            self.overflow = true;
            return;
        }
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn push_int(&mut self, mut n: c_int) {
        let mut digits = [0u8; 12];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[at..]);
    }

    fn as_cstr(&self) -> Option<&CStr> {
        if self.overflow { None } else { CStr::from_bytes_with_nul(&self.buf[..=self.len]).ok() }
    }
}

/// Every mount read-only (and nosuid, nodev): one `mount_setattr` over the tree, or (before
/// Linux 5.12) a read-only remount of each.
unsafe fn read_only(plan: &ChildPlan) -> Result<(), Failure> {
    let attr = MountAttr { attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, attr_clr: 0, propagation: 0, userns_fd: 0 };
    // SAFETY: a valid path and attribute struct of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/".as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            size_of::<MountAttr>(),
        )
    };
    if r == 0 {
        // The device binds must stay usable: clear the nodev the tree just got.
        let devices = MountAttr { attr_set: 0, attr_clr: MOUNT_ATTR_NODEV, propagation: 0, userns_fd: 0 };
        for (i, (dev, _)) in DEVICES.iter().enumerate() {
            // SAFETY: as above.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    dev.as_ptr(),
                    0,
                    &devices as *const MountAttr,
                    size_of::<MountAttr>(),
                )
            };
            check(r as c_int, Step::Dev, i as u32)?;
        }
        return Ok(());
    }
    if errno() != libc::ENOSYS {
        return Err((Step::ReadOnly, 0, errno()));
    }
    let ro = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    for (i, op) in plan.ops.iter().enumerate() {
        if let Op::Bind { path, noexec, .. } = op {
            check(mount(None, path, None, ro | if *noexec { libc::MS_NOEXEC } else { 0 }, None), Step::ReadOnly, i as u32)?;
        }
    }
    for (path, noexec) in [(c"/", false), (c"/proc", true), (c"/dev", true)] {
        check(mount(None, path, None, ro | if noexec { libc::MS_NOEXEC } else { 0 }, None), Step::ReadOnly, u32::MAX)?;
    }
    Ok(())
}

/// Close every descriptor but 0, 1, 2 and `keep` (the report pipe, close-on-exec).
unsafe fn close_others(keep: c_int) {
    let keep = keep as u32;
    // SAFETY: close_range on descriptor ranges; falls back to closing one by one.
    unsafe {
        for (lo, hi) in [(3, keep.saturating_sub(1)), (keep + 1, u32::MAX)] {
            if lo > hi {
                continue;
            }
            if libc::syscall(libc::SYS_close_range, lo, hi, 0) != 0 {
                let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 20) as u32;
                for fd in lo..=hi.min(max) {
                    libc::close(fd as c_int);
                }
            }
        }
    }
}
