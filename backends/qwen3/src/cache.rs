//! The KV cache: a plain struct outside the module tree (llama-burn style), so saved weights
//! hold only parameters. One entry per layer, keys and values `[rows, kv_heads, capacity,
//! head_dim]` after rotary, allocated once for the capacity the caller reserves and written in
//! place (`slice_assign` on a uniquely owned buffer), so a decode step copies one position per
//! row, not the whole cache (concatenation made a generation's copying quadratic in its
//! length). Attention reads a view of the first `len` positions. Rows are left-padded to a
//! common end (the sampler masks each row's padding keys), so every row appends at `len`.

use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData};

/// One layer's keys and values.
pub struct LayerCache<B: Backend> {
    kv: Option<(Tensor<B, 4>, Tensor<B, 4>)>,
    len: usize,
    /// Positions to allocate when the first keys arrive.
    reserve: usize,
    /// Attention reads the whole buffer (every position up to the capacity; the caller masks
    /// those not written yet), not the first `len`: static shapes ([`KvCache::set_static`]).
    whole: bool,
}

impl<B: Backend> LayerCache<B> {
    /// Write this step's keys and values at the end; return views of everything cached so far.
    pub fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let [b, h, t, d] = k.dims();
        let end = self.len + t;
        let (kb, vb) = match self.kv.take() {
            Some((kb, vb)) if kb.dims()[2] >= end => (kb, vb),
            // Too small (or nothing yet): a larger buffer, at least doubled, with the old
            // positions copied over once.
            old => {
                let cap = end.max(self.reserve).max(old.as_ref().map_or(0, |(kb, _)| 2 * kb.dims()[2]));
                let fresh = |like: &Tensor<B, 4>| Tensor::<B, 4>::zeros([b, h, cap, d], (&like.device(), like.dtype()));
                let (mut kn, mut vn) = (fresh(&k), fresh(&v));
                if let Some((ko, vo)) = old {
                    kn = kn.slice_assign([0..b, 0..h, 0..self.len, 0..d], ko.slice([0..b, 0..h, 0..self.len, 0..d]));
                    vn = vn.slice_assign([0..b, 0..h, 0..self.len, 0..d], vo.slice([0..b, 0..h, 0..self.len, 0..d]));
                }
                (kn, vn)
            }
        };
        let kb = kb.slice_assign([0..b, 0..h, self.len..end, 0..d], k);
        let vb = vb.slice_assign([0..b, 0..h, self.len..end, 0..d], v);
        self.len = end;
        let upto = if self.whole { kb.dims()[2] } else { end };
        let views = (kb.clone().slice([0..b, 0..h, 0..upto, 0..d]), vb.clone().slice([0..b, 0..h, 0..upto, 0..d]));
        self.kv = Some((kb, vb));
        views
    }
}

pub struct KvCache<B: Backend> {
    pub layers: Vec<LayerCache<B>>,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache that allocates room for `capacity` positions on first use.
    pub fn new(num_layers: usize) -> Self {
        Self::with_capacity(num_layers, 0)
    }

    pub fn with_capacity(num_layers: usize, capacity: usize) -> Self {
        Self { layers: (0..num_layers).map(|_| LayerCache { kv: None, len: 0, reserve: capacity, whole: false }).collect() }
    }

    /// Static shapes: from now on attention reads every position up to the capacity, so each
    /// decode step's ops have the same shapes (kernels compiled and tuned once, a step
    /// capturable as a CUDA graph); the caller's mask hides the positions not written yet
    /// (zeros, so they add exact zeros to the attention output).
    pub fn set_static(&mut self, on: bool) {
        for layer in &mut self.layers {
            layer.whole = on;
        }
    }

    /// Positions the buffers hold (0 before the first keys arrive).
    pub fn capacity(&self) -> usize {
        self.layers.first().and_then(|l| l.kv.as_ref()).map_or(0, |(k, _)| k.dims()[2])
    }

