//! The last stage of a run: the `final` checkpoint, the held-out evaluation after training,
//! the paired differences, and `results.json`.

use super::held_out::{HeldOut, paired};
use super::steps::Trained;
use super::{Run, RunMeta, RunReport, SplitResult};
use crate::TrainError;
use crate::checkpoint::{self, TrainerState};
use crate::eval::Evaluation;
use arl_core::policy::TrainablePolicy;

/// Write `final` (once per run: after the last step, or on a resume from the last step's
/// checkpoint, killed before `final` was in place), evaluate after, and write `results.json`.
/// `at_final` is `final`'s state when the run resumed from it.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish(
    run: &Run<'_>,
    held_out: &HeldOut<'_>,
    policy: &mut dyn TrainablePolicy,
    self_check: String,
    meta: RunMeta,
    before: [Option<Evaluation>; 2],
    trained: Trained,
    mut at_final: Option<TrainerState>,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<RunReport, TrainError> {
    let config = run.config;
    if config.output.checkpoints && at_final.is_none() {
        let mut state = run.state(config.trainer.steps, &before, &trained.steps, &trained.tool_stats, trained.cursor);
        state.groups_in_flight = trained.in_flight;
        state.task_sampler = trained.task_sampler;
        checkpoint::write(policy, run.codec, run.out_dir, "final", &state)?;
        at_final = Some(state);
    }

    // Each finished split is recorded in `final`, so a kill loses at most the split under way.
    let done = at_final.as_ref().map_or([None, None], |s| [s.after.clone(), s.after_instances.clone()]);
    let final_dir = checkpoint::checkpoints_dir(run.out_dir).join("final");
    let mut save = |_: &dyn TrainablePolicy, evals: &[Option<Evaluation>; 2]| -> Result<(), TrainError> {
        match at_final.as_mut().filter(|_| config.output.checkpoints) {
            Some(state) => {
                [state.after, state.after_instances] = evals.clone();
                checkpoint::rewrite_state(&final_dir, state)
            }
            None => Ok(()),
        }
    };
    let [after, after_instances] = held_out.evaluate(policy, "after", done, &mut save, log, progress)?;
    let [before, before_instances] = before;
    let difference = paired(&before, &after, &held_out.bootstrap, log)?;
    let instances_difference = paired(&before_instances, &after_instances, &held_out.bootstrap, log)?;
    let heldout_instances = (before_instances.is_some() || after_instances.is_some()).then_some(SplitResult {
        before: before_instances,
        after: after_instances,
        difference: instances_difference,
    });
    let report = RunReport {
        meta,
        config: config.clone(),
        self_check,
        steps: trained.steps,
        before,
        after,
        difference,
        heldout_instances,
        tool_stats: trained.tool_stats,
        wall_seconds: run.wall_seconds(),
    };
    let results = run.out_dir.join("results.json");
    std::fs::write(&results, serde_json::to_string_pretty(&report).expect("report serializes")).map_err(TrainError::at(&results))?;
    log(&format!("results: {}", results.display()));
    Ok(report)
}
