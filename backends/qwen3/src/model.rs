//! The causal LM: embeddings → decoder layers → final RMSNorm → LM head (tied to the
//! embeddings or its own `[hidden, vocab]` matrix). Loading from a checkpoint directory or a
//! preset, and saving in the HF layout.

use std::path::Path;

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData};

use crate::ModelError;
use crate::cache::KvCache;
use crate::config::ModelConfig;
use crate::layers::{AttentionMask, DecoderLayer, LinearMut, LinearRef, RmsNorm, Rope, matmul, param, to_f32, transpose};
use crate::weights::{Checkpoint, RandomInit, WeightSource, write_safetensors};

#[derive(Module, Debug)]
pub struct Qwen3<B: Backend> {
    /// `[vocab, hidden]`, as HF stores it.
    pub embed_tokens: Param<Tensor<B, 2>>,
    pub layers: Vec<DecoderLayer<B>>,
    pub norm: RmsNorm<B>,
    /// `[hidden, vocab]`; `None` when tied to `embed_tokens`.
    pub lm_head: Option<Param<Tensor<B, 2>>>,
    #[module(skip)]
    pub config: ModelConfig,
}

impl<B: Backend> Qwen3<B> {
    /// Build from any weight source (HF names and shapes).
    pub fn from_source(config: ModelConfig, src: &mut dyn WeightSource, device: &B::Device) -> Result<Self, ModelError> {
        let c = &config;
        let (v, h) = (c.vocab_size, c.hidden_size);
        let embed_tokens = param(src.get("model.embed_tokens.weight", &[v, h])?, [v, h], device);
        let layers = (0..c.num_hidden_layers).map(|i| DecoderLayer::load(src, i, c, device)).collect::<Result<Vec<_>, _>>()?;
        let norm = RmsNorm::load(src, "model.norm.weight", h, c.rms_norm_eps, device)?;
        // A tied checkpoint may still ship `lm_head.weight` (Qwen3-0.6B does); HF ignores it.
        let lm_head =
            if c.tie_word_embeddings { None } else { Some(param(transpose(&src.get("lm_head.weight", &[v, h])?, v, h), [h, v], device)) };
        Ok(Self { embed_tokens, layers, norm, lm_head, config })
    }

    /// Load an HF checkpoint directory (config.json [+ generation_config.json] + safetensors).
    pub fn load_dir(dir: &Path, device: &B::Device) -> Result<Self, ModelError> {
        let config = ModelConfig::from_dir(dir)?;
        let mut ckpt = Checkpoint::open(dir)?;
        Self::from_source(config, &mut ckpt, device)
    }

    /// Seeded random weights with std `init_std` for matrices.
    pub fn random(config: ModelConfig, seed: u64, init_std: f32, device: &B::Device) -> Self {
        Self::from_source(config, &mut RandomInit { seed, std: init_std }, device).expect("random init cannot fail")
    }

    /// The weights' (and the computation's) float type.
    pub fn dtype(&self) -> DType {
        self.embed_tokens.val().dtype()
    }

    /// The same model with every weight in `dtype` (parameter ids and trainability kept).
    /// Casting from f32 after loading keeps one loading path for every dtype.
    pub fn into_dtype(self, dtype: DType) -> Self {
        if self.dtype() == dtype {
            return self;
        }
        self.map(&mut CastWeights(dtype))
    }

    pub fn device(&self) -> B::Device {
        self.embed_tokens.val().device()
    }

