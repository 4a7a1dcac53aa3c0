//! The trainer's LM head (`arl_qwen3::head`): run outside the graph a chunk of rows at a time
//! and recomputed after the loss's backward, it gives the scores plain scoring gives and the
//! gradient burn's autodiff gives through the whole head, for every parameter, on tied and
//! untied models, with entropy, at a temperature, over several chunks, and with PEFT-made
//! LoRA adapters on a frozen base (the gradient reaches the adapters through the body only);
//! on burn-flex, through the fused host pass, and with `--features tch` also on libtorch's CPU
//! device, through burn's ops as on a GPU.

use std::path::Path;

use arl_core::policy::ScoreParams;
use arl_qwen3::{DispatchQwen3, Qwen3, cpu, score};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn::{Dispatch, DispatchDevice};

type Grads = <Dispatch as AutodiffBackend>::Gradients;

struct Collect<'a> {
    grads: &'a Grads,
    out: Vec<(usize, Vec<f32>)>,
}

impl ModuleVisitor<Dispatch> for Collect<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Dispatch, D>>) {
        let g = param.val().grad(self.grads).map(|g| g.into_data().convert::<f32>().to_vec::<f32>().unwrap());
        let n = param.val().shape().num_elements();
        self.out.push((n, g.unwrap_or_else(|| vec![0.0; n])));
    }
}

fn grads_of(model: &DispatchQwen3, grads: &Grads) -> Vec<(usize, Vec<f32>)> {
    let mut c = Collect { grads, out: Vec::new() };
    model.visit(&mut c);
    c.out
}

fn values(t: Tensor<Dispatch, 2>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

#[test]
fn the_chunked_head_has_the_autodiff_gradient() {
    // burn-flex takes the fused host pass (`arl_qwen3::fused`); libtorch's CPU device, where
    // compiled in, the head's burn ops, which a GPU runs too.
    chunked_head_matches_autodiff_on(DispatchDevice::autodiff(cpu()));
    #[cfg(feature = "tch")]
    chunked_head_matches_autodiff_on(DispatchDevice::autodiff(
        arl_qwen3::device::device_from_args("tch", 0, "f32").expect("libtorch's CPU device"),
    ));
}

fn chunked_head_matches_autodiff_on(device: DispatchDevice) {
    let host = arl_qwen3::fused::fuses_on_host::<Dispatch>(&device);
    assert_eq!(host, !<Dispatch as burn::tensor::backend::Backend>::name(&device).contains("libtorch"), "which path runs");
    let seqs: Vec<Vec<u32>> = vec![(0..14).map(|i| (i * 31 % 300) as u32).collect(), vec![9, 8, 7, 6, 5, 4, 3]];
    let positions = vec![vec![2, 3, 5, 8, 9, 10, 13], vec![1, 4, 6]];
    let (b, l) = (2, 14);
    let coef = |seed: u32| {
        let v: Vec<f32> = (0..b * l).map(|i| ((((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 1000) as f32 / 500.0) - 1.0).collect();
        Tensor::<Dispatch, 2>::from_data(TensorData::new(v, [b, l]), &device)
    };
    let (a, c, e) = (coef(1), coef(2), coef(3));
    // A loss whose gradient in the scores is not constant (as a clipped ratio's is not).
    let loss = |lp: Tensor<Dispatch, 2>, ent: Tensor<Dispatch, 2>| {
        (lp.clone() * a.clone()).sum() + (lp.exp() * e.clone()).sum() + (ent * c.clone()).sum()
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let cases =
        [("qwen3-a", None), ("qwen3-b", None), ("llama", None), ("qwen3-a", Some("qwen3-a-qv")), ("qwen3-b", Some("qwen3-b-rslora"))];
    for (base, adapter) in cases {
        let mut model: DispatchQwen3 = Qwen3::load_dir(&fixtures.join("qwen3").join(base), &device).unwrap();
        if let Some(adapter) = adapter {
            // As a LoRA run: the base frozen, the adapters trainable.
            model = model.no_grad();
            model.load_adapter(&fixtures.join("lora").join(adapter), Some(0.0)).unwrap();
        }
        let name = format!("{base} {adapter:?} on {}", if host { "flex (fused)" } else { "libtorch (burn ops)" });
        let params = ScoreParams::at(0.7).with_entropy(true);
        let plain = score::score(&model, &seqs, Some(&positions), params).unwrap();
        let (lp_ref, ent_ref) = (values(plain.logprobs.clone()), values(plain.entropy.clone().unwrap()));
        let want = grads_of(&model, &loss(plain.logprobs, plain.entropy.unwrap()).backward());
        // Three rows per chunk: the 10 scored rows take four chunks.
        let (out, head) = score::score_deferred_with(&model, &seqs, Some(&positions), params, 3).unwrap();
        let head = head.expect("positions were requested");
        let worst = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| (p - q).abs()).fold(0.0f32, f32::max);
        assert!(worst(&values(out.logprobs.clone()), &lp_ref) < 1e-5, "{name}: log-probabilities");
        assert!(worst(&values(out.entropy.clone().unwrap()), &ent_ref) < 1e-5, "{name}: entropies");
        let upstream = loss(out.logprobs, out.entropy.unwrap()).backward();
        let got = grads_of(&model, &head.surrogate(&upstream, &model).backward());
        assert_eq!(got.len(), want.len());
        let mut checked = 0;
        for (i, ((n, g), (_, w))) in got.iter().zip(&want).enumerate() {
            let scale = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let diff = worst(g, w);
            assert!(diff <= 1e-4 * scale.max(1e-3), "{name}: parameter {i} ({n} values): max |Δ grad| {diff}, max |grad| {scale}");
            checked += (scale > 0.0) as usize;
        }
        let least = if adapter.is_some() { 4 } else { 10 };
        assert!(checked > least, "{name}: only {checked} parameters have a gradient");
    }
}
