//! The blocks, bottom-up: linear (HF `[out, in]` stored here as `[in, out]`), RMSNorm with the
//! fp32 computation HF does, rotary (split halves), attention with GQA and an optional KV
//! cache, the SwiGLU MLP, and the decoder layer. Op order follows `modeling_qwen3.py`
//! (SPEC.md §1.2).

use burn::module::{Module, Param};
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor, TensorData};

use crate::ModelError;
use crate::cache::LayerCache;
use crate::config::ModelConfig;
use crate::lora::LoraAdapter;
use crate::weights::WeightSource;

/// `x` as f32 (no op when it already is).
pub fn to_f32<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    to_dtype(x, DType::F32)
}

/// `x` in `dtype` (no op when it already is).
pub fn to_dtype<B: Backend, const D: usize>(x: Tensor<B, D>, dtype: DType) -> Tensor<B, D> {
    if x.dtype() == dtype { x } else { x.cast(dtype) }
}

/// `a · b`, or zeros when a dimension is 0: never an empty matmul (burn-cuda's matmul
/// autotune divides by zero on one, tracel-ai/burn#5117, fixed after 0.21). Batch dimensions
/// broadcast as in `matmul`.
pub fn matmul<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    let (da, db) = (a.dims(), b.dims());
    if da.contains(&0) || db.contains(&0) {
        let mut out = da;
        out[D - 1] = db[D - 1];
        for i in 0..D - 2 {
            out[i] = da[i].max(db[i]);
        }
        return Tensor::zeros(out, (&a.device(), a.dtype()));
    }
    a.matmul(b)
}

/// Whether `device`'s backend has its own one-kernel sigmoid and a cheap `cat` (burn-flex,
/// libtorch, ndarray), so burn's op compositions suit it as they are; burn-cuda (burn-cubecl)
/// decomposes sigmoid into eight ops and `cat` into one copy per input.
fn composes_well<B: Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    ["flex", "libtorch", "ndarray"].iter().any(|n| name.contains(n))
}

/// `silu(x) = x · sigmoid(x)`. Where the backend's sigmoid is one kernel (burn-flex,
/// libtorch) burn's `silu`: sigmoid and a product. Elsewhere (burn-cuda: burn 0.21's default
/// sigmoid is eight ops — cast, neg, exp, add, log, neg, exp, cast) `x / (1 + e^−x)` in f32,
/// torch's own arithmetic: four ops, six with the casts of bf16/f16.
pub fn silu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    if composes_well::<B>(&x.device()) {
        return burn::tensor::activation::silu(x);
    }
    let dtype = x.dtype();
    let x = to_f32(x);
    to_dtype(x.clone() / x.neg().exp().add_scalar(1.0), dtype)
}

pub(crate) fn param<B: Backend, const D: usize>(data: Vec<f32>, shape: [usize; D], device: &B::Device) -> Param<Tensor<B, D>> {
    Param::from_tensor(Tensor::from_data(TensorData::new(data, shape), device))
}

/// `y = x W + b (+ s · B A x, with a LoRA adapter)` on `[tokens, in]` rows; `weight` is
/// `[in, out]`.
#[derive(Module, Debug)]
pub struct Linear<B: Backend> {
    pub weight: Param<Tensor<B, 2>>,
    pub bias: Option<Param<Tensor<B, 1>>>,
    /// A LoRA adapter, applied unmerged ([`crate::lora`]).
    pub lora: Option<LoraAdapter<B>>,
}

impl<B: Backend> Linear<B> {
    /// Load HF `{prefix}.weight` (`[out, in]`, transposed here) and, if `bias`, `{prefix}.bias`.
    pub fn load(
        src: &mut dyn WeightSource,
        prefix: &str,
        d_in: usize,
        d_out: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let w = src.get(&format!("{prefix}.weight"), &[d_out, d_in])?;
        let weight = param(transpose(&w, d_out, d_in), [d_in, d_out], device);
        let bias = if bias { Some(param(src.get(&format!("{prefix}.bias"), &[d_out])?, [d_out], device)) } else { None };
        Ok(Self { weight, bias, lora: None })
    }

    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let adapter = self.lora.as_ref().map(|l| l.forward(x.clone()));
        let y = matmul(x, self.weight.val());
        let y = match &self.bias {
            Some(b) => y + b.val().unsqueeze_dim(0),
            None => y,
        };
        match adapter {
            Some(a) => y + a,
            None => y,
        }
    }
}

/// Whether `device` computes in host memory (burn-flex, ndarray, libtorch on the CPU): there
/// a launch costs nothing worth saving (`arl_optim`'s flat AdamW decides alike).
fn computes_on_host<B: Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    ["flex", "ndarray", "libtorch<cpu>"].iter().any(|n| name.contains(n))
}

/// HF linear layers that read the same input — a layer's `q_proj`, `k_proj`, `v_proj`, or its
/// `gate_proj`, `up_proj` — as one `[in, Σ out]` weight, concatenated at load (vLLM's
/// `QKVParallelLinear` and `MergedColumnParallelLinear`). Each part keeps its HF name, its
/// bias and its own LoRA adapter (PEFT adapts each module alone), and is saved in HF's layout.
/// Where each op is a launch, one GEMM for all the parts, then a column slice per part; on a
/// device computing in host memory one GEMM per part on a column view of the weight: the
/// products of separate weights, bit for bit, at no copy.
#[derive(Module, Debug)]
pub struct MergedLinear<B: Backend> {
    /// `[in, Σ out]`: the parts' `[in, out]` weights side by side, in order.
    pub weight: Param<Tensor<B, 2>>,
    /// `[Σ out]`, the parts' biases side by side.
    pub bias: Option<Param<Tensor<B, 1>>>,
    /// One per part.
    pub loras: Vec<Option<LoraAdapter<B>>>,
    /// Each part's output width, in order.
    #[module(skip)]
    pub outs: Vec<usize>,
}

