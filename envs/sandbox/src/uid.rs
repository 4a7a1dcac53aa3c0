//! Job uids (when the trainer is root): never repeated within a run.
//!
//! Job `k` of a process with id `pid` runs as `base + ((pid mod 1024)·2²⁰ + k) mod 2³⁰`, so
//! a run's uids are distinct for its first 2³⁰ jobs, and concurrent trainers start in
//! different blocks of 2²⁰ (they cannot meet within a run shorter than that). The default
//! base, 2³¹, keeps job uids above every range distributions hand out (system and login
//! users, `/etc/subuid` ranges, systemd's dynamic users).

use std::sync::atomic::{AtomicU64, Ordering};

/// The default base: 2³¹.
pub const DEFAULT_BASE: u32 = 1 << 31;

const SPACE: u64 = 1 << 30;
const BLOCK: u64 = 1 << 20;

/// Jobs started by this process, across every sandbox in it.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The next job's uid (also its gid).
pub fn next(base: u32) -> u32 {
    let k = NEXT.fetch_add(1, Ordering::Relaxed);
    at(base, std::process::id(), k)
}

fn at(base: u32, pid: u32, k: u64) -> u32 {
    let offset = ((pid as u64 % 1024) * BLOCK + k) % SPACE;
    base.saturating_add(offset as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_do_not_repeat_within_a_run_and_stay_in_range() {
        let mut seen = std::collections::HashSet::new();
        for k in 0..300_000 {
            let uid = at(DEFAULT_BASE, 1023, k);
            assert!(seen.insert(uid), "uid {uid} repeated at job {k}");
            assert!((DEFAULT_BASE as u64..DEFAULT_BASE as u64 + SPACE).contains(&(uid as u64)));
        }
        // The last block wraps to the first instead of leaving the range.
        assert_eq!(at(DEFAULT_BASE, 1023, BLOCK), DEFAULT_BASE);
        assert!(at(DEFAULT_BASE, u32::MAX, SPACE - 1) < u32::MAX - 1, "never (uid_t)-1 or -2");
        assert_ne!(next(DEFAULT_BASE), next(DEFAULT_BASE));
    }
}
