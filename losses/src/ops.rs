//! Small tensor helpers shared by the losses. Every helper keeps the dtype and device of its
//! input, so a loss runs unchanged in f32 on a GPU and in f64 on the CPU.

use arl_core::T2;
use burn::Dispatch;
use burn::tensor::{Bool, Tensor};

pub type B2 = Tensor<Dispatch, 2, Bool>;

/// verl clamps log-ratios to ±20 before `exp`.
pub const LOG_RATIO_CLAMP: f64 = 20.0;

/// 1.0 where `cond`, else 0.0, shaped and typed like `like` (detached).
pub fn ind(cond: B2, like: &T2) -> T2 {
    like.clone().detach().zeros_like().mask_fill(cond, 1.0)
}

/// A constant tensor shaped and typed like `like`.
pub fn full_like(like: &T2, value: f64) -> T2 {
    like.clone().detach().zeros_like().add_scalar(value)
}

/// exp(clamp(a − b, ±20)).
pub fn ratio(a: T2, b: T2) -> T2 {
    (a - b).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).exp()
}

/// The tensor's values on the host, row-major.
pub fn host(t: &T2) -> Vec<f64> {
    t.clone().detach().into_data().convert::<f64>().to_vec::<f64>().expect("f64 data")
}

/// Mean of `x` over the tokens where `mask` is 1 (0 when there are none).
pub fn masked_mean(x: &[f64], mask: &[f64]) -> f64 {
    let n: f64 = mask.iter().sum();
    if n == 0.0 {
        return 0.0;
    }
    x.iter().zip(mask).map(|(v, m)| v * m).sum::<f64>() / n
}

/// (min, max) of `x` over masked tokens; (0, 0) when there are none.
pub fn masked_min_max(x: &[f64], mask: &[f64]) -> (f64, f64) {
    let vals = x.iter().zip(mask).filter(|(_, m)| **m > 0.0).map(|(v, _)| *v);
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo.is_finite() { (lo, hi) } else { (0.0, 0.0) }
}

/// Broadcast a `[rows, 1]` column over `[rows, tokens]`.
pub fn widen(col: T2, like: &T2) -> T2 {
    let [rows, tokens] = like.dims();
    col.expand([rows, tokens])
}

/// Per-row masked mean of `x` as a `[rows, 1]` column (rows without tokens give 0).
pub fn row_mean(x: T2, mask: &T2) -> T2 {
    let len = mask.clone().sum_dim(1).clamp_min(1.0);
    (x * mask.clone()).sum_dim(1) / len
}
