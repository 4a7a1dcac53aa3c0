//! The LM head on a host device with f32 weights, by vocabulary blocks: a group of rows (up
//! to [`ROW_GROUP`]) against one block of the vocabulary at a time, so that `[rows, vocab]`
//! logits never exist at once and the head's weight is read once per group, not once per
//! few rows.
//!
//! [`crate::head`] first chunked by rows: a chunk of `4M / vocab` rows (27 on a 152k
//! vocabulary) times the whole weight. `gemm` repacks the weight on every such product (the
//! tied embedding `[vocab, hidden]` is the transposed operand), so a forward and a backward
//! over 512 policy rows packed 155 MB nineteen times each (≈ 19 % of an update's profile on
//! the tiny preset), and the weight gradient's `[vocab, hidden]` accumulator was read and
//! written once per chunk. Here the same `4M` logits are `group × width`: a block's weight
//! rows are packed once per group, its gradient written once per group, and a row's softmax
//! sums are combined over its blocks ([`Partial::merge`]); the backward combines nothing, as
//! the forward's log-sum-exp and entropy are known.
//!
//! The products with the weight go through the backend's matmul on views of the weight (no
//! copy of it); a block's logits come to host memory (a product's result is moved, not
//! copied), where [`crate::fused`]'s formulas run on them, and the weight gradient is summed
//! by `gemm` straight into one host buffer. Only the order of the sums differs from the
//! row-chunked head, by rounding.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use crate::fused::{self, Partial, RowStats, Upstream, View, product};

/// At most this many rows share one pass over the weight.
pub const ROW_GROUP: usize = 1024;

/// The head over f32 tensors in host memory: its weight, `[vocab, hidden]` (tied embeddings)
/// or `[hidden, vocab]` (an `lm_head`).
pub struct HostHead<B: Backend> {
    weight: Tensor<B, 2>,
    pub vocab: usize,
    pub hidden: usize,
    pub tied: bool,
}

/// Rows per group and vocabulary columns per block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Blocks {
    pub rows: usize,
    pub width: usize,
}

impl Blocks {
    /// Groups of up to [`ROW_GROUP`] of the `n` rows, blocks as wide as `logits` (the logits
    /// one block may hold) allows, at least 16 columns (a vector's width) and at most `vocab`.
    pub fn for_budget(n: usize, vocab: usize, logits: usize) -> Self {
        let rows = n.clamp(1, ROW_GROUP);
        Self { rows, width: (logits / rows).clamp(16.min(vocab), vocab.max(1)) }
    }
}

/// A tensor's f32 values (no copy when the tensor was its buffer's only owner, as a product's
/// result is).
fn host_values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().into_vec::<f32>().expect("f32 values")
}

impl<B: Backend> HostHead<B> {
    pub fn new(weight: Tensor<B, 2>, tied: bool) -> Self {
        let [a, b] = weight.dims();
        let (vocab, hidden) = if tied { (a, b) } else { (b, a) };
        Self { weight, vocab, hidden, tied }
    }

    /// The weight's rows for vocabulary entries `v0 .. v0 + width`, as `[width, hidden]` (a
    /// view; transposed for an `lm_head`).
    fn block(&self, v0: usize, width: usize) -> Tensor<B, 2> {
        let (v, h) = (v0..v0 + width, 0..self.hidden);
        if self.tied { self.weight.clone().slice([v, h]) } else { self.weight.clone().slice([h, v]).transpose() }
    }

    /// `[rows, width]` logits of the rows `h` for vocabulary block `v0`, in host memory.
    fn project(&self, h: Tensor<B, 2>, v0: usize, width: usize) -> Vec<f32> {
        host_values(h.matmul(self.block(v0, width).transpose()))
    }

