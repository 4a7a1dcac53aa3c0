//! The model's gradients against HF transformers' (tests/fixtures/qwen3/<name>.grads.safetensors,
//! `scripts/fixtures/make_qwen3_fixtures.py --gradients`): the loss is a weighted sum of
//! next-token log-probabilities over four sequences (5, 24, 64 and 300 tokens: the longest runs
//! attention in three chunks of queries, `arl_qwen3::layers::QUERY_CHUNK`), which HF scored one
//! at a time and arl scores as one right-padded batch. Every parameter's gradient is compared,
//! through plain scoring (the LM head in burn ops) and through the trainer's deferred head (the
//! fused host pass on burn-flex), on burn-flex and, with `--features tch`, on libtorch's CPU
//! device (the burn-op head GPUs take). This is the outside check of the whole backward pass:
//! attention's softmax (burn-autodiff's one tracked op, third_party/README.md), rotary, the
//! grouped-query layout, the norms, the MLP, the padding mask, tied and untied heads.

use std::collections::BTreeMap;
use std::path::Path;

use arl_core::policy::ScoreParams;
use arl_qwen3::{DispatchQwen3, Qwen3, cpu, score};
use burn::module::Param;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn::{Dispatch, DispatchDevice};
use safetensors::SafeTensors;

type Grads = <Dispatch as AutodiffBackend>::Gradients;

const FIXTURES: [&str; 4] = ["qwen3-a", "qwen3-b", "qwen2", "llama"];

struct Reference {
    sequences: Vec<Vec<u32>>,
    /// `weights[r][t - 1]` weighs `log p(ids[t] | ids[..t])` of sequence `r`.
    weights: Vec<Vec<f32>>,
    grads: BTreeMap<String, Vec<f32>>,
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn reference(name: &str) -> Reference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/qwen3/{name}.grads.safetensors"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (mut sequences, mut weights) = (Vec::new(), Vec::new());
    for n in [5, 24, 64, 300] {
        let ids = st.tensor(&format!("ids_{n}")).unwrap();
        sequences.push(ids.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect());
        weights.push(f32s(st.tensor(&format!("weights_{n}")).unwrap().data()));
    }
    let grads =
        st.names().iter().filter_map(|n| Some((n.strip_prefix("grad.")?.to_string(), f32s(st.tensor(n).unwrap().data())))).collect();
    Reference { sequences, weights, grads }
}

/// `[rows, longest]` weights in the layout of [`score::ScoreOutput::logprobs`].
fn weight_tensor(r: &Reference, device: &DispatchDevice) -> Tensor<Dispatch, 2> {
    let l = r.sequences.iter().map(Vec::len).max().unwrap();
    let mut w = vec![0.0f32; r.sequences.len() * l];
    for (row, ws) in r.weights.iter().enumerate() {
        for (i, x) in ws.iter().enumerate() {
            w[row * l + i + 1] = *x;
        }
    }
    Tensor::from_data(TensorData::new(w, [r.sequences.len(), l]), device)
}

fn grad_of<const D: usize>(p: &Param<Tensor<Dispatch, D>>, grads: &Grads) -> Vec<f32> {
    let n = p.val().shape().num_elements();
    p.val().grad(grads).map_or_else(|| vec![0.0; n], |g| g.into_data().convert::<f32>().to_vec::<f32>().unwrap())
}

/// The gradient of an arl `[in, out]` weight in HF's `[out, in]` layout.
fn transposed_grad(w: &Param<Tensor<Dispatch, 2>>, grads: &Grads, cols: std::ops::Range<usize>) -> Vec<f32> {
    let [d_in, width] = w.dims();
    let (g, d_out) = (grad_of(w, grads), cols.len());
    (0..d_out * d_in).map(|k| g[(k % d_in) * width + cols.start + k / d_in]).collect()
}