impl<B: Backend> MergedLinear<B> {
    /// Load HF `{prefix}.weight` (`[out, in]`) (and `{prefix}.bias`) of each `(prefix, out)`
    /// into one `[in, Σ out]` weight, built in host memory part by part: no second copy on the
    /// device.
    pub fn load(
        src: &mut dyn WeightSource,
        parts: &[(String, usize)],
        d_in: usize,
        bias: bool,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let total: usize = parts.iter().map(|(_, o)| o).sum();
        let (mut w, mut b) = (vec![0.0; d_in * total], Vec::with_capacity(if bias { total } else { 0 }));
        let mut col = 0;
        for (prefix, d_out) in parts {
            let part = src.get(&format!("{prefix}.weight"), &[*d_out, d_in])?;
            for (r, row) in part.chunks_exact(d_in).enumerate() {
                for (c, &x) in row.iter().enumerate() {
                    w[c * total + col + r] = x;
                }
            }
            if bias {
                b.extend(src.get(&format!("{prefix}.bias"), &[*d_out])?);
            }
            col += d_out;
        }
        let bias = bias.then(|| param(b, [total], device));
        let outs: Vec<usize> = parts.iter().map(|(_, o)| *o).collect();
        Ok(Self { weight: param(w, [d_in, total], device), bias, loras: vec![None; outs.len()], outs })
    }

    /// Each part's columns of the weight.
    pub fn ranges(&self) -> Vec<core::ops::Range<usize>> {
        let mut start = 0;
        self.outs
            .iter()
            .map(|&o| {
                start += o;
                start - o..start
            })
            .collect()
    }

    /// Part `i` as one HF linear layer: its `[in, out]` weight and bias (views of the merged
    /// ones) and its adapter.
    pub fn part(&self, i: usize) -> LinearRef<'_, B> {
        let r = self.ranges()[i].clone();
        let d_in = self.weight.dims()[0];
        LinearRef {
            weight: self.weight.val().slice([0..d_in, r.clone()]),
            bias: self.bias.as_ref().map(|b| b.val().slice([r.clone()])),
            lora: &self.loras[i],
            merged: &self.weight,
            merged_bias: self.bias.as_ref(),
            columns: r,
        }
    }

    /// The parts' outputs, `[tokens, out]` each, on `[tokens, in]` rows.
    pub fn forward(&self, x: Tensor<B, 2>) -> Vec<Tensor<B, 2>> {
        let n = x.dims()[0];
        let w = self.weight.val();
        let d_in = w.dims()[0];
        let with_bias = |y: Tensor<B, 2>, b: Option<Tensor<B, 1>>| match b {
            Some(b) => y + b.unsqueeze_dim(0),
            None => y,
        };
        let ranges = self.ranges();
        let bias = |r: &core::ops::Range<usize>| self.bias.as_ref().map(|b| b.val().slice([r.clone()]));
        let ys: Vec<Tensor<B, 2>> = if computes_on_host::<B>(&x.device()) {
            ranges.iter().map(|r| with_bias(matmul(x.clone(), w.clone().slice([0..d_in, r.clone()])), bias(r))).collect()
        } else {
            let y = with_bias(matmul(x.clone(), w), self.bias.as_ref().map(|b| b.val()));
            ranges.iter().map(|r| y.clone().slice([0..n, r.clone()])).collect()
        };
        ys.into_iter()
            .zip(&self.loras)
            .map(|(y, lora)| match lora {
                Some(l) => y + l.forward(x.clone()),
                None => y,
            })
            .collect()
    }

    /// Where each op is a launch and no part has an adapter, the whole `[tokens, Σ out]`
    /// product (one GEMM and the bias), for a caller that reads the parts as columns itself.
    pub fn forward_whole(&self, x: Tensor<B, 2>) -> Option<Tensor<B, 2>> {
        if computes_on_host::<B>(&x.device()) || self.loras.iter().any(Option::is_some) {
            return None;
        }
        let y = matmul(x, self.weight.val());
        Some(match &self.bias {
            Some(b) => y + b.val().unsqueeze_dim(0),
            None => y,
        })
    }

    /// Fold each part's adapter into its columns (W + s·A B in f32, then W's dtype) and drop
    /// the adapters; the merged weight is a new leaf that keeps its trainability.
    pub fn merge_lora(&mut self) {
        if self.loras.iter().all(Option::is_none) {
            return;
        }
        let w = self.weight.val();
        let (dtype, grad, d_in) = (w.dtype(), w.is_require_grad(), w.dims()[0]);
        let mut merged = to_f32(w);
        for (r, lora) in self.ranges().into_iter().zip(&mut self.loras) {
            if let Some(lora) = lora.take() {
                let part = merged.clone().slice([0..d_in, r.clone()]) + lora.delta();
                merged = merged.slice_assign([0..d_in, r], part);
            }
        }
        let merged = to_dtype(merged, dtype).detach();
        self.weight = Param::from_tensor(if grad { merged.require_grad() } else { merged.set_require_grad(false) });
    }
}

/// One HF linear layer of the model, wherever it is stored (a [`Linear`], or a part of a
/// [`MergedLinear`]).
pub struct LinearRef<'a, B: Backend> {
    /// `[in, out]`.
    pub weight: Tensor<B, 2>,
    pub bias: Option<Tensor<B, 1>>,
    pub lora: &'a Option<LoraAdapter<B>>,
    /// The parameters that hold the weight and the bias, and the layer's columns in them (its
    /// gradients are those columns of theirs).
    pub merged: &'a Param<Tensor<B, 2>>,
    pub merged_bias: Option<&'a Param<Tensor<B, 1>>>,
    pub columns: core::ops::Range<usize>,
}

/// [`LinearRef`] for attaching and removing adapters: the weight's `[in, out]` and the slot.
pub struct LinearMut<'a, B: Backend> {
    pub dims: [usize; 2],
    pub lora: &'a mut Option<LoraAdapter<B>>,
}

impl<B: Backend> Linear<B> {
    pub fn as_ref(&self) -> LinearRef<'_, B> {
        let d_out = self.weight.dims()[1];
        LinearRef {
            weight: self.weight.val(),
            bias: self.bias.as_ref().map(|b| b.val()),
            lora: &self.lora,
            merged: &self.weight,
            merged_bias: self.bias.as_ref(),
            columns: 0..d_out,
        }
    }

    pub fn as_mut(&mut self) -> LinearMut<'_, B> {
        LinearMut { dims: self.weight.dims(), lora: &mut self.lora }
    }

    /// Fold the adapter into the weight (W + s·A B in f32, then W's dtype) and drop it; the
    /// merged weight is a new leaf that keeps its trainability.
    pub fn merge_lora(&mut self) {
        if let Some(lora) = self.lora.take() {
            let w = self.weight.val();
            let (dtype, grad) = (w.dtype(), w.is_require_grad());
            let merged = to_dtype(to_f32(w) + lora.delta(), dtype).detach();
            self.weight = Param::from_tensor(if grad { merged.require_grad() } else { merged.set_require_grad(false) });
        }
    }
}