    /// [`RowStats`] of each row of `h` (`[targets.len(), hidden]`) at `inv_t`.
    pub fn stats(&self, h: &Tensor<B, 2>, targets: &[u32], inv_t: f32, blocks: Blocks) -> Vec<RowStats> {
        let n = targets.len();
        assert_eq!(h.dims(), [n, self.hidden], "h is not [rows, hidden]");
        let mut out = Vec::with_capacity(n);
        for g0 in (0..n).step_by(blocks.rows) {
            let rows = blocks.rows.min(n - g0);
            let (hg, tg) = (h.clone().slice([g0..g0 + rows, 0..self.hidden]), &targets[g0..g0 + rows]);
            let mut sums = vec![Partial::EMPTY; rows];
            let mut picked = vec![f32::NAN; rows];
            for v0 in (0..self.vocab).step_by(blocks.width) {
                let width = blocks.width.min(self.vocab - v0);
                let z = self.project(hg.clone(), v0, width);
                for (r, p) in fused::partials(&z, width, inv_t).into_iter().enumerate() {
                    sums[r] = sums[r].merge(p);
                    if let Some(t) = fused::in_block(tg[r], v0, width) {
                        picked[r] = z[r * width + t];
                    }
                }
            }
            out.extend(sums.iter().zip(&picked).map(|(s, &z)| s.finish(z as f64 * inv_t as f64)));
        }
        out
    }

