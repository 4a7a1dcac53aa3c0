//! Starting the job's first process: pipes, `clone` into fresh namespaces, and the report
//! pipe that says whether the child reached `execve` (it closes on exec) or which set-up
//! step failed (12 bytes: step, index, errno).

use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use libc::c_int;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::{Pid, pipe2, read};

use crate::child::{self, ChildPlan, Failure, Step};

/// A pipe: (read end, write end), both close-on-exec and numbered 3 or higher (so the child
/// can `dup2` them onto 0–2 without clobbering one with another).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = pipe2(OFlag::O_CLOEXEC)?;
    Ok((above_two(r)?, above_two(w)?))
}

/// `fd` numbered 3 or higher: std's `try_clone` is `F_DUPFD_CLOEXEC` from 3.
fn above_two(fd: OwnedFd) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    if fd.as_raw_fd() > 2 { Ok(fd) } else { fd.try_clone() }
}

pub fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(&fd, FcntlArg::F_GETFL)?);
    fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// A child that has not reached `execve` by then is killed (its set-up is a few ms).
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The running job's first process.
pub struct Child {
    pub pid: i32,
    pub pidfd: OwnedFd,
}

pub enum SpawnError {
    /// `clone` itself failed (errno).
    Clone(c_int),
    /// The child failed a set-up step and exited.
    Child(Failure),
    Io(io::Error),
}

/// Clone with `flags` (namespace flags) and run [`child::run`] in the child. The caller
/// then closes the child's ends of the pipes (which the plan borrows) and waits for the
/// set-up with [`setup_done`].
pub fn spawn(plan: &ChildPlan, flags: c_int) -> Result<Child, SpawnError> {
    let mut pidfd: c_int = -1;
    let flags = (flags | libc::CLONE_PIDFD | libc::SIGCHLD) as libc::c_ulong;
    // Raw: nix's `clone` runs a callback on a stack of its own (a fork cannot be asked for),
    // and offers no `CLONE_PIDFD`.
    // SAFETY: clone without CLONE_VM is fork with namespaces: the child runs on a copy of
    // this stack and never returns from this block (it execs or `_exit`s). `parent_tid`
    // (the third argument on every architecture) receives the pidfd.
    let ret = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, &mut pidfd as *mut c_int, 0usize, 0usize) };
    if ret == 0 {
        child::run(plan);
        // SAFETY: leaving the child without running any of the parent's destructors.
        unsafe { libc::_exit(127) };
    }
    if ret < 0 {
        return Err(SpawnError::Clone(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)));
    }
    // SAFETY: CLONE_PIDFD stored a fresh descriptor for the child.
    Ok(Child { pid: ret as i32, pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) } })
}

/// Wait for the child's report (`report`, the pipe's read end, once the parent holds no
/// write end): EOF when it reached `execve`, else the step that failed (the child is reaped).
pub fn setup_done(child: Child, report: OwnedFd) -> Result<Child, SpawnError> {
    let mut msg = [0u8; 12];
    let mut got = 0;
    let deadline = std::time::Instant::now() + SETUP_TIMEOUT;
    while got < msg.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = PollTimeout::try_from(left.as_millis().clamp(1, i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX);
        let ready = left.is_zero() || matches!(poll(&mut [PollFd::new(report.as_fd(), PollFlags::POLLIN)], ms), Ok(0));
        if ready {
            // Our unreaped child: its pid cannot have been reused.
            let _ = kill(Pid::from_raw(child.pid), Signal::SIGKILL);
            reap(&child);
            return Err(SpawnError::Io(io::Error::other(format!("the job's set-up did not finish within {SETUP_TIMEOUT:?}"))));
        }
        match read(&report, &mut msg[got..]) {
            Err(nix::errno::Errno::EINTR) => continue,
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    if got == 0 {
        return Ok(child);
    }
    reap(&child);
    if got < msg.len() {
        return Err(SpawnError::Io(io::Error::other("short report from the sandbox child")));
    }
    let word = |i: usize| u32::from_ne_bytes(msg[i..i + 4].try_into().expect("4 bytes"));
    let step = Step::from_u32(word(0)).unwrap_or(Step::Exec);
    Err(SpawnError::Child((step, word(4), word(8) as i32)))
}

/// Wait for a child that is exiting on its own.
fn reap(child: &Child) {
    while waitpid(Pid::from_raw(child.pid), None) == Err(nix::errno::Errno::EINTR) {}
}
