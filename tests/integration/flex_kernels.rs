//! burn-flex's patched kernels (third_party/README.md) against f64 references: `sigmoid` and
//! the row softmax, both on a branch-free vectorized `exp` instead of libm's (masked (−∞)
//! scores must get probability exactly 0, NaN must stay NaN, and the values must stay within a
//! few ulp of the exact ones over the whole f32 range the model meets); and the f32 matmul of
//! at most 16 rows (a decode step's linear layers and attention), whose rows must not depend on
//! one another and whose sums over the weights' rows run in one fixed order on every ISA; and
//! the large two-matrix products of an update's linear layers, in each layout they meet.

use arl_qwen3::cpu;
use burn::Dispatch;
use burn::tensor::activation::{sigmoid, softmax};
use burn::tensor::{Tensor, TensorData};

pub(crate) fn values<const D: usize>(t: Tensor<Dispatch, D>) -> Vec<f32> {
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

/// Deterministic values in [−1, 1).
pub(crate) fn noise(len: usize, seed: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.5 - 1.0).collect()
}

pub(crate) fn tensor<const D: usize>(data: Vec<f32>, shape: [usize; D]) -> Tensor<Dispatch, D> {
    Tensor::from_data(TensorData::new(data, shape), &cpu())
}

/// The `[cols, rows]` transpose of a row-major `[rows, cols]` matrix, row-major.
fn transposed(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols).map(|i| a[(i % rows) * cols + i / rows]).collect()
}

/// `x [m, k] · w [k, n]` in f64, and Σ|x||w| per element (the error scale of any f32 sum).
fn reference(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut out = vec![0f64; m * n];
    let mut scale = vec![0f64; m * n];
    for i in 0..m {
        for r in 0..k {
            for j in 0..n {
                out[i * n + j] += x[i * k + r] as f64 * w[r * n + j] as f64;
                scale[i * n + j] += (x[i * k + r] as f64 * w[r * n + j] as f64).abs();
            }
        }
    }
    (out, scale)
}

/// `got` (`[m, n]`) against [`reference`]'s f64 product: a k-term f32 sum lies within
/// k·ε·Σ|x·w| of the exact value.
fn assert_near_reference(name: &str, got: &[f32], want: &[f64], scale: &[f64], (m, k, n): (usize, usize, usize)) {
    assert_eq!(got.len(), m * n, "{name}");
    for e in 0..m * n {
        let bound = (k as f64 + 1.0) * f32::EPSILON as f64 * scale[e] + 1e-30;
        assert!(
            (got[e] as f64 - want[e]).abs() <= bound,
            "{name}, m {m}, k {k}, n {n}, element {e}: {} vs {} (bound {bound:e})",
            got[e],
            want[e]
        );
    }
}

/// `x` (`[m, k]`) as a view whose rows are strided: the first `k` columns of an `[m, k + 3]`
/// matrix.
fn strided_rows(x: &[f32], m: usize, k: usize) -> Tensor<Dispatch, 2> {
    let wide: Vec<f32> = (0..m).flat_map(|i| [&x[i * k..(i + 1) * k], &[9.0f32; 3][..]].concat()).collect();
    tensor(wide, [m, k + 3]).slice([0..m, 0..k])
}

/// Shapes of the small-row matmul: every remainder of the 16-lane and four-row loops, one
/// wider than a 4096-column panel, and 9 rows (gemm, for comparison).
const SHAPES: [(usize, usize); 7] = [(1, 1), (3, 17), (4, 16), (64, 5), (577, 33), (576, 300), (7, 4100)];

#[test]
fn small_row_matmuls_match_an_f64_reference_in_every_layout() {
    for m in [1, 2, 3, 5, 8, 9] {
        for (k, n) in SHAPES {
            let (x, w) = (noise(m * k, m), noise(k * n, k + n));
            let (want, scale) = reference(&x, &w, m, k, n);
            let wt = transposed(&w, k, n);
            let cases = [
                ("weights row-major", values(tensor(x.clone(), [m, k]).matmul(tensor(w.clone(), [k, n])))),
                // The keys' layout: the right side is a transposed row-major [n, k].
                ("transposed right side", values(tensor(x.clone(), [m, k]).matmul(tensor(wt.clone(), [n, k]).transpose()))),
                // Batched, as attention's [batch, heads, rows, k] (the same matrix in each).
                (
                    "batched",
                    values(tensor(x.repeat(6), [2, 3, m, k]).matmul(tensor(w.repeat(6), [2, 3, k, n])).slice([0..1, 2..3, 0..m, 0..n])),
                ),
                // Rows of the left side strided (a column slice of a wider matrix).
                ("strided rows", values(strided_rows(&x, m, k).matmul(tensor(w.clone(), [k, n])))),
            ];
            for (name, got) in cases {
                assert_near_reference(name, &got, &want, &scale, (m, k, n));
            }
        }
    }
}

