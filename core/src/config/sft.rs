//! Supervised fine-tuning (`arl sft`): which conversations, which of their tokens carry the
//! loss, and how many go into one optimizer step. The optimizer, schedule, micro-batches and
//! checkpoints are `[trainer]`'s, as for `arl run`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `arl sft` settings (`arl run` ignores them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SftConfig {
    /// Training conversations: a JSONL file, one `{"messages": [...]}` per line (optional
    /// `"tools"`, optional per-message `"weight"` 0 or 1 on assistant messages).
    pub data: String,
    /// Held-out conversations in the same format, whose loss is measured before, during and
    /// after training. Unset: the last `heldout_frac` of `data` (by line order) is held out.
    pub heldout: Option<String>,
    /// Fraction of `data` held out when `heldout` is unset (0 ≤ f < 1; 0: no held-out loss).
    pub heldout_frac: f64,
    /// Conversations per optimizer step (the loss is the token mean over all of them;
    /// `trainer.micro` of them go through the model at once).
    pub batch_size: u32,
    /// Which tokens carry the loss: `assistant` (every assistant turn as the model would write
    /// it, through its stop token; a message with `"weight": 0` is left out) or `all` (every
    /// token after the first).
    pub train_on: TrainOn,
    /// Longest conversation, in tokens; a longer one is refused when the data is read,
    /// naming its line (≥ 2).
    pub max_tokens: u32,
    /// Measure the held-out loss every this many steps (0: only before and after).
    pub eval_every: u32,
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            data: String::new(),
            heldout: None,
            heldout_frac: 0.1,
            batch_size: 8,
            train_on: TrainOn::Assistant,
            max_tokens: 4096,
            eval_every: 0,
        }
    }
}

/// The tokens of a conversation that carry the SFT loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrainOn {
    /// Assistant turns only (the prompt, tool results and template text are context).
    Assistant,
    /// Every token but the first.
    All,
}
