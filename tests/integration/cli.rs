//! `arl list`, `arl config …` and `arl run` validation, run in-process.

use arl_tests::arl;

use crate::test_plugins::STAND_INS;

fn with_stand_ins<'a>(args: &[&'a str]) -> Vec<&'a str> {
    args.iter().copied().chain(STAND_INS).collect()
}

#[test]
fn list_shows_every_registry_and_the_example_plugin() {
    let out = arl(&["list"]).unwrap();
    for title in ["Environments:", "Tool sets:", "Sandboxes:", "Advantage estimators:", "Policy losses:", "Backends compiled in:"] {
        assert!(out.contains(title), "missing {title} in\n{out}");
    }
    assert!(out.lines().any(|l| l.trim_start().starts_with("sum ")), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("cpu ")), "{out}");
    assert!(out.contains("Model presets"), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("smollm2-135m ") && l.contains("scripts/setup/smollm2.sh")), "{out}");
    assert!(out.lines().any(|l| l.trim_start().starts_with("tiny ") && l.contains("random weights")), "{out}");
}

#[test]
fn list_json_names_the_example_plugin() {
    let doc: serde_json::Value = serde_json::from_str(&arl(&["list", "--json"]).unwrap()).unwrap();
    assert!(doc["envs"].as_array().unwrap().iter().any(|e| e["name"] == "sum"));
    assert!(doc["backends"].as_array().unwrap().iter().any(|e| e["name"] == "cpu"));
}

#[test]
fn config_show_applies_flags_and_set_in_order() {
    let args = with_stand_ins(&["config", "show", "--steps", "3", "--set", "trainer.steps=5", "--set", "loss.clip_high=0.28"]);
    let out = arl(&args).unwrap();
    let doc: toml::Table = out.parse().unwrap();
    assert_eq!(doc["trainer"]["steps"].as_integer(), Some(5), "--set wins over the flag");
    assert_eq!(doc["loss"]["clip_high"].as_float(), Some(0.28));
    assert_eq!(doc["loss"]["name"].as_str(), Some("test-zero"));
}

#[test]
fn config_schema_is_json_schema_of_the_run_config() {
    let schema: serde_json::Value = serde_json::from_str(&arl(&["config", "schema"]).unwrap()).unwrap();
    assert_eq!(schema["title"], "RunConfig");
    for section in ["env", "sandbox", "model", "sampling", "loss", "advantage", "trainer", "eval", "output"] {
        assert!(schema["properties"][section].is_object(), "schema lacks {section}");
    }
}

fn run_error(args: &[&str]) -> String {
    let err = arl(&with_stand_ins(args)).unwrap_err();
    assert_eq!(err.lines().count(), 1, "errors are one line: {err}");
    err
}

#[test]
fn unknown_key_is_named() {
    let err = run_error(&["run", "--set", "trainer.stepz=3"]);
    assert!(err.starts_with("config key `trainer.stepz`: unknown field `stepz`, expected one of `steps`"), "{err}");
}

#[test]
fn unknown_section_is_named() {
    let err = run_error(&["run", "--set", "trainr.steps=3"]);
    assert!(err.contains("config key `trainr`: unknown field `trainr`"), "{err}");
}

#[test]
fn wrong_type_is_named() {
    let err = run_error(&["run", "--set", "trainer.steps=lots"]);
    assert_eq!(err, "config key `trainer.steps`: invalid type: string \"lots\", expected a whole number from 0 to 4294967295");
}

#[test]
fn unknown_plugin_names_list_the_choices() {
    let err = run_error(&["run", "--env", "nope"]);
    assert!(err.starts_with("config key `env.name`: unknown env `nope`; valid envs: "), "{err}");
    let err = run_error(&["run", "--set", "loss.name=grpp"]);
    assert!(err.starts_with("config key `loss.name`: unknown loss `grpp`; valid losses: "), "{err}");
    assert!(err.contains("test-zero"), "{err}");
}

#[test]
fn unknown_backend_lists_the_choices() {
    let err = run_error(&["run", "--backend", "gpu"]);
    assert_eq!(err, "config key `model.backend`: unknown variant `gpu`, expected one of `cpu`, `cuda`, `tch`, `tch-cuda`");
}

#[test]
fn a_backend_not_compiled_in_names_its_feature() {
    if arl_core::BackendKind::Cuda.compiled_in() {
        return; // this binary has CUDA; the message cannot be produced
    }
    let err = run_error(&["run", "--backend", "cuda"]);
    assert!(err.contains("rebuild with `--features cuda`"), "{err}");
}

