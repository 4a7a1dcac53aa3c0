//! What a running job is held to from the host side: linear memory (a resource limiter),
//! CPU time (every epoch tick), open files (counted in the WASI host calls), and the job
//! directory's contents — file sizes, their sum and the number of entries, measured by a walk
//! relative to directory descriptors (no host path is ever built, so no path can be too
//! long) at every epoch tick and after every write to a file. The walk fails closed: any
//! entry it cannot inspect, too many entries or too deep a tree stops the job like an
//! oversized file.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use arl_core::Limits;
use wasmtime::ResourceLimiter;

/// Why the host stopped a job; carried inside the trap and read back by the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    Cpu {
        seconds: u64,
    },
    FileSize {
        bytes: u64,
        limit: u64,
    },
    /// More entries (files and directories) than [`JOB_INODES`] plus the job's own.
    TooManyFiles {
        limit: u64,
    },
    /// The job directory could not be measured (an unreadable entry, too deep a tree).
    Unwatchable(String),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Cpu { seconds } => write!(f, "CPU time limit of {seconds} s exceeded"),
            Stop::FileSize { bytes, limit } => write!(f, "file size limit exceeded: {bytes} bytes written, the limit is {limit}"),
            Stop::TooManyFiles { limit } => write!(f, "file count limit exceeded: more than {limit} files and directories"),
            Stop::Unwatchable(why) => write!(f, "file size limit: the job directory cannot be measured ({why}), so the job is stopped"),
        }
    }
}

impl std::error::Error for Stop {}

impl Stop {
    /// The signal `rlimit` would have reported.
    pub fn signal(&self) -> i32 {
        match self {
            Stop::Cpu { .. } => libc::SIGXCPU,
            _ => libc::SIGXFSZ,
        }
    }
}

/// Files and directories a job may create beyond its own (as in `rlimit`'s tmpfs).
pub const JOB_INODES: u64 = 4096;
/// The job directory may hold this many times the per-file size limit (as in `rlimit`).
pub const JOB_ROOM_FILES: u64 = 16;
/// Files a job may have open at once (as `rlimit`'s `RLIMIT_NOFILE`, beside stdio and `/`).
pub const MAX_OPEN_FILES: u64 = 64;
/// Directory depth the walk follows; deeper is a breach.
const MAX_DEPTH: usize = 64;

/// Per-job accounting, kept in the store.
pub struct Watch {
    memory_bytes: u64,
    cpu_limit_ns: u64,
    file_size_bytes: u64,
    entry_limit: u64,
    dir: OwnedFd,
    cpu_start_ns: u64,
    /// Peak linear memory, bytes.
    pub peak_memory: u64,
    /// Files the guest has open (its `path_open`s less its closes).
    pub open_files: u64,
    /// Set once the guest renumbers a descriptor onto or away from stdio: from then on every
    /// descriptor is treated as a file.
    pub stdio_moved: bool,
    /// Entries found by the last walk, and creations (opens with create, mkdir, links)
    /// since: their sum bounds the entries there are now.
    known_entries: u64,
    created: u64,
    /// The tick's walk waits until the job's CPU clock reaches this, so that the walks
    /// take at most a tenth of the job's CPU however big its directory grows.
    next_walk_ns: u64,
}

/// The tick's walks may take this share of the job's CPU time (1 / (1 + WALK_SPACING)).
const WALK_SPACING: u64 = 9;

