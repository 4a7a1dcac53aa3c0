//! burn-flex's layout copies and element-wise ops over all cores, and its products into
//! unzeroed buffers (third_party/README.md, change 5): every element of the result, small
//! tensors (one thread) and large ones (rows or chunks split among rayon's threads, lengths
//! that are no multiple of a chunk), against the same arithmetic done here one element at a
//! time.

use burn::tensor::activation::sigmoid;

use crate::flex_kernels::{noise, tensor, values};

/// Above burn-flex's element-wise threshold (256 Ki elements), and not a multiple of its
/// 32 Ki chunks.
const LARGE: usize = 300_007;

/// `0, 1, 2, …` (exact in f32 below 2²⁴), so each copied value names its source position.
fn positions(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// The source position of each element of `shape` permuted by `perm` (output dim `d` is source
/// dim `perm[d]`), in row-major output order; `ranges[d]` narrows source dim `d` first.
fn expected(shape: &[usize], ranges: &[(usize, usize)], perm: &[usize]) -> Vec<f32> {
    let src_strides = strides(shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| ranges[p].1 - ranges[p].0).collect();
    let n: usize = out_shape.iter().product();
    let out_strides = strides(&out_shape);
    (0..n)
        .map(|i| {
            let mut at = 0;
            for (d, &p) in perm.iter().enumerate() {
                let idx = i / out_strides[d] % out_shape[d];
                at += (ranges[p].0 + idx) * src_strides[p];
            }
            at as f32
        })
        .collect()
}

/// `got` equals `want` bit for bit; else names the first element that differs.
fn assert_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    if let Some(i) = got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
        panic!("{what}: element {i} is {} (want {})", got[i], want[i]);
    }
}

/// A `shape` tensor of its positions, narrowed to `ranges`, permuted by `perm`, then flattened
/// (a reshape of a non-contiguous view: burn-flex's `to_contiguous`).
fn copied<const D: usize>(shape: [usize; D], ranges: [(usize, usize); D], perm: [isize; D]) -> Vec<f32> {
    let n = shape.iter().product();
    let t = tensor(positions(n), shape).slice(ranges.map(|(a, b)| a..b)).permute(perm);
    let len = t.shape().num_elements();
    values(t.reshape([len]))
}

#[test]
fn layout_copies_put_every_element_where_index_arithmetic_says() {
    fn check<const D: usize>(shape: [usize; D], ranges: [(usize, usize); D], perm: [usize; D]) {
        let got = copied(shape, ranges, perm.map(|p| p as isize));
        assert_same(&got, &expected(&shape, &ranges, &perm), &format!("{shape:?} {ranges:?} {perm:?}"));
    }
    let whole = |shape: &[usize]| -> Vec<(usize, usize)> { shape.iter().map(|&s| (0, s)).collect() };
    // Attention's head split and merge, small and large (rows of d = 64 in unit stride).
    for [b, l, h, d] in [[2, 7, 3, 8], [4, 512, 9, 64], [1, 600, 9, 64]] {
        let r: [(usize, usize); 4] = whole(&[b, l, h, d]).try_into().unwrap();
        check([b, l, h, d], r, [0, 2, 1, 3]);
    }
    // Transposed last two dims (the keys' layout): tiled blocks, small and large.
    check([3, 5, 17, 33], whole(&[3, 5, 17, 33]).try_into().unwrap(), [0, 1, 3, 2]);
    check([4, 9, 129, 65], whole(&[4, 9, 129, 65]).try_into().unwrap(), [0, 1, 3, 2]);
    // A 2D transpose large enough to split its rows among threads.
    check([1031, 517], [(0, 1031), (0, 517)], [1, 0]);
    // Narrowed views (an offset, rows that skip) under permutations of rank 3 and 5.
    check([6, 700, 130], [(1, 5), (3, 697), (0, 128)], [1, 0, 2]);
    check([5, 40, 7, 11, 37], [(1, 4), (0, 40), (2, 7), (0, 11), (1, 36)], [2, 0, 4, 1, 3]);
    check([3, 200, 9, 64], [(0, 3), (10, 190), (0, 9), (0, 64)], [2, 1, 0, 3]);
}

