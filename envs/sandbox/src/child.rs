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
//!    binds of host files taken from `/oldroot`; for a job run with an endpoint, bind its
//!    host unix socket at [`ENDPOINT`] and bring the namespace's loopback interface up;
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
//! not have). The calls go through `nix`'s typed wrappers wherever those are thin (one
//! libc call on the C strings and descriptors given, nothing allocated: every path here is a
//! `&CStr`, which `nix` passes through as it is); what `nix` lacks or would allocate for
//! (`clone` with a pidfd, `mount_setattr`, `close_range`, the seccomp `prctl`, `execve`) and
//! the `set*id` calls stay raw system calls, each saying why. A failing step is
//! reported to the parent through `report` and the child exits, so a job never runs
//! half-fenced.

use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use libc::{c_char, c_int};
use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, OFlag, open};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl::{set_no_new_privs, set_pdeathsig};
use nix::sys::resource::{Resource, setrlimit};
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, signal, sigprocmask};
use nix::sys::stat::Mode;
use nix::unistd::{
    UnlinkatFlags, chdir, dup2_stderr, dup2_stdin, dup2_stdout, mkdir, pivot_root, sethostname, setsid, symlinkat, unlink, unlinkat, write,
};

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
    Endpoint,
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
            Endpoint,
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
            Step::Endpoint => "connecting the job to its endpoint (the socket's bind, the loopback interface)",
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
    pub stdout: BorrowedFd<'a>,
    pub stderr: BorrowedFd<'a>,
    pub report: BorrowedFd<'a>,
    /// (resource, limit) pairs, soft = hard; `RLIMIT_NPROC` comes last and separately.
    pub rlimits: [(Resource, u64); 5],
    pub nproc: u64,
    pub seccomp: &'a [libc::sock_filter],
    /// The job's memory cgroup (`cgroup.procs`, open for writing), joined first, after which
    /// the child enters a new cgroup namespace; `None`: none (the clone made the namespace).
    pub cgroup: Option<BorrowedFd<'a>>,
    /// The endpoint's unix socket under `/oldroot`, bound at [`ENDPOINT`]; `None`: no endpoint.
    pub endpoint: Option<&'a CStr>,
}

/// Where a job sees its endpoint's socket ([`arl_core::ENDPOINT_AT`]).
pub const ENDPOINT: &CStr = c"/endpoint.sock";

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
        // The parent reads exactly these 12 bytes; a failure to tell it is a report too short.
        let _ = write(plan.report, &msg);
    }
}

/// A set-up step's result as the [`Failure`] the parent is told.
trait At<T> {
    fn at(self, step: Step, index: u32) -> Result<T, Failure>;
}

impl<T> At<T> for nix::Result<T> {
    fn at(self, step: Step, index: u32) -> Result<T, Failure> {
        self.map_err(|e| (step, index, e as c_int))
    }
}

fn errno() -> c_int {
    Errno::last_raw()
}

/// `r < 0` of a raw system call becomes the step's failure.
fn check(r: c_int, step: Step, index: u32) -> Result<(), Failure> {
    if r < 0 { Err((step, index, errno())) } else { Ok(()) }
}

fn mode(bits: libc::mode_t) -> Mode {
    Mode::from_bits_truncate(bits)
}

/// No source, filesystem type or data for [`mount`].
const NONE: Option<&CStr> = None;

fn write_file(path: &CStr, data: &[u8], step: Step) -> Result<(), Failure> {
    let fd = open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty()).at(step, 0)?;
    write_all(&fd, data).at(step, 0)
}

