//! A memory cgroup per job of several processes (`Limits::processes` > 0: a Bash call),
//! where the host lets the trainer make one: rlimits bound each process (`RLIMIT_AS`), not
//! what a job holds in all (16 processes of a shell call, its tmpfs, pipes, socket buffers,
//! page tables); the cgroup bounds the sum, swap included. A job of one process (graded
//! code) goes without: its rlimits, its tmpfs and the seccomp filter bound it, and moving a
//! process into a cgroup costs an RCU grace period (~10 ms a job on the 2-core machine,
//! 45 % of a grading job's time; ~3 % of a Bash call's).
//!
//! Found once per process ([`MemoryCgroups::discover`]) under the trainer's own cgroup:
//!
//! - cgroup v1 (a `memory` hierarchy): `<ours>/arl-sandbox-<pid>/job-<n>` with
//!   `memory.limit_in_bytes` and, where the kernel accounts swap, the same
//!   `memory.memsw.limit_in_bytes` (so nothing goes to swap instead);
//! - cgroup v2: the same directories with `memory.max` and `memory.swap.max = 0`, where the
//!   trainer's cgroup has the `memory` controller for its children (`cgroup.subtree_control`;
//!   v2 allows that only in a cgroup without processes of its own, e.g. the root, or a
//!   delegated one the trainer does not itself sit in).
//!
//! The job's first process joins its cgroup before anything else (it writes `0` to the
//! `cgroup.procs` the parent opened for it), then enters a new cgroup namespace, so the job
//! sees its cgroup as `/`. The parent removes the directory once the job is reaped. A trainer
//! that cannot create cgroups (not root, no delegation, no memory controller) runs without;
//! [`MemoryCgroups::discover`] says why, and the rlimits still bound each process.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where this process makes its jobs' memory cgroups.
#[derive(Debug)]
pub struct MemoryCgroups {
    pub version: Version,
    /// `<the trainer's cgroup>/arl-sandbox-<pid>`, holding one directory per running job.
    pub dir: PathBuf,
    /// Whether swap is bounded too (v1: `memory.memsw.*` exists; v2: `memory.swap.max`).
    pub swap: bool,
    next: AtomicU64,
    /// Job directories whose removal failed (busy); retried when the next job ends.
    stale: Mutex<Vec<PathBuf>>,
}

/// One job's cgroup: the open `cgroup.procs` its first process writes itself into, and the
/// directory, removed on drop.
pub struct JobCgroup<'a> {
    owner: &'a MemoryCgroups,
    dir: PathBuf,
    pub procs: Option<OwnedFd>,
}

impl MemoryCgroups {
    /// The trainer's memory cgroup and a directory of ours under it, checked by making (and
    /// removing) one job's cgroup with a limit; `Err` says why there is none.
    pub fn discover() -> Result<MemoryCgroups, String> {
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
        let mounts = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
        let (version, ours) = find(&own, &mounts)?;
        let swap = match version {
            Version::V1 => ours.join("memory.memsw.limit_in_bytes").exists(),
            Version::V2 => {
                let enabled = fs::read_to_string(ours.join("cgroup.subtree_control")).unwrap_or_default();
                if !enabled.split_whitespace().any(|c| c == "memory") {
                    // Possible only where the trainer's cgroup holds no process (the root).
                    fs::write(ours.join("cgroup.subtree_control"), "+memory").map_err(|e| {
                        format!(
                            "cgroup v2 `{}` does not give its children the memory controller and cannot be made to ({e}): \
                             the trainer would have to run in a delegated cgroup of its own",
                            ours.display()
                        )
                    })?;
                }
                true
            }
        };
        remove_stale(&ours);
        let dir = ours.join(format!("arl-sandbox-{}", std::process::id()));
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create a cgroup under `{}`: {e}", ours.display())),
        }
        if version == Version::V2 {
            fs::write(dir.join("cgroup.subtree_control"), "+memory")
                .map_err(|e| format!("cannot enable the memory controller in `{}`: {e}", dir.display()))?;
        }
        let cgroups = MemoryCgroups { version, dir, swap, next: AtomicU64::new(0), stale: Mutex::new(Vec::new()) };
        let probe =
            cgroups.create(64 << 20).map_err(|e| format!("cannot set up a job's memory cgroup in `{}`: {e}", cgroups.dir.display()))?;
        drop(probe);
        Ok(cgroups)
    }

    /// A new job cgroup holding at most `limit` bytes (and no swap where the kernel counts it).
    pub fn create(&self, limit: u64) -> io::Result<JobCgroup<'_>> {
        self.retry_stale();
        let dir = self.dir.join(format!("job-{}", self.next.fetch_add(1, Ordering::Relaxed)));
        fs::create_dir(&dir)?;
        let mut job = JobCgroup { owner: self, dir, procs: None };
        let set = |file: &str, value: &str| fs::write(job.dir.join(file), value);
        match self.version {
            Version::V1 => {
                set("memory.limit_in_bytes", &limit.to_string())?;
                if self.swap {
                    set("memory.memsw.limit_in_bytes", &limit.to_string())?;
                }
            }
            Version::V2 => {
                set("memory.max", &limit.to_string())?;
                if job.dir.join("memory.swap.max").exists() {
                    set("memory.swap.max", "0")?;
                }
            }
        }
        job.procs = Some(fs::OpenOptions::new().write(true).open(job.dir.join("cgroup.procs"))?.into());
        Ok(job)
    }

    fn retry_stale(&self) {
        let mut stale = self.stale.lock().unwrap_or_else(|p| p.into_inner());
        stale.retain(|d| fs::remove_dir(d).is_err() && d.exists());
    }

    /// A short description for messages: version, place, swap.
    pub fn describe(&self) -> String {
        let v = match self.version {
            Version::V1 => "v1",
            Version::V2 => "v2",
        };
        format!("a memory cgroup per job (cgroup {v}, under {}{})", self.dir.display(), if self.swap { ", swap bounded" } else { "" })
    }
}

