//! Advantage estimators: rewards of a batch, with the group each episode belongs to, in;
//! one advantage per episode out (broadcast over its policy tokens by the trainer).

use crate::LossError;

/// The rewards of one batch. `group_ids[i]` is the group of episode i (episodes sampled
/// from the same task in the same step); groups may have unequal sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct AdvantageInput<'a> {
    /// Each episode's reward ([`crate::Episode::reward`]), in batch order.
    pub rewards: &'a [f64],
    /// Each episode's group ([`crate::Episode::group`]), as long as `rewards`.
    pub group_ids: &'a [usize],
    /// Each episode's response (policy) token count, for estimators whose statistics run
    /// over response tokens (REINFORCE++ whitens over them, as verl's `masked_whiten`);
    /// `None`: every episode counts as one token. The trainer always passes them.
    pub response_tokens: Option<&'a [f64]>,
}

impl<'a> AdvantageInput<'a> {
    /// Rewards and groups, no response lengths.
    pub fn new(rewards: &'a [f64], group_ids: &'a [usize]) -> Self {
        Self { rewards, group_ids, response_tokens: None }
    }

    /// Refuse inputs that do not line up: [`LossError::Shape`] when the lengths differ,
    /// [`LossError::Invalid`] for a response token count that is negative or not finite.
    pub fn check(&self) -> Result<(), LossError> {
        if self.rewards.len() != self.group_ids.len() {
            return Err(LossError::Shape(format!("{} rewards but {} group ids", self.rewards.len(), self.group_ids.len())));
        }
        if let Some(tokens) = self.response_tokens {
            if tokens.len() != self.rewards.len() {
                return Err(LossError::Shape(format!("{} rewards but {} response token counts", self.rewards.len(), tokens.len())));
            }
            if let Some(c) = tokens.iter().find(|c| !(c.is_finite() && **c >= 0.0)) {
                return Err(LossError::Invalid(format!("response token count {c} is not a count")));
            }
        }
        Ok(())
    }
}

/// An advantage estimator (GRPO's group normalization, REINFORCE++, …): a plugin chosen by
/// `[advantage]`, turning a batch's rewards into one advantage per episode.
pub trait AdvantageFn: Send + Sync {
    /// One advantage per episode, every episode weighing the same in batch and group
    /// statistics; a whitening over response tokens (REINFORCE++) counts
    /// `input.response_tokens`.
    fn advantages(&self, input: &AdvantageInput<'_>) -> Result<Vec<f64>, LossError>;

    /// The same with statistics weighted by each episode's policy-token count (AReaL's
    /// token-level normalization). Estimators without a token-level form ignore the counts.
    fn advantages_token_weighted(&self, input: &AdvantageInput<'_>, token_counts: &[f64]) -> Result<Vec<f64>, LossError> {
        let _ = token_counts;
        self.advantages(input)
    }
}