fn write_all(fd: impl AsFd, mut data: &[u8]) -> nix::Result<()> {
    while !data.is_empty() {
        match write(&fd, data) {
            Ok(n) => data = &data[n..],
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Create an empty file to bind a file over.
fn touch(path: &CStr, bits: libc::mode_t) -> nix::Result<()> {
    open(path, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC, mode(bits)).map(drop)
}

fn symlink(target: &CStr, path: &CStr) -> nix::Result<()> {
    symlinkat(target, AT_FDCWD, path)
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
    // 0. The memory cgroup before anything is allocated, then a cgroup namespace rooted at it
    //    (so the job sees `/`).
    if let Some(cgroup) = plan.cgroup {
        write(cgroup, b"0").at(Cgroup, 0)?;
        unshare(CloneFlags::CLONE_NEWCGROUP).at(Cgroup, 1)?;
    }
    if let Identity::UserNs { uid_map, gid_map } = plan.identity {
        write_file(c"/proc/self/setgroups", b"deny", IdMap)?;
        write_file(c"/proc/self/gid_map", gid_map.to_bytes(), IdMap)?;
        write_file(c"/proc/self/uid_map", uid_map.to_bytes(), IdMap)?;
    }
    // Signals as a fresh process has them: nothing blocked, SIGPIPE default.
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None).at(Private, 1)?;
    // SAFETY: restoring the default disposition installs no handler.
    unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) }.at(Private, 2)?;

    // 2. A private tree, a tmpfs root, the old root at /oldroot.
    mount(NONE, c"/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE).at(Private, 0)?;
    mount(Some(c"tmpfs"), c"/tmp", Some(c"tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(plan.base_opts)).at(BaseRoot, 0)?;
    chdir(c"/tmp").at(PivotRoot, 0)?;
    mkdir(c"oldroot", mode(0o700)).at(PivotRoot, 0)?;
    pivot_root(c".", c"oldroot").at(PivotRoot, 0)?;
    chdir(c"/").at(PivotRoot, 0)?;

    // 3. The planned entries.
    for (i, op) in plan.ops.iter().enumerate() {
        let i = i as u32;
        match op {
            Op::Dir { path } => mkdir(path.as_c_str(), mode(0o755)).at(RootEntry, i)?,
            Op::Symlink { target, path } => symlink(target, path).at(RootEntry, i)?,
            Op::Bind { src, path, dir, .. } => {
                if *dir { mkdir(path.as_c_str(), mode(0o755)) } else { touch(path, 0o644) }.at(RootEntry, i)?;
                mount(Some(src.as_c_str()), path.as_c_str(), NONE, MsFlags::MS_BIND, NONE).at(RootEntry, i)?;
            }
            // Mounted once /proc is there (its layers are named through /proc/self/fd).
            Op::Overlay { path, .. } => mkdir(path.as_c_str(), mode(0o755)).at(RootEntry, i)?,
        }
    }
    if let Some(socket) = plan.endpoint {
        touch(ENDPOINT, 0o644).at(Endpoint, 0)?;
        mount(Some(socket), ENDPOINT, NONE, MsFlags::MS_BIND, NONE).at(Endpoint, 0)?;
        loopback_up().at(Endpoint, 1)?;
    }

    // 4. /proc, /dev, /tmp; the old root goes.
    for dir in [c"/job", c"/proc", c"/dev"] {
        mkdir(dir, mode(0o755)).at(RootEntry, u32::MAX)?;
    }
    symlink(c"/job", c"/tmp").at(RootEntry, u32::MAX)?;
    let fenced = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some(c"proc"), c"/proc", Some(c"proc"), fenced, NONE).at(Proc, 0)?;
    for (i, op) in plan.ops.iter().enumerate() {
        if let Op::Overlay { src, path } = op {
            overlay(src, path).at(RootEntry, i as u32)?;
        }
    }
    let dev_opts = c"size=4k,nr_inodes=16,mode=0755";
    mount(Some(c"tmpfs"), c"/dev", Some(c"tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC, Some(dev_opts)).at(Dev, 0)?;
    for (i, (dev, host)) in DEVICES.iter().enumerate() {
        touch(dev, 0o666).at(Dev, i as u32)?;
        mount(Some(*host), *dev, NONE, MsFlags::MS_BIND, NONE).at(Dev, i as u32)?;
    }
    // The usual links into the job's own /proc (bash's `<(…)` needs /dev/fd).
    for (i, (link, target)) in DEV_LINKS.iter().enumerate() {
        symlink(target, link).at(Dev, (DEVICES.len() + i) as u32)?;
    }
    umount2(c"/oldroot", MntFlags::MNT_DETACH).at(DetachOldRoot, 0)?;
    unlinkat(AT_FDCWD, c"/oldroot", UnlinkatFlags::RemoveDir).at(DetachOldRoot, 0)?;

    // 5. Everything read-only, then the one writable place.
    read_only(plan)?;
    mount(Some(c"tmpfs"), c"/job", Some(c"tmpfs"), MsFlags::MS_NOSUID | MsFlags::MS_NODEV, Some(plan.job_opts.as_c_str())).at(JobDir, 0)?;
    sethostname("sandbox").at(Hostname, 0)?;

    // 6. The job's own uid.
    if let Identity::Root { uid, gid } = plan.identity {
        drop_to(*uid, *gid)?;
    }

    // 7. Files, descriptors, limits, the filter, exec.
    chdir(c"/job").at(JobFiles, 0)?;
    let stdin = match plan.stdin {
        Some(data) => {
            let fd = open(STDIN_NAME, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC, mode(0o400)).at(Stdin, 0)?;
            write_all(&fd, data).at(Stdin, 0)?;
            drop(fd);
            let fd = open(STDIN_NAME, OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).at(Stdin, 0)?;
            unlink(STDIN_NAME).at(Stdin, 0)?;
            fd
        }
        None => open(c"/dev/null", OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty()).at(Stdin, 0)?,
    };
    for (i, dir) in plan.dirs.iter().enumerate() {
        mkdir(dir.as_c_str(), mode(0o755)).at(JobFiles, i as u32)?;
    }
    for (i, (path, data)) in plan.files.iter().enumerate() {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = open(path.as_c_str(), flags, mode(0o644)).at(JobFiles, i as u32)?;
        write_all(&fd, data).at(JobFiles, i as u32)?;
    }
    dup2_stdin(&stdin).at(Fds, 0)?;
    dup2_stdout(plan.stdout).at(Fds, 1)?;
    dup2_stderr(plan.stderr).at(Fds, 2)?;
    drop(stdin);
    close_others(plan.report.as_raw_fd());
    setsid().at(Fds, 3)?;

    for (i, (resource, limit)) in plan.rlimits.iter().enumerate() {
        setrlimit(*resource, *limit, *limit).at(Rlimits, i as u32)?;
    }
    // NPROC after the uid change: set before it, the kernel would count the new uid as
    // over its limit at setuid and refuse the exec itself.
    setrlimit(Resource::RLIMIT_NPROC, plan.nproc, plan.nproc).at(Rlimits, 5)?;
    // After the uid change, which clears it: the job dies with the trainer.
    set_pdeathsig(Signal::SIGKILL).at(Privileges, 0)?;
    set_no_new_privs().at(Privileges, 1)?;
    // Raw: nix has no seccomp; the program is prepared and outlives this call.
    let prog = libc::sock_fprog { len: plan.seccomp.len() as u16, filter: plan.seccomp.as_ptr() as *mut _ };
    // SAFETY: a valid program of the given length.
    check(unsafe { libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog, 0, 0) }, Seccomp, 0)?;
    // Raw: nix's execve collects its arguments into a new vector, an allocation, and the
    // parent prepared these null-terminated arrays.
    // SAFETY: a C string and two null-terminated arrays of C strings that outlive the call.
    unsafe { libc::execve(plan.python.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr()) };
    Err((Exec, 0, errno()))
}

/// Bring up `lo`, the only interface of the job's new network namespace (down when created),
/// so that the job can listen and connect on `127.0.0.1`, its own loopback: nothing of the
/// host's. Raw: nix has no `SIOCSIFFLAGS`; the request is built on the stack.
fn loopback_up() -> nix::Result<()> {
    // SAFETY: `ifreq` is plain data, valid zeroed; the socket is closed by its `OwnedFd`.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(Errno::last());
        }
        let fd = <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd);
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as c_char;
        request.ifr_name[1] = b'o' as c_char;
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        Errno::result(libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &request as *const libc::ifreq)).map(drop)
    }
}

