//! Plugins registered by this test binary only — proof that a crate other than core can
//! register every kind, and stand-ins so configs validate whatever else is linked.

use std::sync::Arc;

use arl_core::config::{AdvantageConfig, LossConfig, SandboxConfig};
use arl_core::{
    AdvantageFn, AdvantageInput, Aggregation, Job, JobOutcome, LossError, LossInput, LossMetrics, PluginError, PolicyLoss, Sandbox,
    SandboxError, TokenLoss,
};

pub struct NullSandbox;
impl Sandbox for NullSandbox {
    fn name(&self) -> &str {
        "test-null"
    }
    fn run(&self, _: &Job) -> Result<JobOutcome, SandboxError> {
        Err(SandboxError::Setup("the test-null sandbox runs nothing".into()))
    }
}
fn null_sandbox(_: &SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError> {
    Ok(Arc::new(NullSandbox))
}
arl_core::register!(SandboxPlugin { name: "test-null", about: "test stand-in", build: null_sandbox });

struct ZeroLoss;
impl PolicyLoss for ZeroLoss {
    fn token_loss(&self, input: &LossInput) -> Result<TokenLoss, LossError> {
        Ok(TokenLoss { loss: input.log_prob.zeros_like(), metrics: LossMetrics::default() })
    }
    fn default_aggregation(&self) -> Aggregation {
        Aggregation::TokenMean
    }
}
fn zero_loss(_: &LossConfig) -> Result<Box<dyn PolicyLoss>, PluginError> {
    Ok(Box::new(ZeroLoss))
}
arl_core::register!(LossPlugin { name: "test-zero", about: "test stand-in", build: zero_loss });

struct ZeroAdvantage;
impl AdvantageFn for ZeroAdvantage {
    fn advantages(&self, input: &AdvantageInput<'_>) -> Result<Vec<f64>, LossError> {
        input.check()?;
        Ok(vec![0.0; input.rewards.len()])
    }
}
fn zero_advantage(_: &AdvantageConfig) -> Result<Box<dyn AdvantageFn>, PluginError> {
    Ok(Box::new(ZeroAdvantage))
}
arl_core::register!(AdvantagePlugin { name: "test-zero", about: "test stand-in", build: zero_advantage });

/// Flags that select the stand-ins, for tests about something else.
pub const STAND_INS: [&str; 6] = ["--sandbox", "test-null", "--loss", "test-zero", "--advantage", "test-zero"];
