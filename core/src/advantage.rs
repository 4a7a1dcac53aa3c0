//! Advantage estimators: rewards of a batch, with the group each episode belongs to, in;
//! one advantage per episode out (broadcast over its policy tokens by the trainer).

use crate::LossError;

/// The rewards of one batch. `group_ids[i]` is the group of episode i (episodes sampled
/// from the same task in the same step); groups may have unequal sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct AdvantageInput<'a> {
    pub rewards: &'a [f64],
    pub group_ids: &'a [usize],
}

impl AdvantageInput<'_> {
    pub fn check(&self) -> Result<(), LossError> {
        if self.rewards.len() != self.group_ids.len() {
            return Err(LossError::Shape(format!("{} rewards but {} group ids", self.rewards.len(), self.group_ids.len())));
        }
        Ok(())
    }
}

pub trait AdvantageFn: Send + Sync {
    /// One advantage per episode, every episode weighing the same in batch and group
    /// statistics.
    fn advantages(&self, input: &AdvantageInput<'_>) -> Result<Vec<f64>, LossError>;

    /// The same with statistics weighted by each episode's policy-token count (AReaL's
    /// token-level normalization). Estimators without a token-level form ignore the counts.
    fn advantages_token_weighted(&self, input: &AdvantageInput<'_>, token_counts: &[f64]) -> Result<Vec<f64>, LossError> {
        let _ = token_counts;
        self.advantages(input)
    }
}
