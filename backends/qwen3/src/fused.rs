//! The LM head's element-wise work fused into one pass per row of logits, on a CPU device.
//!
//! [`crate::head`] computes a chunk's log-softmax statistics (the target's log-prob, the
//! log-sum-exp, the entropy) and, in the backward, `∂loss/∂z`, in burn's own ops. On burn-flex
//! those are 6–8 separate passes over `[rows, vocab]`, each allocating its result, with a
//! scalar `expf` per logit, mostly on one thread: on the tiny preset (a 152k vocabulary) they
//! were over half of an update's profile. Here the same formulas run row by row, rows in
//! parallel, reading the logits once (forward) or rewriting them into `∂z` in place
//! (backward), with a polynomial `exp` the compiler vectorizes (AVX-512 or AVX2 where the CPU
//! has them, picked at run time). Sums are kept in 16 lanes and added in f64.
//!
//! Used only where the tensors live in host memory and burn's element-wise ops are the slow
//! part: burn-flex and ndarray ([`fuses_on_host`]). libtorch's CPU kernels are vectorized and
//! threaded already, and a GPU keeps the logits on the device.

use burn::tensor::backend::Backend;
use rayon::prelude::*;

/// Whether `device` is one where [`crate::head`] hands the element-wise work to this module.
pub fn fuses_on_host<B: Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    ["flex", "ndarray"].iter().any(|n| name.contains(n))
}

/// One row's statistics at `1/T`: `log p(target)`, the log-sum-exp of the scaled logits and
/// the entropy of the distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStats {
    pub logprob: f32,
    pub lse: f32,
    pub entropy: f32,
}

/// [`RowStats`] of each row of `logits` (`targets.len()` rows of `vocab`).
pub fn row_stats(logits: &[f32], vocab: usize, targets: &[u32], inv_t: f32) -> Vec<RowStats> {
    assert_eq!(logits.len(), vocab * targets.len(), "logits are not [rows, vocab]");
    logits.par_chunks(vocab).zip(targets).map(|(row, &t)| stats(row, t as usize, inv_t)).collect()
}

/// The upstream gradients of one chunk's rows: of the log-prob and, if the loss used it, of
/// the entropy (with the forward's entropy values).
pub struct Upstream<'a> {
    pub logprob: &'a [f32],
    pub entropy: Option<(&'a [f32], &'a [f32])>,
}

/// Rewrite `logits` (rows of `vocab`, the forward's values) into `∂loss/∂z`, given each row's
/// forward log-sum-exp `lse` and the upstream gradients: with `p = softmax(z/T)`,
/// `∂z = (g_lp·(onehot − p) − g_H·p·(log p + H)) / T`, as [`crate::head::DeferredHead`] forms it.
pub fn logits_grad(logits: &mut [f32], vocab: usize, targets: &[u32], inv_t: f32, lse: &[f32], up: &Upstream) {
    assert_eq!(logits.len(), vocab * targets.len(), "logits are not [rows, vocab]");
    block_grad(logits, vocab, 0, targets, inv_t, lse, up);
}

/// [`logits_grad`] on columns `v0 .. v0 + width` of each row only (`block` is `[rows, width]`):
/// a row's one-hot term lands here only when its target is in those columns.
pub fn block_grad(block: &mut [f32], width: usize, v0: usize, targets: &[u32], inv_t: f32, lse: &[f32], up: &Upstream) {
    assert_eq!(block.len(), width * targets.len(), "the block is not [rows, width]");
    block.par_chunks_mut(width).enumerate().for_each(|(r, row)| {
        let ent = up.entropy.map(|(g, h)| (g[r], h[r]));
        grad(row, in_block(targets[r], v0, width), inv_t, lse[r], up.logprob[r], ent);
    });
}

/// `target`'s column within the block of columns `v0 .. v0 + width`, if it is there.
pub fn in_block(target: u32, v0: usize, width: usize) -> Option<usize> {
    (target as usize).checked_sub(v0).filter(|&t| t < width)
}

