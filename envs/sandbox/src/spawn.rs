//! Starting the job's first process: pipes, `clone` into fresh namespaces, and the report
//! pipe that says whether the child reached `execve` (it closes on exec) or which set-up
//! step failed (12 bytes: step, index, errno).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use libc::c_int;

use crate::child::{self, ChildPlan, Failure, Step};

/// A pipe: (read end, write end), both close-on-exec and numbered 3 or higher (so the child
/// can `dup2` them onto 0–2 without clobbering one with another).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_two(r)?, above_two(w)?))
}

fn above_two(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: duplicating a descriptor we own; the copy is owned by the result.
    let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
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

/// Clone with `flags` (namespace flags), run [`child::run`] in the child; in the parent,
/// close the child's descriptors (`child_fds`, which the plan names) and wait for the
/// report. `report` is the report pipe's read end.
pub fn spawn(plan: &ChildPlan, flags: c_int, report: OwnedFd, child_fds: Vec<OwnedFd>) -> Result<Child, SpawnError> {
    let mut pidfd: c_int = -1;
    let flags = (flags | libc::CLONE_PIDFD | libc::SIGCHLD) as libc::c_ulong;
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
    let child = Child { pid: ret as i32, pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) } };
    drop(child_fds);
    let mut msg = [0u8; 12];
    let mut got = 0;
    let deadline = std::time::Instant::now() + SETUP_TIMEOUT;
    while got < msg.len() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut fd = libc::pollfd { fd: report.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if left.is_zero() || unsafe { libc::poll(&mut fd, 1, left.as_millis().max(1) as c_int) } == 0 {
            // SAFETY: our unreaped child.
            unsafe { libc::kill(child.pid, libc::SIGKILL) };
            reap(&child);
            return Err(SpawnError::Io(io::Error::other(format!("the job's set-up did not finish within {SETUP_TIMEOUT:?}"))));
        }
        // SAFETY: reading into the unfilled part of a local buffer.
        let n = unsafe { libc::read(report.as_raw_fd(), msg[got..].as_mut_ptr().cast(), msg.len() - got) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
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
    let mut status = 0;
    // SAFETY: waiting for our own child.
    while unsafe { libc::waitpid(child.pid, &mut status, 0) } < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {}
}
