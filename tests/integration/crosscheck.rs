//! `arl crosscheck` and the comparison behind it: identical backends agree exactly, a
//! perturbed weight on one side is detected and located, and (with `--features tch`) burn's
//! CPU backend and libtorch agree on every fixture checkpoint within 1e-4 in f32.

use std::path::{Path, PathBuf};

use arl_qwen3::crosscheck::{compare, score_rows};
use arl_qwen3::{DispatchQwen3, Qwen3, cpu};
use arl_tests::arl;
use burn::module::Param;
use burn::tensor::{Tensor, TensorData};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/qwen3").join(name)
}

fn crosscheck(args: &[&str]) -> Result<serde_json::Value, String> {
    let out = arl(&[&["crosscheck"], args].concat())?;
    Ok(serde_json::from_str(&out).expect("one JSON document"))
}

#[test]
fn the_same_backend_twice_agrees_exactly() {
    let dir = fixture("qwen3-b");
    let doc = crosscheck(&["--model", dir.to_str().unwrap(), "--backends", "cpu,cpu", "--samples", "3", "--max-new-tokens", "5"]).unwrap();
    assert_eq!(doc["pass"], true);
    let pair = &doc["pairs"][0];
    assert_eq!((pair["a"].as_str(), pair["b"].as_str(), pair["tokens"].as_u64()), (Some("cpu"), Some("cpu"), Some(15)));
    assert_eq!(pair["max_abs_diff"].as_f64(), Some(0.0));
    assert_eq!(pair["mismatch_kl"].as_f64(), Some(0.0));
    assert!(doc["timing"]["1:cpu"]["score_s"].as_f64().is_some());
}

#[test]
fn a_perturbed_weight_on_one_side_is_detected_and_located() {
    // LM-head column of token 27 shifted: log p(27 | …) changes wherever 27 is the target
    // (row 1, position 7, the only such place); every other token moves ~1/vocab as much.
    let device = cpu();
    let clean: DispatchQwen3 = Qwen3::load_dir(&fixture("qwen3-b"), &device).unwrap();
    let mut bad: DispatchQwen3 = Qwen3::load_dir(&fixture("qwen3-b"), &device).unwrap();
    let w = bad.lm_head.take().expect("qwen3-b has an untied LM head").val();
    let [h, v] = w.dims();
    let delta: Vec<f32> = (0..h * v).map(|i| if i % v == 27 { 0.5 } else { 0.0 }).collect();
    bad.lm_head = Some(Param::from_tensor(w + Tensor::from_data(TensorData::new(delta, [h, v]), &device)));

    let seqs: Vec<Vec<u32>> = vec![(1..=12).collect(), (20..=31).collect()];
    let pos: Vec<Vec<usize>> = seqs.iter().map(|s| (1..s.len()).collect()).collect();
    let (a, b) = (score_rows(&clean, &seqs, &pos).unwrap(), score_rows(&bad, &seqs, &pos).unwrap());
    let same = compare(("cpu", &a), ("cpu", &a.clone()), &seqs, &pos);
    assert_eq!(same.max_abs_diff, 0.0);
    let s = compare(("cpu", &a), ("perturbed", &b), &seqs, &pos);
    assert!(s.max_abs_diff > 1e-3, "perturbation not detected: {s:?}");
    assert!(s.mismatch_kl > 0.0);
    let w = s.worst.unwrap();
    assert_eq!((w.row, w.position, w.token), (1, 7, 27), "mislocated: {w:?}");
    assert_eq!(w.context_before, vec![20, 21, 22, 23, 24, 25, 26]);
}

#[test]
fn crosscheck_refuses_bad_requests_with_the_fix() {
    let err = crosscheck(&["--backends", "cpu"]).unwrap_err();
    assert!(err.contains("at least two backends"), "{err}");
    let err = crosscheck(&["--backends", "cpu,gpu"]).unwrap_err();
    assert!(err.contains("valid backends: cpu, cuda, tch, tch-cuda"), "{err}");
    let err = crosscheck(&["--backends", "cpu,cpu", "--dtype", "fp8"]).unwrap_err();
    assert!(err.contains("unknown dtype `fp8`; valid dtypes: f32, bf16, f16"), "{err}");
    #[cfg(not(feature = "cuda"))]
    assert!(crosscheck(&["--backends", "cpu,cuda"]).unwrap_err().contains("--features cuda"));
    #[cfg(not(feature = "tch"))]
    assert!(crosscheck(&["--backends", "cpu,tch"]).unwrap_err().contains("--features tch"));
}

#[cfg(feature = "tch")]
#[test]
fn cpu_and_libtorch_agree_on_every_fixture_within_1e_4() {
    for name in ["qwen3-a", "qwen3-b", "qwen2", "llama"] {
        let dir = fixture(name);
        let doc = crosscheck(&[
            "--model",
            dir.to_str().unwrap(),
            "--backends",
            "cpu,tch",
            "--samples",
            "4",
            "--max-new-tokens",
            "12",
            "--tolerance",
            "1e-4",
        ])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let max = doc["pairs"][0]["max_abs_diff"].as_f64().unwrap();
        assert!(max <= 1e-4, "{name}: max |Δ logprob| {max}");
        eprintln!("{name}: cpu vs tch max |Δ logprob| {max:.2e}, mean {:.2e}", doc["pairs"][0]["mean_abs_diff"].as_f64().unwrap());
    }
}