impl Watch {
    /// Starts the job's CPU clock: call on the thread that will run the job. `own_entries`
    /// is what the job starts with (its files and directories).
    pub fn new(limits: &Limits, dir: &Path, own_entries: u64) -> std::io::Result<Self> {
        let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))?;
        // SAFETY: a valid C string.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            memory_bytes: limits.memory_bytes,
            cpu_limit_ns: limits.cpu_seconds.saturating_mul(1_000_000_000),
            file_size_bytes: limits.file_size_bytes,
            entry_limit: JOB_INODES + own_entries,
            // SAFETY: a fresh descriptor.
            dir: unsafe { OwnedFd::from_raw_fd(fd) },
            cpu_start_ns: thread_cpu_ns(),
            peak_memory: 0,
            open_files: 0,
            stdio_moved: false,
            known_entries: own_entries,
            created: 0,
            next_walk_ns: 0,
        })
    }

    /// CPU time of this thread since the job started, ms.
    pub fn cpu_ms(&self) -> u64 {
        thread_cpu_ns().saturating_sub(self.cpu_start_ns) / 1_000_000
    }

    pub fn file_size_bytes(&self) -> u64 {
        self.file_size_bytes
    }

    /// A host call may have created an entry: once the count could be over the limit, count
    /// exactly (so a flood of files is stopped at the limit, not at the next tick).
    pub fn created(&mut self) -> Result<(), Stop> {
        self.created += 1;
        if self.known_entries + self.created > self.entry_limit { self.check_files() } else { Ok(()) }
    }

    /// The epoch-tick check: CPU time, then the job directory. Writes, growth and creations
    /// are checked where they happen (the host calls); this walk is the backstop, spaced so
    /// that it costs at most a tenth of the job's CPU time (a 4096-file directory takes
    /// milliseconds to walk, and ticks come every 10 ms).
    pub fn check(&mut self) -> Result<(), Stop> {
        let now = thread_cpu_ns();
        if now.saturating_sub(self.cpu_start_ns) > self.cpu_limit_ns {
            return Err(Stop::Cpu { seconds: self.cpu_limit_ns / 1_000_000_000 });
        }
        if now < self.next_walk_ns {
            return Ok(());
        }
        let checked = self.check_files();
        let after = thread_cpu_ns();
        self.next_walk_ns = after + after.saturating_sub(now) * WALK_SPACING;
        checked
    }

    /// Every file's size, their sum (at most [`JOB_ROOM_FILES`] times the per-file limit) and
    /// the number of entries.
    pub fn check_files(&mut self) -> Result<(), Stop> {
        let mut tally = Tally::default();
        walk(self.dir.as_raw_fd(), 0, &mut tally, self.entry_limit)?;
        (self.known_entries, self.created) = (tally.entries, 0);
        if tally.largest > self.file_size_bytes {
            return Err(Stop::FileSize { bytes: tally.largest, limit: self.file_size_bytes });
        }
        let room = self.file_size_bytes.saturating_mul(JOB_ROOM_FILES);
        if tally.total > room {
            return Err(Stop::FileSize { bytes: tally.total, limit: room });
        }
        Ok(())
    }
}

