//! The first stage of a run: resume from the run folder's latest checkpoint (`--resume`), and
//! the held-out evaluation before training (kept from the checkpoint when it has it).

use std::collections::BTreeMap;
use std::path::Path;

use super::Run;
use super::held_out::HeldOut;
use crate::TrainError;
use crate::checkpoint::{self, TrainerState};
use crate::eval::Evaluation;
use arl_core::RunConfig;
use arl_core::policy::TrainablePolicy;

/// The checkpoint a run resumed from, if any.
pub(super) struct Resumed {
    pub(super) state: Option<TrainerState>,
    /// The state of `final`, when the run resumed from it (killed during the evaluation after
    /// training): the splits it finished are kept.
    pub(super) at_final: Option<TrainerState>,
}

/// Load the run folder's latest checkpoint into `policy` when `trainer.resume` is set.
pub(super) fn resume(
    policy: &mut dyn TrainablePolicy,
    config: &RunConfig,
    out_dir: &Path,
    run_id: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<Resumed, TrainError> {
    if !config.trainer.resume {
        return Ok(Resumed { state: None, at_final: None });
    }
    let (dir, state) = checkpoint::resume(policy, out_dir, run_id, config)?;
    if state.sft.is_some() {
        return Err(TrainError::Other(format!("{} was written by `arl sft`; continue it with `arl sft --resume`", dir.display())));
    }
    log(&format!("resumed from {} after step {}", dir.display(), state.step));
    let at_final = (dir.ends_with("final") && state.step >= config.trainer.steps).then(|| state.clone());
    Ok(Resumed { state: Some(state), at_final })
}

/// `[heldout, heldout_instances]` before training: from the checkpoint once a step has run,
/// else evaluated here.
pub(super) fn evaluate_before(
    run: &Run<'_>,
    held_out: &HeldOut<'_>,
    policy: &mut dyn TrainablePolicy,
    resumed: Option<&TrainerState>,
    log: &mut dyn FnMut(&str),
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<[Option<Evaluation>; 2], TrainError> {
    if let Some(state) = resumed.filter(|s| s.step > 0) {
        return Ok([state.before.clone(), state.before_instances.clone()]);
    }
    // A fresh run, or one killed during this evaluation (resumed from `step-00000`): each
    // finished split is checkpointed at once, so a kill loses at most the split under way.
    let done = resumed.map_or([None, None], |s| [s.before.clone(), s.before_instances.clone()]);
    let mut save = |policy: &dyn TrainablePolicy, evals: &[Option<Evaluation>; 2]| -> Result<(), TrainError> {
        if !run.config.output.checkpoints {
            return Ok(());
        }
        let state = run.state(0, evals, &[], &BTreeMap::new(), 0);
        checkpoint::write(policy, run.codec, run.out_dir, "step-00000", &state).map(drop)
    };
    held_out.evaluate(policy, "before", done, &mut save, log, progress)
}
