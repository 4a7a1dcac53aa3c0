//! Micro-batches: which rows go through the model together. A micro-batch holds at most
//! `rows` rows and, padded to its longest row, at most `tokens` tokens, so a step of long
//! multi-turn episodes stays within memory without the user sizing `trainer.micro` by hand
//! (activations grow with rows × length, attention with rows × length²). Rows keep their
//! order; a row longer than the token budget goes alone. Micro-batches only split the work:
//! the loss's normalizer is computed over the whole batch before any of them runs.

/// The two caps of a micro-batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroBatching {
    /// Rows at most (`usize::MAX`: no cap).
    pub rows: usize,
    /// Padded tokens (rows × the longest row's length) at most (`usize::MAX`: no cap).
    pub tokens: usize,
}

impl MicroBatching {
    /// No cap at all: one micro-batch.
    pub const WHOLE: Self = Self { rows: usize::MAX, tokens: usize::MAX };

    /// From the config's optional caps (`None` or 0 tokens: no cap).
    pub fn new(rows: Option<usize>, tokens: Option<usize>) -> Self {
        Self { rows: rows.unwrap_or(usize::MAX).max(1), tokens: tokens.filter(|&t| t > 0).unwrap_or(usize::MAX) }
    }

    /// Split `rows` (indices, in order) into micro-batches; `len(i)` is row i's length.
    pub fn split(&self, rows: &[usize], len: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = Vec::new();
        let mut widest = 0usize;
        for &i in rows {
            let l = len(i).max(1);
            let fits = out.last().is_some_and(|b| b.len() < self.rows && (b.len() + 1).saturating_mul(widest.max(l)) <= self.tokens);
            if fits {
                out.last_mut().expect("a batch").push(i);
                widest = widest.max(l);
            } else {
                out.push(vec![i]);
                widest = l;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_padded_tokens_both_cap_a_micro_batch() {
        let lens = [100, 100, 300, 50, 50, 50, 900, 10];
        let len = |i: usize| lens[i];
        let all: Vec<usize> = (0..lens.len()).collect();
        assert_eq!(MicroBatching::WHOLE.split(&all, len), vec![all.clone()]);
        assert_eq!(MicroBatching::new(Some(3), None).split(&all, len), vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
        // 600 padded tokens: [100, 100] then 300 would pad three rows to 900; a row longer
        // than the budget (900) goes alone, and the one after it starts afresh.
        assert_eq!(MicroBatching::new(None, Some(600)).split(&all, len), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6], vec![7]]);
        assert_eq!(MicroBatching::new(Some(2), Some(10_000)).split(&all, len), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(MicroBatching::new(Some(0), Some(0)), MicroBatching { rows: 1, tokens: usize::MAX });
        assert!(MicroBatching::new(None, Some(64)).split(&[], len).is_empty());
    }
}