impl ResourceLimiter for Watch {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired as u64 > self.memory_bytes {
            return Ok(false);
        }
        self.peak_memory = self.peak_memory.max(desired as u64);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

#[derive(Default)]
struct Tally {
    largest: u64,
    total: u64,
    entries: u64,
}

fn unwatchable(what: &str) -> Stop {
    Stop::Unwatchable(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Walk the directory open at `fd` (not closed here), relative to descriptors only.
fn walk(fd: RawFd, depth: usize, tally: &mut Tally, limit: u64) -> Result<(), Stop> {
    if depth > MAX_DEPTH {
        return Err(Stop::Unwatchable(format!("directories nested deeper than {MAX_DEPTH}")));
    }
    // SAFETY: a fresh duplicate handed to fdopendir, which owns it until closedir.
    let dir = unsafe {
        let dup = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
        if dup < 0 {
            return Err(unwatchable("duplicating a directory descriptor"));
        }
        let dir = libc::fdopendir(dup);
        if dir.is_null() {
            libc::close(dup);
            return Err(unwatchable("opening a directory stream"));
        }
        // The duplicate shares the offset with `fd`, which an earlier walk left at the end.
        libc::rewinddir(dir);
        Dir(dir)
    };
    loop {
        // SAFETY: errno is thread-local; readdir on a valid stream.
        let entry = unsafe {
            *libc::__errno_location() = 0;
            libc::readdir64(dir.0)
        };
        if entry.is_null() {
            // SAFETY: reading this thread's errno.
            if unsafe { *libc::__errno_location() } != 0 {
                return Err(unwatchable("reading a directory"));
            }
            return Ok(());
        }
        // SAFETY: readdir returned a valid entry with a NUL-terminated name.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        if name == c"." || name == c".." {
            continue;
        }
        tally.entries += 1;
        if tally.entries > limit {
            return Err(Stop::TooManyFiles { limit });
        }
        // SAFETY: stat64 is plain data, valid all zero.
        let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
        // SAFETY: an open directory, a C string name and an out-parameter of the right type.
        if unsafe { libc::fstatat64(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
            return Err(unwatchable("inspecting an entry"));
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            // SAFETY: openat relative to the open directory; the result is owned below.
            let sub = unsafe { libc::openat(fd, name.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
            if sub < 0 {
                return Err(unwatchable("opening a subdirectory"));
            }
            // SAFETY: a fresh descriptor.
            let sub = unsafe { OwnedFd::from_raw_fd(sub) };
            walk(sub.as_raw_fd(), depth + 1, tally, limit)?;
        } else {
            let size = st.st_size.max(0) as u64;
            tally.largest = tally.largest.max(size);
            tally.total = tally.total.saturating_add(size);
        }
    }
}

/// A directory stream, closed on drop.
struct Dir(*mut libc::DIR);

impl Drop for Dir {
    fn drop(&mut self) {
        // SAFETY: a stream from fdopendir, closed once.
        unsafe { libc::closedir(self.0) };
    }
}

/// This thread's CPU clock, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid pointer to a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(dir: &Path) -> Watch {
        Watch::new(&Limits { file_size_bytes: 1000, ..Limits::default() }, dir, 0).unwrap()
    }

    #[test]
    fn a_path_longer_than_path_max_is_measured_all_the_same() {
        let d = crate::scratch_dir("watch-long");
        // 40 levels of 200-byte names: far beyond PATH_MAX (4096) as an absolute path.
        let mut p = d.clone();
        for i in 0..40 {
            p.push(format!("{i:0>200}"));
        }
        let made = std::process::Command::new("python3")
            .args(["-c", "import os, sys\nos.chdir(sys.argv[1])\nfor part in sys.argv[2:]:\n    os.mkdir(part); os.chdir(part)\nopen('big', 'wb').write(b'x' * 5000)\n"])
            .arg(&d)
            .args(p.strip_prefix(&d).unwrap().iter())
            .status()
            .unwrap();
        assert!(made.success());
        let mut w = watch(&d);
        assert_eq!(w.check_files(), Err(Stop::FileSize { bytes: 5000, limit: 1000 }));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_unreadable_directory_stops_the_job_instead_of_being_skipped() {
        let d = crate::scratch_dir("watch-unreadable");
        std::fs::create_dir(d.join("locked")).unwrap();
        std::fs::write(d.join("locked/big"), vec![b'x'; 5000]).unwrap();
        std::fs::set_permissions(d.join("locked"), std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
        let mut w = watch(&d);
        let got = w.check_files();
        std::fs::set_permissions(d.join("locked"), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        // Root reads through mode 000 and finds the big file; anyone else cannot read it.
        assert!(matches!(got, Err(Stop::FileSize { .. }) | Err(Stop::Unwatchable(_))), "{got:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn too_many_entries_or_too_deep_a_tree_is_a_breach_and_repeat_walks_see_everything() {
        let d = crate::scratch_dir("watch-many");
        for i in 0..(JOB_INODES + 1) {
            std::fs::write(d.join(format!("f{i}")), "").unwrap();
        }
        assert_eq!(watch(&d).check_files(), Err(Stop::TooManyFiles { limit: JOB_INODES }));
        std::fs::remove_dir_all(&d).unwrap();
        let d = crate::scratch_dir("watch-deep");
        let mut p = d.clone();
        for _ in 0..(MAX_DEPTH + 2) {
            p.push("d");
        }
        std::fs::create_dir_all(&p).unwrap();
        assert!(matches!(watch(&d).check_files(), Err(Stop::Unwatchable(_))));
        std::fs::remove_dir_all(&d).unwrap();
        let d = crate::scratch_dir("watch-again");
        let mut w = watch(&d);
        assert_eq!(w.check_files(), Ok(()));
        std::fs::write(d.join("late"), vec![b'x'; 2000]).unwrap();
        assert_eq!(w.check_files(), Err(Stop::FileSize { bytes: 2000, limit: 1000 }), "the second walk rewinds");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
