//! Waiting for a job: one `poll` over its stdout, its stderr and its pidfd, against the
//! wall clock. Output is kept up to a cap (the rest is read and dropped, so a flood never
//! blocks the job); at the deadline the job's first process — PID 1 of its namespace — is
//! killed, which kills every process in the namespace. Once that process is reaped the
//! namespace is empty, so nothing can still write: what is left in the pipes is read
//! without waiting, and the pipes are dropped. Nothing here waits for an EOF.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use crate::spawn::Child;

/// Output kept from one pipe.
#[derive(Default)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub truncated: bool,
}

impl Captured {
    fn push(&mut self, data: &[u8], cap: usize) {
        let room = cap.saturating_sub(self.bytes.len());
        if data.len() > room {
            self.truncated = true;
        }
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
    }

    /// Bytes as text, invalid UTF-8 replaced (a cap may split a character).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

pub struct Ended {
    pub status: i32,
    pub timed_out: bool,
    pub usage: libc::rusage,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Most bytes read from a pipe after the job ended (its buffer; more would mean a writer
/// outside the namespace, which cannot exist).
const DRAIN_MAX: usize = 1 << 20;

/// Run `child` to its end or to `deadline`, capturing `stdout`/`stderr` (non-blocking read
/// ends) up to `cap` bytes each.
pub fn collect(child: &Child, stdout: OwnedFd, stderr: OwnedFd, deadline: Instant, cap: usize) -> Ended {
    let mut captured = [Captured::default(), Captured::default()];
    let mut open = [true, true];
    let pipes = [stdout, stderr];
    let mut timed_out = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let now = Instant::now();
        if now >= deadline {
            kill(child);
            timed_out = true;
            break;
        }
        let wait = (deadline - now).as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
        let mut fds = [
            poll_fd(if open[0] { pipes[0].as_raw_fd() } else { -1 }),
            poll_fd(if open[1] { pipes[1].as_raw_fd() } else { -1 }),
            poll_fd(child.pidfd.as_raw_fd()),
        ];
        // SAFETY: a valid array of pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            kill(child);
            break;
        }
        for i in 0..2 {
            if open[i] && fds[i].revents != 0 {
                open[i] = read_some(&pipes[i], &mut buf, &mut captured[i], cap, usize::MAX);
            }
        }
        if fds[2].revents != 0 {
            break;
        }
    }
    let (status, usage) = wait(child);
    for i in 0..2 {
        if open[i] {
            read_some(&pipes[i], &mut buf, &mut captured[i], cap, DRAIN_MAX);
        }
    }
    let [stdout, stderr] = captured;
    Ended { status, timed_out, usage, stdout, stderr }
}

fn poll_fd(fd: i32) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// Read what is there (up to `limit` bytes); false once the pipe is at EOF or broken.
fn read_some(pipe: &OwnedFd, buf: &mut [u8], into: &mut Captured, cap: usize, limit: usize) -> bool {
    let mut total = 0;
    while total < limit {
        // SAFETY: reading into a local buffer of its length.
        let n = unsafe { libc::read(pipe.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            into.push(&buf[..n as usize], cap);
            total += n as usize;
            continue;
        }
        if n == 0 {
            return false;
        }
        return match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => true,
            _ => false,
        };
    }
    true
}

/// SIGKILL to the job's first process: the kernel then kills its whole PID namespace.
fn kill(child: &Child) {
    // SAFETY: pidfd_send_signal on our child's pidfd (not yet reaped, so it cannot be reused).
    let r = unsafe { libc::syscall(libc::SYS_pidfd_send_signal, child.pidfd.as_raw_fd(), libc::SIGKILL, std::ptr::null::<u8>(), 0) };
    if r != 0 {
        // SAFETY: as above, by pid.
        unsafe { libc::kill(child.pid, libc::SIGKILL) };
    }
}

/// Reap the child (blocking: it has exited or been killed) with its resource use.
fn wait(child: &Child) -> (i32, libc::rusage) {
    let mut status = 0;
    // SAFETY: rusage is plain old data; valid pointers to locals.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: as above.
        let r = unsafe { libc::wait4(child.pid, &mut status, 0, &mut usage) };
        if r == child.pid {
            return (status, usage);
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return (-1, usage);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_cap_bytes_and_flags_the_rest() {
        let mut c = Captured::default();
        c.push(&[b'x'; 100], 10);
        assert_eq!((c.bytes.len(), c.truncated), (10, true));
        let mut c = Captured::default();
        c.push(b"hello", 10);
        assert_eq!((c.text().as_str(), c.truncated), ("hello", false));
    }
}