#[test]
fn element_wise_ops_write_every_element_on_every_path() {
    for n in [1_000, LARGE] {
        let (a, b) = (noise(n, 1), noise(n, 2));
        let pos: Vec<f32> = a.iter().map(|x| x.abs() + 0.5).collect();
        let same = |got: Vec<f32>, want: Vec<f32>, what: &str| assert_same(&got, &want, &format!("{what} (n = {n})"));
        let ta = tensor(a.clone(), [n]);
        let tb = tensor(b.clone(), [n]);
        let add: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        // A binary op with a vector path, in place (lhs owned once) and into a new buffer
        // (lhs still held here).
        same(values(ta.clone() + tb.clone()), add.clone(), "add, new buffer");
        same(values(tensor(a.clone(), [n]) + tb.clone()), add, "add, in place");
        // A binary op without one (`powf`): the generic loop, both ways.
        let pow: Vec<f32> = pos.iter().zip(&b).map(|(x, y)| x.powf(*y)).collect();
        let tpos = tensor(pos.clone(), [n]);
        same(values(tpos.clone().powf(tb.clone())), pow.clone(), "powf, new buffer");
        same(values(tensor(pos.clone(), [n]).powf(tb.clone())), pow, "powf, in place");
        // A scalar op, both ways.
        let scaled: Vec<f32> = a.iter().map(|x| x * 1.7).collect();
        same(values(ta.clone().mul_scalar(1.7)), scaled.clone(), "mul_scalar, new buffer");
        same(values(tensor(a.clone(), [n]).mul_scalar(1.7)), scaled, "mul_scalar, in place");
        // A unary op, both ways.
        let neg: Vec<f32> = a.iter().map(|x| -x).collect();
        same(values(ta.clone().neg()), neg.clone(), "neg, new buffer");
        same(values(tensor(a.clone(), [n]).neg()), neg, "neg, in place");
        // sigmoid, both ways (its values are checked against f64 in flex_kernels).
        let s_new = values(sigmoid(ta.clone()));
        same(values(sigmoid(tensor(a.clone(), [n]))), s_new.clone(), "sigmoid, in place vs new buffer");
        let small: Vec<f32> = a.chunks(997).flat_map(|c| values(sigmoid(tensor(c.to_vec(), [c.len()])))).collect();
        same(s_new, small, "sigmoid, whole vs 997-element pieces");
        drop((ta, tb, tpos));

        // Broadcasts over rows: one scalar per row, and one row shared by every row.
        let (rows, len) = (n / 100, 100);
        let m = &a[..rows * len];
        let col: Vec<f32> = (0..rows).map(|r| b[r]).collect();
        let row: Vec<f32> = b[..len].to_vec();
        let per_row: Vec<f32> = m.iter().enumerate().map(|(i, x)| x - col[i / len]).collect();
        let shared: Vec<f32> = m.iter().enumerate().map(|(i, x)| x * row[i % len]).collect();
        let tm = tensor(m.to_vec(), [rows, len]);
        let tcol = tensor(col.clone(), [rows, 1]);
        let trow = tensor(row.clone(), [1, len]);
        same(values(tm.clone() - tcol.clone()), per_row.clone(), "per-row scalar, new buffer");
        same(values(tensor(m.to_vec(), [rows, len]) - tcol), per_row, "per-row scalar, in place");
        same(values(tm.clone() * trow.clone()), shared.clone(), "shared row, new buffer");
        same(values(tensor(m.to_vec(), [rows, len]) * trow), shared, "shared row, in place");
    }
}

#[test]
fn products_over_an_empty_inner_dimension_are_zeros() {
    // burn-flex hands gemm an unzeroed output buffer (change 5); with k = 0 gemm must still
    // write every element. The NaN buffer freed first is likely what the allocator hands out
    // again, so an element left unwritten would read as NaN.
    for _ in 0..3 {
        drop(values(tensor(vec![f32::NAN; 2 * 20 * 30], [2, 20, 30])));
        let two_d = values(tensor(vec![], [20, 0]).matmul(tensor(vec![], [0, 30])));
        let batched = values(tensor(vec![], [2, 20, 0]).matmul(tensor(vec![], [2, 0, 30])));
        assert_eq!(two_d, vec![0.0; 20 * 30]);
        assert_eq!(batched, vec![0.0; 2 * 20 * 30]);
    }
}
