//! Matrix multiplication via gemm crate.
//!
//! Optimizations:
//! - Strided gemm for f32/f64/f16 avoids copying non-contiguous tensors
//! - Enables parallelism for large matrices (with rayon feature)
//! - Batched matmul parallelized across batch dimension

use alloc::vec;
use alloc::vec::Vec;
use burn_backend::{DType, Element};
use burn_std::{Bytes, Shape, bf16, f16};

use crate::{FlexTensor, Layout};

/// Types that can be used with gemm-based matmul.
/// Only implement for types that `gemm::gemm` dispatches on via TypeId (f32, f64, f16).
trait GemmScalar: Element + bytemuck::Pod {
    fn zero() -> Self;
    fn one() -> Self;
}

impl GemmScalar for f32 {
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
}

impl GemmScalar for f64 {
    fn zero() -> Self {
        0.0
    }
    fn one() -> Self {
        1.0
    }
}

impl GemmScalar for f16 {
    fn zero() -> Self {
        f16::from_f32(0.0)
    }
    fn one() -> Self {
        f16::from_f32(1.0)
    }
}

/// Checked multiplication for matrix sizes, panics on overflow.
#[inline]
fn checked_size(a: usize, b: usize) -> usize {
    a.checked_mul(b)
        .unwrap_or_else(|| panic!("matmul: matrix size overflow: {a} * {b}"))
}

/// Threshold for enabling parallelism (M*N*K operations).
/// 192^3 = ~7M ops - balance between 128x128 (no parallel) and 256x256 (parallel)
const PARALLEL_THRESHOLD: usize = 192 * 192 * 192;

/// Threshold for batch-level parallelism (total ops across all batches).
/// Use batch parallelism when individual matrices are small but total work is large.
#[cfg(feature = "rayon")]
const BATCH_PARALLEL_THRESHOLD: usize = 128 * 128 * 128; // ~2M ops total

/// Get parallelism setting based on matrix size.
fn get_parallelism(m: usize, n: usize, k: usize) -> gemm::Parallelism {
    let ops = m.saturating_mul(n).saturating_mul(k);
    if ops >= PARALLEL_THRESHOLD {
        #[cfg(feature = "rayon")]
        {
            gemm::Parallelism::Rayon(0) // 0 = use all available threads
        }
        #[cfg(not(feature = "rayon"))]
        {
            gemm::Parallelism::None
        }
    } else {
        gemm::Parallelism::None
    }
}

/// Dispatch matrix multiplication based on dtype.
pub fn matmul(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    assert_eq!(lhs.dtype(), rhs.dtype(), "matmul: dtype mismatch");

    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    assert!(lhs_rank >= 2, "matmul requires at least 2D tensors");
    assert!(rhs_rank >= 2, "matmul requires at least 2D tensors");

    // Check inner dimensions match: lhs[..., M, K] x rhs[..., K, N]
    let k_lhs = lhs_shape[lhs_rank - 1];
    let k_rhs = rhs_shape[rhs_rank - 2];
    assert_eq!(k_lhs, k_rhs, "matmul: inner dimensions must match");

    match lhs.dtype() {
        DType::F32 => match small_m::matmul_f32(&lhs, &rhs) {
            Some(out) => out,
            None => matmul_gemm::<f32>(lhs, rhs),
        },
        DType::F64 => matmul_gemm::<f64>(lhs, rhs),
        DType::F16 => matmul_gemm::<f16>(lhs, rhs),
        DType::BF16 => matmul_bf16(lhs, rhs),
        _ => panic!("matmul: unsupported dtype {:?}", lhs.dtype()),
    }
}

/// Extract 2D matrix strides from a tensor layout.
/// Returns (row_stride, col_stride) for the last two dimensions.
fn get_2d_strides(layout: &Layout) -> (isize, isize) {
    let strides = layout.strides();
    let ndim = strides.len();
    let row_stride = strides[ndim - 2];
    let col_stride = strides[ndim - 1];
    (row_stride, col_stride)
}

/// Compute broadcast batch dimensions for batched matmul.
/// Returns (broadcast_shape, lhs_strides, rhs_strides) where strides map
/// output batch index to input batch offset (in matrices).
fn broadcast_batch_dims(
    lhs_batch: &[usize],
    rhs_batch: &[usize],
) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    // Pad shorter batch dims with 1s on the left
    let max_len = lhs_batch.len().max(rhs_batch.len());
    let lhs_padded: Vec<usize> = (0..max_len)
        .map(|i| {
            if i < max_len - lhs_batch.len() {
                1
            } else {
                lhs_batch[i - (max_len - lhs_batch.len())]
            }
        })
        .collect();
    let rhs_padded: Vec<usize> = (0..max_len)
        .map(|i| {
            if i < max_len - rhs_batch.len() {
                1
            } else {
                rhs_batch[i - (max_len - rhs_batch.len())]
            }
        })
        .collect();

    // Compute broadcast shape and strides
    let mut broadcast_shape = Vec::with_capacity(max_len);
    let mut lhs_strides = Vec::with_capacity(max_len);
    let mut rhs_strides = Vec::with_capacity(max_len);

    // Compute strides from right to left
    let mut lhs_stride = 1usize;
    let mut rhs_stride = 1usize;
    for i in (0..max_len).rev() {
        let ld = lhs_padded[i];
        let rd = rhs_padded[i];
        debug_assert!(
            ld == rd || ld == 1 || rd == 1,
            "matmul: batch dimensions not broadcastable: {:?} vs {:?}",
            lhs_batch,
            rhs_batch
        );
        broadcast_shape.push(ld.max(rd));
        // Stride is 0 if dimension is 1 (broadcast), otherwise actual stride
        lhs_strides.push(if ld == 1 { 0 } else { lhs_stride });
        rhs_strides.push(if rd == 1 { 0 } else { rhs_stride });
        lhs_stride *= ld;
        rhs_stride *= rd;
    }

    // Reverse to get correct order
    broadcast_shape.reverse();
    lhs_strides.reverse();
    rhs_strides.reverse();

    (broadcast_shape, lhs_strides, rhs_strides)
}

/// Convert a flat batch index to input batch offset using broadcast strides.
#[inline]
fn batch_index_to_offset(b: usize, broadcast_shape: &[usize], strides: &[usize]) -> usize {
    let mut offset = 0;
    let mut remaining = b;
    for i in (0..broadcast_shape.len()).rev() {
        let idx = remaining % broadcast_shape[i];
        offset += idx * strides[i];
        remaining /= broadcast_shape[i];
    }
    offset
}

/// Compute element-level batch strides for a tensor in a broadcast context.
/// Uses the actual layout strides so non-contiguous (transposed/sliced) tensors
/// work without a copy. Dimensions that are broadcast (size 1) get stride 0.
#[allow(clippy::needless_range_loop)]
fn broadcast_batch_elem_strides(
    batch_shape: &[usize],
    layout_strides: &[isize],
    broadcast_len: usize,
) -> Vec<isize> {
    let batch_ndim = batch_shape.len();
    debug_assert!(broadcast_len >= batch_ndim);
    let mut result = vec![0isize; broadcast_len];

    for i in 0..broadcast_len {
        let batch_idx = i as isize - (broadcast_len as isize - batch_ndim as isize);
        if batch_idx >= 0 {
            let bi = batch_idx as usize;
            if batch_shape[bi] > 1 {
                result[i] = layout_strides[bi];
            }
        }
    }

    result
}

