//! Supervised fine-tuning on chat data (`arl sft`), with the RL loop's machinery: the same
//! `TrainablePolicy` (full weights or LoRA), micro-batches under one normalizer, the global
//! gradient-norm clip and AdamW, the learning-rate schedule, checkpoints and `--resume`,
//! `metrics.jsonl` and `results.json`. [`data`] reads and renders conversations
//! token-in/token-out as rollouts grow episodes; [`step`] is one optimizer step and the
//! held-out loss (both usable in a custom loop); [`trainer`] composes them into a run.

pub mod data;
pub mod step;
pub mod trainer;

pub use data::{SftDataError, SftExample, SftSequence, parse_line, read_jsonl, render};
pub use step::{SftStep, mean_nll, sft_step};
pub use trainer::{SftData, SftDataSummary, SftParts, SftProgress, SftReport, SftStepMetrics, load_data, train_sft};
