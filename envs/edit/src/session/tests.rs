//! Scripted episodes: text in (as a policy would write it), reward and statistics out.

use std::sync::{Arc, OnceLock};

use arl_core::config::EnvConfig;
use arl_core::toolcall::parse_turn;
use arl_core::{Env, Outcome, Sandbox, Split, Step, ToolOutcome};
use arl_sandbox::{RlimitSandbox, RlimitSettings};
use arl_tasks::BugTask;

use crate::{EditEnv, EditOptions};

fn sandbox() -> Arc<dyn Sandbox> {
    static SANDBOX: OnceLock<Arc<RlimitSandbox>> = OnceLock::new();
    SANDBOX.get_or_init(|| Arc::new(RlimitSandbox::new(RlimitSettings::default()).unwrap())).clone()
}

fn env() -> EditEnv {
    EditEnv::new(&EnvConfig { name: "edit".into(), ..EnvConfig::default() }, &EditOptions::default(), sandbox())
}

fn call(name: &str, args: &str) -> String {
    format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>")
}

/// Play `turns` until the episode ends; the observations of every turn, and the outcome.
fn play(env: &EditEnv, task: &arl_core::Task, turns: &[String]) -> (Vec<Vec<ToolOutcome>>, Option<Outcome>) {
    let mut session = env.reset(task).unwrap();
    let mut seen = Vec::new();
    for text in turns {
        match session.step(&parse_turn(text, &env.tools(), env.max_calls_per_turn() as usize)).unwrap() {
            Step::Observe(results) => seen.push(results.into_iter().map(|r| r.outcome).collect()),
            Step::Done(outcome) => return (seen, Some(outcome)),
        }
    }
    (seen, None)
}

fn oracle(op: &str) -> Vec<String> {
    vec![
        call("read_source", "{}"),
        format!("I will apply {op}.\n{}", call("apply_edit", &format!("{{\"op\": \"{op}\"}}"))),
        call("run_tests", "{}"),
        call("submit", "{}"),
    ]
}

#[test]
fn the_oracle_reads_applies_the_fix_tests_and_submits_for_reward_one() {
    let env = env();
    let tasks: Vec<_> =
        env.tasks(Split::Train).unwrap().into_iter().step_by(9).chain(env.tasks(Split::Heldout).unwrap().into_iter().take(1)).collect();
    for task in &tasks {
        let bug = BugTask::from_task(task).unwrap();
        let (seen, outcome) = play(&env, task, &oracle(&bug.fix));
        let outcome = outcome.expect("submit ends the episode");
        assert_eq!(outcome.reward, 1.0, "{}: {seen:?}", task.id);
        assert!(seen[0][0].text().contains(&format!("def {}(", bug.function)));
        assert!(seen[1][0].text().starts_with(&format!("Applied edit {}", bug.fix)));
        assert!(seen[2][0].text().contains(" 0 failed"), "{}: {:?}", task.id, seen[2]);
        let s = &outcome.stats;
        assert_eq!((s.turns, s.tool_calls, s.malformed_calls, s.failed_calls, s.truncated), (4, 4, 0, 0, false));
        assert_eq!((s.counters["edits"], s.counters["test_runs"], s.counters["reads"]), (1, 1, 1));
    }
}

#[test]
fn an_agent_that_applies_a_distractor_gets_zero() {
    let env = env();
    for task in env.tasks(Split::Train).unwrap().iter().take(3) {
        let bug = BugTask::from_task(task).unwrap();
        let wrong = bug.ops.iter().find(|o| o.name != bug.fix).unwrap();
        let (_, outcome) = play(&env, task, &oracle(&wrong.name));
        assert_eq!(outcome.unwrap().reward, 0.0, "{}", task.id);
    }
}

#[test]
fn malformed_and_failed_calls_use_the_turn_and_are_counted() {
    let env = env();
    let task = &env.tasks(Split::Train).unwrap()[0];
    let bug = BugTask::from_task(task).unwrap();
    let turns = vec![
        "<tool_call>{\"name\": \"apply_edit\", \"arguments\": {\"op\": </tool_call>".to_string(),
        call("apply_edit", "{\"op\": \"Z\"}"),
        call("apply_edit", "{\"operation\": \"A\"}"),
        call("apply_edit", &format!("{{\"op\": \"{}\"}}", bug.fix)),
        call("apply_edit", &format!("{{\"op\": \"{}\"}}", bug.fix)),
        call("submit", "{}"),
    ];
    let (seen, outcome) = play(&env, task, &turns);
    assert!(matches!(&seen[0][0], ToolOutcome::Malformed(t) if t.contains("not valid JSON")));
    assert!(matches!(&seen[1][0], ToolOutcome::Failed(t) if t.contains("no edit named `Z`")));
    assert!(matches!(&seen[2][0], ToolOutcome::Malformed(t) if t.contains("missing required argument `op`")));
    assert!(matches!(&seen[4][0], ToolOutcome::Failed(t) if t.contains("one per episode")));
    let outcome = outcome.unwrap();
    assert_eq!(outcome.reward, 1.0);
    let s = &outcome.stats;
    assert_eq!((s.turns, s.malformed_calls, s.failed_calls, s.counters["edits"]), (6, 2, 2, 1));
}