/// Convert a flat batch index to an element offset using element-level strides.
#[inline]
fn batch_elem_offset(b: usize, broadcast_shape: &[usize], elem_strides: &[isize]) -> isize {
    let mut offset: isize = 0;
    let mut remaining = b;
    for i in (0..broadcast_shape.len()).rev() {
        let idx = remaining % broadcast_shape[i];
        offset += idx as isize * elem_strides[i];
        remaining /= broadcast_shape[i];
    }
    offset
}

// ============================================================================
// Generic gemm-based matmul (f32, f64, f16)
// ============================================================================

fn matmul_gemm<T: GemmScalar>(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs_rank = lhs.layout().shape().num_dims();
    let rhs_rank = rhs.layout().shape().num_dims();

    if lhs_rank == 2 && rhs_rank == 2 {
        matmul_2d_strided::<T>(lhs, rhs)
    } else {
        matmul_batched_gemm::<T>(lhs, rhs)
    }
}

/// 2D matmul with strided support: [M, K] x [K, N] -> [M, N]
fn matmul_2d_strided<T: GemmScalar>(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();

    let m = lhs_shape[0];
    let k = lhs_shape[1];
    let n = rhs_shape[1];

    let (lhs_row_stride, lhs_col_stride) = get_2d_strides(lhs.layout());
    let (rhs_row_stride, rhs_col_stride) = get_2d_strides(rhs.layout());

    let lhs_data: &[T] = lhs.storage();
    let rhs_data: &[T] = rhs.storage();
    let lhs_ptr = unsafe { lhs_data.as_ptr().add(lhs.layout().start_offset()) };
    let rhs_ptr = unsafe { rhs_data.as_ptr().add(rhs.layout().start_offset()) };

    let out_shape = Shape::from(vec![m, n]);
    let parallelism = get_parallelism(m, n, k);

    // arl patch: the output is not zeroed first (`gemm_output`).
    let mut out = gemm_output::<T>(checked_size(m, n));
    unsafe {
        gemm_call(
            m,
            n,
            k,
            out.as_mut_ptr() as *mut T,
            1,
            n as isize,
            lhs_ptr,
            lhs_col_stride,
            lhs_row_stride,
            rhs_ptr,
            rhs_col_stride,
            rhs_row_stride,
            parallelism,
        );
    }
    // SAFETY: gemm wrote every element of the `m × n` output.
    unsafe { written(out, out_shape) }
}

/// arl patch (third_party/README.md, change 5): storage for a product that `gemm` overwrites
/// whole, left unzeroed. `gemm_call` passes `read_dst = false`, under which gemm writes every
/// element of the output (zeros when `k = 0`) and reads none. `FlexTensor::empty` zeroed it
/// first: a `memset` on the calling thread (calloc on reused heap memory) before every large
/// product, ~2 % of an update's samples on the SmolLM2 shape.
fn gemm_output<T: GemmScalar>(len: usize) -> Vec<core::mem::MaybeUninit<T>> {
    let mut out = Vec::with_capacity(len);
    // SAFETY: `MaybeUninit` elements need no initialization.
    unsafe { out.set_len(len) };
    out
}

/// The tensor of `shape` over a [`gemm_output`] buffer.
///
/// # Safety
/// Every element of `out` must have been written.
unsafe fn written<T: GemmScalar>(out: Vec<core::mem::MaybeUninit<T>>, shape: Shape) -> FlexTensor {
    let mut out = core::mem::ManuallyDrop::new(out);
    let (ptr, len, cap) = (out.as_mut_ptr() as *mut T, out.len(), out.capacity());
    // SAFETY: `MaybeUninit<T>` has `T`'s layout, the allocation is the same, and the caller
    // guarantees every element is initialized.
    let out = unsafe { Vec::from_raw_parts(ptr, len, cap) };
    FlexTensor::new(Bytes::from_elems(out), Layout::contiguous(shape), T::dtype())
}

