//! The loss family through the command line: presets, `arl loss eval`, `arl advantages`,
//! and the refusals, against the reference fixture of arl-losses.

use arl_tests::{ScratchDir, arl, scratch_dir};
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("../../losses/tests/fixtures/expected.json")).unwrap()
}

fn case(name: &str) -> Value {
    fixture()["losses"].as_array().unwrap().iter().find(|c| c["case"] == name).unwrap().clone()
}

/// Write `doc` to `input.json` in a scratch directory named after the test (removed when the
/// returned guard drops, unless the test panicked); returns the guard and the file's path.
fn temp_json(tag: &str, doc: &Value) -> (ScratchDir, String) {
    let dir = scratch_dir(&format!("losses-cli-{tag}"));
    let path = dir.join("input.json");
    std::fs::write(&path, serde_json::to_string(doc).unwrap()).unwrap();
    (dir, path.display().to_string())
}

const SANDBOX: [&str; 2] = ["--sandbox", "test-null"];

fn show(args: &[&str]) -> Result<String, String> {
    let mut all = vec!["config", "show"];
    all.extend(SANDBOX);
    all.extend(args);
    arl(&all)
}

#[test]
fn list_shows_losses_estimators_and_presets() {
    let out = arl(&["list"]).unwrap();
    assert!(out.contains("Algorithm presets (--algo):"), "{out}");
    for name in ["grpo ", "dapo ", "gspo ", "rloo ", "liteppo ", "cispo ", "sapo ", "dppo ", "icepop ", "kpop ", "drgrpo "] {
        assert!(out.lines().any(|l| l.trim_start().starts_with(name)), "no `{name}` in\n{out}");
    }
    let doc: Value = serde_json::from_str(&arl(&["list", "--json"]).unwrap()).unwrap();
    let names = |k: &str| doc[k].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    for loss in ["grpo", "ppo", "gspo", "gspo-token", "cispo", "sapo", "dppo-tv", "dppo-kl", "dro", "is", "reinforce", "cross-entropy"] {
        assert!(names("losses").contains(&loss.to_string()), "{loss}");
    }
    for est in ["grpo", "drgrpo", "rloo", "liteppo", "reinforce++", "reinforce++-baseline", "norm"] {
        assert!(names("advantages").contains(&est.to_string()), "{est}");
    }
    assert_eq!(names("algos").len(), 11);
}

#[test]
fn the_default_loss_and_estimator_are_registered() {
    let doc: toml::Table = show(&[]).unwrap().parse().unwrap();
    assert_eq!(doc["loss"]["name"].as_str(), Some("grpo"));
    assert_eq!(doc["advantage"]["name"].as_str(), Some("grpo"));
}

#[test]
fn a_preset_fills_only_what_the_user_left_unset() {
    let out = show(&["--algo", "dapo"]).unwrap();
    assert!(out.starts_with("# algo `dapo`: DAPO"), "{out}");
    assert!(out.contains("#   loss.clip_high = 0.28"), "{out}");
    let doc: toml::Table = out.parse().unwrap();
    assert_eq!(doc["algo"].as_str(), Some("dapo"));
    assert_eq!(doc["loss"]["clip_high"].as_float(), Some(0.28));
    assert_eq!(doc["loss"]["aggregation"].as_str(), Some("token-mean"));
    assert_eq!(doc["trainer"]["max_sampling_attempts"].as_integer(), Some(10));
    assert_eq!(doc["trainer"]["skip_zero_variance"].as_bool(), Some(true));
    // --set beats the preset, key by key; the rest of the preset stays.
    let doc: toml::Table = show(&["--algo", "dapo", "--set", "loss.clip_high=0.3"]).unwrap().parse().unwrap();
    assert_eq!(doc["loss"]["clip_high"].as_float(), Some(0.3));
    assert_eq!(doc["loss"]["clip_low"].as_float(), Some(0.2));
    // A flag beats it too.
    let doc: toml::Table = show(&["--algo", "rloo", "--advantage", "grpo"]).unwrap().parse().unwrap();
    assert_eq!(doc["advantage"]["name"].as_str(), Some("grpo"));
    // Nested sections (IcePop) come through.
    let doc: toml::Table = show(&["--algo", "icepop"]).unwrap().parse().unwrap();
    assert_eq!(doc["loss"]["icepop"]["lower"].as_float(), Some(0.5));
    assert_eq!(doc["loss"]["decoupled"].as_bool(), Some(true));
}

#[test]
fn every_preset_validates() {
    for preset in ["grpo", "drgrpo", "dapo", "gspo", "rloo", "liteppo", "cispo", "sapo", "dppo", "icepop", "kpop"] {
        show(&["--algo", preset]).unwrap_or_else(|e| panic!("{preset}: {e}"));
    }
}

#[test]
fn an_unknown_preset_lists_the_valid_ones() {
    let err = show(&["--algo", "dapoo"]).unwrap_err();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("config key `algo`: unknown algorithm preset `dapoo`; valid algorithm presets: cispo, dapo,"), "{err}");
}

