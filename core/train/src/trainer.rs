//! A training run: the start-up self-check, a held-out evaluation before, `steps` steps of
//! rollout → advantages → update, an evaluation after, and the paired difference — with
//! metrics to the console and `metrics.jsonl`, checkpoints, and `results.json`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TrainError;
use super::batch::{BatchOptions, Overlong, RewardTerms, collect_from, kl_penalty};
use super::checkpoint::{self, TrainerState};
use super::curriculum::Curriculum;
use super::eval::{Evaluation, evaluate_split};
use super::metrics::StepMetrics;
use super::offpolicy::{self, AsyncSampling};
use super::rollout::{RolloutOptions, RolloutStats};
use super::rounds::{LocalRollouts, Plan, RolloutExecutor, RoundContext, concat};
use super::update::{UpdateOptions, recompute_in, update_with_reference};
use arl_core::chat::ChatCodec;
use arl_core::config::KlPlacement;
use arl_core::eval::{Bootstrap, PairedDifference, paired_difference};
use arl_core::loss::{Aggregation, PolicyLoss};
use arl_core::policy::{Policy, SamplingParams, ScoreParams, TrainablePolicy};
use arl_core::{AdvantageFn, Env, Episode, RunConfig, Split};

/// The concrete pieces a run composes (built by name by the caller).
pub struct Parts<'a> {
    pub env: &'a dyn Env,
    pub codec: &'a dyn ChatCodec,
    pub policy: &'a mut dyn TrainablePolicy,
    pub loss: &'a dyn PolicyLoss,
    pub advantage: &'a dyn AdvantageFn,
    /// The frozen reference policy of a KL term (`loss.kl_coef > 0`), if any.
    pub reference: Option<&'a dyn Policy>,
}

/// After this many steps in a row whose loss or gradient was NaN or infinite, the run stops.
pub const MAX_NON_FINITE_STEPS: u32 = 3;

/// Where and with what a run ran (filled in by the caller).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunMeta {
    pub arl_version: String,
    /// The commit arl was built from (embedded at build time), when it was built from a git
    /// checkout.
    pub git_commit: Option<String>,
    /// The run's id (`run.json`; checkpoints carry it).
    #[serde(default)]
    pub run_id: String,
    /// The model directory the weights came from (unset for a random-weights preset).
    #[serde(default)]
    pub model_dir: Option<String>,
    /// The Hugging Face snapshot (commit hash) of the model, when it came from the hub cache.
    #[serde(default)]
    pub model_snapshot: Option<String>,
    /// The directory of the tokenizer and chat template.
    #[serde(default)]
    pub tokenizer: Option<String>,
    /// The device, as burn names it.
    pub device: String,
    /// The command line.
    pub command: String,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
}

/// What a run produced: the body of `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunReport {
    pub meta: RunMeta,
    pub config: RunConfig,
    /// The chat layer's start-up self-check summary.
    pub self_check: String,
    pub steps: Vec<StepMetrics>,
    /// The `heldout` split (the coding gyms: bug templates no training task has) before and
    /// after training.
    pub before: Option<Evaluation>,
    pub after: Option<Evaluation>,
    /// pass@1 after − before on the same held-out tasks.
    pub difference: Option<PairedDifference>,
    /// The second held-out split, `heldout_instances` (the coding gyms: the training bugs
    /// under names and operand orders never trained on), when the env has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heldout_instances: Option<SplitResult>,
    /// Tool and episode counters summed over training episodes.
    pub tool_stats: BTreeMap<String, u64>,
    pub wall_seconds: f64,
}

/// A held-out split's evaluations before and after training and their paired difference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SplitResult {
    pub before: Option<Evaluation>,
    pub after: Option<Evaluation>,
    pub difference: Option<PairedDifference>,
}