    /// Cached positions (the same for every row; left padding keeps rows aligned).
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, |l| l.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep only the given batch rows (finished sequences leave the batch).
    pub fn retain_rows(&mut self, rows: Tensor<B, 1, Int>) {
        for layer in &mut self.layers {
            if let Some((k, v)) = layer.kv.take() {
                layer.kv = Some((k.select(0, rows.clone()), v.select(0, rows.clone())));
            }
        }
    }

    /// Row `row`'s keys and values at `positions` (each `< len`), per layer, as their own
    /// tensors (`[1, kv_heads, positions, head_dim]`, copied out of the shared buffer).
    pub fn row_positions(&self, row: usize, positions: impl Iterator<Item = usize>) -> Vec<(Tensor<B, 4>, Tensor<B, 4>)> {
        let positions: Vec<i64> = positions.map(|p| p as i64).collect();
        let n = positions.len();
        let len = self.len();
        self.layers
            .iter()
            .map(|layer| {
                let (k, v) = layer.kv.as_ref().expect("a filled cache");
                let index = Tensor::<B, 1, Int>::from_data(TensorData::new(positions.clone(), [n]), &k.device());
                let take = |t: &Tensor<B, 4>| {
                    let [_, h, _, d] = t.dims();
                    t.clone().slice([row..row + 1, 0..h, 0..len, 0..d]).select(2, index.clone())
                };
                (take(k), take(v))
            })
            .collect()
    }

    /// Row `row`'s keys and values at positions `from..len` (see [`KvCache::row_positions`]).
    pub fn row(&self, row: usize, from: usize) -> Vec<(Tensor<B, 4>, Tensor<B, 4>)> {
        self.row_positions(row, from..self.len())
    }

    /// Write `kv` (per layer `[1, kv_heads, n, head_dim]`) into row `row` at positions
    /// `at..at + n` (the buffer must exist and hold them; `len` is not changed).
    pub fn write_row(&mut self, row: usize, at: usize, kv: &[(Tensor<B, 4>, Tensor<B, 4>)]) {
        for (layer, (k, v)) in self.layers.iter_mut().zip(kv) {
            let [_, h, n, d] = k.dims();
            let (kb, vb) = layer.kv.take().expect("an allocated cache");
            layer.kv = Some((
                kb.slice_assign([row..row + 1, 0..h, at..at + n, 0..d], k.clone()),
                vb.slice_assign([row..row + 1, 0..h, at..at + n, 0..d], v.clone()),
            ));
        }
    }

    /// Allocate `rows` rows of `capacity` positions of `kv_heads × head_dim` keys and values
    /// (zeros) in `dtype` on `device`, the first `len` of them taken as written.
    #[allow(clippy::too_many_arguments)]
    pub fn allocate(
        &mut self,
        rows: usize,
        kv_heads: usize,
        capacity: usize,
        head_dim: usize,
        len: usize,
        device: &B::Device,
        dtype: DType,
    ) {
        for layer in &mut self.layers {
            let fresh = || Tensor::<B, 4>::zeros([rows, kv_heads, capacity, head_dim], (device, dtype));
            layer.kv = Some((fresh(), fresh()));
            layer.len = len;
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Shape, Slice};
    use burn_flex::FlexTensor;

    /// The cache is "written in place" only if burn-flex's `slice_assign` writes into a
    /// uniquely owned buffer without copying it. burn-flex 0.21.0 copied the whole buffer on
    /// every call (a clone of its Arc was alive; `third_party/README.md`), which made each turn
    /// of a tools-gym rollout copy the whole decode cache once per row per layer.
    #[test]
    fn slice_assign_writes_into_the_same_buffer() {
        let cache = FlexTensor::zeros(Shape::new([4, 2, 16, 8]), DType::F32);
        let before = cache.storage::<f32>().as_ptr();
        let row = FlexTensor::zeros(Shape::new([1, 2, 5, 8]), DType::F32);
        let slices = [Slice::new(1, Some(2), 1), Slice::new(0, Some(2), 1), Slice::new(3, Some(8), 1), Slice::new(0, Some(8), 1)];
        let after = burn_flex::ops::slice::slice_assign(cache, &slices, row);
        assert_eq!(after.storage::<f32>().as_ptr(), before, "slice_assign copied the destination buffer");
    }
}