impl<B: Backend> MergedLinear<B> {
    pub fn parts_mut(&mut self) -> Vec<LinearMut<'_, B>> {
        let d_in = self.weight.dims()[0];
        self.outs.iter().zip(&mut self.loras).map(|(&o, lora)| LinearMut { dims: [d_in, o], lora }).collect()
    }
}

/// Row-major `[rows, cols]` → `[cols, rows]`.
pub(crate) fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = w[r * cols + c];
        }
    }
    out
}

/// RMSNorm over the last axis: `w * (x * rsqrt(mean(x²) + eps))`, the normalization in f32
/// whatever the model's dtype (HF upcasts, then casts back before the weight).
#[derive(Module, Debug)]
pub struct RmsNorm<B: Backend> {
    pub weight: Param<Tensor<B, 1>>,
    pub eps: f64,
}

impl<B: Backend> RmsNorm<B> {
    pub fn load(src: &mut dyn WeightSource, name: &str, dim: usize, eps: f64, device: &B::Device) -> Result<Self, ModelError> {
        Ok(Self { weight: param(src.get(name, &[dim])?, [dim], device), eps })
    }

    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        let dtype = x.dtype();
        let x = to_f32(x);
        let var = x.clone().square().mean_dim(D - 1).add_scalar(self.eps);
        // rsqrt: one op (`powf`) where each op is a launch; burn-flex and libtorch keep
        // sqrt then 1/x, bit for bit what they computed before.
        let inv = if composes_well::<B>(&var.device()) { var.sqrt().recip() } else { var.powf_scalar(-0.5) };
        let normed = x * inv;
        let mut shape = [1usize; D];
        shape[D - 1] = self.weight.dims()[0];
        // HF: `weight * hidden.to(input_dtype)`.
        to_dtype(normed, dtype) * self.weight.val().reshape(shape)
    }
}

/// Rotary tables for `[B·T, heads·head_dim]` projections (NeoX split-halves layout:
/// `emb = cat(freqs, freqs)`), repeated over the heads so that applying them is two
/// element-wise products of equal, contiguous shapes (burn-flex's SIMD in-place path; a
/// `[B, 1, T, head_dim]` table broadcast over `[B, heads, T, head_dim]` took its scalar
/// strided fallback). `sin` holds `−sin` in each head's first half, so `rotate_half(x) · sin`
/// is `cat(x2, x1) · sin` without a negation. The query tables carry the attention scale
/// `head_dim^−½` (rotary is linear, so `rope(q)·s = rope_s(q)`; for a power-of-two scale,
/// head_dim 64, the result is bit-identical to scaling the scores).
pub struct Rope<B: Backend> {
    pub q: RopeTables<B>,
    pub k: RopeTables<B>,
    /// The query tables then the key tables side by side, for one rotary over the query and
    /// key heads of a merged projection; only where each op is a launch (built once per
    /// forward pass, shared by every layer).
    pub qk: Option<RopeTables<B>>,
}

/// `cos` and signed `sin`, `[B·T, heads·head_dim]`.
pub struct RopeTables<B: Backend> {
    pub cos: Tensor<B, 2>,
    pub sin: Tensor<B, 2>,
    pub heads: usize,
}

impl<B: Backend> Rope<B> {
    /// `positions` is `[B][T]`, every row the same length.
    pub fn new(positions: &[Vec<usize>], c: &ModelConfig, device: &B::Device) -> Self {
        let (b, t) = (positions.len(), positions.first().map_or(0, Vec::len));
        let d = c.head_dim;
        let half = d / 2;
        // HF: inv_freq = 1 / theta^(arange(0, d, 2) / d), in float32.
        let inv_freq: Vec<f32> = (0..half).map(|i| (1.0 / c.rope_theta.powf((2 * i) as f64 / d as f64)) as f32).collect();
        let pos: Vec<f32> = positions.iter().flatten().map(|&p| p as f32).collect();
        let pos = Tensor::<B, 2>::from_data(TensorData::new(pos, [b * t, 1]), device);
        let inv = Tensor::<B, 2>::from_data(TensorData::new(inv_freq, [1, half]), device);
        let freqs = pos * inv;
        let (cos, sin) = (freqs.clone().cos(), freqs.sin());
        let cos = Tensor::cat(vec![cos.clone(), cos], 1);
        let sin = Tensor::cat(vec![sin.clone().neg(), sin], 1);
        let tables = |heads: usize, scale: Option<f32>| {
            let (cos, sin) = match scale {
                Some(s) => (cos.clone().mul_scalar(s), sin.clone().mul_scalar(s)),
                None => (cos.clone(), sin.clone()),
            };
            RopeTables { cos: cos.repeat_dim(1, heads), sin: sin.repeat_dim(1, heads), heads }
        };
        let scale = (d as f64).powf(-0.5) as f32;
        let (q, k) = (tables(c.num_attention_heads, Some(scale)), tables(c.num_key_value_heads, None));
        let qk = (!composes_well::<B>(device)).then(|| RopeTables {
            cos: Tensor::cat(vec![q.cos.clone(), k.cos.clone()], 1),
            sin: Tensor::cat(vec![q.sin.clone(), k.sin.clone()], 1),
            heads: q.heads + k.heads,
        });
        Self { q, k, qk }
    }

    /// The tables in the model's float type (HF computes them in f32, then casts to x's).
    pub fn in_dtype(self, dtype: DType) -> Self {
        let cast = |t: RopeTables<B>| RopeTables { cos: to_dtype(t.cos, dtype), sin: to_dtype(t.sin, dtype), heads: t.heads };
        Self { q: cast(self.q), k: cast(self.k), qk: self.qk.map(cast) }
    }
}

impl<B: Backend> RopeTables<B> {
    /// `x · cos + rotate_half(x) · sin` on `[B·T, heads·head_dim]`.
    pub fn apply(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [n, w] = x.dims();
        let half = w / self.heads / 2;
        // `cat(x2, x1)` per head. On burn-cuda one flip of the halves axis (one kernel; the cat
        // of two slices was three: an allocation and a copy per input); on burn-flex, whose flip
        // is a negative stride that the reshape then copies element by element, the cat (two
        // contiguous copies: the flip made a prefill 10 % slower here).
        let halves = x.clone().reshape([n, self.heads, 2, half]);
        let swapped = if composes_well::<B>(&x.device()) {
            let x1 = halves.clone().slice([0..n, 0..self.heads, 0..1, 0..half]);
            let x2 = halves.slice([0..n, 0..self.heads, 1..2, 0..half]);
            Tensor::cat(vec![x2, x1], 2).reshape([n, w])
        } else {
            halves.flip([2]).reshape([n, w])
        };
        x * self.cos.clone() + swapped * self.sin.clone()
    }
}

