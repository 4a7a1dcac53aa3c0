//! `sum` — the example environment plugin, and the template for writing your own.
//!
//! Each task asks for the sum of two small numbers; the reply earns reward 1 when the
//! first integer in it is the sum. It has no tools and one turn. Everything an env plugin
//! needs is here: a settings struct read from `[env.options]` (unknown keys rejected), a
//! deterministic task bank with a held-out split, an [`EnvSession`] per episode (here a
//! [`SingleTurn`]: one reply, graded), and one
//! `arl_core::register!` line. To ship a plugin of your own, copy this crate, rename it,
//! and add `use your_crate as _;` to `plugins` (or reference it from your binary).

use std::sync::Arc;

use arl_core::config::EnvConfig;
use arl_core::{Env, EnvError, EnvSession, EpisodeStats, Message, Outcome, PluginError, Sandbox, SingleTurn, Split, Task, ToolSchema};
use serde::Deserialize;
use serde_json::json;

/// `[env.options]` of the `sum` env.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SumOptions {
    /// Operands are drawn from 0..=max_operand.
    pub max_operand: u32,
    pub train_tasks: usize,
    pub heldout_tasks: usize,
}

impl Default for SumOptions {
    fn default() -> Self {
        Self { max_operand: 9, train_tasks: 64, heldout_tasks: 16 }
    }
}

pub struct SumEnv {
    options: SumOptions,
    seed: u64,
}

arl_core::register!(EnvPlugin {
    name: "sum",
    about: "example plugin: reply with the sum of two numbers (no tools, one turn)",
    build: build,
});

fn build(config: &EnvConfig, _sandbox: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
    let options: SumOptions = serde_json::from_value(config.options.clone().into()).map_err(|e| PluginError {
        kind: "env",
        name: "sum".into(),
        message: format!("env.options: {e}"),
    })?;
    Ok(Box::new(SumEnv { options, seed: config.seed }))
}

const SYSTEM: &str = "You are a calculator. Reply with the number only.";

impl SumEnv {
    pub fn new(options: SumOptions, seed: u64) -> Self {
        Self { options, seed }
    }

    /// Every (a, b) pair is a task; pairs are shuffled by the seed and the first
    /// `heldout_tasks` form the held-out split, so the two splits never share a task.
    fn pairs(&self) -> Vec<(u32, u32)> {
        let m = self.options.max_operand;
        let mut pairs: Vec<(u32, u32)> = (0..=m).flat_map(|a| (0..=m).map(move |b| (a, b))).collect();
        arl_core::rng::SplitMix64(self.seed ^ 0x9e37_79b9_7f4a_7c15).shuffle(&mut pairs);
        pairs
    }
}

impl Env for SumEnv {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        let pairs = self.pairs();
        let (skip, take) = match split {
            Split::Heldout => (0, self.options.heldout_tasks),
            Split::Train => (self.options.heldout_tasks, self.options.train_tasks),
            // One held-out split: its sums are as new as they come.
            Split::HeldoutInstances => (0, 0),
        };
        Ok(pairs
            .into_iter()
            .skip(skip)
            .take(take)
            .map(|(a, b)| Task {
                id: format!("sum-{a}-{b}"),
                family: if a + b >= 10 { "carry" } else { "single" }.into(),
                split,
                data: json!({ "a": a, "b": b }),
            })
            .collect())
    }

    fn tools(&self) -> Vec<ToolSchema> {
        Vec::new()
    }

    /// The answer is a number: a few tokens are enough.
    fn default_max_new_tokens(&self) -> u32 {
        8
    }

    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        let operand = |k: &str| task.data[k].as_u64().ok_or_else(|| EnvError::Other(format!("task {}: missing operand {k}", task.id)));
        let (a, b) = (operand("a")?, operand("b")?);
        let messages = vec![Message::system(SYSTEM), Message::user(format!("What is {a} + {b}?"))];
        // One turn: whatever the reply, it is the answer (this env offers no tools).
        Ok(Box::new(SingleTurn::new(messages, move |text: &str, truncated| {
            let reward = if first_integer(text) == Some(a + b) { 1.0 } else { 0.0 };
            Outcome { reward, stats: EpisodeStats { turns: 1, truncated, ..Default::default() } }
        })))
    }
}

/// The first run of ASCII digits in `text`, if any.
fn first_integer(text: &str) -> Option<u64> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::{AssistantTurn, Step};

    fn env() -> SumEnv {
        SumEnv::new(SumOptions::default(), 7)
    }

    fn answer(session: &mut dyn EnvSession, text: &str) -> f64 {
        match session.step(&AssistantTurn { text: text.into(), calls: vec![] }).unwrap() {
            Step::Done(outcome) => outcome.reward,
            Step::Observe(_) => panic!("sum has no tools"),
        }
    }

    #[test]
    fn splits_are_disjoint_and_deterministic() {
        let train = env().tasks(Split::Train).unwrap();
        let heldout = env().tasks(Split::Heldout).unwrap();
        assert_eq!((train.len(), heldout.len()), (64, 16));
        assert!(heldout.iter().all(|h| train.iter().all(|t| t.id != h.id)));
        assert_eq!(train, env().tasks(Split::Train).unwrap());
        assert_ne!(train, SumEnv::new(SumOptions::default(), 8).tasks(Split::Train).unwrap());
    }

    #[test]
    fn reward_is_one_only_for_the_right_sum() {
        let task = Task { id: "t".into(), family: "x".into(), split: Split::Train, data: json!({"a": 3, "b": 4}) };
        for (text, reward) in [("7", 1.0), (" 7.", 1.0), ("The answer is 7", 1.0), ("8", 0.0), ("", 0.0), ("77", 0.0)] {
            let mut session = env().reset(&task).unwrap();
            assert_eq!(answer(session.as_mut(), text), reward, "reply {text:?}");
        }
    }

    #[test]
    fn a_finished_episode_refuses_more_turns() {
        let task = &env().tasks(Split::Train).unwrap()[0];
        let mut session = env().reset(task).unwrap();
        answer(session.as_mut(), "1");
        assert!(matches!(session.finish(), Err(EnvError::Finished)));
    }

    #[test]
    fn unknown_option_is_rejected_by_name() {
        let mut config = EnvConfig::default();
        config.options.insert("max_operandd".into(), json!(3));
        let sandbox: Arc<dyn Sandbox> = Arc::new(NoSandbox);
        let err = build(&config, sandbox).err().unwrap().to_string();
        assert!(err.contains("unknown field `max_operandd`"), "{err}");
    }

    struct NoSandbox;
    impl Sandbox for NoSandbox {
        fn name(&self) -> &str {
            "none"
        }
        fn run(&self, _: &arl_core::Job) -> Result<arl_core::JobOutcome, arl_core::SandboxError> {
            unreachable!("sum never runs code")
        }
    }
}