/// Strided gemm call for one matrix. Wraps `gemm::gemm` with GemmScalar zero/one.
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_call<T: GemmScalar>(
    m: usize,
    n: usize,
    k: usize,
    out: *mut T,
    out_cs: isize,
    out_rs: isize,
    lhs: *const T,
    lhs_cs: isize,
    lhs_rs: isize,
    rhs: *const T,
    rhs_cs: isize,
    rhs_rs: isize,
    parallelism: gemm::Parallelism,
) {
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out,
            out_cs,
            out_rs,
            false,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            T::zero(),
            T::one(),
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Batched matmul: [B..., M, K] x [B..., K, N] -> [B..., M, N]
/// Supports broadcasting on batch dimensions and strided (non-contiguous) inputs.
fn matmul_batched_gemm<T: GemmScalar>(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    let m = lhs_shape[lhs_rank - 2];
    let k = lhs_shape[lhs_rank - 1];
    let n = rhs_shape[rhs_rank - 1];

    let lhs_batch: Vec<usize> = lhs_shape[..lhs_rank - 2].to_vec();
    let rhs_batch: Vec<usize> = rhs_shape[..rhs_rank - 2].to_vec();

    let (broadcast_shape, _, _) = broadcast_batch_dims(&lhs_batch, &rhs_batch);
    let batch_size: usize = broadcast_shape.iter().product();
    let broadcast_len = broadcast_shape.len();

    let lhs_batch_strides =
        broadcast_batch_elem_strides(&lhs_batch, lhs.layout().strides(), broadcast_len);
    let rhs_batch_strides =
        broadcast_batch_elem_strides(&rhs_batch, rhs.layout().strides(), broadcast_len);

    let (lhs_row_stride, lhs_col_stride) = get_2d_strides(lhs.layout());
    let (rhs_row_stride, rhs_col_stride) = get_2d_strides(rhs.layout());

    let out_matrix_size = checked_size(m, n);

    let mut out_dims = broadcast_shape.clone();
    out_dims.push(m);
    out_dims.push(n);
    let out_shape = Shape::from(out_dims);

    // arl patch: the output is not zeroed first (`gemm_output`).
    let mut output = gemm_output::<T>(checked_size(batch_size, out_matrix_size));

    let lhs_data: &[T] = lhs.storage();
    let rhs_data: &[T] = rhs.storage();
    let lhs_start = lhs.layout().start_offset() as isize;
    let rhs_start = rhs.layout().start_offset() as isize;
    let out_data: &mut [core::mem::MaybeUninit<T>] = &mut output;

    let per_matrix_ops = m.saturating_mul(n).saturating_mul(k);

    // Closure: run gemm for one batch slice at the given pointers
    let run_one = |out_ptr: *mut core::mem::MaybeUninit<T>, b: usize, parallelism: gemm::Parallelism| {
        let out_ptr = out_ptr as *mut T;
        let lhs_off = lhs_start + batch_elem_offset(b, &broadcast_shape, &lhs_batch_strides);
        let rhs_off = rhs_start + batch_elem_offset(b, &broadcast_shape, &rhs_batch_strides);
        unsafe {
            gemm_call::<T>(
                m,
                n,
                k,
                out_ptr,
                1,
                n as isize,
                lhs_data.as_ptr().offset(lhs_off),
                lhs_col_stride,
                lhs_row_stride,
                rhs_data.as_ptr().offset(rhs_off),
                rhs_col_stride,
                rhs_row_stride,
                parallelism,
            );
        }
    };

    // Strategy:
    // 1. Large matrices: let gemm parallelize internally
    // 2. Small matrices, large batch: parallelize batch loop
    // 3. Small total work: single-threaded
    #[cfg(feature = "rayon")]
    {
        let total_ops = batch_size.saturating_mul(per_matrix_ops);
        let prefer_batch_parallel = batch_size >= 4 && total_ops >= BATCH_PARALLEL_THRESHOLD;

        if per_matrix_ops >= PARALLEL_THRESHOLD && !prefer_batch_parallel {
            let parallelism = gemm::Parallelism::Rayon(0);
            for b in 0..batch_size {
                run_one(out_data[b * out_matrix_size..].as_mut_ptr(), b, parallelism);
            }
        } else if total_ops >= BATCH_PARALLEL_THRESHOLD && batch_size > 1 {
            use rayon::prelude::*;

            out_data
                .par_chunks_mut(out_matrix_size)
                .enumerate()
                .for_each(|(b, out_chunk)| {
                    run_one(out_chunk.as_mut_ptr(), b, gemm::Parallelism::None);
                });
        } else {
            for b in 0..batch_size {
                run_one(
                    out_data[b * out_matrix_size..].as_mut_ptr(),
                    b,
                    gemm::Parallelism::None,
                );
            }
        }
    }

    #[cfg(not(feature = "rayon"))]
    {
        let _ = per_matrix_ops;
        for b in 0..batch_size {
            run_one(
                out_data[b * out_matrix_size..].as_mut_ptr(),
                b,
                gemm::Parallelism::None,
            );
        }
    }

    // SAFETY: gemm wrote every element of each of the `batch_size` matrices.
    unsafe { written(output, out_shape) }
}

// ============================================================================
// bf16 matmul (via f32 conversion)
// ============================================================================

fn matmul_bf16(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs = lhs.to_contiguous();
    let rhs = rhs.to_contiguous();

    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();

    // Convert bf16 -> f32
    let lhs_f32: Vec<f32> = lhs.storage::<bf16>().iter().map(|x| x.to_f32()).collect();
    let rhs_f32: Vec<f32> = rhs.storage::<bf16>().iter().map(|x| x.to_f32()).collect();

    // Create f32 tensors
    let lhs_f32_tensor = FlexTensor::new(
        Bytes::from_elems(lhs_f32),
        Layout::contiguous(lhs_shape.clone()),
        DType::F32,
    );
    let rhs_f32_tensor = FlexTensor::new(
        Bytes::from_elems(rhs_f32),
        Layout::contiguous(rhs_shape.clone()),
        DType::F32,
    );

    // Compute matmul in f32
    let result_f32 = matmul_gemm::<f32>(lhs_f32_tensor, rhs_f32_tensor);

    // Convert f32 -> bf16
    let result_bf16: Vec<bf16> = result_f32
        .storage::<f32>()
        .iter()
        .map(|x| bf16::from_f32(*x))
        .collect();

    FlexTensor::new(
        Bytes::from_elems(result_bf16),
        result_f32.layout().clone(),
        DType::BF16,
    )
}

// ============================================================================
// Integer matmul (naive, with optional SIMD for i32)
// ============================================================================

/// Integer matrix multiplication dispatch.
pub fn int_matmul(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    assert_eq!(lhs.dtype(), rhs.dtype(), "int_matmul: dtype mismatch");

    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    assert!(lhs_rank >= 2, "int_matmul requires at least 2D tensors");
    assert!(rhs_rank >= 2, "int_matmul requires at least 2D tensors");

    let k_lhs = lhs_shape[lhs_rank - 1];
    let k_rhs = rhs_shape[rhs_rank - 2];
    assert_eq!(k_lhs, k_rhs, "int_matmul: inner dimensions must match");

    match lhs.dtype() {
        DType::I32 => matmul_i32(lhs, rhs),
        DType::I64 => matmul_i64(lhs, rhs),
        _ => panic!("int_matmul: unsupported dtype {:?}", lhs.dtype()),
    }
}

/// i32 matmul using naive triple loop with SIMD dot product.
fn matmul_i32(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs = lhs.to_contiguous();
    let rhs = rhs.to_contiguous();

    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    if lhs_rank == 2 && rhs_rank == 2 {
        matmul_2d_i32(&lhs, &rhs)
    } else {
        matmul_batched_i32(lhs, rhs)
    }
}

/// 2D i32 matmul: [M, K] x [K, N] -> [M, N]
/// Transposes rhs to enable contiguous access for dot product.
fn matmul_2d_i32(lhs: &FlexTensor, rhs: &FlexTensor) -> FlexTensor {
    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();

    let m = lhs_shape[0];
    let k = lhs_shape[1];
    let n = rhs_shape[1];

    let lhs_data: &[i32] = lhs.storage();
    let rhs_data: &[i32] = rhs.storage();

    // Transpose rhs [K, N] -> [N, K] for contiguous column access
    let mut rhs_t = vec![0i32; k * n];
    for i in 0..k {
        for j in 0..n {
            rhs_t[j * k + i] = rhs_data[i * n + j];
        }
    }

    let mut output = vec![0i32; m * n];

    // Now both lhs rows and rhs columns (transposed rows) are contiguous
    for i in 0..m {
        let lhs_row = &lhs_data[i * k..(i + 1) * k];
        for j in 0..n {
            let rhs_col = &rhs_t[j * k..(j + 1) * k];
            output[i * n + j] = dot_i32(lhs_row, rhs_col);
        }
    }

    let out_shape = Shape::from(vec![m, n]);
    FlexTensor::new(
        Bytes::from_elems(output),
        Layout::contiguous(out_shape),
        DType::I32,
    )
}

/// Dot product for i32 slices. Uses macerator SIMD when the `simd` feature is enabled.
#[inline]
fn dot_i32(a: &[i32], b: &[i32]) -> i32 {
    debug_assert_eq!(a.len(), b.len());

    #[cfg(feature = "simd")]
    {
        dot_i32_simd(a, b)
    }

    #[cfg(not(feature = "simd"))]
    {
        dot_i32_scalar(a, b)
    }
}

#[cfg(not(feature = "simd"))]
#[inline]
fn dot_i32_scalar(a: &[i32], b: &[i32]) -> i32 {
    let mut sum = 0i32;
    for i in 0..a.len() {
        sum = sum.wrapping_add(a[i].wrapping_mul(b[i]));
    }
    sum
}

#[cfg(feature = "simd")]
#[macerator::with_simd]
fn dot_i32_simd<S: macerator::Simd>(a: &[i32], b: &[i32]) -> i32 {
    use macerator::{Scalar, VMulAdd, vload_unaligned};

    let lanes = i32::lanes::<S>();
    let len = a.len();
    let simd_len = len / lanes * lanes;
    let mut acc = 0i32.splat::<S>();

    let mut i = 0;
    while i < simd_len {
        let va = unsafe { vload_unaligned(a.as_ptr().add(i)) };
        let vb = unsafe { vload_unaligned(b.as_ptr().add(i)) };
        acc = i32::vmul_add(va, vb, acc);
        i += lanes;
    }

    let mut sum = acc.reduce_add();
    while i < len {
        sum = sum.wrapping_add(a[i].wrapping_mul(b[i]));
        i += 1;
    }
    sum
}

/// Batched i32 matmul: [B..., M, K] x [B..., K, N] -> [B..., M, N]
///
/// Uses naive triple-loop with SIMD dot product and batch-level parallelism.
fn matmul_batched_i32(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    let m = lhs_shape[lhs_rank - 2];
    let k = lhs_shape[lhs_rank - 1];
    let n = rhs_shape[rhs_rank - 1];

    let lhs_batch: Vec<usize> = lhs_shape[..lhs_rank - 2].to_vec();
    let rhs_batch: Vec<usize> = rhs_shape[..rhs_rank - 2].to_vec();

    let (broadcast_shape, lhs_strides, rhs_strides) = broadcast_batch_dims(&lhs_batch, &rhs_batch);

    let batch_size: usize = broadcast_shape.iter().product();
    let rhs_batch_size: usize = rhs_batch.iter().product();
    let lhs_matrix_size = checked_size(m, k);
    let rhs_matrix_size = checked_size(k, n);
    let out_matrix_size = checked_size(m, n);

    let mut out_dims = broadcast_shape.clone();
    out_dims.push(m);
    out_dims.push(n);
    let out_shape = Shape::from(out_dims);

    let lhs_data: &[i32] = lhs.storage();
    let rhs_data: &[i32] = rhs.storage();

    // Transpose rhs per actual rhs batch: [B_rhs, K, N] -> [B_rhs, N, K]
    let mut rhs_transposed = vec![0i32; rhs_batch_size * n * k];
    for b in 0..rhs_batch_size {
        let src_offset = b * rhs_matrix_size;
        let dst_offset = b * n * k;
        for i in 0..k {
            for j in 0..n {
                rhs_transposed[dst_offset + j * k + i] = rhs_data[src_offset + i * n + j];
            }
        }
    }

    let mut output = vec![0i32; batch_size * out_matrix_size];

    let run_one = |b: usize, out_slice: &mut [i32]| {
        let lhs_batch_idx = batch_index_to_offset(b, &broadcast_shape, &lhs_strides);
        let rhs_batch_idx = batch_index_to_offset(b, &broadcast_shape, &rhs_strides);
        let lhs_offset = lhs_batch_idx * lhs_matrix_size;
        let rhs_t_offset = rhs_batch_idx * n * k;

        let lhs_slice = &lhs_data[lhs_offset..lhs_offset + lhs_matrix_size];
        let rhs_t_slice = &rhs_transposed[rhs_t_offset..rhs_t_offset + n * k];

        for i in 0..m {
            let lhs_row = &lhs_slice[i * k..(i + 1) * k];
            for j in 0..n {
                let rhs_col = &rhs_t_slice[j * k..(j + 1) * k];
                out_slice[i * n + j] = dot_i32(lhs_row, rhs_col);
            }
        }
    };

    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        output
            .par_chunks_mut(out_matrix_size)
            .enumerate()
            .for_each(|(b, out_slice)| run_one(b, out_slice));
    }

    #[cfg(not(feature = "rayon"))]
    {
        for b in 0..batch_size {
            let offset = b * out_matrix_size;
            run_one(b, &mut output[offset..offset + out_matrix_size]);
        }
    }

    FlexTensor::new(
        Bytes::from_elems(output),
        Layout::contiguous(out_shape),
        DType::I32,
    )
}