/// Query positions per chunk of attention ([`AttentionMask`]): with `T` = 512 (an update on
/// the SmolLM2 shape) 4 chunks, whose score products and softmax cover 5/8 of the full
/// `T × L` square.
pub const QUERY_CHUNK: usize = 128;

/// The additive attention mask of one forward pass, cut into chunks of [`QUERY_CHUNK`] query
/// positions, built once and shared by every layer. Every mask here is causal — query `i` (at
/// key index `past + i`) sees no key after its own, whatever else it hides (padding, another
/// row's prefix) — so a chunk of queries `t0..t1` needs only the keys `0..past + t1`: its
/// score products, softmax and their gradients skip the keys no query of the chunk sees,
/// about half of the square on a long sequence. Each chunk's bias is `[B, kv_heads,
/// (t1 − t0)·rep, past + t1]` in the scores' own layout (rows ordered by position, then by
/// the query head `kv·rep + r` of the key/value head `kv`), so the scores add it in place as
/// one contiguous sum.
pub struct AttentionMask<B: Backend> {
    chunks: Vec<(core::ops::Range<usize>, Tensor<B, 4>)>,
}

impl<B: Backend> AttentionMask<B> {
    /// `bias` is `[B or 1, T, L]` (0 or −∞) with `L = past + T` keys, causal as above; `None`
    /// for plain causal attention. A wider bias (`L > past + T`: a static-shape cache, whose
    /// later keys it masks) is taken whole by every chunk.
    pub fn new(bias: Option<Tensor<B, 3>>, [batch, past, t]: [usize; 3], c: &ModelConfig, dtype: DType, device: &B::Device) -> Self {
        #[cfg(debug_assertions)]
        if let Some(bias) = &bias {
            assert_causal(bias, past);
        }
        let bias = bias.unwrap_or_else(|| causal_bias::<B>(t, past + t, device));
        let [bb, bt, l] = bias.dims();
        assert!(bt == t && l >= past + t, "an attention bias is [B or 1, T, past + T] (or wider), got {:?}", [bb, bt, l]);
        let whole = l > past + t;
        let (nh, nkv) = (c.num_attention_heads, c.num_key_value_heads);
        let rep = nh / nkv;
        let bias = to_dtype(bias, dtype);
        let chunks = (0..t.max(1))
            .step_by(QUERY_CHUNK)
            .map(|t0| {
                let t1 = (t0 + QUERY_CHUNK).min(t);
                let (rows, keys) = (t1 - t0, if whole { l } else { past + t1 });
                let part = if (t0, keys) == (0, l) { bias.clone() } else { bias.clone().slice([0..bb, t0..t1, 0..keys]) };
                let per_head = part.reshape([bb, 1, rows, 1, keys]).repeat_dim(3, rep).repeat_dim(1, nkv);
                let full = if bb == batch { per_head } else { per_head.repeat_dim(0, batch) };
                (t0..t1, full.reshape([batch, nkv, rows * rep, keys]))
            })
            .collect();
        Self { chunks }
    }
}

/// Panics unless every key after a query's own index is masked (−∞): the chunks of
/// [`AttentionMask`] leave those keys out.
#[cfg(debug_assertions)]
fn assert_causal<B: Backend>(bias: &Tensor<B, 3>, past: usize) {
    let [bb, t, l] = bias.dims();
    let values = to_f32(bias.clone()).into_data().convert::<f32>().to_vec::<f32>().expect("f32 bias");
    for b in 0..bb {
        for i in 0..t {
            let row = &values[(b * t + i) * l..(b * t + i + 1) * l];
            assert!(
                row[past + i + 1..].iter().all(|&x| x == f32::NEG_INFINITY),
                "attention bias row {i} of batch {b} lets a query see a later key: masks must be causal"
            );
        }
    }
}

#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    /// HF's `q_proj`, `k_proj`, `v_proj`, merged.
    pub qkv_proj: MergedLinear<B>,
    pub o_proj: Linear<B>,
    pub q_norm: Option<RmsNorm<B>>,
    pub k_norm: Option<RmsNorm<B>>,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

impl<B: Backend> Attention<B> {
    pub fn load(src: &mut dyn WeightSource, p: &str, c: &ModelConfig, device: &B::Device) -> Result<Self, ModelError> {
        let (h, hd) = (c.hidden_size, c.head_dim);
        let (q, kv) = (c.num_attention_heads * hd, c.num_key_value_heads * hd);
        let norm = |src: &mut dyn WeightSource, n: &str| -> Result<Option<RmsNorm<B>>, ModelError> {
            if c.qk_norm { RmsNorm::load(src, &format!("{p}.{n}.weight"), hd, c.rms_norm_eps, device).map(Some) } else { Ok(None) }
        };
        Ok(Self {
            qkv_proj: MergedLinear::load(
                src,
                &[(format!("{p}.q_proj"), q), (format!("{p}.k_proj"), kv), (format!("{p}.v_proj"), kv)],
                h,
                c.qkv_bias,
                device,
            )?,
            o_proj: Linear::load(src, &format!("{p}.o_proj"), q, h, c.o_bias, device)?,
            q_norm: norm(src, "q_norm")?,
            k_norm: norm(src, "k_norm")?,
            n_heads: c.num_attention_heads,
            n_kv_heads: c.num_key_value_heads,
            head_dim: hd,
        })
    }

