//! The blocks, bottom-up: linear (HF `[out, in]` stored here as `[in, out]`), RMSNorm with the
//! fp32 computation HF does, rotary (split halves), attention with GQA and an optional KV
//! cache, the SwiGLU MLP, and the decoder layer. Op order follows `modeling_qwen3.py`
//! (SPEC.md §1.2).

use burn::module::{Module, Param};
use burn::tensor::activation::{silu, softmax};
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
        let y = x.matmul(self.weight.val());
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
        let var = x.clone().square().mean_dim(D - 1);
        let normed = x * var.add_scalar(self.eps).sqrt().recip();
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
        Self { q: tables(c.num_attention_heads, Some(scale)), k: tables(c.num_key_value_heads, None) }
    }

    /// The tables in the model's float type (HF computes them in f32, then casts to x's).
    pub fn in_dtype(self, dtype: DType) -> Self {
        let cast = |t: RopeTables<B>| RopeTables { cos: to_dtype(t.cos, dtype), sin: to_dtype(t.sin, dtype), heads: t.heads };
        Self { q: cast(self.q), k: cast(self.k) }
    }
}

impl<B: Backend> RopeTables<B> {
    /// `x · cos + rotate_half(x) · sin` on `[B·T, heads·head_dim]`.
    pub fn apply(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [n, w] = x.dims();
        let half = w / self.heads / 2;
        let halves = x.clone().reshape([n, self.heads, 2, half]);
        let x1 = halves.clone().slice([0..n, 0..self.heads, 0..1, 0..half]);
        let x2 = halves.slice([0..n, 0..self.heads, 1..2, 0..half]);
        let swapped = Tensor::cat(vec![x2, x1], 2).reshape([n, w]);
        x * self.cos.clone() + swapped * self.sin.clone()
    }
}

/// The additive attention mask, `[B, kv_heads, rep·T, L]` in the scores' own layout (query
/// head `kv·rep + r`), built once per forward pass and shared by every layer: the scores
/// add it in place as one contiguous sum. `bias` is `[B or 1, T, L]` (0 or −∞), `None` for
/// plain causal attention over `L = past + T` keys.
pub fn attention_bias<B: Backend>(
    bias: Option<Tensor<B, 3>>,
    [batch, past, t]: [usize; 3],
    c: &ModelConfig,
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, 4> {
    let bias = bias.unwrap_or_else(|| causal_bias::<B>(t, past + t, device));
    let [bb, _, l] = bias.dims();
    let (nh, nkv) = (c.num_attention_heads, c.num_key_value_heads);
    let per_head = to_dtype(bias, dtype).reshape([bb, 1, t * l]).repeat_dim(1, nh);
    let rows = if bb == batch { per_head } else { per_head.repeat_dim(0, batch) };
    rows.reshape([batch, nkv, (nh / nkv) * t, l])
}

#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    pub q_proj: Linear<B>,
    pub k_proj: Linear<B>,
    pub v_proj: Linear<B>,
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
            q_proj: Linear::load(src, &format!("{p}.q_proj"), h, q, c.qkv_bias, device)?,
            k_proj: Linear::load(src, &format!("{p}.k_proj"), h, kv, c.qkv_bias, device)?,
            v_proj: Linear::load(src, &format!("{p}.v_proj"), h, kv, c.qkv_bias, device)?,
            o_proj: Linear::load(src, &format!("{p}.o_proj"), q, h, c.o_bias, device)?,
            q_norm: norm(src, "q_norm")?,
            k_norm: norm(src, "k_norm")?,
            n_heads: c.num_attention_heads,
            n_kv_heads: c.num_key_value_heads,
            head_dim: hd,
        })
    }

    /// `x` is `[B·T, hidden]` (rows of batch `b` contiguous); `bias` is the additive mask
    /// from [`attention_bias`] over the `L = past + T` keys.
    pub fn forward(
        &self,
        x: Tensor<B, 2>,
        batch: usize,
        rope: &Rope<B>,
        bias: &Tensor<B, 4>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 2> {
        let t = x.dims()[0] / batch;
        let (nh, nkv, hd) = (self.n_heads, self.n_kv_heads, self.head_dim);
        // Per-head norm (Qwen3), rotary on the contiguous projection, then `[B, n, T, hd]`.
        let heads = |y: Tensor<B, 2>, n: usize, norm: &Option<RmsNorm<B>>, rope: Option<&RopeTables<B>>| {
            let y = match norm {
                Some(norm) => norm.forward(y.reshape([batch * t, n, hd])).reshape([batch * t, n * hd]),
                None => y,
            };
            let y = match rope {
                Some(rope) => rope.apply(y),
                None => y,
            };
            y.reshape([batch, t, n, hd]).swap_dims(1, 2)
        };
        // The query tables carry the `hd^−½` scale.
        let q = heads(self.q_proj.forward(x.clone()), nh, &self.q_norm, Some(&rope.q));
        let k = heads(self.k_proj.forward(x.clone()), nkv, &self.k_norm, Some(&rope.k));
        let v = heads(self.v_proj.forward(x), nkv, &None, None);
        let (k, v) = match cache {
            Some(cache) => cache.append(k, v),
            None => (k, v),
        };
        let rep = nh / nkv;
        // GQA without copying K/V: query heads h = kv·rep + r share kv head `kv`
        // (HF's repeat_kv is a repeat_interleave), so group them as [B, nkv, rep·T, hd].
        let q = q.reshape([batch, nkv, rep * t, hd]);
        let dtype = q.dtype();
        let scores = q.matmul(k.swap_dims(2, 3)) + bias.clone();
        // HF eager: softmax in f32, then back to the query's dtype.
        let probs = to_dtype(softmax(to_f32(scores), 3), dtype);
        let out = probs.matmul(v).reshape([batch, nh, t, hd]).swap_dims(1, 2).reshape([batch * t, nh * hd]);
        self.o_proj.forward(out)
    }
}

/// `[1, T, L]`: query `i` (at key index `L − T + i`) sees keys `≤` its own index.
pub fn causal_bias<B: Backend>(t: usize, l: usize, device: &B::Device) -> Tensor<B, 3> {
    let past = l - t;
    let data: Vec<f32> = (0..t).flat_map(|i| (0..l).map(move |j| if j <= past + i { 0.0 } else { f32::NEG_INFINITY })).collect();
    Tensor::from_data(TensorData::new(data, [1, t, l]), device)
}

#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    pub gate_proj: Linear<B>,
    pub up_proj: Linear<B>,
    pub down_proj: Linear<B>,
}

impl<B: Backend> Mlp<B> {
    pub fn load(src: &mut dyn WeightSource, p: &str, c: &ModelConfig, device: &B::Device) -> Result<Self, ModelError> {
        let (h, i, b) = (c.hidden_size, c.intermediate_size, c.mlp_bias);
        Ok(Self {
            gate_proj: Linear::load(src, &format!("{p}.gate_proj"), h, i, b, device)?,
            up_proj: Linear::load(src, &format!("{p}.up_proj"), h, i, b, device)?,
            down_proj: Linear::load(src, &format!("{p}.down_proj"), i, h, b, device)?,
        })
    }

    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.down_proj.forward(silu(self.gate_proj.forward(x.clone())) * self.up_proj.forward(x))
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
        bias: &Tensor<B, 4>,
        cache: Option<&mut LayerCache<B>>,
    ) -> Tensor<B, 2> {
        let h = h.clone() + self.self_attn.forward(self.input_layernorm.forward(h), batch, rope, bias, cache);
        h.clone() + self.mlp.forward(self.post_attention_layernorm.forward(h))
    }
}