#[cfg(feature = "tch")]
#[test]
fn crosscheck_exits_non_zero_above_tolerance() {
    // Flex and libtorch do not sum in the same order, so some |Δ| is above 1e-12.
    let dir = fixture("llama");
    let err = crosscheck(&["--model", dir.to_str().unwrap(), "--backends", "cpu,tch", "--tolerance", "1e-12"]).unwrap_err();
    assert!(err.contains("disagree") && err.contains("position"), "{err}");
}

/// Half precision on both sides: burn-flex and libtorch round differently, so the bound is
/// bf16-sized (HF's own bf16 logits sit ~0.1 from its f32 ones on these fixtures).
#[cfg(feature = "tch")]
#[test]
fn cpu_and_libtorch_agree_in_bf16_and_f16_within_half_precision_noise() {
    for (dtype, tol) in [("bf16", 0.25), ("f16", 0.05)] {
        for name in ["qwen3-a", "qwen2"] {
            let dir = fixture(name);
            let doc = crosscheck(&[
                "--model",
                dir.to_str().unwrap(),
                "--backends",
                "cpu,tch",
                "--dtype",
                dtype,
                "--samples",
                "4",
                "--max-new-tokens",
                "12",
                "--tolerance",
                &tol.to_string(),
            ])
            .unwrap_or_else(|e| panic!("{name} {dtype}: {e}"));
            let (max, mean) = (doc["pairs"][0]["max_abs_diff"].as_f64().unwrap(), doc["pairs"][0]["mean_abs_diff"].as_f64().unwrap());
            eprintln!("{name} {dtype}: cpu vs tch max |Δ logprob| {max:.2e}, mean {mean:.2e}");
            assert!(max > 0.0 && max <= tol, "{name} {dtype}: {max}");
        }
    }
}

/// Needs a GPU at run time: run by scripts/gpu-check.sh on a CUDA machine. f32 on `cuda` is
/// f32: with upstream cubek-matmul's tf32 products the `qwen3-a` fixture differed by up to
/// 4.4e-3 on an H200; with the patch in third_party/cubek-matmul, 2.4e-6
/// (results/gpu-check-h200/).
#[cfg(feature = "cuda")]
#[test]
fn cuda_cpu_and_cuda_agree_on_every_fixture_within_1e_4_in_f32_not_tf32() {
    for name in ["qwen3-a", "qwen3-b", "qwen2", "llama"] {
        let dir = fixture(name);
        let doc = crosscheck(&[
            "--model",
            dir.to_str().unwrap(),
            "--backends",
            "cpu,cuda",
            "--samples",
            "4",
            "--max-new-tokens",
            "12",
            "--tolerance",
            "1e-4",
        ])
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!("{name}: cpu vs cuda max |Δ logprob| {:.2e}", doc["pairs"][0]["max_abs_diff"].as_f64().unwrap());
    }
}

/// Needs a GPU at run time (scripts/gpu-check.sh). The update, not only the forward pass: one
/// GRPO step's loss and gradient norm (`arl bench score`, the same weights and sequences on both
/// sides) on `cuda` match `cpu` in f32: autodiff on the GPU, and with the `fusion` feature
/// burn's fused kernels too.
#[cfg(feature = "cuda")]
#[test]
fn cuda_update_gradient_norm_matches_cpu_within_1e_4_relative_in_f32() {
    let score = |name: &str, backend: &str| -> (f64, f64) {
        let dir = fixture(name);
        let args = ["bench", "score", "--model", dir.to_str().unwrap(), "--backend", backend];
        let out = arl(&[&args[..], &["--batch", "2", "--seq-len", "24", "--policy-frac", "0.5", "--steps", "1"]].concat())
            .unwrap_or_else(|e| panic!("{name} {backend}: {e}"));
        let doc: serde_json::Value = serde_json::from_str(&out).expect("one JSON document");
        (doc["first_loss"].as_f64().unwrap(), doc["first_grad_norm"].as_f64().unwrap())
    };
    for name in ["qwen3-a", "llama"] {
        let ((cpu_loss, cpu_norm), (cuda_loss, cuda_norm)) = (score(name, "cpu"), score(name, "cuda"));
        let rel = (cuda_norm - cpu_norm).abs() / cpu_norm;
        eprintln!("{name}: grad norm cpu {cpu_norm:.6} cuda {cuda_norm:.6} (relative {rel:.1e}); loss {cpu_loss} / {cuda_loss}");
        assert!(cpu_norm > 0.0 && rel <= 1e-4, "{name}: {cpu_norm} vs {cuda_norm}");
        assert!((cuda_loss - cpu_loss).abs() <= 1e-5, "{name}: loss {cpu_loss} vs {cuda_loss}");
    }
}
