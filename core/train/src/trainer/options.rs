//! The options a run's stages take, derived once from the run configuration: rollout and
//! evaluation sampling, the update, the batch (groups, dynamic sampling, overlong shaping).

use crate::TrainError;
use crate::batch::{BatchOptions, Overlong};
use crate::rollout::RolloutOptions;
use crate::update::UpdateOptions;
use arl_core::loss::{Aggregation, PolicyLoss};
use arl_core::policy::SamplingParams;
use arl_core::{Env, RunConfig};

/// The held-out evaluation's sampling: the training rollouts' options at `eval.temperature`
/// (when set) with the evaluation's own seed stream.
pub fn eval_options(config: &RunConfig, env: &dyn Env) -> RolloutOptions {
    let mut opts = rollout_options(config, env, config.trainer.seed ^ 0xe7a1);
    if let Some(t) = config.eval.temperature {
        opts.sampling.temperature = t;
    }
    opts
}

/// Sampling and turn limits from the config (the env supplies the per-turn token default).
pub fn rollout_options(config: &RunConfig, env: &dyn Env, seed: u64) -> RolloutOptions {
    let s = &config.sampling;
    RolloutOptions {
        max_turns: config.env.max_turns,
        max_calls_per_turn: config.env.max_calls_per_turn,
        sampling: SamplingParams {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            max_new_tokens: s.max_new_tokens.unwrap_or_else(|| env.default_max_new_tokens()) as usize,
            seed,
            stop_ids: None,
        },
        gen_batch: config.trainer.gen_batch.map(|b| b as usize),
        gen_tokens: Some(config.trainer.gen_tokens as usize).filter(|&t| t > 0),
        max_episode_tokens: s.max_episode_tokens as usize,
        max_prompt_tokens: s.max_prompt_tokens.map(|t| t as usize),
        max_response_tokens: s.max_response_tokens.map(|t| t as usize),
    }
}

/// Training refuses truncated sampling: scoring does not replay top-k/top-p, so the trainer's
/// log-probabilities would be of another distribution than the sampler's (off by log of the
/// kept mass, trl #6789). Temperature is fine: scores are taken at it.
pub fn check_sampling_for_training(config: &RunConfig) -> Result<(), TrainError> {
    let s = &config.sampling;
    let key = if s.top_k.is_some() {
        "sampling.top_k"
    } else if s.top_p.is_some_and(|p| p < 1.0) {
        "sampling.top_p"
    } else {
        return Ok(());
    };
    Err(TrainError::Config(arl_core::ConfigError::Invalid {
        key: key.into(),
        message: "training samples from the whole distribution (scoring does not replay top-k/top-p truncation, so \
                  sampler and trainer log-probabilities would differ); unset it (temperature is allowed)"
            .into(),
    }))
}

/// The response budget of an episode in tokens: `sampling.max_response_tokens`, else every
/// turn at its full `max_new_tokens`. It is L_max of overlong shaping and the default H of
/// the constant-horizon aggregation.
pub fn response_budget(rollout: &RolloutOptions) -> usize {
    rollout.max_response_tokens.unwrap_or(rollout.max_turns as usize * rollout.sampling.max_new_tokens)
}

/// The update's settings from the config: the loss's aggregation unless `loss.aggregation`
/// is set, H = `loss.horizon` else the response budget (verl's fixed response length, so the
/// constant-horizon normalizer is a constant), scores at the sampling temperature.
pub fn update_options(config: &RunConfig, loss: &dyn PolicyLoss, rollout: &RolloutOptions) -> UpdateOptions {
    UpdateOptions {
        epochs: config.trainer.epochs,
        minibatches: config.trainer.minibatches,
        micro: config.trainer.micro.map(|m| m as usize),
        micro_tokens: Some(config.trainer.micro_tokens as usize),
        lr: config.trainer.lr,
        aggregation: Aggregation::resolve(config.loss.aggregation, loss),
        horizon: Some(config.loss.horizon.unwrap_or(response_budget(rollout) as f64)),
        temperature: config.sampling.temperature,
        zero_advantage_minibatch: config.trainer.zero_advantage_minibatch,
    }
}

/// Dynamic sampling, zero-variance skip and overlong shaping from the config. L_max of the
/// shaping is the [`response_budget`].
pub fn batch_options(config: &RunConfig, rollout: &RolloutOptions) -> Result<BatchOptions, TrainError> {
    let t = &config.trainer;
    let overlong = if t.overlong_buffer > 0 {
        let max_tokens = response_budget(rollout);
        if t.overlong_buffer as usize > max_tokens {
            return Err(TrainError::Other(format!(
                "config key `trainer.overlong_buffer`: {} is longer than the response budget of {max_tokens} tokens; \
                 lower it or raise `sampling.max_response_tokens`",
                t.overlong_buffer
            )));
        }
        Some(Overlong { max_tokens, buffer: t.overlong_buffer as usize, factor: t.overlong_penalty })
    } else {
        None
    };
    Ok(BatchOptions {
        prompts: t.prompts as usize,
        group_size: t.group_size as usize,
        max_sampling_attempts: t.max_sampling_attempts,
        skip_zero_variance: t.skip_zero_variance,
        mask_truncated: t.mask_truncated,
        overlong,
    })
}
