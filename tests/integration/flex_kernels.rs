//! burn-flex's patched element-wise kernels (third_party/README.md) against f64 references:
//! `sigmoid` and the row softmax, both on a branch-free vectorized `exp` instead of libm's.
//! Masked (−∞) scores must get probability exactly 0, NaN must stay NaN, and the values must
//! stay within a few ulp of the exact ones over the whole f32 range the model meets.

use arl_qwen3::cpu;
use burn::Dispatch;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::{Tensor, TensorData};

fn values<const D: usize>(t: Tensor<Dispatch, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// Inputs from −120 to 120, dense near 0, plus the awkward ones.
fn inputs() -> Vec<f32> {
    let mut xs: Vec<f32> = (0..20_000).map(|i| (i as f32 - 10_000.0) / 10_000.0).map(|u| 120.0 * u * u * u).collect();
    xs.extend([0.0, -0.0, 1e-30, -1e-30, 87.0, -87.0, 87.4, -87.4, 88.5, -88.5, 1e30, -1e30, f32::INFINITY, f32::NEG_INFINITY]);
    xs
}

/// |a − b| in units of the f32 spacing at b (relative error / 2⁻²³), or the absolute error
/// where b is below f32's normal range.
fn ulps(a: f32, b: f64) -> f64 {
    let scale = b.abs().max(f32::MIN_POSITIVE as f64);
    (a as f64 - b).abs() / (scale * f32::EPSILON as f64)
}

#[test]
fn sigmoid_is_within_a_few_ulp_and_keeps_nan() {
    let xs = inputs();
    let n = xs.len();
    let got = values(sigmoid(Tensor::<Dispatch, 1>::from_data(TensorData::new(xs.clone(), [n]), &cpu())));
    let mut worst = 0.0f64;
    for (&x, &g) in xs.iter().zip(&got) {
        let want = 1.0 / (1.0 + (-(x as f64)).exp());
        if want < 1e-30 {
            // Where the exact value is subnormal or 0: no more than that.
            assert!((0.0..1e-30).contains(&g), "sigmoid({x}) = {g}, want {want:e}");
            continue;
        }
        worst = worst.max(ulps(g, want));
    }
    eprintln!("sigmoid: worst error {worst:.2} ulp");
    assert!(worst <= 4.0, "sigmoid: worst error {worst} ulp");
    let nan = values(sigmoid(Tensor::<Dispatch, 1>::from_data(TensorData::new(vec![f32::NAN, 1.0], [2]), &cpu())));
    assert!(nan[0].is_nan() && (nan[1] - 0.731_058_6).abs() < 1e-6, "{nan:?}");
}

#[test]
fn softmax_rows_are_exact_enough_and_masked_entries_are_zero() {
    // 64 rows of 300 (an odd length: a vector tail), every third entry masked in odd rows.
    let (rows, len) = (64, 300);
    let xs: Vec<f32> = (0..rows * len)
        .map(|i| {
            let (r, j) = (i / len, i % len);
            if r % 2 == 1 && j % 3 == 0 { f32::NEG_INFINITY } else { ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 40.0 }
        })
        .collect();
    let got = values(softmax(Tensor::<Dispatch, 2>::from_data(TensorData::new(xs.clone(), [rows, len]), &cpu()), 1));
    let mut worst = 0.0f64;
    for r in 0..rows {
        let row = &xs[r * len..(r + 1) * len];
        // The kernel's argument `x − max` is rounded to f32 first (as in any f32 softmax: up to
        // |x − max|·2⁻²⁴ of error in the argument, 20 ulp of the result at −40); the reference
        // takes the same rounded arguments, so what is measured is the exp, the sum and the scaling.
        let m = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        let s: f64 = row.iter().map(|&x| ((x - m) as f64).exp()).sum();
        for (j, &x) in row.iter().enumerate() {
            let (g, want) = (got[r * len + j], ((x - m) as f64).exp() / s);
            if x == f32::NEG_INFINITY {
                assert_eq!(g.to_bits(), 0, "row {r} entry {j}: a masked score has probability {g:e}");
            } else if want > 1e-30 {
                worst = worst.max(ulps(g, want));
            } else {
                assert!(g < 1e-30, "row {r} entry {j}: {g:e} for {want:e}");
            }
        }
    }
    eprintln!("softmax: worst error {worst:.2} ulp");
    assert!(worst <= 8.0, "softmax: worst error {worst} ulp");
    let nan = values(softmax(Tensor::<Dispatch, 2>::from_data(TensorData::new(vec![0.0, f32::NAN, 1.0], [1, 3]), &cpu()), 1));
    assert!(nan.iter().all(|v| v.is_nan()), "a NaN score makes its row NaN: {nan:?}");
}