    /// `(∂h, ∂W)` of the head, row-major (`∂W` in the weight's layout), given each row's
    /// forward log-sum-exp and the upstream gradients of its scores (see
    /// [`fused::logits_grad`]). `tensor` makes a tensor of host values that can meet the
    /// weight in a product (under gradient checkpointing, burn-dispatch refuses one made on
    /// the inner device: [`crate::head`] makes it on the autodiff device, then takes it inside).
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        h: &Tensor<B, 2>,
        targets: &[u32],
        inv_t: f32,
        lse: &[f32],
        up: &Upstream,
        blocks: Blocks,
        tensor: impl Fn(TensorData) -> Tensor<B, 2>,
    ) -> (Vec<f32>, Vec<f32>) {
        let (n, hd) = (targets.len(), self.hidden);
        assert_eq!(h.dims(), [n, hd], "h is not [rows, hidden]");
        assert_eq!((lse.len(), up.logprob.len()), (n, n), "lse or the upstream gradient has the wrong length");
        let hv = host_values(h.clone());
        let (mut dh, mut dw) = (vec![0f32; n * hd], vec![0f32; self.vocab * hd]);
        for g0 in (0..n).step_by(blocks.rows) {
            let rows = blocks.rows.min(n - g0);
            let span = g0..g0 + rows;
            let hg = h.clone().slice([span.clone(), 0..hd]);
            let hs = &hv[g0 * hd..(g0 + rows) * hd];
            let up_g =
                Upstream { logprob: &up.logprob[span.clone()], entropy: up.entropy.map(|(g, e)| (&g[span.clone()], &e[span.clone()])) };
            for v0 in (0..self.vocab).step_by(blocks.width) {
                let width = blocks.width.min(self.vocab - v0);
                let mut dz = self.project(hg.clone(), v0, width);
                fused::block_grad(&mut dz, width, v0, &targets[span.clone()], inv_t, &lse[span.clone()], &up_g);
                // ∂W_block (+)= dzᵀ · h, straight into `dw`: the first group writes it, later ones add.
                let (dzv, dztv) =
                    (View { ptr: dz.as_ptr(), rs: width as isize, cs: 1 }, View { ptr: dz.as_ptr(), rs: 1, cs: width as isize });
                // SAFETY: the views stay inside `dz` (`rows × width`), the group's rows of `h`
                // and the block's columns `v0 .. v0 + width` of `dw` (`vocab × hidden`).
                unsafe {
                    if self.tied {
                        let hview = View { ptr: hs.as_ptr(), rs: hd as isize, cs: 1 };
                        product(width, hd, rows, dw[v0 * hd..].as_mut_ptr(), hd as isize, g0 > 0, dztv, hview);
                    } else {
                        let ht = View { ptr: hs.as_ptr(), rs: 1, cs: hd as isize };
                        product(hd, width, rows, dw[v0..].as_mut_ptr(), self.vocab as isize, g0 > 0, ht, dzv);
                    }
                }
                // ∂h[rows] += dz · W_block ([rows, width] · [width, hidden]).
                let dz = tensor(TensorData::new(dz, [rows, width]));
                let part = host_values(dz.matmul(self.block(v0, width)));
                for (d, p) in dh[g0 * hd..(g0 + rows) * hd].iter_mut().zip(&part) {
                    *d += p;
                }
            }
        }
        (dh, dw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::Dispatch;

    fn tensor(v: &[f32], shape: [usize; 2]) -> Tensor<Dispatch, 2> {
        Tensor::from_data(TensorData::new(v.to_vec(), shape), &crate::cpu())
    }

    /// Deterministic values in ±`scale`.
    fn values(n: usize, seed: u32, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 10_007) as f32 / 10_007.0 * 2.0 - 1.0)
            .map(|x| x * scale)
            .collect()
    }

    /// f64 logits of row `r`: `z[r, v] = h[r]·W[v]`.
    fn logits(c: &Case, tied: bool, r: usize) -> Vec<f64> {
        (0..c.vocab).map(|v| (0..c.hidden).map(|k| c.h[r * c.hidden + k] as f64 * c.w(tied, v, k)).sum()).collect()
    }

    struct Case {
        vocab: usize,
        hidden: usize,
        n: usize,
        weight: Vec<f32>,
        h: Vec<f32>,
        targets: Vec<u32>,
    }

    impl Case {
        /// `W[v, k]` of the tied layout, or of the `lm_head` one over the same values.
        fn w(&self, tied: bool, v: usize, k: usize) -> f64 {
            (if tied { self.weight[v * self.hidden + k] } else { self.weight[k * self.vocab + v] }) as f64
        }

        fn head(&self, tied: bool) -> HostHead<Dispatch> {
            let shape = if tied { [self.vocab, self.hidden] } else { [self.hidden, self.vocab] };
            HostHead::new(tensor(&self.weight, shape), tied)
        }

        fn h(&self) -> Tensor<Dispatch, 2> {
            tensor(&self.h, [self.n, self.hidden])
        }
    }

    fn case(vocab: usize, hidden: usize, n: usize) -> Case {
        let targets = (0..n).map(|r| ((r * 7919 + 3) % vocab) as u32).collect();
        Case { vocab, hidden, n, weight: values(vocab * hidden, 1, 0.5), h: values(n * hidden, 2, 2.0), targets }
    }

    // Row groups of 1, 5 and all rows; blocks narrower than, not dividing, and equal to the vocabulary.
    const BLOCKS: [Blocks; 4] =
        [Blocks { rows: 5, width: 16 }, Blocks { rows: 1, width: 48 }, Blocks { rows: 64, width: 203 }, Blocks { rows: 3, width: 37 }];

    #[test]
    fn blocked_statistics_match_f64_references() {
        let (inv_t, c) = (1.0 / 0.7f32, case(203, 24, 11));
        for tied in [true, false] {
            let head = c.head(tied);
            for blocks in BLOCKS {
                let got = head.stats(&c.h(), &c.targets, inv_t, blocks);
                for (r, g) in got.iter().enumerate() {
                    let z: Vec<f64> = logits(&c, tied, r).iter().map(|z| z * inv_t as f64).collect();
                    let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let lse = m + z.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                    let ent = -z.iter().map(|v| (v - lse).exp() * (v - lse)).sum::<f64>();
                    let lp = z[c.targets[r] as usize] - lse;
                    let what = format!("tied {tied} {blocks:?} row {r}");
                    assert!((g.lse as f64 - lse).abs() < 1e-5 * lse.abs().max(1.0), "{what}: lse {} vs {lse}", g.lse);
                    assert!((g.logprob as f64 - lp).abs() < 1e-5 * lp.abs().max(1.0), "{what}: logprob {} vs {lp}", g.logprob);
                    assert!((g.entropy as f64 - ent).abs() < 1e-5 * ent.abs().max(1.0), "{what}: entropy {} vs {ent}", g.entropy);
                }
            }
        }
    }

    #[test]
    fn blocked_gradients_match_f64_references() {
        let (inv_t, c) = (1.0 / 0.7f32, case(203, 24, 11));
        let g_lp = values(c.n, 3, 1.0);
        let g_ent = values(c.n, 4, 0.3);
        for tied in [true, false] {
            let head = c.head(tied);
            let stats = head.stats(&c.h(), &c.targets, inv_t, Blocks { rows: 64, width: 203 });
            let lse: Vec<f32> = stats.iter().map(|s| s.lse).collect();
            let ent: Vec<f32> = stats.iter().map(|s| s.entropy).collect();
            // ∂z in f64, then ∂h = ∂z·W and ∂W = ∂zᵀ·h.
            let dz: Vec<Vec<f64>> = (0..c.n)
                .map(|r| {
                    let z: Vec<f64> = logits(&c, tied, r).iter().map(|z| z * inv_t as f64).collect();
                    z.iter()
                        .enumerate()
                        .map(|(v, &zv)| {
                            let logp = zv - lse[r] as f64;
                            let p = logp.exp();
                            let onehot = (v == c.targets[r] as usize) as u8 as f64;
                            (g_lp[r] as f64 * (onehot - p) - g_ent[r] as f64 * p * (logp + ent[r] as f64)) * inv_t as f64
                        })
                        .collect()
                })
                .collect();
            for blocks in BLOCKS {
                let up = Upstream { logprob: &g_lp, entropy: Some((&g_ent, &ent)) };
                let (dh, dw) = head.backward(&c.h(), &c.targets, inv_t, &lse, &up, blocks, |d| Tensor::from_data(d, &crate::cpu()));
                let what = format!("tied {tied} {blocks:?}");
                for r in 0..c.n {
                    for k in 0..c.hidden {
                        let want: f64 = (0..c.vocab).map(|v| dz[r][v] * c.w(tied, v, k)).sum();
                        let got = dh[r * c.hidden + k] as f64;
                        assert!((got - want).abs() < 1e-5 * want.abs().max(1.0), "{what}: ∂h[{r}, {k}] {got} vs {want}");
                    }
                }
                for v in 0..c.vocab {
                    for k in 0..c.hidden {
                        let want: f64 = (0..c.n).map(|r| dz[r][v] * c.h[r * c.hidden + k] as f64).sum();
                        let got = dw[if tied { v * c.hidden + k } else { k * c.vocab + v }] as f64;
                        assert!((got - want).abs() < 1e-5 * want.abs().max(1.0), "{what}: ∂W[{v}, {k}] {got} vs {want}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_budget_splits_the_vocabulary_not_the_rows() {
        assert_eq!(Blocks::for_budget(512, 151_936, 1 << 22), Blocks { rows: 512, width: 8192 });
        assert_eq!(Blocks::for_budget(40_000, 49_152, 1 << 22), Blocks { rows: ROW_GROUP, width: 4096 });
        // Never wider than the vocabulary, never narrower than a vector (unless the vocabulary is).
        assert_eq!(Blocks::for_budget(3, 300, 1 << 22), Blocks { rows: 3, width: 300 });
        assert_eq!(Blocks::for_budget(1024, 300, 100), Blocks { rows: 1024, width: 16 });
        assert_eq!(Blocks::for_budget(10, 5, 1), Blocks { rows: 10, width: 5 });
    }

    #[test]
    fn merging_block_sums_is_the_whole_rows_sums() {
        let z = values(1000, 5, 9.0);
        let whole = fused::partials(&z, 1000, 1.3)[0];
        let merged = z.chunks(77).map(|b| fused::partials(b, b.len(), 1.3)[0]).fold(Partial::EMPTY, Partial::merge);
        assert_eq!(whole.m, merged.m);
        // The same sums, but a block's shift is its own maximum: f32 rounding inside the lanes differs.
        assert!(
            (whole.s - merged.s).abs() < 1e-6 * whole.s && (whole.sz - merged.sz).abs() < 1e-6 * whole.sz.abs().max(1.0),
            "{whole:?} vs {merged:?}"
        );
        // A NaN anywhere makes the row NaN.
        let mut bad = z.clone();
        bad[500] = f32::NAN;
        let merged = bad.chunks(77).map(|b| fused::partials(b, b.len(), 1.0)[0]).fold(Partial::EMPTY, Partial::merge);
        assert!(merged.finish(0.0).lse.is_nan());
    }
}