#[test]
fn a_rows_product_does_not_depend_on_the_rows_beside_it() {
    // A decode step computes row i of [m, k] · W for m sequences; alone (m = 1) the row must
    // come out bit for bit the same, in both right-side layouts and batched.
    for (k, n) in SHAPES {
        let w = noise(k * n, k + n);
        let wt = transposed(&w, k, n);
        for m in 1..=16 {
            let x = noise(m * k, m + 11);
            let together = values(tensor(x.clone(), [m, k]).matmul(tensor(w.clone(), [k, n])));
            let together_t = values(tensor(x.clone(), [m, k]).matmul(tensor(wt.clone(), [n, k]).transpose()));
            let batched = values(tensor(x.repeat(2), [2, 1, m, k]).matmul(tensor(w.repeat(2), [2, 1, k, n])));
            for i in 0..m {
                let row = x[i * k..(i + 1) * k].to_vec();
                let alone = values(tensor(row.clone(), [1, k]).matmul(tensor(w.clone(), [k, n])));
                let alone_t = values(tensor(row, [1, k]).matmul(tensor(wt.clone(), [n, k]).transpose()));
                let cols = i * n..(i + 1) * n;
                assert_eq!(&together[cols.clone()], &alone[..], "k {k}, n {n}: row {i} of {m}");
                assert_eq!(&together_t[cols.clone()], &alone_t[..], "k {k}, n {n}: row {i} of {m}, transposed right side");
                assert_eq!(&batched[cols.clone()], &alone[..], "k {k}, n {n}: row {i} of {m}, batched");
                assert_eq!(&batched[m * n + i * n..m * n + (i + 1) * n], &alone[..], "k {k}, n {n}: row {i} of {m}, second matrix");
            }
        }
    }
}

/// Whether this CPU takes f32 products of ≤ 16 rows in burn-flex's small-row kernels (x86-64
/// with AVX2 and FMA); elsewhere they go to gemm, whose summation order differs, and the
/// order tests say they were skipped.
fn small_row_kernels_run() -> bool {
    #[cfg(target_arch = "x86_64")]
    let kernel = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let kernel = false;
    if !kernel {
        arl_core::testing::skip("the small-row kernels need x86-64 with AVX2 and FMA");
    }
    kernel
}

#[test]
fn a_weight_products_sums_are_in_order_from_zero() {
    // Every small-row kernel with row-major weights (AVX-512 register tiles, AVX2 walk) sums
    // each element as one FMA per term from +0 over r in increasing order; the exact (fused)
    // `mul_add` in that order is the reference, so the two ISAs give the same bits. Elsewhere
    // (no AVX2 + FMA, or not x86-64) the product is gemm's, whose order differs.
    if !small_row_kernels_run() {
        return;
    }
    for (k, n) in SHAPES {
        let w = noise(k * n, k + n);
        for m in 1..=16 {
            let x = noise(m * k, m + 3);
            let got = values(tensor(x.clone(), [m, k]).matmul(tensor(w.clone(), [k, n])));
            for i in 0..m {
                for j in 0..n {
                    let want = (0..k).fold(0f32, |s, r| x[i * k + r].mul_add(w[r * n + j], s));
                    assert_eq!(got[i * n + j].to_bits(), want.to_bits(), "m {m}, k {k}, n {n}, element ({i}, {j})");
                }
            }
        }
    }
}

/// A dot product in 16 lanes (lane l: terms l, l + 16, … in order, one exact FMA each, from
/// +0), the lanes then summed pairwise: l + (l + 8), + 4, + 2, + 1.
fn lane_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    for (r, (a, b)) in a.iter().zip(b).enumerate() {
        lanes[r % 16] = a.mul_add(*b, lanes[r % 16]);
    }
    for width in [8, 4, 2, 1] {
        for l in 0..width {
            lanes[l] += lanes[l + width];
        }
    }
    lanes[0]
}

#[test]
fn dot_product_kernels_sum_in_sixteen_lanes_on_every_isa() {
    // Products whose right side has contiguous columns (attention's transposed keys; the tied
    // head E · hᵀ, many rows against ≤ 16 columns) are dot products in one fixed lane order.
    if !small_row_kernels_run() {
        return;
    }
    for (k, n) in SHAPES.into_iter().chain([(33, 9), (47, 1000)]) {
        for m in 1..=16 {
            let (x, wt) = (noise(m * k, m + 5), noise(n * k, n + 2 * k));
            // x [m, k] · (wt [n, k])ᵀ, and the head's orientation wt · xᵀ ([n, m]).
            let got = values(tensor(x.clone(), [m, k]).matmul(tensor(wt.clone(), [n, k]).transpose()));
            let head = values(tensor(wt.clone(), [n, k]).matmul(tensor(x.clone(), [m, k]).transpose()));
            for i in 0..m {
                for j in 0..n {
                    let want = lane_dot(&x[i * k..(i + 1) * k], &wt[j * k..(j + 1) * k]).to_bits();
                    assert_eq!(got[i * n + j].to_bits(), want, "m {m}, k {k}, n {n}, element ({i}, {j})");
                    assert_eq!(head[j * m + i].to_bits(), want, "head: n {n}, k {k}, m {m}, element ({j}, {i})");
                }
            }
        }
    }
}

