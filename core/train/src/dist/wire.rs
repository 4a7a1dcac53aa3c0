//! A round's result as it travels from a worker to the trainer: CBOR, which keeps every
//! float's bits (f32 and f64 written at full width or narrower only when lossless; NaN,
//! infinities and −0 included), so the trainer trains on exactly the episodes the worker
//! sampled.

use serde::{Deserialize, Serialize};

use crate::TrainError;
use crate::rounds::{RoundOutput, RoundSpec};

/// `results/r{id}.a{attempt}.cbor`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundResult {
    pub protocol: u32,
    /// The worker that rolled it out.
    pub worker: u32,
    /// The round as the worker read it from the index (the trainer checks it against its own).
    pub round: RoundSpec,
    /// The episodes, or why the worker could not roll the round out (one line).
    pub outcome: Result<RoundOutput, String>,
}

pub fn encode(result: &RoundResult) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(result, &mut out).expect("writing CBOR into memory cannot fail");
    out
}

pub fn decode(bytes: &[u8]) -> Result<RoundResult, TrainError> {
    ciborium::from_reader(bytes).map_err(|e| TrainError::Other(format!("a round result that does not decode ({e})")))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::rollout::RolloutStats;
    use arl_core::{Episode, EpisodeFinish, EpisodeStats, Message};

    fn episode(logprobs: Vec<f32>, reward: f64) -> Episode {
        let n = logprobs.len();
        let mut call = Message::assistant("<tool_call>{}</tool_call>");
        call.tool_calls =
            vec![serde_json::from_value(serde_json::json!({
            "type": "function",
            "function": {"name": "run", "arguments": {"x": 0.1, "n": -3, "big": 18446744073709551615u64, "s": "é\n", "l": [true, null]}}
        }))
        .unwrap()];
        Episode {
            task_id: "t-1".into(),
            group: 3,
            ids: (0..n as u32).map(|i| i * 7919).collect(),
            policy_mask: (0..n).map(|i| i % 2 == 1).collect(),
            sampler_logprobs: logprobs,
            turn_ids: (0..n as i32).map(|i| if i % 2 == 1 { i / 2 } else { -1 }).collect(),
            reward,
            stats: EpisodeStats {
                turns: 2,
                truncated: true,
                finish: Some(EpisodeFinish::Length),
                counters: BTreeMap::from([("tool_calls_ok".to_string(), 2)]),
                rewards: BTreeMap::from([("correct".to_string(), 0.1 + 0.2)]),
                solved: Some(false),
                ..Default::default()
            },
            messages: vec![Message::user("hi"), call],
            branches: Vec::new(),
        }
    }

    #[test]
    fn a_result_round_trips_bit_for_bit() {
        let floats = vec![
            0.0,
            -0.0,
            -1.0e-45,
            f32::MIN_POSITIVE,
            -0.1,
            -std::f32::consts::PI,
            f32::NEG_INFINITY,
            f32::NAN,
            -3.402_823_5e38,
            -1.000_000_1,
        ];
        let result = RoundResult {
            protocol: 1,
            worker: 2,
            round: RoundSpec { id: 9, version: 4, position: 17, group_base: 2, seed: u64::MAX - 5, task_ids: vec!["t-1".into()] },
            outcome: Ok(RoundOutput {
                episodes: vec![episode(floats.clone(), 1.0 / 3.0), episode(vec![-0.5], f64::NAN)],
                stats: RolloutStats { episodes: 2, seconds: 0.1 + 0.2, generate_seconds: 1e-300, ..Default::default() },
            }),
        };
        let back = decode(&encode(&result)).unwrap();
        let (Ok(a), Ok(b)) = (&result.outcome, &back.outcome) else { panic!("outcome lost") };
        for (x, y) in a.episodes.iter().zip(&b.episodes) {
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&x.sampler_logprobs), bits(&y.sampler_logprobs));
            assert_eq!(x.reward.to_bits(), y.reward.to_bits());
            // Everything else compares with ==, once the NaNs are out of the way.
            let strip = |e: &Episode| Episode { sampler_logprobs: vec![], reward: 0.0, ..e.clone() };
            assert_eq!(strip(x), strip(y));
        }
        assert_eq!(a.stats.seconds.to_bits(), b.stats.seconds.to_bits());
        assert_eq!(a.stats, b.stats);
        assert_eq!((back.protocol, back.worker, &back.round), (1, 2, &result.round));

        let failed = RoundResult { outcome: Err("the sandbox refused".into()), ..result };
        assert_eq!(decode(&encode(&failed)).unwrap(), failed);
        assert!(decode(b"not cbor").unwrap_err().to_string().contains("does not decode"));
    }
}