#[test]
fn the_turn_budget_ends_the_episode_truncated() {
    let env = env();
    let task = &env.tasks(Split::Train).unwrap()[1];
    let turns: Vec<String> = (0..10).map(|_| call("read_source", "{}")).collect();
    let (seen, outcome) = play(&env, task, &turns);
    assert_eq!(seen.len(), 5, "six turns: five observed, the sixth ends it");
    let outcome = outcome.unwrap();
    assert_eq!((outcome.reward, outcome.stats.turns, outcome.stats.truncated), (0.0, 6, true));
}

#[test]
fn a_final_answer_ends_the_episode_with_the_source_as_it_stands() {
    let env = env();
    let task = &env.tasks(Split::Train).unwrap()[2];
    let bug = BugTask::from_task(task).unwrap();
    let (_, outcome) = play(&env, task, &["It looks fine to me.".to_string()]);
    assert_eq!(outcome.unwrap().reward, 0.0);
    let turns = [call("apply_edit", &format!("{{\"op\": \"{}\"}}", bug.fix)), "Done.".into()];
    let (_, outcome) = play(&env, task, &turns);
    assert_eq!(outcome.unwrap().reward, 1.0);
}

#[test]
fn finish_grades_once_and_the_prompt_lists_every_edit() {
    let env = env();
    let task = &env.tasks(Split::Heldout).unwrap()[0];
    let bug = BugTask::from_task(task).unwrap();
    let mut session = env.reset(task).unwrap();
    let prompt = &session.messages()[1].content;
    for op in &bug.ops {
        assert!(prompt.contains(&format!("{}: replace `{}` with `{}`", op.name, op.old, op.new)), "{prompt}");
    }
    assert!(!prompt.contains(&bug.template), "the prompt names no template");
    let outcome = session.finish().unwrap();
    assert!(outcome.stats.truncated);
    assert!(session.finish().is_err());
}

#[test]
fn unknown_options_are_rejected_by_name() {
    let mut config = EnvConfig { name: "edit".into(), ..EnvConfig::default() };
    config.options.insert("train_instancez".into(), serde_json::json!(2));
    let err = crate::build(&config, sandbox()).err().unwrap().to_string();
    assert!(err.contains("unknown field `train_instancez`"), "{err}");
}

/// With `menu_order = "episode"` each seed lists the task's edits in an order of its own, and
/// the fix is the edit, not the letter: the seeded menu's own name for it earns 1, the task's
/// name for it (where that now names another edit) 0. With the default order a seed changes nothing.
#[test]
fn a_menu_drawn_per_episode_keeps_the_fix_under_its_new_name() {
    let mut config = EnvConfig { name: "edit".into(), ..EnvConfig::default() };
    config.options.insert("menu_order".into(), serde_json::json!("episode"));
    let per_episode = crate::build(&config, sandbox()).unwrap();
    let task = &env().tasks(Split::Train).unwrap()[0];
    let bug = BugTask::from_task(task).unwrap();
    let fix = bug.op(&bug.fix).unwrap();
    let fix_line = |name: &str| format!("{name}: replace `{}` with `{}`", fix.old, fix.new);
    let prompt = |env: &dyn Env, seed| env.reset_seeded(task, seed).unwrap().messages()[1].content.clone();
    assert_eq!(prompt(&env(), 3), env().reset(task).unwrap().messages()[1].content, "the task's order by default");
    let (mut names, mut moved) = (std::collections::BTreeSet::new(), false);
    for seed in 0..12 {
        let text = prompt(per_episode.as_ref(), seed);
        let name = ["A", "B", "C", "D", "E"].into_iter().find(|n| text.contains(&fix_line(n))).expect("the fix is listed");
        names.insert(name);
        let reward = |op: &str| {
            let mut session = per_episode.reset_seeded(task, seed).unwrap();
            let turns = oracle(op);
            let mut last = None;
            for text in &turns {
                if let Step::Done(outcome) = session.step(&parse_turn(text, &per_episode.tools(), 4)).unwrap() {
                    last = Some(outcome.reward);
                    break;
                }
            }
            last.expect("submit ends the episode")
        };
        assert_eq!(reward(name), 1.0, "seed {seed}: {text}");
        if name != bug.fix {
            assert_eq!(reward(&bug.fix), 0.0, "seed {seed}: the task's letter names another edit here");
            moved = true;
        }
    }
    assert!(moved && names.len() == bug.ops.len(), "{names:?}");
}

#[test]
fn a_menu_order_is_task_or_episode_and_episode_is_the_edit_gyms_alone() {
    let mut config = EnvConfig { name: "edit".into(), ..EnvConfig::default() };
    config.options.insert("menu_order".into(), serde_json::json!("step"));
    let err = crate::build(&config, sandbox()).err().unwrap().to_string();
    assert!(err.contains("env.options.menu_order") && err.contains("expected `task` or `episode`"), "{err}");
    config.options.insert("menu_order".into(), serde_json::json!("episode"));
    let err = arl_tasks::BankEnvOptions::parse("tools", &config).err().unwrap().to_string();
    assert!(err.contains("env.options.menu_order: the `tools` gym shows no menu"), "{err}");
}