/// `acc += dzᵀ·h` (`[vocab, hidden]`, a tied embedding's layout) or `acc += hᵀ·dz`
/// (`[hidden, vocab]`, an `lm_head`'s) for one chunk of `rows` rows — `dz` `[rows, vocab]`, `h`
/// `[rows, hidden]` — summed straight into the f32 accumulator (zeroed by the caller). The
/// head's weight gradient then costs one gemm per chunk and no `[vocab, hidden]` temporary:
/// through burn, each chunk's product and the running sum were new tensors of the weight's size.
pub fn accumulate_weight_grad(acc: &mut [f32], dz: &[f32], h: &[f32], rows: usize, vocab: usize, hidden: usize, tied: bool) {
    assert_eq!(acc.len(), vocab * hidden, "the accumulator is not the weight's size");
    assert_eq!((dz.len(), h.len()), (rows * vocab, rows * hidden), "dz or h is not [rows, ·]");
    let (v, hd) = (vocab as isize, hidden as isize);
    let (dz, h) = (dz.as_ptr(), h.as_ptr());
    // SAFETY: the views address exactly the asserted extents of `acc`, `dz`, `h`.
    unsafe {
        if tied {
            // [V, H] += dzᵀ [V, rows] · h [rows, H].
            product(vocab, hidden, rows, acc.as_mut_ptr(), hd, true, View { ptr: dz, rs: 1, cs: v }, View { ptr: h, rs: hd, cs: 1 });
        } else {
            // [H, V] += hᵀ [H, rows] · dz [rows, V].
            product(hidden, vocab, rows, acc.as_mut_ptr(), v, true, View { ptr: h, rs: 1, cs: hd }, View { ptr: dz, rs: v, cs: 1 });
        }
    }
}

/// A strided f32 matrix operand of [`product`]: element `(i, j)` at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy)]
pub(crate) struct View {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

/// `dst = lhs · rhs` (`[m, k] · [k, n]`), or `dst += lhs · rhs` with `accumulate`, by `gemm`
/// on rayon's pool; `dst` is row-major with rows `dst_rs` apart.
///
/// # Safety
/// Each operand addresses memory valid for its extent, and `dst` overlaps neither input.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn product(m: usize, n: usize, k: usize, dst: *mut f32, dst_rs: isize, accumulate: bool, lhs: View, rhs: View) {
    // gemm: dst = alpha·dst + beta·lhs·rhs; it reads dst only with `read_dst`. Strides are
    // passed (column, row).
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs,
            accumulate,
            lhs.ptr,
            lhs.cs,
            lhs.rs,
            rhs.ptr,
            rhs.cs,
            rhs.rs,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        );
    }
}

const LANES: usize = 16;

/// Runs `$body` (a generic `#[inline(always)]` call) compiled for AVX-512 or AVX2+FMA when
/// the CPU has them, else for the baseline target.
macro_rules! multiversion {
    ($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = $body:ident) => {
        fn $name($($arg: $ty),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) -> $ret { $body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) -> $ret { $body($($arg),*) }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the features the function was compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}

multiversion!(stats(row: &[f32], target: usize, inv_t: f32) -> RowStats = stats_impl);
multiversion!(partial(row: &[f32], inv_t: f32) -> Partial = partial_impl);
multiversion!(grad(row: &mut [f32], target: Option<usize>, inv_t: f32, lse: f32, g: f32, ent: Option<(f32, f32)>) -> () = grad_impl);

/// A row's (or a block of a row's) softmax sums at `1/T`, shifted by its maximum: `m = max z/T`,
/// `s = Σ exp(z/T − m)`, `sz = Σ exp(z/T − m)·(z/T − m)`. Blocks of one row combine with
/// [`Partial::merge`]; [`Partial::finish`] turns the whole row's into [`RowStats`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Partial {
    pub m: f32,
    pub s: f64,
    pub sz: f64,
}

impl Partial {
    /// The sums of no logits.
    pub const EMPTY: Partial = Partial { m: f32::NEG_INFINITY, s: 0.0, sz: 0.0 };

    /// The sums over both parts, on the larger shift: with `d = m_part − m`,
    /// `Σ e^(x−m) = e^d·s_part` and `Σ e^(x−m)(x−m) = e^d·(sz_part + d·s_part)`.
    pub fn merge(self, other: Partial) -> Partial {
        let m = if other.m > self.m { other.m } else { self.m };
        let shift = |p: Partial| {
            if p.s == 0.0 {
                return (0.0, 0.0);
            }
            let d = p.m as f64 - m as f64;
            let f = d.exp();
            (f * p.s, f * (p.sz + d * p.s))
        };
        let ((s1, z1), (s2, z2)) = (shift(self), shift(other));
        Partial { m, s: s1 + s2, sz: z1 + z2 }
    }

    /// The row's statistics, given its target's scaled logit `z_target/T` (in f64).
    pub fn finish(self, target_scaled: f64) -> RowStats {
        // lse = m + ln s; H = lse − Σ p·z/T = ln s − sz/s (the shift m cancels).
        let lse = self.m as f64 + self.s.ln();
        RowStats { logprob: (target_scaled - lse) as f32, lse: lse as f32, entropy: (self.s.ln() - self.sz / self.s) as f32 }
    }
}