#[test]
fn a_setting_that_does_not_apply_to_the_loss_fails_in_one_line() {
    let err = show(&["--loss", "is", "--set", "loss.clip_high=0.28"]).unwrap_err();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("config key `loss`: loss `is`: setting `loss.clip_high` does not apply to this loss"), "{err}");
    // A preset's keys that the chosen loss does not use are refused the same way.
    let err = show(&["--algo", "sapo", "--loss", "grpo"]).unwrap_err();
    assert!(err.contains("setting `loss.tau_pos` does not apply"), "{err}");
    let err = show(&["--set", "advantage.lambda=0.9"]).unwrap_err();
    assert!(err.contains("setting `advantage.lambda` does not apply"), "{err}");
}

#[test]
fn loss_eval_reproduces_the_reference() {
    let (_dir, path) = temp_json("eval", &fixture()["batch"]);
    let out: Value = serde_json::from_str(&arl(&["loss", "eval", "--loss", "ppo", "--input", &path]).unwrap()).unwrap();
    let want = case("ppo");
    assert!((out["loss"].as_f64().unwrap() - want["expected_loss"].as_f64().unwrap()).abs() < 1e-9, "{out}");
    assert_eq!(out["grad_log_prob"].as_array().unwrap().len(), 4);
    assert!(out["metrics"]["clip_frac_high"].as_f64().unwrap() > 0.0, "{out}");
    // --aggregation and --set (with or without the `loss.` prefix) use the run config's keys.
    let args = [
        "loss",
        "eval",
        "--loss",
        "grpo",
        "--aggregation",
        "token-mean",
        "--set",
        "clip_high=0.28",
        "--set",
        "loss.dual_clip=3.0",
        "--input",
        &path,
    ];
    let out: Value = serde_json::from_str(&arl(&args).unwrap()).unwrap();
    let want = case("dapo_dual_clip");
    assert!((out["loss"].as_f64().unwrap() - want["expected_loss"].as_f64().unwrap()).abs() < 1e-9, "{out}");
    let g = &out["grad_log_prob"][0][1];
    assert!((g.as_f64().unwrap() - want["expected_grad"][0][1].as_f64().unwrap()).abs() < 1e-7);
}

#[test]
fn loss_eval_refusals_are_one_line() {
    let (_dir, path) = temp_json("refuse", &fixture()["batch"]);
    let err = arl(&["loss", "eval", "--loss", "is", "--set", "clip_high=0.3", "--input", &path]).unwrap_err();
    assert!(err.starts_with("loss `is`: setting `loss.clip_high` does not apply"), "{err}");
    let err = arl(&["loss", "eval", "--loss", "grpo", "--aggregation", "mean", "--input", &path]).unwrap_err();
    assert!(err.starts_with("--aggregation mean: unknown aggregation `mean`; valid: token-mean"), "{err}");
    let err = arl(&["loss", "eval", "--loss", "grpp", "--input", &path]).unwrap_err();
    assert!(err.starts_with("unknown loss `grpp`; valid losses:"), "{err}");
}

#[test]
fn advantages_reproduce_the_reference() {
    let fx = fixture();
    for case in fx["advantages"].as_array().unwrap() {
        let mut input = fx["rewards"].clone();
        if let Some(counts) = case.get("token_counts") {
            input["token_counts"] = counts.clone();
        }
        let (_dir, path) = temp_json(&format!("adv-{}", case["case"].as_str().unwrap()), &input);
        let mut args = vec!["advantages".to_string(), "--advantage".into(), case["estimator"].as_str().unwrap().into()];
        for (k, v) in case["config"].as_object().unwrap() {
            args.push("--set".into());
            args.push(format!("{k}={v}"));
        }
        args.extend(["--input".to_string(), path.clone()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out: Value = serde_json::from_str(&arl(&args).unwrap()).unwrap();
        let got = out["advantages"].as_array().unwrap();
        let want = case["expected"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{}: {out}", case["case"]);
        for (g, w) in got.iter().zip(want) {
            assert!((g.as_f64().unwrap() - w.as_f64().unwrap()).abs() < 1e-12, "{}: {out}", case["case"]);
        }
    }
}

/// `arl advantages` with `response_tokens` gives verl's numbers (the fixture made from verl's
/// own functions by scripts/fixtures/make_verl_fixtures.py).
#[test]
fn advantages_with_response_lengths_reproduce_verl() {
    let fx: Value = serde_json::from_str(include_str!("../../losses/tests/fixtures/verl.json")).unwrap();
    let input = serde_json::json!({ "rewards": fx["rewards"], "group_ids": fx["group_ids"], "response_tokens": fx["response_tokens"] });
    let (_dir, path) = temp_json("adv-verl", &input);
    let cases = fx["advantages"].as_array().unwrap();
    assert_eq!(cases.len(), 5);
    for case in cases {
        let out: Value =
            serde_json::from_str(&arl(&["advantages", "--advantage", case["estimator"].as_str().unwrap(), "--input", &path]).unwrap())
                .unwrap();
        let got = out["advantages"].as_array().unwrap();
        let want = case["expected"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{}: {out}", case["estimator"]);
        for (g, w) in got.iter().zip(want) {
            let (g, w) = (g.as_f64().unwrap(), w.as_f64().unwrap());
            assert!((g - w).abs() < 1e-9 * (1.0 + w.abs()), "{}: {g} vs verl {w}", case["estimator"]);
        }
    }
}
