//! An SFT run: the held-out loss before, `trainer.steps` steps of `sft.batch_size`
//! conversations (a seeded order, reshuffled every pass over the data), the held-out loss
//! every `sft.eval_every` steps and after — with `metrics.jsonl`, checkpoints, `--resume` and
//! `results.json`, as `arl run` writes them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::data::{SftDataError, SftSequence, read_jsonl, render};
use super::step::{mean_nll, sft_step};
use crate::TrainError;
use crate::checkpoint::{self, TrainerState};
use crate::micro::MicroBatching;
use crate::trainer::{MAX_NON_FINITE_STEPS, RunMeta, shuffled};
use arl_core::RunConfig;
use arl_core::chat::ChatCodec;
use arl_core::loss::PolicyLoss;
use arl_core::policy::TrainablePolicy;

/// The pieces an SFT run composes (built by the caller).
pub struct SftParts<'a> {
    pub codec: &'a dyn ChatCodec,
    pub policy: &'a mut dyn TrainablePolicy,
    /// The loss on target tokens (`cross-entropy`).
    pub loss: &'a dyn PolicyLoss,
}

/// The conversations of a run, rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct SftData {
    pub train: Vec<SftSequence>,
    pub heldout: Vec<SftSequence>,
    pub summary: SftDataSummary,
}

/// What the run trained on (in `results.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SftDataSummary {
    pub data: String,
    /// The held-out file, or unset when the held-out conversations are the end of `data`.
    pub heldout_file: Option<String>,
    pub train_conversations: usize,
    pub heldout_conversations: usize,
    pub train_tokens: usize,
    pub train_target_tokens: usize,
    pub heldout_target_tokens: usize,
    pub longest_tokens: usize,
}

/// Per-step metrics: one line of `metrics.jsonl`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SftStepMetrics {
    /// 1-based step number.
    pub step: u32,
    pub lr: f64,
    /// Passes over the training conversations so far (fractional).
    pub epoch: f64,
    /// The batch's loss: token-mean −log π over its target tokens (before this step's update).
    pub loss: f64,
    /// Target tokens in the batch.
    pub tokens: usize,
    pub sequences: usize,
    pub grad_norm: f64,
    pub clipped: bool,
    /// The loss or gradient was NaN or infinite: the step was skipped (weights unchanged).
    pub non_finite: bool,
    /// The held-out loss after this step, when measured (`sft.eval_every`).
    pub heldout_loss: Option<f64>,
    /// Tokens (all of each conversation) through the model per second.
    pub tokens_per_s: f64,
    pub step_seconds: f64,
    /// The process's peak resident memory so far, MiB.
    pub peak_rss_mb: Option<f64>,
}

/// The SFT loop's own state at a checkpoint (in `trainer_state.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SftProgress {
    pub steps: Vec<SftStepMetrics>,
    pub heldout_before: Option<f64>,
    /// Training conversations handed out so far (the data position).
    pub examples_used: usize,
}

/// What an SFT run produced: the body of its `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SftReport {
    pub meta: RunMeta,
    pub config: RunConfig,
    pub data: SftDataSummary,
    pub steps: Vec<SftStepMetrics>,
    /// Mean −log π of the held-out conversations' target tokens before training.
    pub heldout_before: Option<f64>,
    /// … and after.
    pub heldout_after: Option<f64>,
    pub wall_seconds: f64,
}

fn line_error(path: &str, line: usize, message: String) -> SftDataError {
    SftDataError::Line { path: path.to_string(), line, message }
}

