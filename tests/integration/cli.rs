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