#[test]
fn the_tied_heads_product_matches_f64_and_a_sequences_column_is_its_own() {
    // The tied LM head of a decode step, E · hᵀ: the embedding [vocab, k] against the hidden
    // states of 1–16 sequences, given as the transposed view of h [m, k]. Column j must match
    // an f64 sum and be bit for bit the column of sequence j decoded alone.
    for (vocab, k) in [(300, 64), (1000, 577), (9, 3)] {
        let e = noise(vocab * k, vocab);
        for m in [1, 2, 5, 8, 9, 16, 17] {
            let h = noise(m * k, m + k);
            let got = values(tensor(e.clone(), [vocab, k]).matmul(tensor(h.clone(), [m, k]).transpose()));
            let ht = transposed(&h, m, k);
            let (want, scale) = reference(&e, &ht, vocab, k, m);
            assert_near_reference("tied head", &got, &want, &scale, (vocab, k, m));
            if m > 16 {
                continue;
            }
            for j in 0..m {
                let alone = values(tensor(e.clone(), [vocab, k]).matmul(tensor(h[j * k..(j + 1) * k].to_vec(), [1, k]).transpose()));
                let column: Vec<f32> = (0..vocab).map(|v| got[v * m + j]).collect();
                assert_eq!(column, alone, "vocab {vocab}, k {k}: sequence {j} of {m}");
            }
        }
    }
}

/// Products with every side ≥ 64 (`gemm`'s, with its packing) in the layouts of an update's
/// linear layers — `x · W`, `∂y · Wᵀ` (a transposed right side), `xᵀ · ∂y` (a transposed left
/// side) — and both transposed, strided rows, sizes that are no multiple of any kernel's tile,
/// against f64; from several threads at once, as parallel tests and trainers call them.
#[test]
fn large_matmuls_match_an_f64_reference_in_every_layout_from_several_threads() {
    let shapes = [(64, 64, 64), (100, 70, 130), (301, 577, 97), (65, 200, 1000), (1030, 96, 65)];
    let check = |t: usize| {
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let (x, w) = (noise(m * k, s + t), noise(k * n, 3 * s + t + 1));
            let (want, scale) = reference(&x, &w, m, k, n);
            let (xt, wt) = (transposed(&x, m, k), transposed(&w, k, n));
            let cases = [
                ("plain", values(tensor(x.clone(), [m, k]).matmul(tensor(w.clone(), [k, n])))),
                ("transposed right side", values(tensor(x.clone(), [m, k]).matmul(tensor(wt.clone(), [n, k]).transpose()))),
                ("transposed left side", values(tensor(xt.clone(), [k, m]).transpose().matmul(tensor(w.clone(), [k, n])))),
                ("both transposed", values(tensor(xt.clone(), [k, m]).transpose().matmul(tensor(wt.clone(), [n, k]).transpose()))),
                ("strided rows", values(strided_rows(&x, m, k).matmul(tensor(w.clone(), [k, n])))),
            ];
            for (name, got) in cases {
                assert_near_reference(name, &got, &want, &scale, (m, k, n));
            }
        }
    };
    std::thread::scope(|scope| {
        for t in 1..4 {
            scope.spawn(move || check(t));
        }
        check(0);
    });
}

#[test]
fn a_nan_in_a_large_products_left_side_reaches_its_row_only() {
    let (m, k, n) = (96, 80, 72);
    let mut x = noise(m * k, 5);
    x[7 * k + 3] = f32::NAN;
    let got = values(tensor(x, [m, k]).matmul(tensor(noise(k * n, 6), [k, n])));
    for i in 0..m {
        for j in 0..n {
            assert_eq!(got[i * n + j].is_nan(), i == 7, "element ({i}, {j}): {}", got[i * n + j]);
        }
    }
}

/// A sum over 4 Mi elements or more runs its 64 Ki chunks in parallel and adds their sums in
/// order (third_party/README.md, change 7), whatever else the pool is doing. Chunk 0 sums to
/// 2²⁴ and each of the 79 chunks after it to 1: in order, every 1 is rounded away (2²⁴ + 1 is
/// a tie, to even, back to 2²⁴); any tree that adds two of the 1s first ends above 2²⁴.
#[test]
fn a_large_sum_adds_its_chunks_in_order() {
    const CHUNK: usize = 64 * 1024;
    let chunks = 80;
    let mut xs = vec![0.0f32; chunks * CHUNK];
    xs[0] = 16_777_216.0;
    for c in 1..chunks {
        xs[c * CHUNK + 7] = 1.0;
    }
    let n = xs.len();
    for _ in 0..8 {
        let total = values(Tensor::<Dispatch, 1>::from_data(TensorData::new(xs.clone(), [n]), &cpu()).sum());
        assert_eq!(total, [16_777_216.0], "the chunks' sums were not added in order");
    }
}