/// Every parameter's gradient under its HF name, linear weights transposed to HF's `[out, in]`.
fn hf_grads(model: &DispatchQwen3, grads: &Grads) -> BTreeMap<String, Vec<f32>> {
    let mut out = BTreeMap::new();
    out.insert("model.embed_tokens.weight".to_string(), grad_of(&model.embed_tokens, grads));
    for (name, _, linear) in model.linears() {
        // q/k/v and gate/up are columns of one merged weight (and bias).
        let cols = linear.columns.clone();
        out.insert(format!("{name}.weight"), transposed_grad(linear.merged, grads, cols.clone()));
        if let Some(b) = linear.merged_bias {
            out.insert(format!("{name}.bias"), grad_of(b, grads)[cols].to_vec());
        }
    }
    for (i, l) in model.layers.iter().enumerate() {
        let p = format!("model.layers.{i}");
        out.insert(format!("{p}.input_layernorm.weight"), grad_of(&l.input_layernorm.weight, grads));
        out.insert(format!("{p}.post_attention_layernorm.weight"), grad_of(&l.post_attention_layernorm.weight, grads));
        for (n, norm) in [("q_norm", &l.self_attn.q_norm), ("k_norm", &l.self_attn.k_norm)] {
            if let Some(norm) = norm {
                out.insert(format!("{p}.self_attn.{n}.weight"), grad_of(&norm.weight, grads));
            }
        }
    }
    out.insert("model.norm.weight".to_string(), grad_of(&model.norm.weight, grads));
    if let Some(w) = &model.lm_head {
        out.insert("lm_head.weight".to_string(), transposed_grad(w, grads, 0..w.dims()[1]));
    }
    out
}

/// Each parameter's max |Δ| within `1e-4` of its largest HF gradient entry; the worst ratio.
fn compare(what: &str, got: &BTreeMap<String, Vec<f32>>, want: &BTreeMap<String, Vec<f32>>) -> f32 {
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{what}: parameter names");
    let mut worst = 0.0f32;
    for (name, w) in want {
        let g = &got[name];
        assert_eq!(g.len(), w.len(), "{what}: {name} size");
        let scale = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert!(scale > 0.0, "{what}: HF's {name} gradient is zero");
        let diff = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(diff <= 1e-4 * scale, "{what}: {name}: max |Δ grad| {diff:.3e} against max |grad| {scale:.3e}");
        worst = worst.max(diff / scale);
    }
    worst
}

#[test]
fn gradients_equal_hf_transformers_on_every_fixture() {
    gradients_equal_hf_on(DispatchDevice::autodiff(cpu()), "flex");
    #[cfg(feature = "tch")]
    gradients_equal_hf_on(
        DispatchDevice::autodiff(arl_qwen3::device::device_from_args("tch", 0, "f32").expect("libtorch's CPU device")),
        "libtorch",
    );
}

fn gradients_equal_hf_on(device: DispatchDevice, backend: &str) {
    for name in FIXTURES {
        let r = reference(name);
        let model: DispatchQwen3 =
            Qwen3::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/qwen3").join(name), &device).unwrap();
        let w = weight_tensor(&r, &device);

        let plain = score::score(&model, &r.sequences, None, ScoreParams::default()).unwrap();
        let grads = (plain.logprobs * w.clone()).sum().backward();
        let worst = compare(&format!("{name} on {backend}, plain scoring"), &hf_grads(&model, &grads), &r.grads);

        let (out, head) = score::score_deferred(&model, &r.sequences, None, ScoreParams::default()).unwrap();
        let upstream = (out.logprobs * w).sum().backward();
        let grads = head.expect("positions to score").surrogate(&upstream, &model).backward();
        let worst_deferred = compare(&format!("{name} on {backend}, the trainer's deferred head"), &hf_grads(&model, &grads), &r.grads);
        eprintln!(
            "{name} on {backend}: {} parameters, worst max |Δ grad| / max |grad|: {worst:.2e} plain, {worst_deferred:.2e} deferred",
            r.grads.len()
        );
    }
}
