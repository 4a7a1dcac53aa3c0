//! The KV cache: a plain struct outside the module tree (llama-burn style), so saved weights
//! hold only parameters. One entry per layer, keys and values `[B, kv_heads, L, head_dim]`
//! after rotary; a decode step appends one position.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

pub struct LayerCache<B: Backend> {
    kv: Option<(Tensor<B, 4>, Tensor<B, 4>)>,
}

impl<B: Backend> LayerCache<B> {
    /// Append this step's keys and values; return everything cached so far.
    pub fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let (k, v) = match self.kv.take() {
            Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
            None => (k, v),
        };
        self.kv = Some((k.clone(), v.clone()));
        (k, v)
    }
}

pub struct KvCache<B: Backend> {
    pub layers: Vec<LayerCache<B>>,
}

impl<B: Backend> KvCache<B> {
    pub fn new(num_layers: usize) -> Self {
        Self { layers: (0..num_layers).map(|_| LayerCache { kv: None }).collect() }
    }

    /// Cached positions (the same for every row; left padding keeps rows aligned).
    pub fn len(&self) -> usize {
        self.layers.first().and_then(|l| l.kv.as_ref()).map_or(0, |(k, _)| k.dims()[2])
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
}