    /// `x` is `[B·T, hidden]` (rows of batch `b` contiguous); `mask` covers the `L = past + T`
    /// keys.
    pub fn forward(
        &self,
        x: Tensor<B, 2>,
        batch: usize,
        rope: &Rope<B>,
        mask: &AttentionMask<B>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 2> {
        let t = x.dims()[0] / batch;
        let (nh, nkv, hd) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let rep = nh / nkv;
        // Per-head norm (Qwen3), rotary on the contiguous projection, then `[B, nkv, T, g·hd]`:
        // the `g` heads that share a key/value head side by side (g = 1 for keys and values).
        let heads = |y: Tensor<B, 2>, n: usize, g: usize, norm: &Option<RmsNorm<B>>, rope: Option<&RopeTables<B>>| {
            let y = match norm {
                Some(norm) => norm.forward(y.reshape([batch * t, n, hd])).reshape([batch * t, n * hd]),
                None => y,
            };
            let y = match rope {
                Some(rope) => rope.apply(y),
                None => y,
            };
            y.reshape([batch, t, n / g, g * hd]).swap_dims(1, 2)
        };
        // The query tables carry the `hd^−½` scale.
        // GQA without copying K/V: query heads h = kv·rep + r share kv head `kv` (HF's
        // repeat_kv is a repeat_interleave), so the queries are `[B, nkv, T·rep, hd]`, rows
        // by position, then by r.
        let whole = rope.qk.as_ref().and_then(|tables| Some((tables, self.qkv_proj.forward_whole(x.clone())?)));
        let (q, k, v) = match whole {
            // Off the CPU without adapters: the q and k heads side by side as the merged
            // projection left them, normed in one pass and rotated in one pass.
            Some((tables, y)) => {
                let n = y.dims()[0];
                let (wq, wk) = (nh * hd, nkv * hd);
                let qk = y.clone().slice([0..n, 0..wq + wk]);
                let qk = match (&self.q_norm, &self.k_norm) {
                    (Some(qn), Some(kn)) => qk_norm(qn, kn, qk.reshape([n, nh + nkv, hd]), nh).reshape([n, wq + wk]),
                    _ => qk,
                };
                let qk = tables.apply(qk);
                let q = qk.clone().slice([0..n, 0..wq]).reshape([batch, t, nkv, rep * hd]).swap_dims(1, 2);
                let k = qk.slice([0..n, wq..wq + wk]).reshape([batch, t, nkv, hd]).swap_dims(1, 2);
                let v = y.slice([0..n, wq + wk..wq + 2 * wk]).reshape([batch, t, nkv, hd]).swap_dims(1, 2);
                (q.reshape([batch, nkv, t * rep, hd]), k, v)
            }
            None => {
                let [q, k, v]: [Tensor<B, 2>; 3] = self.qkv_proj.forward(x).try_into().expect("q, k, v");
                let q = heads(q, nh, rep, &self.q_norm, Some(&rope.q)).reshape([batch, nkv, t * rep, hd]);
                (q, heads(k, nkv, 1, &self.k_norm, Some(&rope.k)), heads(v, nkv, 1, &None, None))
            }
        };
        let (k, v) = match cache {
            Some(cache) => cache.append(k, v),
            None => (k, v),
        };
        let dtype = q.dtype();
        let l = k.dims()[2];
        let one = mask.chunks.len() == 1;
        let mut outs: Vec<Tensor<B, 4>> = mask
            .chunks
            .iter()
            .map(|(ts, bias)| {
                // Query rows of positions ts, keys 0..past + ts.end.
                let keys = bias.dims()[3];
                let q = if one { q.clone() } else { q.clone().slice([0..batch, 0..nkv, ts.start * rep..ts.end * rep, 0..hd]) };
                let (k, v) = if keys == l {
                    (k.clone(), v.clone())
                } else {
                    (k.clone().slice([0..batch, 0..nkv, 0..keys, 0..hd]), v.clone().slice([0..batch, 0..nkv, 0..keys, 0..hd]))
                };
                let scores = matmul(q, k.swap_dims(2, 3)) + bias.clone();
                // HF eager: softmax in f32, then back to the query's dtype.
                let probs = to_dtype(softmax(to_f32(scores), 3), dtype);
                matmul(probs, v)
            })
            .collect();
        let out = if one { outs.remove(0) } else { Tensor::cat(outs, 2) };
        let out = out.reshape([batch, nkv, t, rep * hd]).swap_dims(1, 2).reshape([batch * t, nh * hd]);
        self.o_proj.forward(out)
    }
}

/// Qwen3's q and k norms in one pass over `[tokens, nh + nkv, hd]` (the query heads, then the
/// key heads): one set of statistics for every head, then q_norm's weight on the first `nh`
/// heads and k_norm's on the rest — per head what [`RmsNorm::forward`] computes where each op
/// is a launch.
fn qk_norm<B: Backend>(q: &RmsNorm<B>, k: &RmsNorm<B>, x: Tensor<B, 3>, nh: usize) -> Tensor<B, 3> {
    debug_assert_eq!(q.eps, k.eps);
    let [_, heads, hd] = x.dims();
    let dtype = x.dtype();
    let x = to_f32(x);
    let inv = x.clone().square().mean_dim(2).add_scalar(q.eps).powf_scalar(-0.5);
    let w =
        Tensor::cat(vec![q.weight.val().reshape([1, hd]).expand([nh, hd]), k.weight.val().reshape([1, hd]).expand([heads - nh, hd])], 0);
    to_dtype(x * inv, dtype) * w.unsqueeze_dim(0)
}

/// `[1, T, L]`: query `i` (at key index `L − T + i`) sees keys `≤` its own index.
pub fn causal_bias<B: Backend>(t: usize, l: usize, device: &B::Device) -> Tensor<B, 3> {
    let past = l - t;
    let data: Vec<f32> = (0..t).flat_map(|i| (0..l).map(move |j| if j <= past + i { 0.0 } else { f32::NEG_INFINITY })).collect();
    Tensor::from_data(TensorData::new(data, [1, t, l]), device)
}

#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// HF's `gate_proj`, `up_proj`, merged.
    pub gate_up_proj: MergedLinear<B>,
    pub down_proj: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    pub fn load(src: &mut dyn WeightSource, p: &str, c: &ModelConfig, device: &B::Device) -> Result<Self, ModelError> {
        let (h, i, b) = (c.hidden_size, c.intermediate_size, c.mlp_bias);
        Ok(Self {
            gate_up_proj: MergedLinear::load(src, &[(format!("{p}.gate_proj"), i), (format!("{p}.up_proj"), i)], h, b, device)?,
            down_proj: Linear::load(src, &format!("{p}.down_proj"), i, h, b, device)?,
        })
    }

    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [gate, up]: [Tensor<B, 2>; 2] = self.gate_up_proj.forward(x).try_into().expect("gate, up");
        self.down_proj.forward(silu(gate) * up)
    }
}

#[derive(Module, Debug)]
pub struct DecoderLayer<B: Backend> {
    pub input_layernorm: RmsNorm<B>,
    pub self_attn: Attention<B>,
    pub post_attention_layernorm: RmsNorm<B>,
    pub mlp: Mlp<B>,
}

