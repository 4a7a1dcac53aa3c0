//! [`PrefixCache`]: KV of earlier sampling calls kept between calls, so a prompt that extends
//! an earlier row's tokens (the next turn of the same episode: its history, then the
//! observation) prefills only what is new.
//!
//! An entry is one row's exact token ids and their keys and values (`[1, kv_heads, n,
//! head_dim]` per layer). A lookup takes the entry with the longest common prefix with the
//! prompt (keys at positions `< m` depend only on tokens `< m`, so any common prefix is
//! reusable). An entry that is a prefix of a newer one is dropped (the newer serves every
//! prompt the older would); beyond the byte budget the least recently used go first. The
//! cache holds one model's KV: whoever changes the weights clears it (`QwenTrainer::step`).

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// Per layer: keys and values `[1, kv_heads, n, head_dim]`.
pub type RowKv<B> = Vec<(Tensor<B, 4>, Tensor<B, 4>)>;

/// 4 GiB of keys and values by default.
pub const DEFAULT_BUDGET_BYTES: usize = 4 << 30;

struct Entry<B: Backend> {
    ids: Vec<u32>,
    kv: RowKv<B>,
    used: u64,
}

pub struct PrefixCache<B: Backend> {
    entries: Vec<Entry<B>>,
    budget_bytes: usize,
    clock: u64,
}

impl<B: Backend> Default for PrefixCache<B> {
    fn default() -> Self {
        Self::new(DEFAULT_BUDGET_BYTES)
    }
}

/// A hit: the entry's index and how many of its positions the prompt shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Hit {
    pub entry: usize,
    pub len: usize,
}

impl<B: Backend> PrefixCache<B> {
    /// A cache of at most `budget_bytes` of keys and values (0: keeps nothing).
    pub fn new(budget_bytes: usize) -> Self {
        Self { entries: Vec::new(), budget_bytes, clock: 0 }
    }

    /// Drop everything (the weights changed).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn is_enabled(&self) -> bool {
        self.budget_bytes > 0
    }

    /// Token positions held.
    pub fn tokens(&self) -> usize {
        self.entries.iter().map(|e| e.ids.len()).sum()
    }

    /// The longest reusable prefix of `prompt`, at most `prompt.len() − 1` positions (the last
    /// prompt token always runs, for its logits), if at least `min` long.
    pub(crate) fn lookup(&mut self, prompt: &[u32], min: usize) -> Option<Hit> {
        let cap = prompt.len().saturating_sub(1);
        let best = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| Hit { entry: i, len: common_prefix(&e.ids, prompt).min(cap) })
            .max_by_key(|h| (h.len, std::cmp::Reverse(h.entry)))?;
        (best.len >= min.max(1)).then(|| {
            self.clock += 1;
            self.entries[best.entry].used = self.clock;
            best
        })
    }

    /// The first `len` positions of entry `hit.entry` (views).
    pub(crate) fn kv(&self, hit: Hit) -> RowKv<B> {
        self.entries[hit.entry]
            .kv
            .iter()
            .map(|(k, v)| {
                let [_, h, _, d] = k.dims();
                (k.clone().slice([0..1, 0..h, 0..hit.len, 0..d]), v.clone().slice([0..1, 0..h, 0..hit.len, 0..d]))
            })
            .collect()
    }

    /// Keep `kv` (its own tensors, exactly `ids.len()` positions) for later prompts.
    pub fn insert(&mut self, ids: Vec<u32>, kv: RowKv<B>) {
        if !self.is_enabled() || ids.is_empty() {
            return;
        }
        // An entry that this one extends serves no prompt this one does not serve as well.
        self.entries.retain(|e| !(e.ids.len() <= ids.len() && ids[..e.ids.len()] == e.ids[..]));
        if self.entries.iter().any(|e| e.ids.len() >= ids.len() && e.ids[..ids.len()] == ids[..]) {
            return;
        }
        self.clock += 1;
        self.entries.push(Entry { ids, kv, used: self.clock });
        let bytes = |e: &Entry<B>| {
            e.kv.iter().map(|(k, v)| (k.shape().num_elements() + v.shape().num_elements()) * k.dtype().size()).sum::<usize>()
        };
        let mut total: usize = self.entries.iter().map(bytes).sum();
        while total > self.budget_bytes && !self.entries.is_empty() {
            let oldest = self.entries.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, _)| i).expect("non-empty");
            total -= bytes(&self.entries[oldest]);
            self.entries.swap_remove(oldest);
        }
    }
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::common_prefix;

    #[test]
    fn common_prefix_counts_equal_leading_ids() {
        assert_eq!(common_prefix(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(common_prefix(&[1, 2], &[1, 2, 3]), 2);
        assert_eq!(common_prefix(&[], &[1]), 0);
    }
}