/// Run training as `config` says, writing into `out_dir`. `log` receives console lines;
/// `progress(stage, done, total)` is called as episodes finish (for a progress bar).
pub fn train(
    parts: Parts<'_>,
    config: &RunConfig,
    meta: RunMeta,
    out_dir: &Path,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<RunReport, TrainError> {
    train_with(parts, None, config, meta, out_dir, log, progress)
}

/// As [`train`], with lockstep's rollout rounds run by `rollouts` (rollout workers,
/// `train::dist`); `None`: in this process ([`LocalRollouts`]). Held-out evaluations always
/// run here.
pub fn train_with(
    parts: Parts<'_>,
    rollouts: Option<&mut dyn RolloutExecutor>,
    config: &RunConfig,
    meta: RunMeta,
    out_dir: &Path,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<RunReport, TrainError> {
    let start = Instant::now();
    if rollouts.is_some() && config.trainer.max_steps_off_policy.is_some() {
        return Err(TrainError::Config(arl_core::ConfigError::Invalid {
            key: "trainer.max_steps_off_policy".into(),
            message: "rollout workers need lockstep training; unset it or roll out locally".into(),
        }));
    }
    check_sampling_for_training(config)?;
    std::fs::create_dir_all(out_dir).map_err(TrainError::at(out_dir))?;
    let Parts { env, codec, policy, loss, advantage, reference } = parts;
    let self_check = codec.self_check()?;
    log(&self_check);
    let total_steps = config.trainer.steps;
    let run_id = (!meta.run_id.is_empty()).then(|| meta.run_id.clone());

    let rollout_opts = rollout_options(config, env, config.trainer.seed);
    let eval_opts = eval_options(config, env);
    let batch_opts = batch_options(config, &rollout_opts)?;
    let bootstrap = Bootstrap { seed: config.trainer.seed, ..Bootstrap::default() };
    let eval_n = config.eval.n as usize;

    let resumed = if config.trainer.resume {
        let (dir, state) = checkpoint::resume(policy, out_dir, run_id.as_deref(), config)?;
        if state.sft.is_some() {
            return Err(TrainError::Other(format!("{} was written by `arl sft`; continue it with `arl sft --resume`", dir.display())));
        }
        log(&format!("resumed from {} after step {}", dir.display(), state.step));
        Some((dir, state))
    } else {
        None
    };
    // Resumed from `final` (killed during the evaluation after training): the splits it finished.
    let mut resumed_final: Option<TrainerState> =
        resumed.as_ref().filter(|(dir, s)| dir.ends_with("final") && s.step >= total_steps).map(|(_, s)| s.clone());
    let resumed = resumed.map(|(_, s)| s);
    // The held-out splits the env has: `heldout` always, `heldout_instances` when it lists any.
    let splits: Vec<Split> = if eval_n == 0 {
        Vec::new()
    } else if env.tasks(Split::HeldoutInstances)?.is_empty() {
        vec![Split::Heldout]
    } else {
        Split::HELDOUT.to_vec()
    };
    let held_out = HeldOut { env, codec, splits: &splits, n: eval_n, opts: &eval_opts, bootstrap: &bootstrap };
    let [before, before_instances] = match &resumed {
        Some(state) if state.step > 0 => [state.before.clone(), state.before_instances.clone()],
        // A fresh run, or one killed during this evaluation (resumed from `step-00000`): each
        // finished split is checkpointed at once, so a kill loses at most the split under way.
        _ => {
            let done = resumed.as_ref().map_or([None, None], |s| [s.before.clone(), s.before_instances.clone()]);
            let earlier = resumed.as_ref().map_or(0.0, |s| s.wall_seconds);
            let mut save = |policy: &dyn TrainablePolicy, evals: &[Option<Evaluation>; 2]| -> Result<(), TrainError> {
                if !config.output.checkpoints {
                    return Ok(());
                }
                let state = TrainerState {
                    step: 0,
                    config: config.clone(),
                    steps: Vec::new(),
                    before: evals[0].clone(),
                    before_instances: evals[1].clone(),
                    after: None,
                    after_instances: None,
                    task_sampler: None,
                    tool_stats: BTreeMap::new(),
                    wall_seconds: earlier + start.elapsed().as_secs_f64(),
                    tasks_used: 0,
                    run_id: run_id.clone(),
                    groups_in_flight: 0,
                    sft: None,
                };
                checkpoint::write(policy, codec, out_dir, "step-00000", &state).map(drop)
            };
            held_out.evaluate(policy, "before", done, &mut save, log, progress)?
        }
    };

    let train_tasks = env.tasks(Split::Train)?;
    if train_tasks.is_empty() {
        return Err(TrainError::Other(format!("env `{}` has no training tasks", config.env.name)));
    }
    let order = shuffled(train_tasks.len(), config.trainer.seed);
    let mut local =
        LocalRollouts { ctx: RoundContext::new(env, codec, &train_tasks, config.trainer.group_size as usize, rollout_opts.clone()) };
    let executor: &mut dyn RolloutExecutor = match rollouts {
        Some(r) => r,
        None => &mut local,
    };
    let update_opts = update_options(config, loss, &rollout_opts);
    let metrics_path = out_dir.join("metrics.jsonl");
    let mut metrics_file = std::fs::File::create(&metrics_path).map_err(TrainError::at(&metrics_path))?;
    let (first_step, mut steps, mut tool_stats, earlier_seconds, tasks_used, resumed_in_flight, sampler_state) = match resumed {
        Some(s) => (s.step, s.steps, s.tool_stats, s.wall_seconds, s.tasks_used, s.groups_in_flight, s.task_sampler),
        None => (0, Vec::new(), BTreeMap::new(), 0.0, 0, 0, None),
    };
    let mut curriculum = Curriculum::new(&config.trainer, &train_tasks, tasks_used, sampler_state.as_ref()).map_err(TrainError::Other)?;
    if resumed_in_flight > 0 {
        log(&format!("{} in flight at the checkpoint discarded; their tasks are sampled again", plural(resumed_in_flight, "group")));
    }
    // A resumed run rewrites the lines of the steps it keeps (a killed process may have
    // logged a step it never checkpointed).
    // TensorBoard event files (`output.tensorboard`), the same steps as `metrics.jsonl`.
    let mut events = match &config.output.tensorboard {
        Some(dir) => {
            let dir = Path::new(dir);
            let w = super::tensorboard::EventWriter::create(dir, run_id.as_deref()).map_err(TrainError::at(dir))?;
            log(&format!("tensorboard: {} (tensorboard --logdir {})", w.path().display(), dir.display()));
            Some(w)
        }
        None => None,
    };
    for m in &steps {
        writeln!(metrics_file, "{}", serde_json::to_string(m).expect("metrics serialize")).map_err(TrainError::at(&metrics_path))?;
        if let Some(w) = &mut events {
            w.step(m).map_err(|e| TrainError::File { path: w.path().to_path_buf(), error: e })?;
        }
    }
    let state_at = |step: u32, steps: &[StepMetrics], tool_stats: &BTreeMap<String, u64>, tasks_used: usize| TrainerState {
        step,
        config: config.clone(),
        steps: steps.to_vec(),
        before: before.clone(),
        before_instances: before_instances.clone(),
        after: None,
        after_instances: None,
        task_sampler: None,
        tool_stats: tool_stats.clone(),
        wall_seconds: earlier_seconds + start.elapsed().as_secs_f64(),
        tasks_used,
        run_id: run_id.clone(),
        groups_in_flight: 0,
        sft: None,
    };
    // KL in the reward: the reference scores each round's episodes before advantages.
    let kl_terms: Option<Box<RewardTerms<'_>>> = match (reference, config.loss.kl_placement) {
        (Some(r), KlPlacement::Reward) if config.loss.kl_coef > 0.0 => {
            let (coef, estimator) = (config.loss.kl_coef, config.loss.kl_estimator);
            let batching = update_opts.batching();
            let at = ScoreParams::at(update_opts.temperature);
            Some(Box::new(move |episodes: &[Episode]| {
                let ref_lp = recompute_in(r, episodes, batching, at)?.logprobs;
                Ok(kl_penalty(episodes, &ref_lp, coef, estimator))
            }))
        }
        _ => None,
    };
    if let Some(k) = config.trainer.max_steps_off_policy {
        let l = &config.loss;
        let corrected = l.decoupled || l.tis.is_some() || l.icepop.is_some() || l.kpop.is_some();
        log(&format!(
            "async sampling: groups up to {} old train, {} in flight, weights taken {}{}",
            plural(k as usize, "step"),
            config.trainer.groups_in_flight(),
            match config.trainer.weight_sync {
                arl_core::config::WeightSync::Sync => "between rollout rounds",
                arl_core::config::WeightSync::Background => "between turns",
            },
            if k > 0 && !corrected {
                "; note: no off-policy correction is set, so stale groups train as if the current weights sampled them \
                 (set loss.decoupled=true or loss.tis to weight tokens by pi_old/pi_behave; loss.icepop only filters \
                 out tokens whose policy drift pi_old/pi_behave leaves its band)"
            } else {
                ""
            }
        ));
    }
    // The data position: tasks handed out so far (the curriculum's in lockstep).
    let mut cursor = tasks_used;
    let loop_start = Instant::now();
    let mut last_checkpoint: Option<PathBuf> = checkpoint::latest_of(out_dir, run_id.as_deref())?.map(|(dir, _)| dir);
    let mut non_finite_in_a_row = 0u32;
    let mut cadence = checkpoint::Cadence::new(&config.trainer);
    // Async off-policy training: a rollout thread in this scope samples ahead (see `offpolicy`).
    let shared = offpolicy::sampler::Shared::new(config.trainer.groups_in_flight() as usize);
    let mut discarded = resumed_in_flight;
    let in_flight = std::thread::scope(|scope| -> Result<usize, TrainError> {
        let prompts = config.trainer.prompts as usize;
        let mut sampler = match config.trainer.max_steps_off_policy {
            Some(bound) => {
                let setup = offpolicy::sampler::SamplerSetup {
                    env,
                    codec,
                    tasks: &train_tasks,
                    order: &order,
                    start: cursor,
                    group_size: batch_opts.group_size,
                    prompts,
                    rollout: rollout_opts.clone(),
                    weight_sync: config.trainer.weight_sync,
                };
                let first = offpolicy::snapshot(policy, first_step)?;
                Some(AsyncSampling::start(scope, &shared, setup, first, bound))
            }
            None => None,
        };
        if sampler.is_none() {
            executor.publish(first_step, policy)?;
        }
        let round_groups = config.cluster.round_groups(config.trainer.prompts) as usize;
        let mut next_round = 0u64;
        for step in first_step..config.trainer.steps {
            let t0 = Instant::now();
            let stage = format!("step {}/{total_steps} rollout", step + 1);
            let pools = curriculum.pools();
            let batch = match &mut sampler {
                None => {
                    let plan = Plan { seed: rollout_opts.sampling.seed, prompts, round_groups, step };
                    let mut groups = |n: usize, base: usize, attempt: u32| -> Result<(Vec<Episode>, RolloutStats), TrainError> {
                        let position = curriculum.used();
                        let tasks = curriculum.draw(n).into_iter().map(|i| train_tasks[i].id.clone()).collect();
                        let rounds = plan.rounds(tasks, position, base, attempt, &mut next_round);
                        let outputs = executor.run(&mut *policy, &rounds, &mut |d, t| progress(&stage, d, t))?;
                        Ok(concat(outputs))
                    };
                    let batch = collect_from(&mut groups, advantage, &batch_opts, kl_terms.as_deref())?;
                    curriculum.observe(&batch.sampled);
                    cursor = curriculum.used();
                    batch
                }
                Some(s) => {
                    let batch = s.collect(step, advantage, &batch_opts, kl_terms.as_deref(), &mut |d, t| progress(&stage, d, t))?;
                    cursor = s.position();
                    batch
                }
            };
            let update_stage = format!("step {}/{total_steps} update", step + 1);
            progress(&update_stage, 0, 1);
            let opts = UpdateOptions { lr: config.trainer.lr_at(step), ..update_opts.clone() };
            let upd = update_with_reference(policy, reference, loss, &batch.train, &batch.advantages, &opts)?;
            progress(&update_stage, 1, 1);
            let t_publish = Instant::now();
            match &sampler {
                // The weights the next step trains (unchanged by a skipped non-finite step).
                Some(s) => s.publish(step + 1, policy)?,
                None if step + 1 < config.trainer.steps => executor.publish(step + 1, policy)?,
                None => {}
            }
            let publish_seconds = t_publish.elapsed().as_secs_f64();
            let episodes = &batch.sampled;
            let rstats = &batch.rollout;
            let mut m = step_metrics(step + 1, episodes, &batch.stats, rstats, &upd, t0.elapsed().as_secs_f64());
            m.lr = opts.lr;
            m.publish_seconds = publish_seconds;
            m.tasks = step_tasks(&batch);
            m.pools = pools;
            m.sandbox_exhausted += super::metrics::sandbox_exhausted(&batch.infra_failed);
            let faults = executor.take_faults();
            (m.rounds_retried, m.workers_lost) = (faults.rounds_retried, faults.workers_lost);
            if let Some(s) = &mut sampler {
                let mut a = s.metrics(&batch, &upd);
                a.discarded_in_flight = std::mem::take(&mut discarded);
                m.off_policy = Some(a);
            }
            for e in episodes.iter().chain(&batch.infra_failed) {
                super::metrics::sum_counters(&mut tool_stats, e);
            }
            if episodes.is_empty() && !batch.infra_failed.is_empty() {
                return Err(TrainError::Other(format!(
                    "stopped at step {}: all {} were lost to infrastructure failures ({}); the sandbox or the env is failing — \
                     see its errors above",
                    step + 1,
                    plural(batch.infra_failed.len(), "episode"),
                    infra_reasons(&batch.infra_failed)
                )));
            }
            let bad = m.non_finite_updates;
            // A skipped step's weights are the previous step's: no new checkpoint for it.
            let checkpoint_now = bad == 0 && config.output.checkpoints && cadence.due(step + 1);
            steps.push(m);
            if checkpoint_now {
                let t = Instant::now();
                let mut state = state_at(step + 1, &steps, &tool_stats, cursor);
                state.groups_in_flight = sampler.as_ref().map_or(0, AsyncSampling::in_flight);
                state.task_sampler = curriculum.state();
                last_checkpoint = Some(checkpoint::write(policy, codec, out_dir, &format!("step-{:05}", step + 1), &state)?);
                cadence.written();
                checkpoint::prune(out_dir, config.trainer.keep_checkpoints as usize)?;
                steps.last_mut().expect("just pushed").checkpoint_seconds = t.elapsed().as_secs_f64();
            }
            let m = steps.last().expect("just pushed");
            writeln!(metrics_file, "{}", serde_json::to_string(m).expect("metrics serialize")).map_err(TrainError::at(&metrics_path))?;
            metrics_file.flush().map_err(TrainError::at(&metrics_path))?;
            if let Some(w) = &mut events {
                w.step(m).map_err(|e| TrainError::File { path: w.path().to_path_buf(), error: e })?;
            }
            let done_here = (step + 1 - first_step) as f64;
            let per_step = loop_start.elapsed().as_secs_f64() / done_here;
            let eta = per_step * (total_steps - step - 1) as f64;
            log(&m.console_line(total_steps, earlier_seconds + start.elapsed().as_secs_f64(), Some(eta)));
            let b = &batch.stats;
            if b.groups_sampled > 0 && b.groups_zero_variance == b.groups_sampled {
                log(&format!("no gradient this step: all {} had equal rewards", plural(b.groups_sampled, "group")));
            }
            if !batch.infra_failed.is_empty() {
                log(&format!(
                    "step {}/{total_steps}: {} lost to infrastructure failures ({}), left out of the step's statistics and loss",
                    step + 1,
                    plural(batch.infra_failed.len(), "episode"),
                    infra_reasons(&batch.infra_failed)
                ));
            }
            if bad > 0 {
                non_finite_in_a_row += 1;
                log(&format!(
                    "step {}/{total_steps}: non-finite loss or gradient; skipped {bad} of {} optimizer steps (their weights unchanged); \
                     {non_finite_in_a_row} such step(s) in a row",
                    step + 1,
                    bad + upd.optimizer_steps,
                ));
                if non_finite_in_a_row >= MAX_NON_FINITE_STEPS {
                    let kept = match &last_checkpoint {
                        Some(dir) => format!("the last good checkpoint is {}", dir.display()),
                        None => "no checkpoint was written before it".into(),
                    };
                    return Err(TrainError::Other(format!(
                        "stopped at step {}: {non_finite_in_a_row} steps in a row had a NaN or infinite loss or gradient; {kept}; \
                         lower trainer.lr or check the loss settings",
                        step + 1
                    )));
                }
                continue;
            }
            non_finite_in_a_row = 0;
        }
        // Dropping the sampler stops the rollout thread; what it had in flight is discarded.
        Ok(sampler.as_ref().map_or(0, AsyncSampling::in_flight))
    })?;
    if in_flight > 0 {
        log(&format!("{} in flight at the end discarded (their tasks are sampled again on --resume)", plural(in_flight, "group")));
    }
    // `final` is written once per run: after the last step, or on a resume from the last step's
    // checkpoint (killed before `final` was in place).
    if config.output.checkpoints && resumed_final.is_none() {
        let mut state = state_at(config.trainer.steps, &steps, &tool_stats, cursor);
        state.groups_in_flight = in_flight;
        state.task_sampler = curriculum.state();
        checkpoint::write(policy, codec, out_dir, "final", &state)?;
        resumed_final = Some(state);
    }

    // Each finished split is recorded in `final`, so a kill loses at most the split under way.
    let done = resumed_final.as_ref().map_or([None, None], |s| [s.after.clone(), s.after_instances.clone()]);
    let final_dir = checkpoint::checkpoints_dir(out_dir).join("final");
    let mut save = |_: &dyn TrainablePolicy, evals: &[Option<Evaluation>; 2]| -> Result<(), TrainError> {
        match resumed_final.as_mut().filter(|_| config.output.checkpoints) {
            Some(state) => {
                [state.after, state.after_instances] = evals.clone();
                checkpoint::rewrite_state(&final_dir, state)
            }
            None => Ok(()),
        }
    };
    let [after, after_instances] = held_out.evaluate(policy, "after", done, &mut save, log, progress)?;
    let difference = paired(&before, &after, &bootstrap, log)?;
    let instances_difference = paired(&before_instances, &after_instances, &bootstrap, log)?;
    let heldout_instances = (before_instances.is_some() || after_instances.is_some()).then_some(SplitResult {
        before: before_instances,
        after: after_instances,
        difference: instances_difference,
    });
    let report = RunReport {
        meta,
        config: config.clone(),
        self_check,
        steps,
        before,
        after,
        difference,
        heldout_instances,
        tool_stats,
        wall_seconds: earlier_seconds + start.elapsed().as_secs_f64(),
    };
    let results = out_dir.join("results.json");
    std::fs::write(&results, serde_json::to_string_pretty(&report).expect("report serializes")).map_err(TrainError::at(&results))?;
    log(&format!("results: {}", results.display()));
    Ok(report)
}

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

fn step_metrics(
    step: u32,
    episodes: &[Episode],
    b: &super::batch::BatchStats,
    r: &super::rollout::RolloutStats,
    u: &super::update::UpdateMetrics,
    seconds: f64,
) -> StepMetrics {
    let n = episodes.len().max(1) as f64;
    let calls: u64 = episodes.iter().map(|e| e.stats.tool_calls as u64).sum();
    let mut finish = BTreeMap::new();
    for e in episodes {
        *finish.entry(e.stats.finish.map(|f| f.name()).unwrap_or("unknown").to_string()).or_default() += 1;
    }
    let per_call = |x: u64| if calls > 0 { x as f64 / calls as f64 } else { 0.0 };
    let groups = b.groups_sampled.max(1) as f64;
    StepMetrics {
        step,
        lr: 0.0,
        episodes: episodes.len(),
        reward_mean: episodes.iter().map(|e| e.reward).sum::<f64>() / n,
        pass_rate: episodes.iter().filter(|e| e.solved()).count() as f64 / n,
        rewards: super::metrics::reward_components(episodes),
        zero_variance_groups: b.groups_zero_variance as f64 / groups,
        zero_variance_skipped: (b.groups_sampled - b.groups_kept) as f64 / groups,
        identical_nonzero_groups: b.groups_identical_nonzero as f64 / groups,
        prompts_over_budget: episodes.iter().filter(|e| e.stats.finish == Some(arl_core::EpisodeFinish::PromptBudget)).count(),
        sampling_attempts: b.attempts,
        shaped_reward_mean: b.shaped_reward_mean,
        overlong_penalty_mean: b.overlong_penalty_mean,
        kl_reward_mean: b.extra_reward_mean,
        masked_truncated: b.masked_truncated,
        loss: u.loss_value,
        entropy: u.entropy.or(u.loss.entropy),
        ref_kl: u.ref_kl,
        clip_frac_high: u.loss.clip_frac_high,
        clip_frac_low: u.loss.clip_frac_low,
        ratio_mean: (u.loss.tokens > 0.0).then_some(u.loss.ratio_mean),
        grad_norm: u.grad_norm_mean,
        logprob_gap_mean: u.logprob_gap_mean,
        logprob_gap_max: u.logprob_gap_max,
        truncated_frac: r.truncated as f64 / n,
        response_tokens_mean: episodes.iter().map(|e| e.policy_tokens()).sum::<usize>() as f64 / n,
        response_tokens_max: episodes.iter().map(|e| e.policy_tokens()).max().unwrap_or(0),
        finish,
        non_finite_updates: u.non_finite_steps,
        malformed_call_rate: per_call(episodes.iter().map(|e| e.stats.malformed_calls as u64).sum()),
        failed_call_rate: per_call(episodes.iter().map(|e| e.stats.failed_calls as u64).sum()),
        policy_tokens: u.policy_tokens,
        prompt_tokens_per_episode: r.prompt_tokens as f64 / r.episodes.max(1) as f64,
        prefill_tokens_per_episode: r.prefill_tokens as f64 / r.episodes.max(1) as f64,
        generate_tokens_per_s: if r.generate_seconds > 0.0 { r.generated_tokens as f64 / r.generate_seconds } else { 0.0 },
        update_tokens_per_s: u.tokens_per_s,
        rollout_seconds: r.seconds,
        generate_seconds: r.generate_seconds,
        env_seconds: r.env_seconds,
        update_seconds: u.seconds,
        scoring_seconds: u.scoring_seconds,
        step_seconds: seconds,
        peak_rss_mb: super::metrics::peak_rss_mb(),
        sandbox_exhausted: super::metrics::sandbox_exhausted(episodes),
        infra_failed: b.infra_failed,
        checkpoint_seconds: 0.0,
        publish_seconds: 0.0,
        tasks: Vec::new(),
        pools: None,
        off_policy: None,
        rounds_retried: 0,
        workers_lost: 0,
    }
}

fn eval_line(when: &str, e: &Evaluation) -> String {
    let s = &e.summary;
    let lost =
        if e.infra_failed > 0 { format!("; {} lost to infrastructure failures", plural(e.infra_failed, "episode")) } else { String::new() };
    format!(
        "eval {when}, {}: pass@1 {:.3}  95% CI [{:.3}, {:.3}]  ({} of {}, {}{lost})",
        e.split,
        s.pass_at_1,
        s.ci.lo,
        s.ci.hi,
        s.correct,
        plural(s.episodes as usize, "episode"),
        plural(s.tasks, "task")
    )
}

/// Records the held-out splits evaluated so far (`[heldout, heldout_instances]`) in a checkpoint.
type SaveSplits<'a> = dyn FnMut(&dyn TrainablePolicy, &[Option<Evaluation>; 2]) -> Result<(), TrainError> + 'a;

/// The held-out evaluations of a run: every split the env has, `n` episodes per task.
struct HeldOut<'a> {
    env: &'a dyn Env,
    codec: &'a dyn ChatCodec,
    splits: &'a [Split],
    n: usize,
    opts: &'a RolloutOptions,
    bootstrap: &'a Bootstrap,
}

