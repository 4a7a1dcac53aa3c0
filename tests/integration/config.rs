//! The run configuration document: round trips, files, and bad files.

use arl_core::RunConfig;
use arl_core::config::Overrides;

#[test]
fn toml_round_trip_is_lossless() {
    let text = r#"
        [env]
        name = "sum"
        max_turns = 3
        [env.options]
        max_operand = 5
        [loss]
        name = "grpo"
        aggregation = "seq-mean-token-mean"
        clip_high = 0.28
        [trainer]
        steps = 7
        micro = 4
    "#;
    let config = RunConfig::from_toml_str(text).unwrap();
    assert_eq!(config.env.max_turns, 3);
    assert_eq!(config.env.options["max_operand"], 5);
    assert_eq!(config.trainer.micro, Some(4));
    let again = RunConfig::from_toml_str(&config.to_toml()).unwrap();
    assert_eq!(again, config);
    assert_eq!(again.to_toml(), config.to_toml());
}

#[test]
fn defaults_round_trip() {
    let config = RunConfig::default();
    assert_eq!(RunConfig::from_toml_str(&config.to_toml()).unwrap(), config);
}

#[test]
fn a_file_then_overrides() {
    let dir = std::env::temp_dir().join(format!("arl-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.toml");
    std::fs::write(&path, "[trainer]\nsteps = 2\nlr = 1e-6\n").unwrap();
    let mut o = Overrides::default();
    o.push_set("trainer.steps=9").unwrap();
    let config = RunConfig::load(Some(&path), &o).unwrap();
    assert_eq!((config.trainer.steps, config.trainer.lr), (9, 1e-6));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_files_are_one_line_naming_the_file() {
    let missing = RunConfig::load(Some("/nonexistent/run.toml".as_ref()), &Overrides::default()).unwrap_err();
    assert!(missing.to_string().starts_with("cannot read config file /nonexistent/run.toml"), "{missing}");
    let syntax = RunConfig::from_toml_str("[trainer\nsteps = 1").unwrap_err().to_string();
    assert!(syntax.starts_with("config file <string> is not valid TOML"), "{syntax}");
    assert_eq!(syntax.lines().count(), 1, "{syntax}");
}

#[test]
fn set_values_are_typed() {
    let mut o = Overrides::default();
    o.push_set("sampling.top_k=20").unwrap();
    o.push_set("sampling.top_p=0.95").unwrap();
    o.push_set("model.source=Qwen/Qwen3-0.6B").unwrap();
    o.push_set("env.randomize_names=false").unwrap();
    let c = RunConfig::load(None, &o).unwrap();
    assert_eq!((c.sampling.top_k, c.sampling.top_p), (Some(20), Some(0.95)));
    assert_eq!(c.model.source, "Qwen/Qwen3-0.6B");
    assert!(!c.env.randomize_names);
}

#[test]
fn malformed_set_arguments_are_rejected() {
    let mut o = Overrides::default();
    assert!(o.push_set("no-equals-sign").unwrap_err().to_string().contains("expected key=value"));
    assert!(o.push_set("trainer..steps=1").is_err());
    o.push_set("trainer.steps=1").unwrap();
    o.push_set("trainer.steps.deeper=1").unwrap();
    let err = RunConfig::load(None, &o).unwrap_err().to_string();
    assert_eq!(err, "config key `trainer.steps`: is a value, not a section, so `trainer.steps.deeper` cannot be set");
}