impl<B: Backend> DecoderLayer<B> {
    pub fn load(src: &mut dyn WeightSource, i: usize, c: &ModelConfig, device: &B::Device) -> Result<Self, ModelError> {
        let p = format!("model.layers.{i}");
        let (h, eps) = (c.hidden_size, c.rms_norm_eps);
        Ok(Self {
            input_layernorm: RmsNorm::load(src, &format!("{p}.input_layernorm.weight"), h, eps, device)?,
            self_attn: Attention::load(src, &format!("{p}.self_attn"), c, device)?,
            post_attention_layernorm: RmsNorm::load(src, &format!("{p}.post_attention_layernorm.weight"), h, eps, device)?,
            mlp: Mlp::load(src, &format!("{p}.mlp"), c, device)?,
        })
    }

    pub fn forward(
        &self,
        h: Tensor<B, 2>,
        batch: usize,
        rope: &Rope<B>,
        mask: &AttentionMask<B>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 2> {
        let h = h.clone() + self.self_attn.forward(self.input_layernorm.forward(h), batch, rope, mask, cache);
        h.clone() + self.mlp.forward(self.post_attention_layernorm.forward(h))
    }
}

#[cfg(test)]
mod tests {
    use burn::Dispatch;
    use burn::tensor::{Tensor, TensorData};

    /// `[1, 3, 3]` masks of a 3-token prefill: causal with one more key hidden (padding), then
    /// one that lets query 0 see key 2.
    fn mask(values: [[f32; 3]; 3]) -> Option<Tensor<Dispatch, 3>> {
        let data: Vec<f32> = values.iter().flatten().copied().collect();
        Some(Tensor::from_data(TensorData::new(data, [1, 3, 3]), &crate::cpu()))
    }

    /// The ops of one decode layer (one token per row against a cache of 3, Qwen3 shape: q/k
    /// norms, GQA) on the recording backend, by name, in f32 and bf16: pinned, so an op added
    /// to the hot path shows here. Each is about one kernel launch on burn-cuda without fusion.
    #[test]
    fn a_decode_layer_runs_a_pinned_number_of_ops() {
        use crate::layers::{AttentionMask, Rope};
        use crate::{KvCache, Qwen3};
        use arl_optim::opcount::{self, Counting};
        use burn::tensor::DType;
        let _lock = opcount::lock();
        let device = Default::default();
        let preset = crate::presets::find("tiny-vocab512").unwrap();
        let mut counts = Vec::new();
        for dtype in [DType::F32, DType::BF16] {
            let model = Qwen3::<Counting>::random(preset.config(), preset.seed, preset.init_std, &device).into_dtype(dtype);
            let c = &model.config;
            let mut kv = KvCache::with_capacity(c.num_hidden_layers, 8);
            model.hidden(&[vec![3, 17, 42], vec![5, 6, 7]], &[vec![0, 1, 2], vec![0, 1, 2]], None, Some(&mut kv));
            let positions = [vec![3], vec![3]];
            let rope = Rope::new(&positions, c, &device).in_dtype(dtype);
            let bias = Tensor::<Counting, 3>::zeros([2, 1, 4], &device);
            let mask = AttentionMask::new(Some(bias), [2, 3, 1], c, dtype, &device);
            let h = Tensor::<Counting, 2>::ones([2, c.hidden_size], (&device, dtype));
            opcount::take();
            let out = model.layers[0].forward(h, 2, &rope, &mask, Some(&mut kv.layers[0]));
            let names = opcount::names(&opcount::take());
            assert_eq!(out.dims(), [2, c.hidden_size]);
            counts.push((names.len(), names));
        }
        // f32: 2 RMSNorms of 7 (square, mean, +ε, x^−½ (was sqrt, 1/x), ·, the weight's
        // reshape, ·), 6 matmuls (q/k/v merged into one, gate/up into one: 9 before), one
        // q/k norm over the query and key heads together (the same 5 ops for the statistics,
        // then both weights side by side: 2 reshapes, 2 expands, a cat and its unsqueeze, the
        // product; was two norms of 7), one rotary over them together (a flip of the halves
        // and its reshapes, two products and a sum; was two of 6), the merged projections'
        // column slices, 4 for the KV write and its views, softmax 5, silu 4 (was 9: burn's
        // sigmoid is 8), the residual adds and the layout views. bf16 adds the casts HF makes:
        // each norm's two, softmax's two, silu's two. (This backend composes as burn-cuda does;
        // burn-flex and libtorch keep the cat, sqrt and 1/x, burn's silu, separate q and k
        // norms and rotaries, and a GEMM per part of a merged projection.) Reshapes, dimension
        // swaps, expands and slices are views on burn-cubecl (a slice whose offsets meet the
        // memory alignment, as the merged projections' parts do at these widths: burn-cubecl's
        // `kernel/index/slice.rs`; an expand sets strides to 0: `ops/base.rs`); the rest are
        // launches (a cat is two copies there).
        let got: Vec<usize> = counts.iter().map(|(n, _)| *n).collect();
        assert_eq!(got, [74, 84], "ops of a decode layer in f32 and bf16: {counts:?}");
        let count = |names: &Vec<String>, kinds: &[&str]| names.iter().filter(|n| kinds.iter().any(|k| n.contains(k))).count();
        let launches: Vec<usize> =
            counts.iter().map(|(n, names)| n - count(names, &["Reshape", "SwapDims", "(Slice)", "Expand"])).collect();
        let matmuls: Vec<usize> = counts.iter().map(|(_, names)| count(names, &["Matmul"])).collect();
        assert_eq!((launches, matmuls), (vec![44, 54], vec![6, 6]), "launches and matmuls of a decode layer");
    }

    /// A weight source whose values are distinct per name and index (biases non-zero).
    struct Distinct;

    impl crate::weights::WeightSource for Distinct {
        fn get(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, crate::ModelError> {
            let salt = arl_core::rng::fnv1a(name.as_bytes()) % 97;
            Ok((0..shape.iter().product::<usize>()).map(|i| ((i as u64 * 31 + salt) % 53) as f32 / 53.0 - 0.5).collect())
        }

        fn has(&self, _: &str) -> bool {
            true
        }
    }