/// Read and render `sft.data` (and `sft.heldout`, else the last `sft.heldout_frac` of the
/// data) through `codec`; a conversation the template refuses, one longer than
/// `sft.max_tokens` or one without a trained token is an error naming its line.
pub fn load_data(config: &RunConfig, codec: &dyn ChatCodec) -> Result<SftData, SftDataError> {
    let s = &config.sft;
    let render_file = |path: &str| -> Result<Vec<SftSequence>, SftDataError> {
        read_jsonl(Path::new(path))?
            .iter()
            .map(|ex| {
                let seq = render(codec, ex, s.train_on)
                    .map_err(|e| line_error(path, ex.line, format!("the chat template cannot render it: {e}")))?;
                if seq.ids.len() > s.max_tokens as usize {
                    return Err(line_error(
                        path,
                        ex.line,
                        format!("{} tokens, over sft.max_tokens = {}; raise sft.max_tokens or shorten it", seq.ids.len(), s.max_tokens),
                    ));
                }
                if seq.target_tokens() == 0 {
                    return Err(line_error(path, ex.line, "no token to train on (every assistant message has weight 0)".into()));
                }
                Ok(seq)
            })
            .collect()
    };
    let mut train = render_file(&s.data)?;
    let heldout = match &s.heldout {
        Some(path) => render_file(path)?,
        None if s.heldout_frac > 0.0 => {
            if train.len() < 2 {
                return Err(SftDataError::File {
                    path: s.data.clone(),
                    message: "one conversation cannot be split into training and held-out ones; add more, pass sft.heldout, or set \
                              sft.heldout_frac = 0"
                        .into(),
                });
            }
            let k = ((train.len() as f64 * s.heldout_frac).round() as usize).clamp(1, train.len() - 1);
            train.split_off(train.len() - k)
        }
        None => Vec::new(),
    };
    let summary = SftDataSummary {
        data: s.data.clone(),
        heldout_file: s.heldout.clone(),
        train_conversations: train.len(),
        heldout_conversations: heldout.len(),
        train_tokens: train.iter().map(|q| q.ids.len()).sum(),
        train_target_tokens: train.iter().map(SftSequence::target_tokens).sum(),
        heldout_target_tokens: heldout.iter().map(SftSequence::target_tokens).sum(),
        longest_tokens: train.iter().chain(&heldout).map(|q| q.ids.len()).max().unwrap_or(0),
    };
    Ok(SftData { train, heldout, summary })
}