/// i64 matmul using naive triple loop.
fn matmul_i64(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs = lhs.to_contiguous();
    let rhs = rhs.to_contiguous();

    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    if lhs_rank == 2 && rhs_rank == 2 {
        matmul_2d_i64(&lhs, &rhs)
    } else {
        matmul_batched_i64(lhs, rhs)
    }
}

/// 2D i64 matmul: [M, K] x [K, N] -> [M, N]
fn matmul_2d_i64(lhs: &FlexTensor, rhs: &FlexTensor) -> FlexTensor {
    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();

    let m = lhs_shape[0];
    let k = lhs_shape[1];
    let n = rhs_shape[1];

    let lhs_data: &[i64] = lhs.storage();
    let rhs_data: &[i64] = rhs.storage();

    let mut output = vec![0i64; m * n];

    for i in 0..m {
        for j in 0..n {
            let mut sum = 0i64;
            for l in 0..k {
                sum = sum.wrapping_add(lhs_data[i * k + l].wrapping_mul(rhs_data[l * n + j]));
            }
            output[i * n + j] = sum;
        }
    }

    let out_shape = Shape::from(vec![m, n]);
    FlexTensor::new(
        Bytes::from_elems(output),
        Layout::contiguous(out_shape),
        DType::I64,
    )
}

/// Batched i64 matmul with broadcast support
fn matmul_batched_i64(lhs: FlexTensor, rhs: FlexTensor) -> FlexTensor {
    let lhs_shape = lhs.layout().shape();
    let rhs_shape = rhs.layout().shape();
    let lhs_rank = lhs_shape.num_dims();
    let rhs_rank = rhs_shape.num_dims();

    let m = lhs_shape[lhs_rank - 2];
    let k = lhs_shape[lhs_rank - 1];
    let n = rhs_shape[rhs_rank - 1];

    let lhs_batch: Vec<usize> = lhs_shape[..lhs_rank - 2].to_vec();
    let rhs_batch: Vec<usize> = rhs_shape[..rhs_rank - 2].to_vec();

    // Compute broadcast batch dimensions
    let (broadcast_shape, lhs_strides, rhs_strides) = broadcast_batch_dims(&lhs_batch, &rhs_batch);

    let batch_size: usize = broadcast_shape.iter().product();
    let lhs_matrix_size = checked_size(m, k);
    let rhs_matrix_size = checked_size(k, n);
    let out_matrix_size = checked_size(m, n);

    let mut out_dims = broadcast_shape.clone();
    out_dims.push(m);
    out_dims.push(n);
    let out_shape = Shape::from(out_dims);

    let lhs_data: &[i64] = lhs.storage();
    let rhs_data: &[i64] = rhs.storage();

    let mut output = vec![0i64; batch_size * out_matrix_size];

    for b in 0..batch_size {
        let lhs_batch_idx = batch_index_to_offset(b, &broadcast_shape, &lhs_strides);
        let rhs_batch_idx = batch_index_to_offset(b, &broadcast_shape, &rhs_strides);
        let lhs_offset = lhs_batch_idx * lhs_matrix_size;
        let rhs_offset = rhs_batch_idx * rhs_matrix_size;
        let out_offset = b * out_matrix_size;

        for i in 0..m {
            for j in 0..n {
                let mut sum = 0i64;
                for l in 0..k {
                    let lhs_idx = lhs_offset + i * k + l;
                    let rhs_idx = rhs_offset + l * n + j;
                    sum = sum.wrapping_add(lhs_data[lhs_idx].wrapping_mul(rhs_data[rhs_idx]));
                }
                output[out_offset + i * n + j] = sum;
            }
        }
    }

    FlexTensor::new(
        Bytes::from_elems(output),
        Layout::contiguous(out_shape),
        DType::I64,
    )
}

// ============================================================================
// Tests
// ============================================================================

// Tests kept here exercise flex-specific behavior of the matmul kernel:
// dtype-specific storage paths (F64, F16, BF16) that the generic
// FloatElem-parameterized backend-tests cannot reach. Plain contiguous
// F32/I32/I64 matmul, stride-through-matmul variants (transposed /
// swap_dims / broadcast-transposed), and other generic coverage have
// been migrated to burn-backend-tests so they run against every backend.
/// arl change 4: f32 products with at most [`small_m::MAX_ROWS`] rows per matrix — the linear
/// layers of a decode step (one row per sequence, `[m, k] · [k, n]`) and its attention
/// (`[.., rep, d] · [.., d, L]` against the key cache, `[.., rep, L] · [.., L, d]` against the
/// values). `gemm` treats a linear layer's product as its transpose, `n` rows by `m` columns,
/// splits the `m` columns into micro-kernel widths of 6 and 2 and walks the weights once per
/// width; on attention it runs 3 valid rows in a 16-lane kernel, one call per head. Here the
/// weights `[k, n]` are walked once, row after row, into `m` rows of accumulators per column
/// panel (panels in parallel), and a product whose right side is a transposed row-major matrix
/// (the keys; the tied LM head `h · Eᵀ`) is `m · n` dot products — which also serve its
/// transpose, many rows against at most `MAX_ROWS` columns (the head computed as `E · hᵀ`,
/// reading the embedding in its stored order). Each output element is summed in an order that depends
/// only on `k`, the same on AVX2 and AVX-512: a row's result does not depend on how many rows
/// are multiplied with it, on the panels, on the batch, on the threads or on the ISA.
mod small_m {
    #![cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code, unused_imports))]
    use core::ops::Range;

