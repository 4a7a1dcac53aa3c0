//! What the child does between `fork` and `exec`, before any job code exists: a new
//! session, a new network namespace, rlimits, and the drop to an unprivileged uid.
//!
//! This runs in a forked child of a possibly multi-threaded parent, so it only makes
//! system calls on values computed beforehand (no allocation, no locks).

use std::io;

use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, setrlimit};
use nix::unistd::{Gid, Uid, setgid, setgroups, setsid, setuid};

/// How the child loses the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetIsolation {
    /// A new network namespace (needs root, or CAP_SYS_ADMIN).
    Namespace,
    /// A new user namespace holding a new network namespace (unprivileged kernels that allow it).
    UserNamespace,
    /// The kernel refused both; the job keeps the host's network (reported once).
    None,
}

/// Everything the child sets up, decided by the parent.
#[derive(Clone, Copy, Debug)]
pub struct Fence {
    pub net: NetIsolation,
    /// Drop to this uid/gid (when the parent is root).
    pub drop_to: Option<(u32, u32)>,
    pub cpu_seconds: u64,
    pub memory_bytes: u64,
    pub file_size_bytes: u64,
}

impl Fence {
    /// Run in the child after fork, before exec. An error aborts the spawn (the parent
    /// sees it from `spawn`), so a job never runs half-fenced.
    pub fn apply(&self) -> io::Result<()> {
        setsid().map_err(errno)?;
        match self.net {
            NetIsolation::Namespace => unshare(CloneFlags::CLONE_NEWNET).map_err(errno)?,
            NetIsolation::UserNamespace => unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).map_err(errno)?,
            NetIsolation::None => {}
        }
        // CPU: SIGXCPU at the soft limit, SIGKILL one second later at the hard one.
        setrlimit(Resource::RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 1).map_err(errno)?;
        setrlimit(Resource::RLIMIT_AS, self.memory_bytes, self.memory_bytes).map_err(errno)?;
        setrlimit(Resource::RLIMIT_FSIZE, self.file_size_bytes, self.file_size_bytes).map_err(errno)?;
        setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(errno)?;
        setrlimit(Resource::RLIMIT_NOFILE, 64, 64).map_err(errno)?;
        if let Some((uid, gid)) = self.drop_to {
            setgroups(&[]).map_err(errno)?;
            setgid(Gid::from_raw(gid)).map_err(errno)?;
            setuid(Uid::from_raw(uid)).map_err(errno)?;
        }
        // NPROC last: set before the uid change, the kernel would flag the new user as over
        // its limit at setuid and refuse the exec itself.
        setrlimit(Resource::RLIMIT_NPROC, 0, 0).map_err(errno)?;
        // After the uid change, which clears it: the job dies with the trainer, and can never
        // gain privileges through exec.
        // SAFETY: prctl with constant arguments.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        }
        Ok(())
    }
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}