#[test]
fn out_of_range_values_are_named() {
    let err = run_error(&["run", "--group-size", "0"]);
    assert_eq!(err, "config key `trainer.group_size`: 0 is out of range; valid: ≥ 1");
}

#[test]
fn results_schema_has_the_new_fields() {
    let schema: serde_json::Value = serde_json::from_str(&arl(&["results", "schema"]).unwrap()).unwrap();
    let text = schema.to_string();
    let defs = &schema["$defs"];
    for key in ["tokenizer", "model_dir", "model_snapshot", "git_commit", "run_id"] {
        assert!(defs["RunMeta"]["properties"][key].is_object(), "meta.{key} in {text}");
    }
    for key in ["episodes", "tool_stats"] {
        assert!(defs["Evaluation"]["properties"][key].is_object(), "evaluation.{key}");
    }
    for key in ["response_tokens", "finish"] {
        assert!(defs["EpisodeSummary"]["properties"][key].is_object(), "episode.{key}");
    }
    let ratio = &defs["StepMetrics"]["properties"]["ratio_mean"];
    assert!(ratio.to_string().contains("null"), "ratio_mean may be null: {ratio}");
    for key in ["response_tokens_mean", "finish", "non_finite_updates"] {
        assert!(defs["StepMetrics"]["properties"][key].is_object(), "step.{key}");
    }
}

/// Top-k/top-p sampling is refused for training in one line naming the key (scoring does not
/// replay the truncation); the temperature is fine.
#[test]
fn truncated_sampling_is_refused_for_training() {
    let err = run_error(&["run", "--set", "sampling.top_k=20"]);
    assert!(err.starts_with("config key `sampling.top_k`: training samples from the whole distribution"), "{err}");
    let err = run_error(&["run", "--set", "sampling.top_p=0.95"]);
    assert!(err.starts_with("config key `sampling.top_p`:") && err.contains("unset it"), "{err}");
}

/// docs/training.md's defaults paragraph states what `arl config show` prints: every `key = value`
/// in it is the shown value, and the keys it calls unset are unset (with the grpo loss's own
/// aggregation token-mean, and `--algo grpo` DeepSeekMath's seq-mean-token-mean).
#[test]
fn the_documented_defaults_match_config_show() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/training.md")).unwrap();
    let start = readme.find("**Defaults**").expect("docs/training.md has a **Defaults** paragraph");
    let paragraph = &readme[start..start + readme[start..].find("\n\n").unwrap()];
    let shown: toml::Table = arl(&["config", "show"]).unwrap().parse().unwrap();
    let lookup = |key: &str| -> Option<toml::Value> {
        let mut node = toml::Value::Table(shown.clone());
        for part in key.split('.') {
            node = node.get(part)?.clone();
        }
        Some(node)
    };
    let mut checked = 0;
    for span in paragraph.split('`').skip(1).step_by(2) {
        let Some((key, value)) = span.split_once(" = ") else { continue };
        let want: toml::Table = format!("v = {value}").parse().unwrap_or_else(|e| panic!("`{span}`: {e}"));
        assert_eq!(lookup(key).as_ref(), Some(&want["v"]), "docs/training.md says `{span}`; arl config show has {:?}", lookup(key));
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} `key = value` pairs in the defaults paragraph");
    for unset in ["loss.aggregation", "loss.clip_low", "loss.clip_high", "loss.horizon", "sampling.top_k", "sampling.top_p"] {
        assert!(paragraph.contains(&format!("`{unset}`")) || paragraph.contains(&format!("`{}`", unset.rsplit('.').next().unwrap())));
        assert_eq!(lookup(unset), None, "docs/training.md calls `{unset}` unset");
    }
    arl_plugins::link();
    let build = |toml: &str| {
        let config = arl_core::RunConfig::from_toml_str(toml).unwrap();
        let loss = (arl_core::registry::get::<arl_core::registry::LossPlugin>(&config.loss.name).unwrap().build)(&config.loss).unwrap();
        arl_core::Aggregation::resolve(config.loss.aggregation, loss.as_ref())
    };
    assert_eq!(build(""), arl_core::Aggregation::TokenMean);
    assert_eq!(build("algo = \"grpo\""), arl_core::Aggregation::SeqMeanTokenMean);
}