    use crate::FlexTensor;

    /// Rows up to which the kernels are used (a decode step of up to this many sequences).
    /// Up to 8 the AVX-512 tiles hold 32 columns of every row's sums in registers, 9–16 rows
    /// 16 columns; `gemm` took a 9- to 16-row decode step's products at 2.2–2.7× the 8-row
    /// step's time (results/bench-peer-cpu.md, session 21).
    pub(crate) const MAX_ROWS: usize = 16;

    /// `lhs · rhs` for f32 `[.., m, k] · [.., k, n]` with the same batch dimensions (no
    /// broadcasting), `lhs` rows contiguous, and either `m ≤` [`MAX_ROWS`] with `rhs` row-major
    /// (rows contiguous) or column-major (columns contiguous), or any `m` against `n ≤`
    /// [`MAX_ROWS`] column-major columns; on a CPU with FMA (x86-64: AVX2 or AVX-512). `None`
    /// otherwise (the caller uses `gemm`).
    pub(crate) fn matmul_f32(lhs: &FlexTensor, rhs: &FlexTensor) -> Option<FlexTensor> {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        {
            use alloc::vec::Vec;
            use burn_backend::DType;
            use burn_std::Shape;
            let (ls, rs) = (lhs.layout().shape(), rhs.layout().shape());
            let rank = ls.num_dims();
            if rank < 2 || rs.num_dims() != rank {
                return None;
            }
            let (m, k, n) = (ls[rank - 2], ls[rank - 1], rs[rank - 1]);
            if m == 0 || k == 0 || n == 0 || (0..rank - 2).any(|d| ls[d] != rs[d]) {
                return None;
            }
            let (lst, rst) = (lhs.layout().strides(), rhs.layout().strides());
            if lst.iter().chain(rst).any(|&s| s < 0) {
                return None;
            }
            let (lhs_rs, lhs_cs) = (lst[rank - 2] as usize, lst[rank - 1] as usize);
            let (rhs_rs, rhs_cs) = (rst[rank - 2] as usize, rst[rank - 1] as usize);
            if lhs_cs != 1 && k > 1 || (m > 1 && lhs_rs < k) {
                return None;
            }
            // Columns first: a transposed `[1, k]` (strides 1 and k: one sequence's hidden
            // state against the tied head) fits both, and must take the dots as 2–8 do.
            let layout = if rhs_rs == 1 && rhs_cs >= k {
                Layout::Columns
            } else if (rhs_cs == 1 || n == 1) && (k == 1 || rhs_rs >= n) {
                Layout::Rows
            } else {
                return None;
            };
            // Dot products also serve many rows against at most MAX_ROWS columns: the tied LM
            // head of a decode step, `E · hᵀ` (the embedding's rows against each sequence's
            // hidden state), whose columns are then the rows of `h · Eᵀ` computed alike.
            if m > MAX_ROWS && !(layout == Layout::Columns && n <= MAX_ROWS) {
                return None;
            }
            let isa = if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
                Isa::Avx512
            } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                Isa::Avx2
            } else {
                return None;
            };
            let batch: Vec<usize> = (0..rank - 2).map(|d| ls[d]).collect();
            let count: usize = batch.iter().product();
            // Element offsets of matrix b (the strides are non-negative, checked above).
            let offsets = |strides: &[isize], start: usize| -> Vec<usize> {
                (0..count).map(|b| start + super::batch_elem_offset(b, &batch, &strides[..rank - 2]) as usize).collect()
            };
            let (lhs_off, rhs_off) = (offsets(lst, lhs.layout().start_offset()), offsets(rst, rhs.layout().start_offset()));
            let (x, w) = (lhs.storage::<f32>(), rhs.storage::<f32>());
            let mut dims = batch;
            dims.extend([m, n]);
            let mut output = FlexTensor::empty(Shape::from(dims), DType::F32);
            let out: &mut [f32] = output.storage_mut();
            let problem = Problem { isa, layout, m, n, k, x_stride: lhs_rs, w_stride: if layout == Layout::Rows { rhs_rs } else { rhs_cs } };
            #[cfg(feature = "rayon")]
            let threads = if count * m * n * k >= 1 << 16 { rayon::current_num_threads().max(1) } else { 1 };
            #[cfg(not(feature = "rayon"))]
            let threads = 1;
            if count == 1 {
                problem.run(&x[lhs_off[0]..], &w[rhs_off[0]..], out, threads);
            } else {
                let item = |(b, out): (usize, &mut [f32])| problem.run(&x[lhs_off[b]..], &w[rhs_off[b]..], out, 1);
                #[cfg(feature = "rayon")]
                if threads > 1 {
                    use rayon::prelude::*;
                    out.par_chunks_mut(m * n).enumerate().for_each(item);
                    return Some(output);
                }
                out.chunks_mut(m * n).enumerate().for_each(item);
            }
            return Some(output);
        }
        #[allow(unreachable_code)]
        None
    }

    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Isa {
        Avx512,
        Avx2,
    }

    /// How the right side's `[k, n]` elements lie: rows contiguous (`w[r · stride + c]`, the
    /// weights, the values) or columns contiguous (`w[c · stride + r]`, the transposed keys).
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Layout {
        Rows,
        Columns,
    }

    /// One `[m, k] · [k, n]` product: `x[i · x_stride + r]`; `w` as `layout` with `w_stride`.
    #[derive(Clone, Copy)]
    struct Problem {
        isa: Isa,
        layout: Layout,
        m: usize,
        n: usize,
        k: usize,
        x_stride: usize,
        w_stride: usize,
    }

    impl Problem {
        /// Into `out` (`[m, n]`, contiguous); with `threads > 1`, in parallel parts.
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        fn run(&self, x: &[f32], w: &[f32], out: &mut [f32], threads: usize) {
            match self.layout {
                Layout::Rows => self.run_rows(x, w, out, threads),
                Layout::Columns => self.run_dots(x, w, out, threads),
            }
        }

        /// Dot products in blocks of the longer side (rows or columns), a few per thread.
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        fn run_dots(&self, x: &[f32], w: &[f32], out: &mut [f32], threads: usize) {
            let (m, n) = (self.m, self.n);
            let by_rows = m >= n;
            let len = if by_rows { m } else { n };
            let step = len.div_ceil(if threads > 1 { 4 * threads } else { 1 }).max(1);
            let out_addr = out.as_mut_ptr() as usize;
            let block = |start: usize| {
                let end = (start + step).min(len);
                let (rows, cols) = if by_rows { (start..end, 0..n) } else { (0..m, start..end) };
                // SAFETY: the ISA was detected at run time; blocks write disjoint elements.
                unsafe {
                    let out = out_addr as *mut f32;
                    match self.isa {
                        Isa::Avx512 => dots_avx512(self, x, w, out, rows, cols),
                        Isa::Avx2 => dots_avx2(self, x, w, out, rows, cols),
                    }
                }
            };
            for_each_start(len, step, threads > 1, block);
        }

        /// Column panels of the weights' walk, about one per thread.
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        fn run_rows(&self, x: &[f32], w: &[f32], out: &mut [f32], threads: usize) {
            let n = self.n;
            // About one panel per thread, at most 4096 columns (16 rows of accumulators: 256 KiB).
            let width = n.div_ceil(threads).next_multiple_of(16).clamp(16, 4096).min(n);
            let out_addr = out.as_mut_ptr() as usize;
            let panel = |j0: usize| {
                let cols = width.min(n - j0);
                // SAFETY: the ISA was detected at run time; each panel writes only columns
                // j0..j0 + cols of every output row, and the panels are disjoint.
                unsafe {
                    let out = out_addr as *mut f32;
                    match self.isa {
                        Isa::Avx512 => panel_avx512(self, x, w, out, j0, cols),
                        Isa::Avx2 => panel_avx2(self, x, w, out, j0, cols),
                    }
                }
            };
            for_each_start(n, width, threads > 1, panel);
        }
    }

    /// `f(start)` for `start` in `0, step, 2·step, … < len`: on rayon's threads when `parallel`
    /// and there is more than one part, else in order on this thread.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    fn for_each_start(len: usize, step: usize, parallel: bool, f: impl Fn(usize) + Send + Sync) {
        #[cfg(feature = "rayon")]
        if parallel && step < len {
            use rayon::prelude::*;
            (0..len).step_by(step).collect::<alloc::vec::Vec<_>>().into_par_iter().for_each(f);
            return;
        }
        let _ = parallel;
        (0..len).step_by(step).for_each(f);
    }

    /// [`panel`]'s sums on AVX-512, in register tiles: for a block of [`BLOCK`] weight rows,
    /// each tile of up to 32 columns (16 beyond 8 rows) keeps all `m` rows' accumulators in
    /// registers across the block (loaded from and stored to the panel's accumulators between
    /// blocks) and asks for the tile's lines [`AHEAD`] blocks on ahead of time. Every element is the same sequence
    /// of FMAs as in [`panel`] (from +0, over `r` in increasing order), so the two agree bit
    /// for bit; here an accumulator is not reloaded for every four terms, and the weights
    /// arrive from memory while the previous block is multiplied (with [`dots_many`], a decode
    /// step on SmolLM2's shape 1.7× as fast as on [`panel`] and [`dot`]: results/bench-peer-cpu.md).
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn panel_avx512(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, j0: usize, cols: usize) {
        unsafe {
            match p.m {
                1 => tiles::<1>(p, x, w, out, j0, cols),
                2 => tiles::<2>(p, x, w, out, j0, cols),
                3 => tiles::<3>(p, x, w, out, j0, cols),
                4 => tiles::<4>(p, x, w, out, j0, cols),
                5 => tiles::<5>(p, x, w, out, j0, cols),
                6 => tiles::<6>(p, x, w, out, j0, cols),
                7 => tiles::<7>(p, x, w, out, j0, cols),
                8 => tiles::<8>(p, x, w, out, j0, cols),
                9 => tiles::<9>(p, x, w, out, j0, cols),
                10 => tiles::<10>(p, x, w, out, j0, cols),
                11 => tiles::<11>(p, x, w, out, j0, cols),
                12 => tiles::<12>(p, x, w, out, j0, cols),
                13 => tiles::<13>(p, x, w, out, j0, cols),
                14 => tiles::<14>(p, x, w, out, j0, cols),
                15 => tiles::<15>(p, x, w, out, j0, cols),
                _ => tiles::<16>(p, x, w, out, j0, cols),
            }
        }
    }

    /// Weight rows per block of [`tiles`] (a tile's accumulators stay in registers over it).
    const BLOCK: usize = 16;

    /// How many blocks ahead [`tile`] asks for the weights' lines, and it asks for them in L2.
    /// A tile walks its columns down the rows, a line or two per row `n` floats apart, so the
    /// lines of a block share few L1 sets (one, for the 49,152-float rows of an LM head), and
    /// the hardware prefetchers do not follow the walk. Fetching the next block into L1 (as
    /// first written) arrived late and was evicted early: on a decode step's products on
    /// SmolLM2's shape (8 rows, 540 MB of weights), 31 ms against 23 ms two blocks ahead into
    /// L2, i.e. ≈ 23 GB/s, this machine's read bandwidth (results/bench-peer-cpu.md, session 21).
    const AHEAD: usize = 2;

    /// [`panel_avx512`] for `M` rows.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[inline(always)]
    unsafe fn tiles<const M: usize>(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, j0: usize, cols: usize) {
        debug_assert_eq!(p.m, M);
        let mut acc = alloc::vec![0f32; M * cols];
        let mut r0 = 0;
        while r0 < p.k {
            let r1 = (r0 + BLOCK).min(p.k);
            let mut t = 0;
            // SAFETY (each tile): columns j0 + t .. j0 + t + width lie inside the panel and
            // rows r0..r1 inside the weights; masked lanes are neither read nor written.
            // Two vectors per row up to 8 rows (16 accumulators), one beyond (up to 16).
            while M <= 8 && t + 32 <= cols {
                unsafe { tile::<M, 2>(p, x, w, &mut acc, j0, cols, t, 16, r0..r1) };
                t += 32;
            }
            while t < cols {
                let width = (cols - t).min(16);
                unsafe { tile::<M, 1>(p, x, w, &mut acc, j0, cols, t, width, r0..r1) };
                t += width;
            }
            r0 = r1;
        }
        for i in 0..M {
            // SAFETY: row i of the output has n ≥ j0 + cols columns (the caller's panel).
            unsafe { core::ptr::copy_nonoverlapping(acc[i * cols..].as_ptr(), out.add(i * p.n + j0), cols) };
        }
    }

    /// One tile of [`tiles`]: `V` vectors of 16 columns from panel column `t` (the last vector
    /// `last` lanes wide), every row, weight rows `rows`.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn tile<const M: usize, const V: usize>(
        p: &Problem,
        x: &[f32],
        w: &[f32],
        acc: &mut [f32],
        j0: usize,
        cols: usize,
        t: usize,
        last: usize,
        rows: Range<usize>,
    ) {
        use core::arch::x86_64::*;
        let mask = |v: usize| -> __mmask16 { if v + 1 < V || last == 16 { 0xffff } else { (1u16 << last) - 1 } };
        let wp = w.as_ptr();
        unsafe {
            let mut a = [[_mm512_setzero_ps(); V]; M];
            if rows.start > 0 {
                for (i, ai) in a.iter_mut().enumerate() {
                    for (v, av) in ai.iter_mut().enumerate() {
                        *av = _mm512_maskz_loadu_ps(mask(v), acc.as_ptr().add(i * cols + t + 16 * v));
                    }
                }
            }
            // This tile's lines [`AHEAD`] blocks on (from the first block, every block up to
            // there), into L2, while this block is multiplied.
            let ahead = rows.end + (AHEAD - 1) * BLOCK;
            let from = if rows.start == 0 { rows.end } else { ahead };
            for r in from.min(p.k)..(ahead + BLOCK).min(p.k) {
                for v in 0..V {
                    _mm_prefetch::<_MM_HINT_T1>(wp.add(r * p.w_stride + j0 + t + 16 * v) as *const i8);
                }
            }
            for r in rows {
                let mut wv = [_mm512_setzero_ps(); V];
                for (v, wv) in wv.iter_mut().enumerate() {
                    *wv = _mm512_maskz_loadu_ps(mask(v), wp.add(r * p.w_stride + j0 + t + 16 * v));
                }
                for (i, ai) in a.iter_mut().enumerate() {
                    let xb = _mm512_set1_ps(*x.get_unchecked(i * p.x_stride + r));
                    for (av, wv) in ai.iter_mut().zip(wv) {
                        *av = _mm512_fmadd_ps(xb, wv, *av);
                    }
                }
            }
            for (i, ai) in a.iter().enumerate() {
                for (v, av) in ai.iter().enumerate() {
                    _mm512_mask_storeu_ps(acc.as_mut_ptr().add(i * cols + t + 16 * v), mask(v), *av);
                }
            }
        }
    }

    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn panel_avx2(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, j0: usize, cols: usize) {
        unsafe { panel(p, x, w, out, j0, cols) }
    }

    /// Output columns `j0..j0 + cols` of all rows, the right side's rows contiguous: for each
    /// weight row r (four at a time, so an accumulator is loaded and stored once per four
    /// terms), every output row adds x[i, r] · w[r, j0..] — the sum over r in increasing order,
    /// one FMA per term. Inlined into the `target_feature` wrappers, so the loops are
    /// vectorized for that ISA and `mul_add` is one FMA instruction.
    #[inline(always)]
    unsafe fn panel(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, j0: usize, cols: usize) {
        let (m, k) = (p.m, p.k);
        let xrow = |i: usize| &x[i * p.x_stride..i * p.x_stride + k];
        let wrow = |r: usize| &w[r * p.w_stride + j0..r * p.w_stride + j0 + cols];
        let mut acc = alloc::vec![0f32; m * cols];
        let mut r = 0;
        while r + 4 <= k {
            let (w0, w1, w2, w3) = (wrow(r), wrow(r + 1), wrow(r + 2), wrow(r + 3));
            for i in 0..m {
                let xi = &xrow(i)[r..r + 4];
                let row = &mut acc[i * cols..(i + 1) * cols];
                for j in 0..cols {
                    let mut s = row[j];
                    s = xi[0].mul_add(w0[j], s);
                    s = xi[1].mul_add(w1[j], s);
                    s = xi[2].mul_add(w2[j], s);
                    s = xi[3].mul_add(w3[j], s);
                    row[j] = s;
                }
            }
            r += 4;
        }
        while r < k {
            let w0 = wrow(r);
            for i in 0..m {
                let a = xrow(i)[r];
                let row = &mut acc[i * cols..(i + 1) * cols];
                for j in 0..cols {
                    row[j] = a.mul_add(w0[j], row[j]);
                }
            }
            r += 1;
        }
        for i in 0..m {
            // SAFETY: row i of the output has n ≥ j0 + cols columns (the caller's panel).
            unsafe { core::ptr::copy_nonoverlapping(acc[i * cols..].as_ptr(), out.add(i * p.n + j0), cols) };
        }
    }

    /// [`dots`] on AVX-512: for each item of the block's longer side, its dot products with
    /// all of the shorter side's (at most [`MAX_ROWS`]) at once, one register of 16 lanes each,
    /// so a long-side chunk is loaded once for all of them and the FMA chains run side by side.
    /// The lanes, the masked tail and the pairwise reduction are [`dot`]'s, so the two agree
    /// bit for bit.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx512f,fma")]
    unsafe fn dots_avx512(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, rows: Range<usize>, cols: Range<usize>) {
        // The short side is the one whose whole range the block holds (run_dots splits the long one).
        let by_rows = p.m >= p.n;
        let short = if by_rows { cols.len() } else { rows.len() };
        unsafe {
            match short {
                0 => {}
                1 => dots_many::<1>(p, x, w, out, rows, cols, by_rows),
                2 => dots_many::<2>(p, x, w, out, rows, cols, by_rows),
                3 => dots_many::<3>(p, x, w, out, rows, cols, by_rows),
                4 => dots_many::<4>(p, x, w, out, rows, cols, by_rows),
                5 => dots_many::<5>(p, x, w, out, rows, cols, by_rows),
                6 => dots_many::<6>(p, x, w, out, rows, cols, by_rows),
                7 => dots_many::<7>(p, x, w, out, rows, cols, by_rows),
                8 => dots_many::<8>(p, x, w, out, rows, cols, by_rows),
                9 => dots_many::<9>(p, x, w, out, rows, cols, by_rows),
                10 => dots_many::<10>(p, x, w, out, rows, cols, by_rows),
                11 => dots_many::<11>(p, x, w, out, rows, cols, by_rows),
                12 => dots_many::<12>(p, x, w, out, rows, cols, by_rows),
                13 => dots_many::<13>(p, x, w, out, rows, cols, by_rows),
                14 => dots_many::<14>(p, x, w, out, rows, cols, by_rows),
                15 => dots_many::<15>(p, x, w, out, rows, cols, by_rows),
                16 => dots_many::<16>(p, x, w, out, rows, cols, by_rows),
                _ => dots(p, x, w, out, rows, cols),
            }
        }
    }

    /// [`dots_avx512`] with `S` short-side items: `by_rows`, the long side is `rows` (x's rows
    /// against the columns `cols`), else `cols` (w's columns against the rows `rows`).
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn dots_many<const S: usize>(
        p: &Problem,
        x: &[f32],
        w: &[f32],
        out: *mut f32,
        rows: Range<usize>,
        cols: Range<usize>,
        by_rows: bool,
    ) {
        use core::arch::x86_64::*;
        let k = p.k;
        let (chunks, tail) = (k / 16, k % 16);
        let tail_mask: __mmask16 = ((1u32 << tail) - 1) as u16;
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        let (long, short) = if by_rows { (rows, cols) } else { (cols, rows) };
        let short0 = short.start;
        for l in long {
            // SAFETY: every vector below lies in x's row or w's column (k elements each; the
            // tail loads are masked), and (i, j) is inside the output and in this block only.
            unsafe {
                let (a, b): (*const f32, [*const f32; S]) = if by_rows {
                    (xp.add(l * p.x_stride), core::array::from_fn(|s| wp.add((short0 + s) * p.w_stride)))
                } else {
                    (wp.add(l * p.w_stride), core::array::from_fn(|s| xp.add((short0 + s) * p.x_stride)))
                };
                let mut acc = [_mm512_setzero_ps(); S];
                for c in 0..chunks {
                    let av = _mm512_loadu_ps(a.add(16 * c));
                    for (acc, b) in acc.iter_mut().zip(b) {
                        *acc = _mm512_fmadd_ps(av, _mm512_loadu_ps(b.add(16 * c)), *acc);
                    }
                }
                if tail > 0 {
                    let av = _mm512_maskz_loadu_ps(tail_mask, a.add(16 * chunks));
                    for (acc, b) in acc.iter_mut().zip(b) {
                        let bv = _mm512_maskz_loadu_ps(tail_mask, b.add(16 * chunks));
                        // Lanes past the tail keep their sums exactly (no + 0 that turns −0 into +0).
                        *acc = _mm512_mask3_fmadd_ps(av, bv, *acc, tail_mask);
                    }
                }
                for (s, acc) in acc.into_iter().enumerate() {
                    let (i, j) = if by_rows { (l, short0 + s) } else { (short0 + s, l) };
                    *out.add(i * p.n + j) = reduce16(acc);
                }
            }
        }
    }

    /// [`dot`]'s pairwise sum of 16 lanes: lanes l + (l + 8), then + 4, + 2, + 1.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[inline(always)]
    unsafe fn reduce16(v: core::arch::x86_64::__m512) -> f32 {
        use core::arch::x86_64::*;
        // SAFETY: avx512f is enabled in every caller (the casts and extracts are avx512f's).
        unsafe {
            let lo = _mm512_castps512_ps256(v);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            let s8 = _mm256_add_ps(lo, hi);
            let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
            let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            let s1 = _mm_add_ss(s2, _mm_shuffle_ps::<1>(s2, s2));
            _mm_cvtss_f32(s1)
        }
    }

    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dots_avx2(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, rows: Range<usize>, cols: Range<usize>) {
        unsafe { dots(p, x, w, out, rows, cols) }
    }

    /// `out[i, j] = x[i, ..] · w[.., j]` for the block, the right side's columns contiguous.
    #[inline(always)]
    unsafe fn dots(p: &Problem, x: &[f32], w: &[f32], out: *mut f32, rows: Range<usize>, cols: Range<usize>) {
        let k = p.k;
        for i in rows {
            let xi = &x[i * p.x_stride..i * p.x_stride + k];
            for j in cols.clone() {
                let c = j * p.w_stride;
                // SAFETY: (i, j) is inside the [m, n] output and in this block only.
                unsafe { *out.add(i * p.n + j) = dot(xi, &w[c..c + k]) };
            }
        }
    }

    /// A dot product of contiguous vectors: 16 lanes, lane l summing terms l, l + 16, … in
    /// order (one FMA each), then the lanes pairwise in a fixed order. Symmetric in `a`, `b`.
    #[inline(always)]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut lanes = [0f32; 16];
        let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
        let (ar, br) = (ac.remainder(), bc.remainder());
        for (a, b) in ac.zip(bc) {
            for l in 0..16 {
                lanes[l] = a[l].mul_add(b[l], lanes[l]);
            }
        }
        for l in 0..ar.len() {
            lanes[l] = ar[l].mul_add(br[l], lanes[l]);
        }
        // Pairwise: (0+8, 1+9, …), then halves again, down to one.
        let mut width = 8;
        while width > 0 {
            for l in 0..width {
                lanes[l] += lanes[l + width];
            }
            width /= 2;
        }
        lanes[0]
    }
}

