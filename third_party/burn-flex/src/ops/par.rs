//! arl patch (third_party/README.md, change 5): element-wise loops over all cores.
//!
//! Each helper splits a flat buffer into chunks of [`CHUNK`] elements (or groups of whole
//! rows) and runs the caller's loop on them on rayon's pool once the buffer holds at least
//! upstream's `ops::PARALLEL_THRESHOLD` (256 Ki) elements, its threshold for per-row loops;
//! below that (or without the `rayon` feature) it runs the same loop once over the whole
//! buffer on the calling thread. Every output element is computed by the same
//! expression from the same inputs either way, so results do not depend on the split.

use alloc::vec::Vec;
use core::mem::MaybeUninit;

/// Elements per task.
const CHUNK: usize = 32 * 1024;

#[cfg(feature = "rayon")]
fn parallel(len: usize) -> bool {
    len >= super::PARALLEL_THRESHOLD && rayon::current_num_threads() > 1
}

/// `f(chunk)` over `data`, in chunks.
pub(crate) fn for_each_mut<E, F>(data: &mut [E], f: F)
where
    E: Send,
    F: Fn(&mut [E]) + Sync + Send,
{
    #[cfg(feature = "rayon")]
    if parallel(data.len()) {
        use rayon::prelude::*;
        data.par_chunks_mut(CHUNK).for_each(f);
        return;
    }
    f(data)
}

/// Rows per task for a loop over `rows` rows of `row_len` elements each: about [`CHUNK`]
/// elements, at least one row.
pub(crate) fn rows_per_group(rows: usize, row_len: usize) -> usize {
    (CHUNK / row_len.max(1)).clamp(1, rows.max(1))
}

/// `f(g, group)` over `data` cut into groups of `group_len` elements (the last may be
/// shorter), `g` the group's index; whole rows stay together when `group_len` is a multiple
/// of the row length.
#[cfg(feature = "simd")]
pub(crate) fn for_each_rows_mut<E, F>(data: &mut [E], group_len: usize, f: F)
where
    E: Send,
    F: Fn(usize, &mut [E]) + Sync + Send,
{
    let group_len = group_len.max(1);
    #[cfg(feature = "rayon")]
    if parallel(data.len()) {
        use rayon::prelude::*;
        data.par_chunks_mut(group_len)
            .enumerate()
            .for_each(|(g, group)| f(g, group));
        return;
    }
    for (g, group) in data.chunks_mut(group_len).enumerate() {
        f(g, group);
    }
}

/// `f(a_chunk, b_chunk)` over `a` and the same positions of `b` (`b.len() >= a.len()`).
pub(crate) fn zip_mut<E, R, F>(a: &mut [E], b: &[R], f: F)
where
    E: Send,
    R: Sync,
    F: Fn(&mut [E], &[R]) + Sync + Send,
{
    let b = &b[..a.len()];
    #[cfg(feature = "rayon")]
    if parallel(a.len()) {
        use rayon::prelude::*;
        a.par_chunks_mut(CHUNK)
            .zip(b.par_chunks(CHUNK))
            .for_each(|(a, b)| f(a, b));
        return;
    }
    f(a, b)
}

/// A new vector of `len` elements: `fill(start, out)` writes every element of `out`, which
/// holds positions `start..start + out.len()`.
pub(crate) fn collect<E, F>(len: usize, fill: F) -> Vec<E>
where
    E: Send,
    F: Fn(usize, &mut [MaybeUninit<E>]) + Sync + Send,
{
    collect_in(len, CHUNK, fill)
}

/// [`collect`] with tasks of `group_len` elements (the last may be shorter): whole rows stay
/// in one task when `group_len` is a multiple of the row length.
pub(crate) fn collect_in<E, F>(len: usize, group_len: usize, fill: F) -> Vec<E>
where
    E: Send,
    F: Fn(usize, &mut [MaybeUninit<E>]) + Sync + Send,
{
    #[cfg(feature = "rayon")]
    let group_len = group_len.max(1);
    #[cfg(not(feature = "rayon"))]
    let _ = group_len;
    let mut out = Vec::with_capacity(len);
    {
        let spare = &mut out.spare_capacity_mut()[..len];
        #[cfg(feature = "rayon")]
        if parallel(len) {
            use rayon::prelude::*;
            spare
                .par_chunks_mut(group_len)
                .enumerate()
                .for_each(|(i, chunk)| fill(i * group_len, chunk));
        } else {
            fill(0, spare);
        }
        #[cfg(not(feature = "rayon"))]
        fill(0, spare);
    }
    // SAFETY: `fill`'s contract is to write every element of the slice it is given, and the
    // slices above cover `0..len` exactly once.
    unsafe { out.set_len(len) };
    out
}

/// `out[i] = op(a[i])` into a new vector.
pub(crate) fn map<E, R, Op>(a: &[E], op: Op) -> Vec<R>
where
    E: Copy + Sync,
    R: Send,
    Op: Fn(E) -> R + Sync + Send,
{
    collect(a.len(), |start, out| {
        let end = start + out.len();
        for (o, &x) in out.iter_mut().zip(&a[start..end]) {
            o.write(op(x));
        }
    })
}

/// `out[i] = op(a[i], b[i])` into a new vector (`b.len() == a.len()`).
pub(crate) fn map2<E, R, Op>(a: &[E], b: &[E], op: Op) -> Vec<R>
where
    E: Copy + Sync,
    R: Send,
    Op: Fn(E, E) -> R + Sync + Send,
{
    debug_assert_eq!(a.len(), b.len());
    collect(a.len(), |start, out| {
        let end = start + out.len();
        for ((o, &x), &y) in out.iter_mut().zip(&a[start..end]).zip(&b[start..end]) {
            o.write(op(x, y));
        }
    })
}

/// A copy of `a`.
#[cfg(feature = "simd")]
pub(crate) fn copy<E: Copy + Send + Sync>(a: &[E]) -> Vec<E> {
    map(a, |x| x)
}
