//! LoRA adapters on the decoder's linear layers, computed as PEFT's `lora.Linear` does:
//! `y = W x + b + s · B A dropout(x)`, with A `[r, in]` and B `[out, r]` in HF's layout (stored
//! here transposed, `[in, r]` and `[r, out]`, as [`crate::layers::Linear`] stores W) and
//! s = alpha / r (alpha / √r for rank-stabilized LoRA). The adapter computes in its own dtype
//! (f32), whatever the base's: the input is cast to it and the output back, as PEFT does.
//!
//! A new adapter starts as PEFT's `init_lora_weights=True`: A Kaiming-uniform with a = √5
//! (U(−1/√in, 1/√in), nn.Linear's default), B zero, so the adapted model starts as the base.

use arl_core::config::LoraConfig;
use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Distribution, Tensor, TensorData};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution as _, Uniform};

use crate::ModelError;
use crate::layers::{matmul, to_dtype, transpose};
use crate::model::Qwen3;

/// One adapter of a linear layer.
#[derive(Module, Debug)]
pub struct LoraAdapter<B: Backend> {
    /// `[in, r]`: PEFT's `lora_A.weight` (`[r, in]`) transposed.
    pub a: Param<Tensor<B, 2>>,
    /// `[r, out]`: PEFT's `lora_B.weight` (`[out, r]`) transposed.
    pub b: Param<Tensor<B, 2>>,
    /// PEFT's `lora_alpha`.
    pub alpha: f64,
    /// Scale by alpha / √r instead of alpha / r.
    pub use_rslora: bool,
    /// Dropout probability on the input, applied only on an autodiff device (training).
    pub dropout: f64,
}

/// How an adapter scales and drops out (the rank comes from its matrices).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoraScaling {
    pub alpha: f64,
    pub use_rslora: bool,
    pub dropout: f64,
}

impl<B: Backend> LoraAdapter<B> {
    /// From HF-layout row-major data: `a` is `[r, d_in]`, `b` is `[d_out, r]`; f32 on `device`.
    pub fn from_hf(a: &[f32], b: &[f32], [r, d_in, d_out]: [usize; 3], scaling: LoraScaling, device: &B::Device) -> Self {
        let a = Tensor::from_data(TensorData::new(transpose(a, r, d_in), [d_in, r]), (device, DType::F32));
        let b = Tensor::from_data(TensorData::new(transpose(b, d_out, r), [r, d_out]), (device, DType::F32));
        let LoraScaling { alpha, use_rslora, dropout } = scaling;
        Self { a: Param::from_tensor(a), b: Param::from_tensor(b), alpha, use_rslora, dropout }
    }

    pub fn rank(&self) -> usize {
        self.a.dims()[1]
    }

    /// s: alpha / r, or alpha / √r.
    pub fn scale(&self) -> f64 {
        arl_core::config::lora_scale(self.rank(), self.alpha, self.use_rslora)
    }

    pub fn scaling(&self) -> LoraScaling {
        LoraScaling { alpha: self.alpha, use_rslora: self.use_rslora, dropout: self.dropout }
    }

    /// `s · dropout(x) A B` on `[tokens, in]` rows, returned in `x`'s dtype.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let dtype = x.dtype();
        let mut x = to_dtype(x, self.a.val().dtype());
        if self.dropout > 0.0 && B::ad_enabled(&x.device()) {
            let keep = x.random_like(Distribution::Bernoulli(1.0 - self.dropout));
            x = x * keep / (1.0 - self.dropout);
        }
        to_dtype(matmul(matmul(x, self.a.val()), self.b.val()).mul_scalar(self.scale()), dtype)
    }

    /// s · A B as an `[in, out]` update of the base weight, in f32.
    pub fn delta(&self) -> Tensor<B, 2> {
        self.a.val().matmul(self.b.val()).mul_scalar(self.scale())
    }

    /// A and B in HF's layout and shape: (`[r, in]` data, `[out, r]` data).
    pub fn hf_data(&self) -> (Vec<f32>, Vec<f32>) {
        let host = |t: Tensor<B, 2>| t.into_data().convert::<f32>().to_vec::<f32>().expect("f32 data");
        let ([d_in, r], [_, d_out]) = (self.a.dims(), self.b.dims());
        (transpose(&host(self.a.val()), d_in, r), transpose(&host(self.b.val()), r, d_out))
    }
}

