//! Oracle demonstrations: a gym that knows each task's answer can script an expert's turns
//! through its own tools ([`Env::oracle`](crate::Env::oracle)). Played back through a
//! session, they become SFT conversations (`arl tasks --transcripts`), the warm start a cold
//! model needs before GRPO can see a non-zero reward.
//!
//! [`OracleNoise`] keeps the demonstrations imperfect on purpose, so the warm-started policy
//! still has something to learn: a wrong edit, a skipped read, a skipped test run.

use serde::{Deserialize, Serialize};

use crate::ToolCall;

/// How often the oracle deviates from the expert script (each a probability in [0, 1]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OracleNoise {
    /// Apply a distractor edit instead of the fix.
    pub wrong_edit_rate: f64,
    /// Edit without reading the source first.
    pub skip_read_rate: f64,
    /// Finish without running the tests.
    pub skip_test_rate: f64,
}

impl OracleNoise {
    /// The first rate outside [0, 1], as `(name, value)`.
    pub fn invalid(&self) -> Option<(&'static str, f64)> {
        [("wrong_edit_rate", self.wrong_edit_rate), ("skip_read_rate", self.skip_read_rate), ("skip_test_rate", self.skip_test_rate)]
            .into_iter()
            .find(|(_, p)| !(0.0..=1.0).contains(p))
    }
}

/// One scripted assistant turn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OracleTurn {
    /// Tool calls, run in order; their results are the next observation.
    Calls(Vec<ToolCall>),
    /// A final answer without a tool call (it ends the episode).
    Answer(String),
}

impl OracleTurn {
    /// A turn of one call.
    pub fn call(name: &str, arguments: serde_json::Value) -> Self {
        let arguments = match arguments {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        OracleTurn::Calls(vec![ToolCall { name: name.to_string(), arguments }])
    }
}