    /// Hidden states before the final norm, `[B·T, hidden]` (rows of a sequence contiguous).
    /// `positions` is `[B][T]` (rotary positions); `bias` an additive `[B or 1, T, past+T]`
    /// mask or `None` for plain causal attention. A mask must be causal (no query sees a key
    /// after its own index; debug builds check it): attention runs in chunks of queries that
    /// leave those keys out ([`AttentionMask`]).
    pub fn hidden(
        &self,
        ids: &[Vec<u32>],
        positions: &[Vec<usize>],
        bias: Option<Tensor<B, 3>>,
        mut cache: Option<&mut KvCache<B>>,
    ) -> Tensor<B, 2> {
        let device = self.device();
        let batch = ids.len();
        let flat: Vec<i64> = ids.iter().flatten().map(|&i| i as i64).collect();
        let ids = Tensor::<B, 1, Int>::from_data(TensorData::new(flat, [batch * ids[0].len()]), &device);
        let mut h = self.embed_tokens.val().select(0, ids);
        let rope = Rope::new(positions, &self.config, &device).in_dtype(h.dtype());
        let shape = [batch, cache.as_deref().map_or(0, KvCache::len), positions.first().map_or(0, Vec::len)];
        let mask = AttentionMask::new(bias, shape, &self.config, h.dtype(), &device);
        for (i, layer) in self.layers.iter().enumerate() {
            let layer_cache = cache.as_deref_mut().map(|c| &mut c.layers[i]);
            h = layer.forward(h, batch, &rope, &mask, layer_cache);
        }
        h
    }

    /// Final norm and LM head on `[N, hidden]` rows → logits `[N, vocab]`.
    /// Logits are f32 whatever the model's dtype (log-probabilities are taken in f32).
    pub fn head(&self, h: Tensor<B, 2>) -> Tensor<B, 2> {
        to_f32(self.head_in_dtype(h))
    }

    fn head_in_dtype(&self, h: Tensor<B, 2>) -> Tensor<B, 2> {
        let h = self.norm.forward(h);
        match &self.lm_head {
            Some(w) => matmul(h, w.val()),
            // Few rows (decode): (E hᵀ)ᵀ reads the [vocab, hidden] embedding in its stored order;
            // h Eᵀ made burn-flex copy the transposed embedding on every call (~2x slower head,
            // measured here). Many rows (scoring): h Eᵀ keeps the [N, vocab] logits contiguous
            // for the log-softmax (~15% faster `arl bench score`).
            None if h.dims()[0] <= 64 => matmul(self.embed_tokens.val(), h.transpose()).transpose(),
            None => matmul(h, self.embed_tokens.val().transpose()),
        }
    }

    /// Logits for every position of equal-length sequences, `[B, T, vocab]` (for tests and
    /// small inputs; scoring and sampling only project the rows they need).
    pub fn logits(&self, ids: &[Vec<u32>]) -> Tensor<B, 3> {
        let (b, t) = (ids.len(), ids[0].len());
        let positions: Vec<Vec<usize>> = (0..b).map(|_| (0..t).collect()).collect();
        let h = self.hidden(ids, &positions, None, None);
        self.head(h).reshape([b, t, self.config.vocab_size])
    }

