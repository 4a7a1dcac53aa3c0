//! The step loop: each step samples its groups (lockstep through the rollout executor, or
//! from the rollout thread sampling ahead, `trainer.max_steps_off_policy`), updates the
//! policy, publishes the new weights, and records the step (`metrics.jsonl`, TensorBoard,
//! checkpoints, the console).

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use super::{MAX_NON_FINITE_STEPS, Run, plural, shuffled, update_options};
use crate::TrainError;
use crate::batch::{BatchOptions, BatchStats, RewardTerms, StepBatch, collect_from, kl_penalty};
use crate::checkpoint::{self, Cadence, TrainerState};
use crate::curriculum::{Curriculum, DifficultyState};
use crate::eval::Evaluation;
use crate::metrics::{self, StepMetrics};
use crate::offpolicy::{self, AsyncSampling};
use crate::rollout::{RolloutOptions, RolloutStats};
use crate::rounds::{LocalRollouts, Plan, RolloutExecutor, RoundContext, RoundSpec, concat};
use crate::tensorboard::EventWriter;
use crate::update::{UpdateMetrics, UpdateOptions, recompute_in, update_with_reference};
use arl_core::config::{KlPlacement, WeightSync};
use arl_core::loss::PolicyLoss;
use arl_core::policy::{Policy, ScoreParams, TrainablePolicy};
use arl_core::{AdvantageFn, Episode, RunConfig, Split, Task};

/// What a step's update takes: the policy being trained and how.
pub(super) struct Learner<'a> {
    pub(super) policy: &'a mut dyn TrainablePolicy,
    pub(super) loss: &'a dyn PolicyLoss,
    pub(super) advantage: &'a dyn AdvantageFn,
    /// The frozen reference policy of a KL term (`loss.kl_coef > 0`), if any.
    pub(super) reference: Option<&'a dyn Policy>,
}

/// What the step loop leaves for `final`.
pub(super) struct Trained {
    pub(super) steps: Vec<StepMetrics>,
    pub(super) tool_stats: BTreeMap<String, u64>,
    /// The data position: tasks handed out so far.
    pub(super) cursor: usize,
    /// Groups the rollout thread had started and the trainer never took (discarded).
    pub(super) in_flight: usize,
    pub(super) task_sampler: Option<DifficultyState>,
}