/// A new adapter as PEFT initializes one: A ~ U(−1/√in, 1/√in) (`kaiming_uniform_(a=√5)` of a
/// `[r, in]` weight, fan_in = in), drawn from a stream of `seed` and the module name; B = 0.
pub fn peft_init<B: Backend>(
    module: &str,
    d_in: usize,
    d_out: usize,
    config: &LoraConfig,
    seed: u64,
    device: &B::Device,
) -> LoraAdapter<B> {
    let r = config.rank as usize;
    let bound = 1.0 / (d_in as f32).sqrt();
    let stream = arl_core::rng::fnv1a(module.as_bytes());
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ stream);
    let uniform = Uniform::new(-bound, bound).expect("a positive bound");
    let a: Vec<f32> = (0..r * d_in).map(|_| uniform.sample(&mut rng)).collect();
    let scaling = LoraScaling { alpha: config.alpha, use_rslora: config.use_rslora, dropout: config.dropout };
    LoraAdapter::from_hf(&a, &vec![0.0; d_out * r], [r, d_in, d_out], scaling, device)
}

/// The `target_modules` that are not linear layers of the model, as one error listing those
/// it has.
pub fn check_targets(targets: &[String]) -> Result<(), ModelError> {
    let valid = arl_core::config::LORA_TARGETS;
    match targets.iter().find(|t| !valid.contains(&t.as_str())) {
        Some(bad) => Err(ModelError::Lora(format!(
            "target module `{bad}` is not a linear layer of the model; its linear layers are {}",
            valid.join(", ")
        ))),
        None if targets.is_empty() => {
            Err(ModelError::Lora(format!("no target modules; the model's linear layers are {}", valid.join(", "))))
        }
        None => Ok(()),
    }
}

impl<B: Backend> Qwen3<B> {
    /// Give every linear layer named in `config.target_modules` a new PEFT-initialized adapter
    /// (f32, on the model's device), replacing any it had. Returns how many were attached.
    pub fn attach_lora(&mut self, config: &LoraConfig, seed: u64) -> Result<usize, ModelError> {
        check_targets(&config.target_modules)?;
        if config.rank == 0 {
            return Err(ModelError::Lora("rank 0; a LoRA rank must be ≥ 1".into()));
        }
        let device = self.device();
        let mut n = 0;
        for (name, short, linear) in self.linears_mut() {
            if config.target_modules.iter().any(|t| t == short) {
                let [d_in, d_out] = linear.dims;
                *linear.lora = Some(peft_init(&name, d_in, d_out, config, seed, &device));
                n += 1;
            }
        }
        Ok(n)
    }

    /// Whether any linear layer carries an adapter.
    pub fn has_lora(&self) -> bool {
        self.linears().iter().any(|(_, _, l)| l.lora.is_some())
    }

    /// Remove every adapter, keeping the base weights as they are.
    pub fn without_lora(mut self) -> Self {
        for (_, _, linear) in self.linears_mut() {
            *linear.lora = None;
        }
        self
    }