/// [`Partial`] sums of each row of `z` (rows of `width`) at `inv_t`, rows in parallel.
pub fn partials(z: &[f32], width: usize, inv_t: f32) -> Vec<Partial> {
    assert_eq!(z.len() % width.max(1), 0, "z is not [rows, width]");
    z.par_chunks(width).map(|row| partial(row, inv_t)).collect()
}

#[inline(always)]
fn stats_impl(row: &[f32], target: usize, inv_t: f32) -> RowStats {
    partial_impl(row, inv_t).finish(row[target] as f64 * inv_t as f64)
}

#[inline(always)]
fn partial_impl(row: &[f32], inv_t: f32) -> Partial {
    // m = max z/T (a NaN does not win here, but it turns the sums below into NaN).
    let mut mx = [f32::NEG_INFINITY; LANES];
    let (body, tail) = row.split_at(row.len() - row.len() % LANES);
    for c in body.chunks_exact(LANES) {
        for l in 0..LANES {
            let v = c[l] * inv_t;
            mx[l] = if v > mx[l] { v } else { mx[l] };
        }
    }
    let mut m = mx.iter().copied().fold(f32::NEG_INFINITY, |a, b| if b > a { b } else { a });
    for &v in tail {
        let v = v * inv_t;
        m = if v > m { v } else { m };
    }
    // s = Σ exp(z/T − m), sz = Σ exp(z/T − m)·(z/T − m).
    let (mut s, mut sz) = ([0f32; LANES], [0f32; LANES]);
    for c in body.chunks_exact(LANES) {
        for l in 0..LANES {
            let x = c[l] * inv_t - m;
            let e = exp(x);
            s[l] += e;
            sz[l] += e * x;
        }
    }
    let (mut s_sum, mut sz_sum) = (s.iter().map(|&v| v as f64).sum::<f64>(), sz.iter().map(|&v| v as f64).sum::<f64>());
    for &v in tail {
        let x = v * inv_t - m;
        let e = exp(x);
        s_sum += e as f64;
        sz_sum += (e * x) as f64;
    }
    Partial { m, s: s_sum, sz: sz_sum }
}

#[inline(always)]
fn grad_impl(row: &mut [f32], target: Option<usize>, inv_t: f32, lse: f32, g: f32, ent: Option<(f32, f32)>) {
    match ent {
        // ∂z_j = −p_j·(g + g_H·(log p_j + H)) / T.
        Some((ge, h)) => {
            for v in row.iter_mut() {
                let logp = *v * inv_t - lse;
                *v = -(exp(logp) * ((logp + h) * ge + g)) * inv_t;
            }
        }
        None => {
            for v in row.iter_mut() {
                *v = -(exp(*v * inv_t - lse) * g) * inv_t;
            }
        }
    }
    if let Some(t) = target {
        row[t] += g * inv_t;
    }
}

