//! The bank's seeded generator (arl-core's splitmix64): task generation depends on the seed only.

use arl_core::rng::SplitMix64;

pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64(seed ^ 0x9e37_79b9_7f4a_7c15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        self.0.shuffle(items)
    }
}

/// A stable per-template seed from its id (FNV-1a).
pub fn hash(text: &str) -> u64 {
    arl_core::rng::fnv1a(text.as_bytes())
}