    /// Fold every adapter into its base weight (W + s·A B, in f32, then in W's dtype) and drop
    /// the adapters: the merged model computes the same function without them. The merged
    /// weights are new leaves that keep their trainability.
    pub fn merge_lora(mut self) -> Self {
        for layer in &mut self.layers {
            layer.self_attn.qkv_proj.merge_lora();
            layer.self_attn.o_proj.merge_lora();
            layer.mlp.gate_up_proj.merge_lora();
            layer.mlp.down_proj.merge_lora();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::Dispatch;

    fn config(rank: u32) -> LoraConfig {
        LoraConfig { rank, alpha: 8.0, ..LoraConfig::default() }
    }

    #[test]
    fn a_new_adapter_is_peft_init_and_leaves_the_model_unchanged() {
        let device = crate::cpu();
        let base = crate::load("tiny-vocab512", &device).unwrap();
        let ids = vec![vec![3u32, 17, 42, 99, 7, 250]];
        let before: Vec<f32> = base.logits(&ids).into_data().to_vec().unwrap();
        let mut adapted = base;
        let n = adapted.attach_lora(&config(4), 7).unwrap();
        assert_eq!(n, 2 * 7, "7 linear layers in each of 2 decoder layers");
        let after: Vec<f32> = adapted.logits(&ids).into_data().to_vec().unwrap();
        assert_eq!(before, after, "B = 0: the adapted model is the base model exactly");
        let lora = adapted.layers[0].mlp.down_proj.lora.as_ref().unwrap();
        let (a, b) = lora.hf_data();
        let d_in = adapted.config.intermediate_size;
        assert_eq!((a.len(), b.len()), (4 * d_in, adapted.config.hidden_size * 4));
        assert!(b.iter().all(|&x| x == 0.0));
        let bound = 1.0 / (d_in as f32).sqrt();
        assert!(a.iter().all(|x| x.abs() <= bound), "A ~ U(−1/√in, 1/√in)");
        let var = a.iter().map(|x| (x * x) as f64).sum::<f64>() / a.len() as f64;
        let want = (bound * bound) as f64 / 3.0;
        assert!((var / want - 1.0).abs() < 0.15, "variance {var} vs {want} of a uniform");
        assert_eq!(lora.scale(), 2.0, "alpha 8 / r 4");
    }

    #[test]
    fn merging_folds_the_adapter_into_the_weights() {
        let device = crate::cpu();
        let mut model = crate::load("tiny-vocab512", &device).unwrap();
        model.attach_lora(&LoraConfig { target_modules: vec!["q_proj".into(), "up_proj".into()], ..config(2) }, 1).unwrap();
        // A non-zero B, so the adapter changes the output.
        for (_, _, l) in model.linears_mut() {
            if let Some(lora) = l.lora {
                let [r, out] = lora.b.dims();
                let data: Vec<f32> = (0..r * out).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.01).collect();
                lora.b = Param::from_tensor(Tensor::<Dispatch, 2>::from_data(TensorData::new(data, [r, out]), &device));
            }
        }
        let ids = vec![vec![1u32, 5, 9, 200, 4]];
        let base: Vec<f32> = model.clone().without_lora().logits(&ids).into_data().to_vec().unwrap();
        let unmerged: Vec<f32> = model.logits(&ids).into_data().to_vec().unwrap();
        let merged_model = model.merge_lora();
        assert!(!merged_model.has_lora());
        let merged: Vec<f32> = merged_model.logits(&ids).into_data().to_vec().unwrap();
        let worst = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst(&unmerged, &base) > 1e-3, "the adapter matters: {}", worst(&unmerged, &base));
        assert!(worst(&unmerged, &merged) < 1e-5, "merged = unmerged: {}", worst(&unmerged, &merged));
    }

    #[test]
    fn unknown_targets_and_rank_zero_are_refused() {
        let mut model = crate::load("tiny-vocab512", &crate::cpu()).unwrap();
        let err = model.attach_lora(&LoraConfig { target_modules: vec!["qkv_proj".into()], ..config(4) }, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "LoRA: target module `qkv_proj` is not a linear layer of the model; its linear layers are q_proj, k_proj, v_proj, o_proj, \
             gate_proj, up_proj, down_proj"
        );
        assert!(model.attach_lora(&config(0), 0).unwrap_err().to_string().contains("rank 0"));
    }
}