/// Steps from the resumed one (or 0) to `trainer.steps`, with `before` (the evaluations
/// before training) in every checkpoint.
#[allow(clippy::too_many_arguments)]
pub(super) fn train_steps(
    run: &Run<'_>,
    learner: Learner<'_>,
    rollouts: Option<&mut dyn RolloutExecutor>,
    rollout_opts: &RolloutOptions,
    batch_opts: &BatchOptions,
    before: &[Option<Evaluation>; 2],
    resumed: Option<TrainerState>,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<Trained, TrainError> {
    let config = run.config;
    let Learner { policy, loss, advantage, reference } = learner;
    let train_tasks = run.env.tasks(Split::Train)?;
    if train_tasks.is_empty() {
        return Err(TrainError::Other(format!("env `{}` has no training tasks", config.env.name)));
    }
    let order = shuffled(train_tasks.len(), config.trainer.seed);
    let group_size = config.trainer.group_size as usize;
    let mut local = LocalRollouts::new(RoundContext::new(run.env, run.codec, &train_tasks, group_size, rollout_opts.clone()));
    let executor: &mut dyn RolloutExecutor = match rollouts {
        Some(r) => r,
        None => &mut local,
    };
    let update_opts = update_options(config, loss, rollout_opts);
    let (first_step, steps, tool_stats, tasks_used, resumed_in_flight, sampler_state) = match resumed {
        Some(s) => (s.step, s.steps, s.tool_stats, s.tasks_used, s.groups_in_flight, s.task_sampler),
        None => (0, Vec::new(), BTreeMap::new(), 0, 0, None),
    };
    let mut curriculum = Curriculum::new(&config.trainer, &train_tasks, tasks_used, sampler_state.as_ref()).map_err(TrainError::Other)?;
    if resumed_in_flight > 0 {
        log(&format!("{} in flight at the checkpoint discarded; their tasks are sampled again", plural(resumed_in_flight, "group")));
    }
    let mut ledger = Ledger::open(run, before, steps, tool_stats, first_step, log)?;
    let kl_terms = kl_reward_terms(config, reference, &update_opts);
    log_async_sampling(config, log);
    // The data position: tasks handed out so far (the curriculum's in lockstep).
    let mut cursor = tasks_used;
    // Pinned off-policy training: step s's rounds were issued k steps ahead (see `Ahead`).
    let pinned = config.trainer.max_steps_off_policy.filter(|_| config.trainer.weight_sync == WeightSync::Pinned);
    let mut ahead: VecDeque<Ahead> = VecDeque::new();
    // Async off-policy training: a rollout thread in this scope samples ahead (see `offpolicy`).
    let shared = offpolicy::sampler::Shared::new(config.trainer.groups_in_flight() as usize);
    let mut discarded = resumed_in_flight;
    let in_flight = std::thread::scope(|scope| -> Result<usize, TrainError> {
        let prompts = config.trainer.prompts as usize;
        let mut sampler = match config.trainer.max_steps_off_policy {
            Some(bound) if pinned.is_none() => {
                let setup = offpolicy::sampler::SamplerSetup {
                    env: run.env,
                    codec: run.codec,
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
            _ => None,
        };
        if sampler.is_none() {
            executor.publish(first_step, policy)?;
        }
        let round_groups = config.cluster.round_groups(config.trainer.prompts) as usize;
        let plan = |step: u32, version: u32| Plan { seed: rollout_opts.sampling.seed, prompts, round_groups, step, version };
        let mut next_round = 0u64;
        if let Some(k) = pinned {
            // The first k + 1 steps sample with the weights the run starts from.
            for s in first_step..(first_step + k + 1).min(config.trainer.steps) {
                let a = Ahead::issue(executor, policy, &mut curriculum, &train_tasks, plan(s, first_step), &mut next_round, progress)?;
                ahead.push_back(a);
            }
        }
        for step in first_step..config.trainer.steps {
            let t0 = Instant::now();
            let stage = format!("step {}/{} rollout", step + 1, config.trainer.steps);
            let pools = curriculum.pools();
            let batch = match &mut sampler {
                None => {
                    let mut groups = |n: usize, base: usize, attempt: u32| -> Result<(Vec<Episode>, RolloutStats), TrainError> {
                        // Pinned: the step's first rounds were issued steps ago.
                        if attempt == 0
                            && let Some(a) = ahead.pop_front()
                        {
                            debug_assert_eq!(a.step, step, "pinned rounds are collected in step order");
                            return Ok(concat(executor.collect(&a.rounds, &mut |d, t| progress(&stage, d, t))?));
                        }
                        // Lockstep, and dynamic sampling's further rounds: drawn and sampled now,
                        // by the current weights.
                        let rounds = draw_rounds(&mut curriculum, &train_tasks, &plan(step, step), n, base, attempt, &mut next_round);
                        let outputs = executor.run(&mut *policy, &rounds, &mut |d, t| progress(&stage, d, t))?;
                        Ok(concat(outputs))
                    };
                    let batch = collect_from(&mut groups, advantage, batch_opts, kl_terms.as_deref())?;
                    curriculum.observe(&batch.sampled);
                    batch
                }
                Some(s) => {
                    let batch = s.collect(step, advantage, batch_opts, kl_terms.as_deref(), &mut |d, t| progress(&stage, d, t))?;
                    cursor = s.position();
                    batch
                }
            };
            let update_stage = format!("step {}/{} update", step + 1, config.trainer.steps);
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
            if let Some(k) = pinned
                && step + 1 + k < config.trainer.steps
            {
                let (s, version) = (step + 1 + k, step + 1);
                let a = Ahead::issue(executor, policy, &mut curriculum, &train_tasks, plan(s, version), &mut next_round, progress)?;
                ahead.push_back(a);
            }
            if sampler.is_none() {
                // The first task no step has trained on: where a resumed run draws again.
                cursor = ahead.front().map_or(curriculum.used(), |a| a.position);
            }
            let mut m = step_metrics(step + 1, &batch.sampled, &batch.stats, &batch.rollout, &upd, t0.elapsed().as_secs_f64());
            m.lr = opts.lr;
            m.publish_seconds = publish_seconds;
            m.tasks = step_tasks(&batch);
            m.pools = pools;
            m.sandbox_exhausted += metrics::sandbox_exhausted(&batch.infra_failed);
            let faults = executor.take_faults();
            (m.rounds_retried, m.workers_lost) = (faults.rounds_retried, faults.workers_lost);
            if let Some(s) = &mut sampler {
                let mut a = s.metrics(&batch, &upd);
                a.discarded_in_flight = std::mem::take(&mut discarded);
                m.off_policy = Some(a);
            }
            let position = Position {
                cursor,
                in_flight: sampler.as_ref().map_or(0, AsyncSampling::in_flight) + ahead.iter().map(Ahead::groups).sum::<usize>(),
                task_sampler: curriculum.state(),
            };
            ledger.record(&*policy, m, &batch, &upd, position, log)?;
        }
        // Dropping the sampler stops the rollout thread; what it had in flight is discarded.
        Ok(sampler.as_ref().map_or(0, AsyncSampling::in_flight) + ahead.iter().map(Ahead::groups).sum::<usize>())
    })?;
    if in_flight > 0 {
        log(&format!("{} in flight at the end discarded (their tasks are sampled again on --resume)", plural(in_flight, "group")));
    }
    Ok(Trained { steps: ledger.steps, tool_stats: ledger.tool_stats, cursor, in_flight, task_sampler: curriculum.state() })
}

/// A step's first rollout rounds under pinned off-policy training (`trainer.weight_sync =
/// "pinned"`): step s's `trainer.prompts` groups are drawn and issued to the rollout executor as
/// soon as the weights after max(first, s − k) steps are published, and collected at step s.
/// The issue points are fixed places in the loop, so the schedule depends on the configuration
/// and the results only, never on timing: every launcher reproduces it.
struct Ahead {
    step: u32,
    /// The data position of its first task.
    position: usize,
    rounds: Vec<RoundSpec>,
}

impl Ahead {
    /// Draw step `plan.step`'s groups and issue them, sampled by weights `plan.version`
    /// (the policy's now: a local executor rolls them out here).
    fn issue(
        executor: &mut dyn RolloutExecutor,
        policy: &mut dyn TrainablePolicy,
        curriculum: &mut Curriculum,
        tasks: &[Task],
        plan: Plan,
        next_round: &mut u64,
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<Ahead, TrainError> {
        let position = curriculum.used();
        let rounds = draw_rounds(curriculum, tasks, &plan, plan.prompts, 0, 0, next_round);
        let stage = format!("step {} rollout (issued ahead)", plan.step + 1);
        executor.issue(&mut *policy, &rounds, &mut |d, t| progress(&stage, d, t))?;
        Ok(Ahead { step: plan.step, position, rounds })
    }

    /// Groups issued and not yet collected.
    fn groups(&self) -> usize {
        self.rounds.iter().map(|r| r.task_ids.len()).sum()
    }
}

/// The rounds of `n` groups drawn now from the curriculum, their groups from `base` on, for
/// dynamic sampling's `attempt` (ids from `next_round`).
fn draw_rounds(
    curriculum: &mut Curriculum,
    tasks: &[Task],
    plan: &Plan,
    n: usize,
    base: usize,
    attempt: u32,
    next_round: &mut u64,
) -> Vec<RoundSpec> {
    let position = curriculum.used();
    let ids = curriculum.draw(n).into_iter().map(|i| tasks[i].id.clone()).collect();
    plan.rounds(ids, position, base, attempt, next_round)
}

/// KL in the reward (`loss.kl_placement = "reward"`): the reference scores each round's
/// episodes before advantages.
fn kl_reward_terms<'a>(config: &RunConfig, reference: Option<&'a dyn Policy>, update_opts: &UpdateOptions) -> Option<Box<RewardTerms<'a>>> {
    match (reference, config.loss.kl_placement) {
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
    }
}

/// The console line of async off-policy training's settings (nothing in lockstep).
fn log_async_sampling(config: &RunConfig, log: &mut dyn FnMut(&str)) {
    let Some(k) = config.trainer.max_steps_off_policy else { return };
    let l = &config.loss;
    let corrected = l.decoupled || l.tis.is_some() || l.icepop.is_some() || l.kpop.is_some();
    let schedule = match config.trainer.weight_sync {
        WeightSync::Pinned => format!(
            "pinned off-policy sampling: step s trains on groups sampled by the weights after max(0, s − {k}) steps, \
             issued to the rollout executor as soon as those are published"
        ),
        sync => format!(
            "async sampling: groups up to {} old train, {} in flight, weights taken {}",
            plural(k as usize, "step"),
            config.trainer.groups_in_flight(),
            if sync == WeightSync::Sync { "between rollout rounds" } else { "between turns" }
        ),
    };
    log(&format!(
        "{schedule}{}",
        if k > 0 && !corrected {
            "; note: no off-policy correction is set, so stale groups train as if the current weights sampled them \
             (set loss.decoupled=true or loss.tis to weight tokens by pi_old/pi_behave; loss.icepop only filters \
             out tokens whose policy drift pi_old/pi_behave leaves its band)"
        } else {
            ""
        }
    ));
}

/// Where the data stands after a step, as a checkpoint records it.
struct Position {
    cursor: usize,
    in_flight: usize,
    task_sampler: Option<DifficultyState>,
}

/// What the step loop writes: the steps so far, `metrics.jsonl`, TensorBoard event files,
/// checkpoints, and the console lines; and the run of non-finite steps that stops it.
struct Ledger<'r> {
    run: &'r Run<'r>,
    before: &'r [Option<Evaluation>; 2],
    steps: Vec<StepMetrics>,
    tool_stats: BTreeMap<String, u64>,
    metrics_path: PathBuf,
    metrics_file: std::fs::File,
    events: Option<EventWriter>,
    cadence: Cadence,
    last_checkpoint: Option<PathBuf>,
    non_finite_in_a_row: u32,
    first_step: u32,
    loop_start: Instant,
}

impl<'r> Ledger<'r> {
    /// Create `metrics.jsonl` (and the TensorBoard event file, `output.tensorboard`) with the
    /// lines of the steps a resumed run keeps (a killed process may have logged a step it
    /// never checkpointed).
    fn open(
        run: &'r Run<'r>,
        before: &'r [Option<Evaluation>; 2],
        steps: Vec<StepMetrics>,
        tool_stats: BTreeMap<String, u64>,
        first_step: u32,
        log: &mut dyn FnMut(&str),
    ) -> Result<Self, TrainError> {
        let metrics_path = run.out_dir.join("metrics.jsonl");
        let metrics_file = std::fs::File::create(&metrics_path).map_err(TrainError::at(&metrics_path))?;
        let events = match &run.config.output.tensorboard {
            Some(dir) => {
                let dir = std::path::Path::new(dir);
                let w = EventWriter::create(dir, run.run_id.as_deref()).map_err(TrainError::at(dir))?;
                log(&format!("tensorboard: {} (tensorboard --logdir {})", w.path().display(), dir.display()));
                Some(w)
            }
            None => None,
        };
        let last_checkpoint = checkpoint::latest_of(run.out_dir, run.run_id.as_deref())?.map(|(dir, _)| dir);
        let mut ledger = Ledger {
            run,
            before,
            steps: Vec::new(),
            tool_stats,
            metrics_path,
            metrics_file,
            events,
            cadence: Cadence::new(&run.config.trainer),
            last_checkpoint,
            non_finite_in_a_row: 0,
            first_step,
            loop_start: Instant::now(),
        };
        for m in &steps {
            ledger.write(m, false)?;
        }
        ledger.steps = steps;
        Ok(ledger)
    }

    /// One line in `metrics.jsonl` (flushed when `flush`) and in the event file.
    fn write(&mut self, m: &StepMetrics, flush: bool) -> Result<(), TrainError> {
        let path = &self.metrics_path;
        writeln!(self.metrics_file, "{}", serde_json::to_string(m).expect("metrics serialize")).map_err(TrainError::at(path))?;
        if flush {
            self.metrics_file.flush().map_err(TrainError::at(path))?;
        }
        if let Some(w) = &mut self.events {
            w.step(m).map_err(|e| TrainError::File { path: w.path().to_path_buf(), error: e })?;
        }
        Ok(())
    }

    /// Record step `m.step`: its counters, a checkpoint when one is due (never after a skipped
    /// non-finite step: its weights are the previous step's), its lines. An error stops the run:
    /// every episode lost to infrastructure failures, or too many non-finite steps in a row.
    fn record(
        &mut self,
        policy: &dyn TrainablePolicy,
        m: StepMetrics,
        batch: &StepBatch,
        upd: &UpdateMetrics,
        position: Position,
        log: &mut dyn FnMut(&str),
    ) -> Result<(), TrainError> {
        let (run, config) = (self.run, self.run.config);
        let (step, total_steps) = (m.step, config.trainer.steps);
        for e in batch.sampled.iter().chain(&batch.infra_failed) {
            metrics::sum_counters(&mut self.tool_stats, e);
        }
        if batch.sampled.is_empty() && !batch.infra_failed.is_empty() {
            return Err(TrainError::Other(format!(
                "stopped at step {step}: all {} were lost to infrastructure failures ({}); the sandbox or the env is failing — \
                 see its errors above",
                plural(batch.infra_failed.len(), "episode"),
                infra_reasons(&batch.infra_failed)
            )));
        }
        let bad = m.non_finite_updates;
        let checkpoint_now = bad == 0 && config.output.checkpoints && self.cadence.due(step);
        self.steps.push(m);
        if checkpoint_now {
            let t = Instant::now();
            let mut state = run.state(step, self.before, &self.steps, &self.tool_stats, position.cursor);
            state.groups_in_flight = position.in_flight;
            state.task_sampler = position.task_sampler;
            self.last_checkpoint = Some(checkpoint::write(policy, run.codec, run.out_dir, &format!("step-{step:05}"), &state)?);
            self.cadence.written();
            checkpoint::prune(run.out_dir, config.trainer.keep_checkpoints as usize)?;
            self.steps.last_mut().expect("just pushed").checkpoint_seconds = t.elapsed().as_secs_f64();
        }
        let m = self.steps.last().expect("just pushed").clone();
        self.write(&m, true)?;
        let per_step = self.loop_start.elapsed().as_secs_f64() / (step - self.first_step) as f64;
        let eta = per_step * (total_steps - step) as f64;
        log(&m.console_line(total_steps, run.wall_seconds(), Some(eta)));
        let b = &batch.stats;
        if b.groups_sampled > 0 && b.groups_zero_variance == b.groups_sampled {
            log(&format!("no gradient this step: all {} had equal rewards", plural(b.groups_sampled, "group")));
        }
        if !batch.infra_failed.is_empty() {
            log(&format!(
                "step {step}/{total_steps}: {} lost to infrastructure failures ({}), left out of the step's statistics and loss",
                plural(batch.infra_failed.len(), "episode"),
                infra_reasons(&batch.infra_failed)
            ));
        }
        if bad == 0 {
            self.non_finite_in_a_row = 0;
            return Ok(());
        }
        self.non_finite_in_a_row += 1;
        let in_a_row = self.non_finite_in_a_row;
        log(&format!(
            "step {step}/{total_steps}: non-finite loss or gradient; skipped {bad} of {} optimizer steps (their weights unchanged); \
             {in_a_row} such step(s) in a row",
            bad + upd.optimizer_steps,
        ));
        if in_a_row >= MAX_NON_FINITE_STEPS {
            let kept = match &self.last_checkpoint {
                Some(dir) => format!("the last good checkpoint is {}", dir.display()),
                None => "no checkpoint was written before it".into(),
            };
            return Err(TrainError::Other(format!(
                "stopped at step {step}: {in_a_row} steps in a row had a NaN or infinite loss or gradient; {kept}; \
                 lower trainer.lr or check the loss settings"
            )));
        }
        Ok(())
    }
}

fn step_metrics(step: u32, episodes: &[Episode], b: &BatchStats, r: &RolloutStats, u: &UpdateMetrics, seconds: f64) -> StepMetrics {
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
        rewards: metrics::reward_components(episodes),
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
        peak_rss_mb: metrics::peak_rss_mb(),
        sandbox_exhausted: metrics::sandbox_exhausted(episodes),
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

/// The step's training tasks, one per group in group order.
fn step_tasks(batch: &StepBatch) -> Vec<String> {
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