impl HeldOut<'_> {
    /// `[heldout, heldout_instances]`, each `None` when not evaluated. The splits in `done`
    /// (from a checkpoint) are kept; `save` is called after each split evaluated here.
    fn evaluate(
        &self,
        policy: &mut dyn TrainablePolicy,
        when: &str,
        done: [Option<Evaluation>; 2],
        save: &mut SaveSplits<'_>,
        log: &mut dyn FnMut(&str),
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<[Option<Evaluation>; 2], TrainError> {
        let mut out = [None, None];
        for &split in self.splits {
            let slot = usize::from(split == Split::HeldoutInstances);
            if let Some(e) = &done[slot] {
                log(&format!("{} (from the checkpoint)", eval_line(when, e)));
                out[slot] = Some(e.clone());
                continue;
            }
            let stage = format!("eval {when}, {split}");
            log(&format!("{stage}: {} per task", plural(self.n, "episode")));
            let e =
                evaluate_split(self.env, self.codec, policy, split, self.n, self.opts, self.bootstrap, &mut |d, t| progress(&stage, d, t))?;
            log(&eval_line(when, &e));
            out[slot] = Some(e);
            save(&*policy, &out)?;
        }
        Ok(out)
    }
}

/// The paired difference after − before over the tasks both evaluations counted (a task whose
/// episodes were all lost to infrastructure failures in either is left out, and said so).
fn paired(
    before: &Option<Evaluation>,
    after: &Option<Evaluation>,
    bootstrap: &Bootstrap,
    log: &mut dyn FnMut(&str),
) -> Result<Option<PairedDifference>, TrainError> {
    let (Some(before), Some(after)) = (before, after) else { return Ok(None) };
    let has = |e: &Evaluation, id: &str| e.per_task.iter().any(|t| t.task_id == id);
    let b: Vec<_> = before.per_task.iter().filter(|t| has(after, &t.task_id)).cloned().collect();
    let a: Vec<_> = after.per_task.iter().filter(|t| has(before, &t.task_id)).cloned().collect();
    let left_out = before.per_task.len() + after.per_task.len() - b.len() - a.len();
    if left_out > 0 {
        log(&format!("paired difference, {}: tasks counted in only one evaluation left out ({left_out})", after.split));
    }
    let d = paired_difference(&b, &a, bootstrap).map_err(TrainError::Other)?;
    log(&format!(
        "pass@1 after − before, {}: {:+.3}  95% CI [{:+.3}, {:+.3}]  p = {:.3}  ({} tasks)",
        after.split, d.mean, d.ci.lo, d.ci.hi, d.p_value, d.tasks
    ));
    Ok(Some(d))
}

/// The step's training tasks, one per group in group order.
fn step_tasks(batch: &super::batch::StepBatch) -> Vec<String> {
    let mut groups: Vec<(usize, &str)> = batch.sampled.iter().chain(&batch.infra_failed).map(|e| (e.group, e.task_id.as_str())).collect();
    groups.sort();
    groups.dedup();
    groups.into_iter().map(|(_, id)| id.to_string()).collect()
}

/// `sandbox_exhausted 2, env_process_errors 1`: the infrastructure counters of lost episodes.
fn infra_reasons(lost: &[Episode]) -> String {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for e in lost {
        for key in [arl_core::SANDBOX_EXHAUSTED, arl_core::SANDBOX_FAILED, arl_core::HARNESS_FAILED, "env_process_errors"] {
            if let Some(n) = e.stats.counters.get(key) {
                *counts.entry(key).or_default() += n;
            }
        }
    }
    if counts.is_empty() {
        return "marked by the env".into();
    }
    counts.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// `1 episode`, `4 episodes`.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// A seeded permutation of 0..n (Fisher–Yates with splitmix64).
pub(crate) fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    arl_core::rng::SplitMix64(seed ^ 0x5eed).shuffle(&mut v);
    v
}