impl Drop for MemoryCgroups {
    fn drop(&mut self) {
        self.retry_stale();
        let _ = fs::remove_dir(&self.dir);
    }
}

impl Drop for JobCgroup<'_> {
    fn drop(&mut self) {
        drop(self.procs.take());
        // The job is reaped, and with it every process of its PID namespace; a cgroup can
        // still read as busy for a moment while the kernel lets go of the last one.
        for _ in 0..20 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => std::thread::sleep(std::time::Duration::from_micros(500)),
                Err(_) => break,
            }
        }
        self.owner.stale.lock().unwrap_or_else(|p| p.into_inner()).push(self.dir.clone());
    }
}

/// The directory of this process's memory cgroup, checked: it exists, and under v2 has the
/// controller.
fn find(own: &str, mounts: &str) -> Result<(Version, PathBuf), String> {
    let (version, dir) = locate(own, mounts)?;
    match version {
        Version::V1 if !dir.is_dir() => Err(format!("the memory cgroup is not at `{}`", dir.display())),
        Version::V2 => {
            let controllers = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                Ok((version, dir))
            } else {
                Err(format!("cgroup v2 `{}` has no memory controller", dir.display()))
            }
        }
        Version::V1 => Ok((version, dir)),
    }
}

/// Where this process's memory cgroup is, from `/proc/self/cgroup` and `/proc/self/mountinfo`:
/// the v1 `memory` hierarchy if there is one (hybrid hosts keep the controller there), else
/// the v2 unified one.
fn locate(own: &str, mounts: &str) -> Result<(Version, PathBuf), String> {
    // `hierarchy-id:controllers:path`.
    let entries: Vec<(&str, &str)> = own
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((controllers, path))
        })
        .collect();
    // mountinfo: id parent major:minor root mount-point options [optional…] - fstype source super-options
    let mount = |want: &dyn Fn(&str, &str) -> bool| -> Option<(String, String)> {
        mounts.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (fstype, options) = (*right.first()?, *right.get(2).unwrap_or(&""));
            if want(fstype, options) { Some((unescape(fields.get(3)?), unescape(fields.get(4)?))) } else { None }
        })
    };
    // The cgroup's path is relative to the hierarchy's root; the mount shows `root` of it.
    let under = |root: &str, point: &str, path: &str| -> PathBuf {
        let rel = path.strip_prefix(root).unwrap_or(path).trim_start_matches('/');
        Path::new(point).join(rel)
    };
    if let Some((_, path)) = entries.iter().find(|(c, _)| c.split(',').any(|c| c == "memory"))
        && let Some((root, point)) = mount(&|t, o| t == "cgroup" && o.split(',').any(|o| o == "memory"))
    {
        return Ok((Version::V1, under(&root, &point, path)));
    }
    let Some((_, path)) = entries.iter().find(|(c, _)| c.is_empty()) else {
        return Err("no memory cgroup controller on this host".into());
    };
    let Some((root, point)) = mount(&|t, _| t == "cgroup2") else {
        return Err("cgroup v2 is not mounted".into());
    };
    Ok((Version::V2, under(&root, &point, path)))
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Directories `arl-sandbox-<pid>` of trainers that are gone (killed before they could
/// remove them): their empty job cgroups, then themselves.
fn remove_stale(ours: &Path) {
    let Ok(entries) = fs::read_dir(ours) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("arl-sandbox-")).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(jobs) = fs::read_dir(entry.path()) {
            for job in jobs.flatten().filter(|j| j.file_type().is_ok_and(|t| t.is_dir())) {
                let _ = fs::remove_dir(job.path());
            }
        }
        let _ = fs::remove_dir(entry.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS_V1: &str = "30 25 0:27 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n\
        35 30 0:32 / /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory\n\
        36 30 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn the_memory_hierarchy_is_found_in_v1_hybrid_and_v2_layouts() {
        let own = "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n";
        assert_eq!(locate(own, MOUNTS_V1).unwrap(), (Version::V1, PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")));
        // A container whose cgroup mount's root is its own cgroup.
        let mounts = "35 30 0:32 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(locate("4:memory:/docker/x/sub\n", mounts).unwrap(), (Version::V1, PathBuf::from("/sys/fs/cgroup/memory/sub")));
        // v2 only.
        let mounts = "30 25 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(locate("0::/user.slice/u\n", mounts).unwrap(), (Version::V2, PathBuf::from("/sys/fs/cgroup/user.slice/u")));
        assert!(locate("0::/\n", "").unwrap_err().contains("not mounted"));
        assert!(locate("1:cpu:/\n", MOUNTS_V1).unwrap_err().contains("no memory cgroup"));
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