    /// Every linear layer of the decoder: its HF module name (`model.layers.3.self_attn.q_proj`),
    /// its short name (`q_proj`: what `lora.target_modules` names) and the layer (a part of a
    /// merged projection for q/k/v and gate/up), in a fixed order (layer by layer: q, k, v, o,
    /// gate, up, down).
    pub fn linears(&self) -> Vec<(String, &'static str, LinearRef<'_, B>)> {
        let mut out = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            let (a, m) = (&l.self_attn, &l.mlp);
            let attn = [("q_proj", a.qkv_proj.part(0)), ("k_proj", a.qkv_proj.part(1)), ("v_proj", a.qkv_proj.part(2))];
            for (n, lin) in attn.into_iter().chain([("o_proj", a.o_proj.as_ref())]) {
                out.push((format!("model.layers.{i}.self_attn.{n}"), n, lin));
            }
            let mlp = [("gate_proj", m.gate_up_proj.part(0)), ("up_proj", m.gate_up_proj.part(1)), ("down_proj", m.down_proj.as_ref())];
            for (n, lin) in mlp {
                out.push((format!("model.layers.{i}.mlp.{n}"), n, lin));
            }
        }
        out
    }

    /// [`Qwen3::linears`], mutably: each layer's `[in, out]` and its adapter slot.
    pub fn linears_mut(&mut self) -> Vec<(String, &'static str, LinearMut<'_, B>)> {
        let mut out = Vec::new();
        for (i, l) in self.layers.iter_mut().enumerate() {
            let (a, m) = (&mut l.self_attn, &mut l.mlp);
            let attn = ["q_proj", "k_proj", "v_proj"].into_iter().zip(a.qkv_proj.parts_mut());
            for (n, lin) in attn.chain([("o_proj", a.o_proj.as_mut())]) {
                out.push((format!("model.layers.{i}.self_attn.{n}"), n, lin));
            }
            let mlp = ["gate_proj", "up_proj"].into_iter().zip(m.gate_up_proj.parts_mut());
            for (n, lin) in mlp.chain([("down_proj", m.down_proj.as_mut())]) {
                out.push((format!("model.layers.{i}.mlp.{n}"), n, lin));
            }
        }
        out
    }

    /// Every weight under its HF name, HF shape (`[out, in]`) and row-major f32 data. A linear
    /// layer with a LoRA adapter gives its merged weight W + s·A B (in f32).
    pub fn hf_tensors(&self) -> Vec<(String, Vec<usize>, Vec<f32>)> {
        fn data<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
            t.into_data().convert::<f32>().to_vec::<f32>().expect("f32 data")
        }
        let mut out = Vec::new();
        let linears = self.linears();
        let mut linears = linears.into_iter().map(|(name, _, l)| (name, l));
        let mut push_linear = |out: &mut Vec<_>, want: String| {
            let (name, l) = linears.next().expect("a linear layer");
            assert_eq!(name, want, "linears() lists the layers in HF order");
            let [din, dout] = l.weight.dims();
            let w = match l.lora {
                Some(lora) => to_f32(l.weight) + lora.delta(),
                None => l.weight,
            };
            out.push((format!("{name}.weight"), vec![dout, din], transpose(&data(w), din, dout)));
            if let Some(b) = l.bias {
                out.push((format!("{name}.bias"), vec![dout], data(b)));
            }
        };
        let norm = |out: &mut Vec<(String, Vec<usize>, Vec<f32>)>, name: String, n: &RmsNorm<B>| {
            out.push((name, n.weight.dims().to_vec(), data(n.weight.val())));
        };
        out.push(("model.embed_tokens.weight".into(), self.embed_tokens.dims().to_vec(), data(self.embed_tokens.val())));
        for (i, l) in self.layers.iter().enumerate() {
            let p = format!("model.layers.{i}");
            norm(&mut out, format!("{p}.input_layernorm.weight"), &l.input_layernorm);
            norm(&mut out, format!("{p}.post_attention_layernorm.weight"), &l.post_attention_layernorm);
            let a = &l.self_attn;
            for n in ["q_proj", "k_proj", "v_proj", "o_proj"] {
                push_linear(&mut out, format!("{p}.self_attn.{n}"));
            }
            if let Some(q) = &a.q_norm {
                norm(&mut out, format!("{p}.self_attn.q_norm.weight"), q);
            }
            if let Some(k) = &a.k_norm {
                norm(&mut out, format!("{p}.self_attn.k_norm.weight"), k);
            }
            for n in ["gate_proj", "up_proj", "down_proj"] {
                push_linear(&mut out, format!("{p}.mlp.{n}"));
            }
        }
        norm(&mut out, "model.norm.weight".into(), &self.norm);
        if let Some(w) = &self.lm_head {
            let [h, v] = w.dims();
            out.push(("lm_head.weight".into(), vec![v, h], transpose(&data(w.val()), h, v)));
        }
        out
    }

    /// Write `dir/config.json`, `dir/generation_config.json` (EOS ids) and an F32
    /// `dir/model.safetensors`, loadable by arl and by HF transformers.
    pub fn save_dir(&self, dir: &Path) -> Result<(), ModelError> {
        std::fs::create_dir_all(dir).map_err(|e| ModelError::write(dir, e))?;
        let config = serde_json::to_string_pretty(&self.config.to_hf_json()).expect("json");
        let path = dir.join("config.json");
        std::fs::write(&path, config + "\n").map_err(|e| ModelError::write(&path, e))?;
        let mut gen_cfg = serde_json::Map::new();
        if let Some(b) = self.config.bos_token_id {
            gen_cfg.insert("bos_token_id".into(), b.into());
        }
        if !self.config.eos_token_ids.is_empty() {
            gen_cfg.insert("eos_token_id".into(), self.config.eos_token_ids.clone().into());
        }
        let path = dir.join("generation_config.json");
        std::fs::write(&path, serde_json::to_string_pretty(&gen_cfg).expect("json") + "\n").map_err(|e| ModelError::write(&path, e))?;
        write_safetensors(&dir.join("model.safetensors"), &self.hf_tensors())
    }
}