// When adding new tests, keep them here only if they probe a flex
// dtype-storage path; otherwise add them to
// crates/burn-backend-tests/tests/tensor/float/ops/matmul.rs.
#[cfg(test)]
mod tests {
    use alloc::vec;
    use burn_backend::TensorData;
    use burn_backend::ops::FloatTensorOps;
    use burn_std::{bf16, f16};

    use crate::{Flex, FlexTensor};

    #[test]
    fn test_matmul_f64() {
        let lhs = FlexTensor::from_data(TensorData::new(vec![1.0f64, 2.0, 3.0, 4.0], [2, 2]));
        let rhs = FlexTensor::from_data(TensorData::new(vec![5.0f64, 6.0, 7.0, 8.0], [2, 2]));

        let result = Flex::float_matmul(lhs, rhs);
        let values: Vec<f64> = result.into_data().to_vec().unwrap();

        assert_eq!(values, vec![19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn test_matmul_f16() {
        let lhs_vals: Vec<f16> = [1.0f32, 2.0, 3.0, 4.0]
            .iter()
            .copied()
            .map(f16::from_f32)
            .collect();
        let rhs_vals: Vec<f16> = [5.0f32, 6.0, 7.0, 8.0]
            .iter()
            .copied()
            .map(f16::from_f32)
            .collect();

        let lhs = FlexTensor::from_data(TensorData::new(lhs_vals, [2, 2]));
        let rhs = FlexTensor::from_data(TensorData::new(rhs_vals, [2, 2]));

        let result = Flex::float_matmul(lhs, rhs);
        let values: Vec<f16> = result.into_data().to_vec().unwrap();

        let expected = [19.0f32, 22.0, 43.0, 50.0];
        for (a, e) in values.iter().zip(expected.iter()) {
            assert!((a.to_f32() - e).abs() < 0.1, "f16 matmul mismatch");
        }
    }

    #[test]
    fn test_matmul_bf16() {
        let lhs_vals: Vec<bf16> = [1.0f32, 2.0, 3.0, 4.0]
            .iter()
            .copied()
            .map(bf16::from_f32)
            .collect();
        let rhs_vals: Vec<bf16> = [5.0f32, 6.0, 7.0, 8.0]
            .iter()
            .copied()
            .map(bf16::from_f32)
            .collect();

        let lhs = FlexTensor::from_data(TensorData::new(lhs_vals, [2, 2]));
        let rhs = FlexTensor::from_data(TensorData::new(rhs_vals, [2, 2]));

        let result = Flex::float_matmul(lhs, rhs);
        let values: Vec<bf16> = result.into_data().to_vec().unwrap();

        let expected = [19.0f32, 22.0, 43.0, 50.0];
        for (a, e) in values.iter().zip(expected.iter()) {
            assert!((a.to_f32() - e).abs() < 0.5, "bf16 matmul mismatch");
        }
    }

    #[test]
    fn test_matmul_batched_transposed_f64() {
        // Non-contiguous (swap_dims) batched matmul on the F64 dtype path.
        let q_data = TensorData::new(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [2, 2, 2]);
        let k_data = TensorData::new(vec![1.0f64, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0], [2, 2, 2]);

        let q = FlexTensor::from_data(q_data.clone());
        let k = FlexTensor::from_data(k_data.clone());
        let k_t = k.transpose(1, 2);
        let result = Flex::float_matmul(q, k_t);

        let q2 = FlexTensor::from_data(q_data);
        let k2 = FlexTensor::from_data(k_data)
            .transpose(1, 2)
            .to_contiguous();
        let expected = Flex::float_matmul(q2, k2);

        let values: Vec<f64> = result.into_data().to_vec().unwrap();
        let expected: Vec<f64> = expected.into_data().to_vec().unwrap();
        assert_eq!(values, expected);
    }

    #[test]
    fn test_matmul_batched_transposed_f16() {
        // Non-contiguous (swap_dims) batched matmul on the F16 dtype path.
        let f = f16::from_f32;
        let q_data = TensorData::new(
            vec![
                f(1.0),
                f(2.0),
                f(3.0),
                f(4.0),
                f(5.0),
                f(6.0),
                f(7.0),
                f(8.0),
            ],
            [2, 2, 2],
        );
        let k_data = TensorData::new(
            vec![
                f(1.0),
                f(0.0),
                f(0.0),
                f(1.0),
                f(2.0),
                f(0.0),
                f(0.0),
                f(2.0),
            ],
            [2, 2, 2],
        );

        let q = FlexTensor::from_data(q_data.clone());
        let k = FlexTensor::from_data(k_data.clone());
        let k_t = k.transpose(1, 2);
        let result = Flex::float_matmul(q, k_t);

        let q2 = FlexTensor::from_data(q_data);
        let k2 = FlexTensor::from_data(k_data)
            .transpose(1, 2)
            .to_contiguous();
        let expected = Flex::float_matmul(q2, k2);

        let values: Vec<f16> = result.into_data().to_vec().unwrap();
        let expected: Vec<f16> = expected.into_data().to_vec().unwrap();
        assert_eq!(values, expected);
    }
}