    /// A merged projection is its HF parts: each part's weight and bias are the HF tensors it
    /// was loaded from (transposed), and its outputs, LoRA included, are the separate layers'
    /// — bit for bit on burn-flex (a GEMM per part on a column view), within f32 rounding on
    /// the recording backend, which takes one GEMM for all the parts as burn-cuda does.
    #[test]
    fn a_merged_projection_is_its_parts() {
        use crate::layers::{Linear, MergedLinear};
        use crate::lora::{LoraAdapter, LoraScaling};
        use arl_optim::opcount::{self, Counting};
        use burn::tensor::backend::Backend;
        let _lock = opcount::lock();
        fn run<B: Backend>(d: &B::Device) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, usize) {
            let (d_in, outs) = (5, [("p.a", 6), ("p.b", 4), ("p.c", 3)]);
            let parts: Vec<(String, usize)> = outs.iter().map(|(n, o)| (n.to_string(), *o)).collect();
            let mut merged = MergedLinear::<B>::load(&mut Distinct, &parts, d_in, true, d).unwrap();
            let mut single: Vec<Linear<B>> = outs.iter().map(|(n, o)| Linear::load(&mut Distinct, n, d_in, *o, true, d).unwrap()).collect();
            // An adapter on the second part only, the same on both sides.
            let a: Vec<f32> = (0..2 * d_in).map(|i| i as f32 * 0.1 - 0.3).collect();
            let b: Vec<f32> = (0..4 * 2).map(|i| 0.2 - i as f32 * 0.05).collect();
            let scaling = LoraScaling { alpha: 4.0, use_rslora: false, dropout: 0.0 };
            let lora = LoraAdapter::from_hf(&a, &b, [2, d_in, 4], scaling, d);
            (merged.loras[1], single[1].lora) = (Some(lora.clone()), Some(lora));
            let host = |t: Tensor<B, 2>| t.into_data().convert::<f32>().to_vec::<f32>().unwrap();
            for (i, l) in single.iter().enumerate() {
                let part = merged.part(i);
                assert_eq!(host(part.weight), host(l.weight.val()), "part {i}'s weight");
                let bias = |b: Option<Tensor<B, 1>>| b.unwrap().into_data().to_vec::<f32>().unwrap();
                assert_eq!(bias(part.bias), bias(l.bias.as_ref().map(|b| b.val())), "part {i}'s bias");
            }
            let x: Vec<f32> = (0..3 * d_in).map(|i| (i as f32 * 0.37).sin()).collect();
            let x = Tensor::<B, 2>::from_data(TensorData::new(x, [3, d_in]), d);
            let want: Vec<Vec<f32>> = single.iter().map(|l| host(l.forward(x.clone()))).collect();
            opcount::take();
            let got: Vec<Vec<f32>> = merged.forward(x).into_iter().map(host).collect();
            let matmuls = opcount::names(&opcount::take()).iter().filter(|n| n.contains("Matmul")).count();
            (got, want, matmuls)
        }
        let (got, want, _) = run::<Dispatch>(&crate::cpu());
        assert_eq!(got, want, "burn-flex: the separate layers' outputs, bit for bit");
        let (got, want, matmuls) = run::<Counting>(&Default::default());
        assert_eq!(matmuls, 1 + 2, "one GEMM for the three parts, two for the adapter");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.len(), w.len());
            assert!(g.iter().zip(w).all(|(a, b)| (a - b).abs() <= 1e-6 * b.abs().max(1.0)), "{g:?} vs {w:?}");
        }
    }

    /// The compositions taken where each op is a launch (rotary by a flip, rsqrt by `powf`,
    /// silu in four ops; the recording backend takes them, as burn-cuda does) give burn-flex's
    /// logits to f32 rounding, on a Qwen3 and a Llama shape, prefill and a cached decode step.
    #[test]
    fn the_gpu_compositions_give_the_cpu_logits() {
        use crate::{KvCache, Qwen3};
        use arl_optim::opcount::{self, Counting};
        let _lock = opcount::lock();
        for name in ["tiny-vocab512", "llama-135m"] {
            let preset = crate::presets::find(name).unwrap();
            let mut config = preset.config();
            config.num_hidden_layers = 2;
            config.vocab_size = config.vocab_size.min(512);
            let logits = |device: &dyn std::any::Any| -> Vec<f32> {
                fn run<B: burn::tensor::backend::Backend>(c: &crate::ModelConfig, seed: u64, std: f32, d: &B::Device) -> Vec<f32> {
                    let model = Qwen3::<B>::random(c.clone(), seed, std, d);
                    let mut kv = KvCache::with_capacity(c.num_hidden_layers, 8);
                    let ids = [vec![3u32, 17, 42, 9], vec![5, 6, 7, 8]];
                    let pos = [vec![0, 1, 2, 3], vec![0, 1, 2, 3]];
                    let h = model.hidden(&ids, &pos, None, Some(&mut kv));
                    let prefill = model.head(h).into_data().to_vec::<f32>().unwrap();
                    let bias = Tensor::<B, 3>::zeros([2, 1, 5], d);
                    let h = model.hidden(&[vec![11], vec![12]], &[vec![4], vec![4]], Some(bias), Some(&mut kv));
                    prefill.into_iter().chain(model.head(h).into_data().to_vec::<f32>().unwrap()).collect()
                }
                match device.downcast_ref::<burn::DispatchDevice>() {
                    Some(d) => run::<burn::Dispatch>(&config, preset.seed, preset.init_std, d),
                    None => run::<Counting>(&config, preset.seed, preset.init_std, &Default::default()),
                }
            };
            let (cpu, gpu_like) = (logits(&crate::cpu()), logits(&()));
            assert_eq!(cpu.len(), gpu_like.len());
            let worst = cpu.iter().zip(&gpu_like).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst <= 1e-5, "{name}: max |Δ logit| {worst}");
            // Not 0: the recording backend did take the other compositions.
            assert!(worst > 0.0, "{name}: no difference at all from burn-flex's compositions");
        }
    }

    /// Off the CPU, a layer without adapters norms and rotates its q and k heads in one pass
    /// each; with adapters on q and k (B zero: they add nothing) it takes the per-part path.
    /// Both give the same logits on the recording backend, Qwen3 (q/k norms, given different
    /// weights: random presets' are all 1) and Llama shapes, prefill and a cached decode step.
    /// (That the one-pass path is the one taken without adapters, the pinned op count shows.)
    #[test]
    fn one_pass_q_k_norm_and_rotary_equal_the_per_part_path() {
        use crate::{KvCache, Qwen3};
        use arl_core::config::LoraConfig;
        use arl_optim::opcount::{self, Counting};
        let _lock = opcount::lock();
        let d = Default::default();
        for name in ["tiny-vocab512", "llama-135m"] {
            let preset = crate::presets::find(name).unwrap();
            let mut config = preset.config();
            config.num_hidden_layers = 2;
            config.vocab_size = config.vocab_size.min(512);
            let run = |model: &Qwen3<Counting>| -> Vec<f32> {
                let mut kv = KvCache::with_capacity(2, 8);
                let h =
                    model.hidden(&[vec![3u32, 17, 42, 9], vec![5, 6, 7, 8]], &[vec![0, 1, 2, 3], vec![0, 1, 2, 3]], None, Some(&mut kv));
                let mut out = model.head(h).into_data().to_vec::<f32>().unwrap();
                let bias = Tensor::<Counting, 3>::zeros([2, 1, 5], &d);
                let h = model.hidden(&[vec![11], vec![12]], &[vec![4], vec![4]], Some(bias), Some(&mut kv));
                out.extend(model.head(h).into_data().to_vec::<f32>().unwrap());
                out
            };
            let mut model = Qwen3::<Counting>::random(config, preset.seed, preset.init_std, &d);
            for (i, layer) in model.layers.iter_mut().enumerate() {
                let attn = &mut layer.self_attn;
                for (j, norm) in [&mut attn.q_norm, &mut attn.k_norm].into_iter().flatten().enumerate() {
                    let hd = norm.weight.dims()[0];
                    let w: Vec<f32> = (0..hd).map(|c| 1.0 + ((c * 7 + i * 3 + j * 5) % 11) as f32 * 0.05 - 0.25).collect();
                    norm.weight = burn::module::Param::from_tensor(Tensor::from_data(TensorData::new(w, [hd]), &d));
                }
            }
            let one_pass = run(&model);
            let mut adapted = model;
            let lora = LoraConfig { rank: 2, target_modules: vec!["q_proj".into(), "k_proj".into()], ..LoraConfig::default() };
            adapted.attach_lora(&lora, 1).unwrap();
            let per_part = run(&adapted);
            let worst = one_pass.iter().zip(&per_part).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(worst <= 1e-6, "{name}: max |Δ logit| {worst}");
        }
    }

    /// Off burn-flex and libtorch, `silu` is `x / (1 + e^−x)` in f32: four ops (burn's was
    /// nine), within f32 rounding of the exact value in f32 and of bf16's in bf16, ±∞-safe.
    #[test]
    fn silu_takes_four_ops_where_sigmoid_is_not_one_kernel() {
        use crate::layers::silu;
        use arl_optim::opcount::{self, Counting};
        use burn::tensor::DType;
        let _lock = opcount::lock();
        let d = Default::default();
        let xs: Vec<f32> = (-400..=400).map(|i| i as f32 * 0.1).chain([-1e4, 1e4]).collect();
        for (dtype, tol, ops) in [(DType::F32, 5e-7, 4), (DType::BF16, 1.0 / 128.0, 6)] {
            let x = Tensor::<Counting, 1>::from_data(TensorData::new(xs.clone(), [xs.len()]), (&d, dtype));
            let x_back: Vec<f32> = x.clone().into_data().convert::<f32>().to_vec().unwrap();
            opcount::take();
            let y = silu(x);
            assert_eq!(opcount::names(&opcount::take()).len(), ops, "{dtype:?}");
            let y: Vec<f32> = y.into_data().convert::<f32>().to_vec().unwrap();
            for (&x, &y) in x_back.iter().zip(&y) {
                let exact = x as f64 / (1.0 + (-x as f64).exp());
                assert!((y as f64 - exact).abs() <= tol * exact.abs().max(1e-30), "{dtype:?}: silu({x}) = {y}, not {exact}");
            }
        }
    }

    /// No matmul with an empty dimension is issued (burn-cuda's autotune divides by zero on
    /// one): no rows give an empty result, an empty inner dimension zeros, a [`Linear`] on no
    /// rows no product; recorded on the recording backend.
    #[test]
    fn no_matmul_has_an_empty_dimension() {
        use crate::layers::{Linear, matmul};
        use arl_optim::opcount::{self, Counting};
        use burn::module::Param;
        let _lock = opcount::lock();
        let d = Default::default();
        let linear = Linear { weight: Param::from_tensor(Tensor::<Counting, 2>::ones([4, 3], &d)), bias: None, lora: None };
        opcount::take();
        let rows = linear.forward(Tensor::zeros([0, 4], &d));
        let inner = matmul(Tensor::<Counting, 3>::zeros([2, 5, 0], &d), Tensor::zeros([1, 0, 3], &d));
        let names = opcount::names(&opcount::take());
        assert!(!names.iter().any(|n| n.contains("Matmul")), "{names:?}");
        assert_eq!((rows.dims(), inner.dims()), ([0, 3], [2, 5, 3]));
        assert_eq!(inner.into_data().to_vec::<f32>().unwrap(), vec![0.0; 30]);
        // A product with no empty dimension is still one matmul.
        let one = linear.forward(Tensor::ones([2, 4], &d));
        assert_eq!(opcount::names(&opcount::take()).iter().filter(|n| n.contains("Matmul")).count(), 1);
        assert_eq!(one.into_data().to_vec::<f32>().unwrap(), vec![4.0; 6]);
    }

    #[test]
    fn a_causal_mask_is_taken_and_one_that_shows_a_later_key_is_refused_in_debug_builds() {
        let model = crate::load("tiny-vocab512", &crate::cpu()).unwrap();
        let positions = vec![vec![0, 1, 2]];
        let ids = vec![vec![3u32, 17, 42]];
        let inf = f32::NEG_INFINITY;
        let padded = mask([[0.0, inf, inf], [inf, 0.0, inf], [inf, 0.0, 0.0]]);
        assert_eq!(model.hidden(&ids, &positions, padded, None).dims(), [3, model.config.hidden_size]);
        if cfg!(debug_assertions) {
            let future = mask([[0.0, inf, 0.0], [0.0, 0.0, inf], [0.0, 0.0, 0.0]]);
            let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.hidden(&ids, &positions, future, None)))
                .expect_err("a mask that shows query 0 key 2 is refused");
            let msg = err.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
            assert!(msg.contains("row 0 of batch 0") && msg.contains("masks must be causal"), "{msg}");
        }
    }
}
