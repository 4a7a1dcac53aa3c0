//! Your own RL loop on arl's building blocks — the loop `arl run` runs, written out: sample a
//! group of episodes per task (the env grades them), turn rewards into advantages, take one
//! policy-gradient step, and evaluate on the held-out tasks before and after.
//!
//!     cargo run --release -p arl --example own_loop -- [MODEL] [STEPS]
//!
//! MODEL defaults to `smollm2-135m` (run `scripts/setup/smollm2.sh` once), STEPS to 10. The
//! pieces are the ones `arl run` builds from a config (`Built::new`): an env and its chat codec,
//! a policy loss, an advantage estimator and a trainable policy; the loop calls
//! `rollout`, `AdvantageFn::advantages`, `update` and `evaluate`.

use arl::commands::Built;
use arl_core::config::RunConfig;
use arl_core::{AdvantageInput, Split};
use arl_train::eval::evaluate;
use arl_train::rollout::rollout;
use arl_train::trainer::{eval_options, rollout_options, update_options};
use arl_train::update::update;

/// Train `model` on the `sum` env for `steps` steps; returns held-out pass@1 before and after.
pub fn own_loop(model: &str, steps: usize, log: &mut dyn FnMut(String)) -> anyhow::Result<(f64, f64)> {
    arl_plugins::link();
    let mut config = RunConfig::default();
    config.model.source = model.to_string();
    config.env.name = "sum".into();
    let Built { env, codec, loss, advantage, mut policy, .. } = Built::new(&config)?;
    let (prompts, group) = (config.trainer.prompts as usize, config.trainer.group_size as usize);
    let tasks = env.tasks(Split::Train)?;
    let eval_opts = eval_options(&config, env.as_ref());
    let bootstrap = arl_core::eval::Bootstrap::default();
    let mut quiet = |_: usize, _: usize| {};
    let before = evaluate(env.as_ref(), &codec, &mut policy, config.eval.n as usize, &eval_opts, &bootstrap, &mut quiet)?;
    log(format!("before: pass@1 {:.3}", before.summary.pass_at_1));
    for step in 0..steps {
        // Sample: `group` episodes of each of `prompts` tasks; the env's reward comes with each.
        let specs: Vec<_> =
            (0..prompts).flat_map(|g| std::iter::repeat_n((tasks[(step * prompts + g) % tasks.len()].clone(), g), group)).collect();
        let opts = rollout_options(&config, env.as_ref(), config.trainer.seed.wrapping_add(step as u64));
        let (episodes, _) = rollout(env.as_ref(), &codec, &mut policy, &specs, &opts, &mut quiet)?;
        // Advantages: rewards normalized within each task's group (GRPO).
        let rewards: Vec<f64> = episodes.iter().map(|e| e.reward).collect();
        let groups: Vec<usize> = specs.iter().map(|s| s.1).collect();
        let advantages = advantage.advantages(&AdvantageInput::new(&rewards, &groups))?;
        // Forward, backward and one AdamW step on the policy loss.
        let m = update(&mut policy, loss.as_ref(), &episodes, &advantages, &update_options(&config, loss.as_ref(), &opts))?;
        log(format!("step {}: reward {:.3}, loss {:+.4}", step + 1, rewards.iter().sum::<f64>() / rewards.len() as f64, m.loss_value));
    }
    let after = evaluate(env.as_ref(), &codec, &mut policy, config.eval.n as usize, &eval_opts, &bootstrap, &mut quiet)?;
    log(format!("after: pass@1 {:.3}", after.summary.pass_at_1));
    Ok((before.summary.pass_at_1, after.summary.pass_at_1))
}

#[allow(dead_code)] // the tests include this file for `own_loop` alone
fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let model = args.get(1).map(String::as_str).unwrap_or("smollm2-135m");
    let steps = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(10);
    own_loop(model, steps, &mut |line| println!("{line}"))?;
    Ok(())
}
