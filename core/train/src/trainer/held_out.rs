//! The held-out evaluations of a run (every split the env has, before and after training),
//! their console lines, and the paired difference after − before.

use arl_core::chat::ChatCodec;
use arl_core::eval::{Bootstrap, PairedDifference, paired_difference};
use arl_core::policy::TrainablePolicy;
use arl_core::{Env, RunConfig, Split};

use super::{eval_options, plural};
use crate::TrainError;
use crate::eval::{Evaluation, evaluate_split};
use crate::rollout::RolloutOptions;

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
pub(super) type SaveSplits<'a> = dyn FnMut(&dyn TrainablePolicy, &[Option<Evaluation>; 2]) -> Result<(), TrainError> + 'a;

/// The held-out evaluations of a run: every split the env has, `n` episodes per task.
pub(super) struct HeldOut<'a> {
    env: &'a dyn Env,
    codec: &'a dyn ChatCodec,
    splits: Vec<Split>,
    n: usize,
    opts: RolloutOptions,
    pub(super) bootstrap: Bootstrap,
}

impl<'a> HeldOut<'a> {
    /// The splits `env` has — `heldout` always, `heldout_instances` when it lists any; none
    /// when `eval.n` is 0 — sampled as [`eval_options`] says.
    pub(super) fn new(config: &RunConfig, env: &'a dyn Env, codec: &'a dyn ChatCodec) -> Result<Self, TrainError> {
        let n = config.eval.n as usize;
        let splits = if n == 0 {
            Vec::new()
        } else if env.tasks(Split::HeldoutInstances)?.is_empty() {
            vec![Split::Heldout]
        } else {
            Split::HELDOUT.to_vec()
        };
        let bootstrap = Bootstrap { seed: config.trainer.seed, ..Bootstrap::default() };
        Ok(HeldOut { env, codec, splits, n, opts: eval_options(config, env), bootstrap })
    }

    /// `[heldout, heldout_instances]`, each `None` when not evaluated. The splits in `done`
    /// (from a checkpoint) are kept; `save` is called after each split evaluated here.
    pub(super) fn evaluate(
        &self,
        policy: &mut dyn TrainablePolicy,
        when: &str,
        done: [Option<Evaluation>; 2],
        save: &mut SaveSplits<'_>,
        log: &mut dyn FnMut(&str),
        progress: &mut dyn FnMut(&str, usize, usize),
    ) -> Result<[Option<Evaluation>; 2], TrainError> {
        let mut out = [None, None];
        for &split in &self.splits {
            let slot = usize::from(split == Split::HeldoutInstances);
            if let Some(e) = &done[slot] {
                log(&format!("{} (from the checkpoint)", eval_line(when, e)));
                out[slot] = Some(e.clone());
                continue;
            }
            let stage = format!("eval {when}, {split}");
            log(&format!("{stage}: {} per task", plural(self.n, "episode")));
            let e = evaluate_split(self.env, self.codec, policy, split, self.n, &self.opts, &self.bootstrap, &mut |d, t| {
                progress(&stage, d, t)
            })?;
            log(&eval_line(when, &e));
            out[slot] = Some(e);
            save(&*policy, &out)?;
        }
        Ok(out)
    }
}

/// The paired difference after − before over the tasks both evaluations counted (a task whose
/// episodes were all lost to infrastructure failures in either is left out, and said so).
pub(super) fn paired(
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
