//! arl-core — the ground floor of arl.
//!
//! It owns the plugin traits ([`Env`], [`ToolSet`], [`Sandbox`], [`AdvantageFn`],
//! [`PolicyLoss`]), the [`Policy`] interface (generate, score), the data that flows between them (messages, tool calls and their
//! outcomes, tasks, episodes with token ids and masks), the run configuration, and the
//! `inventory`-based plugin [`registry`] and evaluation statistics ([`eval`]). The RL loop
//! written against these traits is its own crate, arl-train (`core/train`).
//!
//! It deliberately knows no model, no environment and no concrete backend: environments,
//! tool sets and sandboxes are text in, text out and never see a tensor; only the loss and
//! policy interfaces ([`loss`], [`policy`]) and arl-train's update touch tensors,
//! through burn's `Dispatch` backend, so the same `Box<dyn PolicyLoss>` and
//! `dyn TrainablePolicy` run on every device.
//!
//! Cargo features (all off by default): `cuda` compiles burn-cuda into `Dispatch`, `tch`
//! compiles libtorch into it. The CPU backend (burn-flex) is always there.

#![warn(missing_docs)]

pub mod advantage;
pub mod backend;
pub mod chat;
pub mod config;
pub mod env;
pub mod episode;
pub mod error;
pub mod eval;
pub mod hub;
pub mod loss;
pub mod message;
pub mod oracle;
pub mod policy;
pub mod registry;
pub mod rng;
pub mod sandbox;
pub mod single_turn;
pub mod task;
pub mod testing;
pub mod tool;
pub mod toolcall;

pub use advantage::{AdvantageFn, AdvantageInput};
pub use backend::{BackendKind, DeviceSpec};
pub use chat::{ChatCodec, ChatError, Conversation};
pub use config::RunConfig;
pub use env::{AgentEnv, AgentSampling, AssistantTurn, Env, EnvSession, Outcome, Step};
pub use episode::{Episode, EpisodeFinish, EpisodeStats, HARNESS_FAILED, SANDBOX_EXHAUSTED, SANDBOX_FAILED, TokenStream};
pub use error::{ConfigError, EnvError, LossError, PluginError, RegistryError, SandboxError};
pub use loss::{Aggregation, LossInput, LossMetrics, Normalizer, PolicyLoss, T2, TokenLoss};
pub use message::{Message, Role};
pub use oracle::{OracleNoise, OracleTurn};
pub use policy::{FinishReason, Generation, OptimStep, Policy, PolicyError, SamplingParams, ScoreParams, Scores, TrainablePolicy};
pub use registry::{AdvantagePlugin, EnvPlugin, LossPlugin, Plugin, SandboxPlugin, ToolSetPlugin};
pub use sandbox::{ENDPOINT_AT, Job, JobFile, JobOutcome, Limits, PYTEST_AT, Sandbox, ShellSupport, pytest_dir};
pub use single_turn::SingleTurn;
pub use task::{Split, Task};
pub use tool::{ParsedCall, ToolCall, ToolContext, ToolOutcome, ToolResult, ToolSchema, ToolSet, Workspace, dispatch};

/// Re-exported so the [`register!`] macro works in crates that do not depend on inventory.
#[doc(hidden)]
pub use inventory as __inventory;
