//! Train a LoRA adapter for a few steps on a fixture checkpoint and save it the way a LoRA
//! run's checkpoint does (`TrainablePolicy::save`: PEFT's layout), with arl's logits of the
//! fixture's inputs beside it (`arl.logits.safetensors`), so the fixture script can check
//! that PEFT loads what arl writes and computes the same logits:
//!
//!     cargo run -p arl-qwen3 --example lora_save -- tests/fixtures/qwen3/qwen3-a /tmp/arl-adapter
//!     ~/.cache/arl/venv-hf/bin/python scripts/fixtures/make_lora_fixtures.py --check-arl-save tests/fixtures/qwen3/qwen3-a /tmp/arl-adapter
//!
//! With a third argument, an existing adapter (e.g. a PEFT fixture with a `rank_pattern` on
//! one layer) is loaded and written back by arl instead of training a new one.

use std::collections::HashMap;
use std::path::Path;

use arl_core::config::LoraConfig;
use arl_core::policy::{ScoreParams, TrainablePolicy};
use arl_optim::OptimConfig;
use arl_qwen3::{QwenTrainer, TrainSetup};
use safetensors::SafeTensors;
use safetensors::tensor::{Dtype, TensorView};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (base, dst, from) = match args.as_slice() {
        [base, dst] => (base, dst, None),
        [base, dst, from] => (base, dst, Some(Path::new(from))),
        _ => return Err("usage: lora_save BASE_FIXTURE_DIR DST [ADAPTER_TO_RESAVE]".into()),
    };
    let dst = Path::new(dst);
    if let Some(from) = from {
        let model = arl_qwen3::load_adapted(base, Some(from), &arl_qwen3::cpu(), arl_qwen3::DType::F32)?;
        model.save_adapter(dst, Some(base))?;
        write_logits(base, dst)?;
        println!("loaded {} on {base} and saved it again, with arl's logits, to {}", from.display(), dst.display());
        return Ok(());
    }
    let lora = LoraConfig {
        rank: 4,
        alpha: 8.0,
        target_modules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"].map(String::from).to_vec(),
        ..LoraConfig::default()
    };
    let setup = TrainSetup { lora: Some(lora), seed: 5, ..TrainSetup::default() };
    let mut trainer = QwenTrainer::load_setup(base, &arl_qwen3::cpu(), OptimConfig::default(), &setup)?;
    let vocab = trainer.model().config.vocab_size as u32;
    // A few steps of cross-entropy on one fixed sequence: B moves away from zero.
    let seq: Vec<u32> = (0..24u32).map(|i| (i * 37 + 11) % vocab).collect();
    for _ in 0..5 {
        let lp = trainer.score_with_grad(std::slice::from_ref(&seq), None, ScoreParams::default())?.logprobs;
        trainer.backward(lp.sum().neg().reshape([1]))?;
        trainer.step(1e-2)?;
    }
    trainer.save(dst)?;
    write_logits(base, dst)?;
    let (total, trainable) = trainer.param_counts();
    println!("saved a LoRA adapter of {base} ({trainable} of {total} parameters trained, 5 steps) and arl's logits to {}", dst.display());
    Ok(())
}

fn write_logits(base: &str, dst: &Path) -> Result<(), Box<dyn std::error::Error>> {
    // arl's logits of the base fixture's recorded inputs, base + adapter unmerged.
    let name = Path::new(base).file_name().and_then(|n| n.to_str()).ok_or("BASE must name a fixture directory")?;
    let inputs = std::fs::read(Path::new(base).with_file_name(format!("{name}.logits.safetensors")))?;
    let st = SafeTensors::deserialize(&inputs)?;
    let model = arl_qwen3::load_adapted(base, Some(dst), &arl_qwen3::cpu(), arl_qwen3::DType::F32)?;
    let mut out: Vec<(String, Vec<usize>, Dtype, Vec<u8>)> = Vec::new();
    for n in st.names() {
        let Some(len) = n.strip_prefix("ids_") else { continue };
        let view = st.tensor(n)?;
        let ids: Vec<u32> = view.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
        let logits: Vec<f32> =
            model.logits(std::slice::from_ref(&ids)).into_data().convert::<f32>().to_vec().map_err(|e| format!("{e:?}"))?;
        out.push((
            format!("logits_{len}"),
            vec![ids.len(), logits.len() / ids.len()],
            Dtype::F32,
            logits.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ));
        out.push((n.to_string(), vec![ids.len()], Dtype::I64, view.data().to_vec()));
    }
    let views: Vec<(String, TensorView<'_>)> = out
        .iter()
        .map(|(n, s, d, b)| Ok((n.clone(), TensorView::new(*d, s.clone(), b)?)))
        .collect::<Result<_, safetensors::SafeTensorError>>()?;
    safetensors::serialize_to_file(views, Some(HashMap::from([("format".into(), "pt".into())])), &dst.join("arl.logits.safetensors"))?;
    Ok(())
}
