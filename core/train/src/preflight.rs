//! Checks that need the env and the tokenizer but not the model, run after those are built and
//! before the weights load: the token budgets against the prompts the env really renders, and
//! the response budget DAPO's overlong shaping ramps against, and held-out task ids that are
//! each used once (the paired difference matches tasks by id). Errors are one line naming the
//! key ([`ConfigError`]) or the repeated id; a budget that only some prompts exceed is a warning.

use super::TrainError;
use arl_core::chat::ChatCodec;
use arl_core::{ConfigError, Env, RunConfig, Split};

/// What the preflight found that is worth saying but not an error.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Preflight {
    pub warnings: Vec<String>,
}

/// Run every check (see the module docs).
pub fn preflight(config: &RunConfig, env: &dyn Env, codec: &dyn ChatCodec) -> Result<Preflight, TrainError> {
    let mut out = Preflight::default();
    overlong(config, env)?;
    for split in [Split::Train, Split::Heldout, Split::HeldoutInstances] {
        if let Some(w) = prompt_budget(config, env, codec, split)? {
            out.warnings.push(w);
        }
    }
    Ok(out)
}

/// The longest first prompt an episode may start with: `sampling.max_prompt_tokens`, and room
/// for one full turn within `sampling.max_episode_tokens`. Returns the limit and the key that
/// sets it.
fn prompt_limit(config: &RunConfig, env: &dyn Env) -> (usize, &'static str) {
    let s = &config.sampling;
    let turn = s.max_new_tokens.unwrap_or_else(|| env.default_max_new_tokens()) as usize;
    let room = (s.max_episode_tokens as usize).saturating_sub(turn);
    match s.max_prompt_tokens {
        Some(p) if (p as usize) < room => (p as usize, "sampling.max_prompt_tokens"),
        _ => (room, "sampling.max_episode_tokens"),
    }
}

/// Every prompt of `split` over the limit is an error (every episode would end before its
/// first turn); some over it is a warning.
fn prompt_budget(config: &RunConfig, env: &dyn Env, codec: &dyn ChatCodec, split: Split) -> Result<Option<String>, TrainError> {
    let tasks = env.tasks(split)?;
    if split == Split::Heldout {
        arl_core::eval::distinct_task_ids(tasks.iter().map(|t| t.id.as_str())).map_err(TrainError::Other)?;
    }
    // An agent program writes its own prompts; the endpoint refuses a request over the budget.
    if tasks.is_empty() || env.agent().is_some() {
        return Ok(None);
    }
    let tools = env.tools();
    let mut lengths = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let session = env.reset(task)?;
        lengths.push(codec.prompt_ids(session.messages(), &tools)?.len());
    }
    let (limit, key) = prompt_limit(config, env);
    let over = lengths.iter().filter(|&&n| n > limit).count();
    let shortest = lengths.iter().copied().min().unwrap_or(0);
    let value = match key {
        "sampling.max_prompt_tokens" => config.sampling.max_prompt_tokens.unwrap_or(0),
        _ => config.sampling.max_episode_tokens,
    };
    let turn = config.sampling.max_new_tokens.unwrap_or_else(|| env.default_max_new_tokens());
    let need = if key == "sampling.max_prompt_tokens" { shortest as u64 } else { shortest as u64 + turn as u64 };
    if over == tasks.len() {
        return Err(TrainError::Config(ConfigError::Invalid {
            key: key.into(),
            message: format!(
                "{value} leaves no {split} prompt room for a turn (the shortest prompt has {shortest} tokens{}), so every episode \
                 would end before its first turn; valid: ≥ {need}",
                if key == "sampling.max_episode_tokens" { format!(", a turn {turn}") } else { String::new() }
            ),
        }));
    }
    Ok((over > 0).then(|| {
        format!(
            "warning: {over} of {} {split} prompts are longer than {limit} tokens ({key} = {value}); those episodes end \
             before their first turn (counter prompt_over_budget or finish episode_budget)",
            tasks.len()
        )
    }))
}

/// Overlong shaping needs a response budget longer than its buffer.
fn overlong(config: &RunConfig, env: &dyn Env) -> Result<(), TrainError> {
    let t = &config.trainer;
    if t.overlong_buffer == 0 {
        return Ok(());
    }
    let turn = config.sampling.max_new_tokens.unwrap_or_else(|| env.default_max_new_tokens()) as u64;
    let budget = config.sampling.max_response_tokens.map(u64::from).unwrap_or(config.env.max_turns as u64 * turn);
    if t.overlong_buffer as u64 > budget {
        return Err(TrainError::Config(ConfigError::Invalid {
            key: "trainer.overlong_buffer".into(),
            message: format!(
                "{} is longer than the response budget of {budget} tokens (sampling.max_response_tokens, else env.max_turns × \
                 max_new_tokens); valid: 0 to {budget}",
                t.overlong_buffer
            ),
        }));
    }
    Ok(())
}