/// `e^x` in f32 to about 2 ulp, branch-free so loops over it vectorize: Cephes' `expf`
/// (range reduction by `ln 2` in two parts, a degree-6 polynomial, `2^n` from the exponent
/// bits). Below −87.3 it returns ~1e-38 instead of 0 (negligible against a sum ≥ 1, and log p
/// is formed from z, not from it); NaN stays NaN.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Comparisons, not min/max, so that NaN passes through.
    let x = if x < -87.33 { -87.33 } else { x };
    let x = if x > 88.37 { 88.37 } else { x };
    // n = round(x·log₂e) by the 1.5·2²³ trick; its integer is in the low mantissa bits.
    const SHIFT: f32 = 12_582_912.0;
    let t = x * LOG2E + SHIFT;
    let n = t - SHIFT;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5; // Cephes: 5.0000001201e-1, which is 0.5 in f32
    let y = p * r * r + r + 1.0;
    let k = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    y * f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_of_libm_and_keeps_nan() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (ours, libm) = (exp(x) as f64, (x as f64).exp());
            worst = worst.max(((ours - libm) / libm).abs());
            x += 0.0137;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst:e}");
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1e4) < 1.2e-38 && exp(-1e4) >= 0.0);
    }

    fn reference(row: &[f32], target: usize, inv_t: f64) -> (f64, f64, f64, Vec<f64>) {
        let z: Vec<f64> = row.iter().map(|&v| v as f64 * inv_t).collect();
        let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
        let lse = m + s.ln();
        let p: Vec<f64> = z.iter().map(|v| (v - lse).exp()).collect();
        let h = -p.iter().zip(&z).map(|(p, z)| p * (z - lse)).sum::<f64>();
        (z[target] - lse, lse, h, p)
    }

    fn logits(rows: usize, vocab: usize) -> Vec<f32> {
        // Deterministic, spread over ±8 like a trained model's logits.
        (0..rows * vocab).map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * 16.0 + (i % 7) as f32 * 0.1).collect()
    }

    #[test]
    fn row_stats_match_f64_references() {
        // A vocabulary that is not a multiple of the lanes, and a temperature.
        for (vocab, t) in [(1000, 1.0), (1003, 0.7), (5, 1.3)] {
            let z = logits(3, vocab);
            let targets = [0u32, vocab as u32 / 2, vocab as u32 - 1];
            let got = row_stats(&z, vocab, &targets, 1.0 / t as f32);
            for (r, g) in got.iter().enumerate() {
                let (lp, lse, h, _) = reference(&z[r * vocab..(r + 1) * vocab], targets[r] as usize, 1.0 / t);
                assert!((g.logprob as f64 - lp).abs() < 1e-5, "vocab {vocab} row {r}: {} vs {lp}", g.logprob);
                assert!((g.lse as f64 - lse).abs() < 1e-5, "{} vs {lse}", g.lse);
                assert!((g.entropy as f64 - h).abs() < 1e-5, "{} vs {h}", g.entropy);
            }
        }
    }

    #[test]
    fn the_weight_gradient_accumulates_both_layouts() {
        let (rows, vocab, hidden) = (3, 37, 5);
        let dz: Vec<Vec<f32>> = (0..2).map(|c| logits(rows, vocab).iter().map(|x| x * (c + 1) as f32).collect()).collect();
        let h: Vec<Vec<f32>> = (0..2).map(|c| logits(rows, hidden + c).into_iter().take(rows * hidden).collect()).collect();
        for tied in [true, false] {
            let mut acc = vec![0.0; vocab * hidden];
            for c in 0..2 {
                accumulate_weight_grad(&mut acc, &dz[c], &h[c], rows, vocab, hidden, tied);
            }
            for v in 0..vocab {
                for j in 0..hidden {
                    let want: f64 = (0..2)
                        .flat_map(|c| (0..rows).map(move |r| (c, r)))
                        .map(|(c, r)| dz[c][r * vocab + v] as f64 * h[c][r * hidden + j] as f64)
                        .sum();
                    let got = acc[if tied { v * hidden + j } else { j * vocab + v }] as f64;
                    assert!((got - want).abs() < 1e-4 * want.abs().max(1.0), "tied {tied} [{v}, {j}]: {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn a_nan_logit_makes_the_row_nan() {
        let mut z = logits(2, 100);
        z[150] = f32::NAN;
        let got = row_stats(&z, 100, &[3, 4], 1.0);
        assert!(got[0].logprob.is_finite());
        assert!(got[1].logprob.is_nan() && got[1].lse.is_nan() && got[1].entropy.is_nan());
    }

    #[test]
    fn logits_grad_matches_the_f64_formula() {
        let (vocab, t) = (517, 0.8f64);
        let z = logits(2, vocab);
        let targets = [7u32, 300];
        let stats = row_stats(&z, vocab, &targets, 1.0 / t as f32);
        let lse: Vec<f32> = stats.iter().map(|s| s.lse).collect();
        let ent: Vec<f32> = stats.iter().map(|s| s.entropy).collect();
        let (g_lp, g_ent) = ([0.3f32, -1.2], [0.05f32, -0.4]);
        for with_entropy in [false, true] {
            let mut dz = z.clone();
            let up = Upstream { logprob: &g_lp, entropy: with_entropy.then_some((&g_ent[..], &ent[..])) };
            logits_grad(&mut dz, vocab, &targets, 1.0 / t as f32, &lse, &up);
            for r in 0..2 {
                let (_, _, h, p) = reference(&z[r * vocab..(r + 1) * vocab], targets[r] as usize, 1.0 / t);
                for j in 0..vocab {
                    let onehot = if j == targets[r] as usize { 1.0 } else { 0.0 };
                    let mut want = g_lp[r] as f64 * (onehot - p[j]);
                    if with_entropy {
                        want -= g_ent[r] as f64 * p[j] * (p[j].ln() + h);
                    }
                    want /= t;
                    let got = dz[r * vocab + j] as f64;
                    assert!((got - want).abs() < 1e-6 + 1e-5 * want.abs(), "row {r} j {j}: {got} vs {want}");
                }
            }
        }
    }
}
