//! Help that researchers read: every flag of every subcommand described, flags that map to
//! config keys name the key and its default (read from the code), `run --help` ends with
//! examples, and one name per concept.

use arl_tests::arl_status;
use clap::CommandFactory;

/// Every (command path, flag) of the `arl` command tree.
fn all_args() -> Vec<(String, clap::Arg)> {
    fn walk(path: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Arg)>) {
        for arg in cmd.get_arguments() {
            out.push((path.to_string(), arg.clone()));
        }
        for sub in cmd.get_subcommands() {
            walk(&format!("{path} {}", sub.get_name()), sub, out);
        }
    }
    let mut out = Vec::new();
    walk("arl", &arl::Cli::command(), &mut out);
    out
}

/// `arl ARGS --help` as text.
fn help(args: &[&str]) -> String {
    let mut full: Vec<&str> = args.to_vec();
    full.push("--help");
    let (code, out) = arl_status(&full);
    assert_eq!(code, 0);
    out.expect_err("--help comes back as clap's message")
}

#[test]
fn every_flag_of_every_command_has_help() {
    let args = all_args();
    assert!(args.len() > 100, "the walk reaches the subcommands: {}", args.len());
    let missing: Vec<String> = args
        .iter()
        .filter(|(_, a)| !["help", "version"].contains(&a.get_id().as_str()))
        .filter(|(_, a)| a.get_help().is_none_or(|h| h.to_string().trim().is_empty()))
        .map(|(p, a)| format!("{p} --{}", a.get_id()))
        .collect();
    assert!(missing.is_empty(), "flags without help: {missing:?}");
}

#[test]
fn run_help_names_each_key_with_its_default_and_ends_with_examples() {
    let text = help(&["run"]);
    let d = arl_core::RunConfig::default();
    for want in [
        format!("(trainer.steps) [default: {}]", d.trainer.steps),
        format!("(trainer.group_size) [default: {}]", d.trainer.group_size),
        format!("(model.source) [default: {}]", d.model.source),
        format!("(env.name) [default: {}]", d.env.name),
        "(sampling.max_new_tokens) [default: unset]".to_string(),
    ] {
        assert!(text.contains(&want), "{want} in\n{text}");
    }
    let tail: Vec<&str> = text.trim_end().lines().rev().take(9).collect();
    assert!(tail.iter().any(|l| l.trim() == "Examples:"), "run --help ends with examples:\n{text}");
    assert!(tail[0].trim_start().starts_with("arl "), "the last line is an example: {}", tail[0]);
    assert!(text.contains("Training:"), "training flags under their own heading:\n{text}");
}

#[test]
fn eval_help_has_no_training_flags() {
    let text = help(&["eval"]);
    for flag in ["--lr ", "--steps ", "--resume", "--group-size", "--prompts", "--loss ", "--advantage ", "--algo", "--overwrite"] {
        assert!(!text.contains(flag), "{flag} in eval --help:\n{text}");
    }
    for flag in ["--model", "--env", "--eval-n", "--tokenizer", "--set"] {
        assert!(text.contains(flag), "{flag} missing from eval --help");
    }
}

#[test]
fn one_name_per_concept() {
    let long: Vec<String> =
        all_args().iter().filter_map(|(p, a)| a.get_long().map(|l| format!("{} --{l}", p.split(' ').nth(1).unwrap_or("")))).collect();
    for gone in ["advantages --estimator", "loss --agg"] {
        assert!(!long.iter().any(|l| l == gone), "{gone} is named by its config key now");
    }
    assert!(long.iter().any(|l| l == "advantages --advantage"));
    assert!(long.iter().any(|l| l == "run --advantage"));
}

#[test]
fn version_names_the_build_commit() {
    let (code, out) = arl_status(&["--version"]);
    assert_eq!(code, 0);
    let text = out.unwrap_err();
    let commit = arl::GIT_COMMIT.expect("built from a git checkout");
    assert!(text.contains(&commit[..12]), "{text}");
}