/// Casts each float weight to the target dtype on its device, then detaches it: a fresh leaf,
/// so on an autodiff device it is still a trainable parameter (the cast alone would be a graph
/// node). On the device, not through host memory: on CUDA, reading every weight back and
/// uploading it again went through cubecl's pinned staging pool and left the process at
/// 13.5 GB of host memory for Qwen3-0.6B in bf16 (2.8 GB in f32; results/gpu-check-h200/).
struct CastWeights(DType);

impl<B: Backend> ModuleMapper<B> for CastWeights {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let grad = tensor.is_require_grad();
        let cast = tensor.cast(self.0).detach();
        Param::from_mapped_value(id, if grad { cast.require_grad() } else { cast }, mapper)
    }
}

#[cfg(test)]
mod tests {
    use burn::module::Param;
    use burn::tensor::{DType, Tensor, TensorData};
    use half::{bf16, f16};

    /// Casting the weights to bf16/f16 rounds each f32 to nearest-even from the f32 itself, as
    /// torch's `.to(torch.bfloat16)` and `half`'s `from_f32` do. The first planted values sit
    /// just above a bf16 tie in their last f32 bits: burn-flex's cast went through f64, where
    /// `half`'s `bf16::from_f64` sees only the upper 32 bits, took them for ties and rounded
    /// them down to even. (Its `f16::from_f64` rounds such values right.)
    #[test]
    fn half_precision_weights_are_the_f32_weights_rounded_to_nearest_even() {
        let mut model = crate::load("tiny-vocab512", &crate::cpu()).unwrap();
        let hidden = model.config.hidden_size;
        // Above a bf16 tie by one to three f32 ulps (±), above an f16 tie by one ulp (±), then
        // the weights as they were.
        let planted = [0x3F80_8001u32, 0xBF80_8001, 0x4000_8003, 0x3F80_1001, 0xC100_1001];
        let norm: Vec<f32> = model.norm.weight.val().into_data().to_vec().unwrap();
        let values: Vec<f32> = planted.iter().map(|&b| f32::from_bits(b)).chain(norm[planted.len()..].iter().copied()).collect();
        let device = model.device();
        model.norm.weight = Param::from_tensor(Tensor::from_data(TensorData::new(values.clone(), [hidden]), &device));
        let embed: Vec<f32> = model.embed_tokens.val().into_data().to_vec().unwrap();

        let bf = model.clone().into_dtype(DType::BF16);
        let got = |t: Tensor<_, 1>| t.into_data().to_vec::<bf16>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<u16>>();
        let want = |xs: &[f32]| xs.iter().map(|&v| bf16::from_f32(v).to_bits()).collect::<Vec<u16>>();
        assert_eq!(got(bf.norm.weight.val()), want(&values));
        assert_eq!(got(bf.embed_tokens.val().flatten::<1>(0, 1)), want(&embed));
        // The planted values are ones the cast through f64 gets wrong.
        assert_eq!(bf16::from_f32(values[0]).to_bits(), 0x3F81, "the first planted value rounds up");
        assert_eq!(bf16::from_f64(values[0] as f64).to_bits(), 0x3F80, "through f64 it rounded down");

        let half = model.into_dtype(DType::F16);
        let got: Vec<u16> = half.norm.weight.val().into_data().to_vec::<f16>().unwrap().iter().map(|v| v.to_bits()).collect();
        let want: Vec<u16> = values.iter().map(|&v| f16::from_f32(v).to_bits()).collect();
        assert_eq!(got, want);
        assert_eq!(f16::from_f32(values[3]).to_bits(), 0x3C01, "the fourth planted value rounds up");
    }
}