/// Run SFT as `config` says on `data`, writing into `out_dir` (see the module docs).
pub fn train_sft(
    parts: SftParts<'_>,
    config: &RunConfig,
    meta: RunMeta,
    data: &SftData,
    out_dir: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<SftReport, TrainError> {
    let start = Instant::now();
    let SftParts { codec, policy, loss } = parts;
    std::fs::create_dir_all(out_dir).map_err(TrainError::at(out_dir))?;
    let (s, t) = (&config.sft, &config.trainer);
    let run_id = (!meta.run_id.is_empty()).then(|| meta.run_id.clone());
    let n = data.train.len();
    if n == 0 {
        return Err(TrainError::Other(format!("{}: no training conversations", s.data)));
    }
    let batching = MicroBatching::new(Some(t.micro.map_or(s.batch_size as usize, |m| m as usize)), Some(t.micro_tokens as usize));

    let resumed = if t.resume {
        let (dir, state) = checkpoint::resume(policy, out_dir, run_id.as_deref(), config)?;
        let Some(progress) = state.sft.clone() else {
            return Err(TrainError::Other(format!(
                "{} was written by `arl run`, not `arl sft`; it cannot resume an SFT run",
                dir.display()
            )));
        };
        log(&format!("resumed from {} after step {}", dir.display(), state.step));
        Some((state, progress))
    } else {
        None
    };
    let heldout_before = match &resumed {
        Some((_, p)) => p.heldout_before,
        None => {
            let h = mean_nll(policy, &data.heldout, batching)?;
            if let Some(h) = h {
                log(&format!("held-out loss before: {h:.4} ({} conversations)", data.heldout.len()));
            }
            h
        }
    };
    let (first_step, mut steps, mut cursor, earlier_seconds) = match &resumed {
        Some((state, p)) => (state.step, p.steps.clone(), p.examples_used, state.wall_seconds),
        None => (0, Vec::new(), 0, 0.0),
    };
    let metrics_path = out_dir.join("metrics.jsonl");
    let mut metrics_file = std::fs::File::create(&metrics_path).map_err(TrainError::at(&metrics_path))?;
    for m in &steps {
        writeln!(metrics_file, "{}", serde_json::to_string(m).expect("metrics serialize")).map_err(TrainError::at(&metrics_path))?;
    }
    let state_at = |step: u32, steps: &[SftStepMetrics], cursor: usize| TrainerState {
        step,
        config: config.clone(),
        wall_seconds: earlier_seconds + start.elapsed().as_secs_f64(),
        tasks_used: cursor,
        run_id: run_id.clone(),
        sft: Some(SftProgress { steps: steps.to_vec(), heldout_before, examples_used: cursor }),
        ..TrainerState::default()
    };
    // Pass `e` over the data visits it in the order `shuffled(n, seed ^ e·φ)`.
    let order = |epoch: usize| shuffled(n, t.seed ^ (epoch as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut epoch_order: (usize, Vec<usize>) = (usize::MAX, Vec::new());
    let mut last_checkpoint: Option<PathBuf> = None;
    let mut cadence = checkpoint::Cadence::new(t);
    let mut non_finite_in_a_row = 0u32;
    for step in first_step..t.steps {
        let mut batch: Vec<&SftSequence> = Vec::with_capacity(s.batch_size as usize);
        for j in 0..s.batch_size as usize {
            let at = cursor + j;
            if epoch_order.0 != at / n {
                epoch_order = (at / n, order(at / n));
            }
            batch.push(&data.train[epoch_order.1[at % n]]);
        }
        cursor += s.batch_size as usize;
        let lr = t.lr_at(step);
        let st = sft_step(policy, loss, &batch, batching, lr)?;
        let measure = s.eval_every > 0 && (step + 1) % s.eval_every == 0 && step + 1 < t.steps;
        let heldout_loss = if measure { mean_nll(policy, &data.heldout, batching)? } else { None };
        let all_tokens: usize = batch.iter().map(|q| q.ids.len()).sum();
        let m = SftStepMetrics {
            step: step + 1,
            lr,
            epoch: cursor as f64 / n as f64,
            loss: st.loss,
            tokens: st.tokens,
            sequences: st.sequences,
            grad_norm: st.grad_norm,
            clipped: st.clipped,
            non_finite: st.non_finite,
            heldout_loss,
            tokens_per_s: if st.seconds > 0.0 { all_tokens as f64 / st.seconds } else { 0.0 },
            step_seconds: st.seconds,
            peak_rss_mb: crate::metrics::peak_rss_mb(),
        };
        writeln!(metrics_file, "{}", serde_json::to_string(&m).expect("metrics serialize")).map_err(TrainError::at(&metrics_path))?;
        metrics_file.flush().map_err(TrainError::at(&metrics_path))?;
        log(&console_line(&m, t.steps));
        steps.push(m);
        if st.non_finite {
            non_finite_in_a_row += 1;
            log(&format!("step {}/{}: non-finite loss or gradient; the step was skipped (weights unchanged)", step + 1, t.steps));
            if non_finite_in_a_row >= MAX_NON_FINITE_STEPS {
                let kept = match &last_checkpoint {
                    Some(dir) => format!("the last good checkpoint is {}", dir.display()),
                    None => "no checkpoint was written before it".into(),
                };
                return Err(TrainError::Other(format!(
                    "stopped at step {}: {non_finite_in_a_row} steps in a row had a NaN or infinite loss or gradient; {kept}; lower trainer.lr",
                    step + 1
                )));
            }
            continue;
        }
        non_finite_in_a_row = 0;
        if config.output.checkpoints && cadence.due(step + 1) {
            let state = state_at(step + 1, &steps, cursor);
            last_checkpoint = Some(checkpoint::write(policy, codec, out_dir, &format!("step-{:05}", step + 1), &state)?);
            cadence.written();
            checkpoint::prune(out_dir, t.keep_checkpoints as usize)?;
        }
    }
    if config.output.checkpoints && t.steps > first_step {
        checkpoint::write(policy, codec, out_dir, "final", &state_at(t.steps, &steps, cursor))?;
    }
    let heldout_after = mean_nll(policy, &data.heldout, batching)?;
    if let (Some(b), Some(a)) = (heldout_before, heldout_after) {
        log(&format!("held-out loss: {b:.4} → {a:.4} ({:+.4})", a - b));
    }
    let report = SftReport {
        meta,
        config: config.clone(),
        data: data.summary.clone(),
        steps,
        heldout_before,
        heldout_after,
        wall_seconds: earlier_seconds + start.elapsed().as_secs_f64(),
    };
    let results = out_dir.join("results.json");
    std::fs::write(&results, serde_json::to_string_pretty(&report).expect("report serializes")).map_err(TrainError::at(&results))?;
    log(&format!("results: {}", results.display()));
    Ok(report)
}

fn console_line(m: &SftStepMetrics, total: u32) -> String {
    let heldout = m.heldout_loss.map(|h| format!("  held-out {h:.4}")).unwrap_or_default();
    format!(
        "step {}/{total}  loss {:.4}{heldout}  lr {:.2e}  grad {:.3}{}  {} tokens  {:.1} s  epoch {:.2}",
        m.step,
        m.loss,
        m.lr,
        m.grad_norm,
        if m.clipped { " (clipped)" } else { "" },
        m.tokens,
        m.step_seconds,
        m.epoch
    )
}