/// Drop to the job's own uid and gid, no supplementary groups.
///
/// Raw system calls: glibc's `set*id` wrappers (which `nix::unistd::setresuid` and friends
/// call) signal every thread glibc believes the process has and wait for each to change its
/// ids too, and this clone has none of the parent's threads: it would wait for ever.
fn drop_to(uid: u32, gid: u32) -> Result<(), Failure> {
    // SAFETY: plain system calls on integers (a null list with a count of 0).
    unsafe {
        check(libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) as c_int, Step::DropUid, 0)?;
        check(libc::syscall(libc::SYS_setresgid, gid, gid, gid) as c_int, Step::DropUid, 0)?;
        check(libc::syscall(libc::SYS_setresuid, uid, uid, uid) as c_int, Step::DropUid, 0)
    }
}

/// `src` read-only at `path` as an overlay whose lower layers are `src` and the root's
/// still empty `/job`, both given as `/proc/self/fd/N` (the options are built on the stack:
/// no allocation after `clone`); a read-only bind where the overlay is refused.
fn overlay(src: &CStr, path: &CStr) -> nix::Result<()> {
    let dir = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let lower = open(src, dir, Mode::empty())?;
    let empty = open(c"/job", dir, Mode::empty())?;
    let mut opts = StackStr::<96>::new();
    opts.push(b"ro,lowerdir=/proc/self/fd/");
    opts.push_int(lower.as_raw_fd());
    opts.push(b":/proc/self/fd/");
    opts.push_int(empty.as_raw_fd());
    match opts.as_cstr().map(|opts| mount(Some(c"overlay"), path, Some(c"overlay"), MsFlags::MS_RDONLY, Some(opts))) {
        Some(Ok(())) => Ok(()),
        _ => mount(Some(src), path, NONE, MsFlags::MS_BIND, NONE),
    }
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
/// Linux 5.12) a read-only remount of each. Raw: nix has no `mount_setattr`.
fn read_only(plan: &ChildPlan) -> Result<(), Failure> {
    let attr = MountAttr { attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, attr_clr: 0, propagation: 0, userns_fd: 0 };
    let setattr = |path: &CStr, flags: c_int, attr: &MountAttr| {
        // SAFETY: a valid path and attribute struct of the size passed.
        unsafe {
            libc::syscall(libc::SYS_mount_setattr, libc::AT_FDCWD, path.as_ptr(), flags, attr as *const MountAttr, size_of::<MountAttr>())
        }
    };
    if setattr(c"/", AT_RECURSIVE, &attr) == 0 {
        // The device binds must stay usable: clear the nodev the tree just got.
        let devices = MountAttr { attr_set: 0, attr_clr: MOUNT_ATTR_NODEV, propagation: 0, userns_fd: 0 };
        for (i, (dev, _)) in DEVICES.iter().enumerate() {
            check(setattr(dev, 0, &devices) as c_int, Step::Dev, i as u32)?;
        }
        return Ok(());
    }
    if errno() != libc::ENOSYS {
        return Err((Step::ReadOnly, 0, errno()));
    }
    let ro = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    let noexec = |yes: bool| if yes { MsFlags::MS_NOEXEC } else { MsFlags::empty() };
    for (i, op) in plan.ops.iter().enumerate() {
        if let Op::Bind { path, noexec: x, .. } = op {
            mount(NONE, path.as_c_str(), NONE, ro | noexec(*x), NONE).at(Step::ReadOnly, i as u32)?;
        }
    }
    for (path, x) in [(c"/", false), (c"/proc", true), (c"/dev", true)] {
        mount(NONE, path, NONE, ro | noexec(x), NONE).at(Step::ReadOnly, u32::MAX)?;
    }
    Ok(())
}

/// Close every descriptor but 0, 1, 2 and `keep` (the report pipe, close-on-exec). Raw: nix
/// has no `close_range`; closing one by one where the kernel lacks it.
fn close_others(keep: c_int) {
    let keep = keep as u32;
    for (lo, hi) in [(3, keep.saturating_sub(1)), (keep + 1, u32::MAX)] {
        if lo > hi {
            continue;
        }
        // SAFETY: closing descriptors of this process, none of which is borrowed past here
        // (the plan's are the report pipe, kept, and the output pipes, already on 1 and 2).
        unsafe {
            if libc::syscall(libc::SYS_close_range, lo, hi, 0) != 0 {
                let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 20) as u32;
                for fd in lo..=hi.min(max) {
                    libc::close(fd as c_int);
                }
            }
        }
    }
}
