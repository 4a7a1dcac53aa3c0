//! Subcommands, one file each.

mod advantages;
mod bench;
mod bench_sandbox;
mod chat_codec;
mod cluster;
mod config;
mod convert;
mod crosscheck;
mod env_replay;
mod eval;
mod fs_check;
mod generate;
mod grade;
mod list;
mod loss;
mod merge;
mod model_args;
mod new;
mod procs;
mod progress;
mod render;
mod report;
mod results;
mod run;
mod run_args;
mod run_folder;
mod sandbox;
mod score;
mod sft;
mod slurm;
mod smoke;
mod tasks;
mod transcripts;
mod worker;

use std::io::Write;

pub use advantages::Advantages;
pub use bench::Bench;
pub use chat_codec::tokenizer_dir;
pub use cluster::ClusterCommand;
pub use config::ConfigCommand;
pub use convert::Convert;
pub use crosscheck::Crosscheck;
pub use env_replay::EnvCommand;
pub use eval::Eval;
pub use generate::Generate;
pub use grade::Grade;
pub use list::List;
pub use loss::LossCommand;
pub use merge::Merge;
pub use model_args::ModelArgs;
pub use new::New;
pub use render::Render;
pub use report::Report;
pub use results::ResultsCommand;
pub use run::{Built, Run};
pub use run_args::{ConfigArgs, TrainArgs};
pub use sandbox::SandboxCommand;
pub use score::Score;
pub use sft::Sft;
pub use tasks::Tasks;
pub use worker::Worker;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// List every registered plugin (envs, tool sets, sandboxes, advantage estimators,
    /// losses) and the backends compiled into this binary.
    List(List),
    /// Show the resolved run configuration, or its JSON Schema.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Train a policy on an environment.
    Run(Run),
    /// Supervised fine-tuning on a JSONL file of conversations (full weights or LoRA).
    Sft(Sft),
    /// Evaluate a model on an environment's held-out tasks (pass@1 with intervals, JSON).
    Eval(Eval),
    /// The results file's JSON Schema; the paired difference of two evaluations.
    #[command(subcommand)]
    Results(ResultsCommand),
    /// Evaluate a policy loss on a batch from a file (f64, CPU).
    #[command(subcommand)]
    Loss(LossCommand),
    /// Compute advantages from rewards and group ids in a file.
    Advantages(Advantages),
    /// List an environment's tasks, or write them out as files.
    Tasks(Tasks),
    /// Grade a candidate source against a task's hidden tests (JSON).
    Grade(Grade),
    /// Run a Python file in a sandbox (JSON outcome).
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Teacher-forced log-probabilities of token sequences (JSON in, JSON out).
    Score(Score),
    /// Sample continuations of token-id prompts with the KV cache.
    Generate(Generate),
    /// Throughput benchmarks (one JSON line each).
    #[command(subcommand)]
    Bench(Bench),
    /// Render a conversation through a model's chat template: `{"text": …, "ids": […]}`.
    Render(Render),
    /// Convert a GGUF file (llama.cpp's format) into a Hugging Face model directory.
    Convert(Convert),
    /// Score the same sampled tokens on several backends and report how far they disagree.
    Crosscheck(Crosscheck),
    /// One self-contained HTML page of one or more runs: curves, before/after per task, tool
    /// statistics and transcripts.
    Report(Report),
    /// Start a plugin crate of your own outside arl's tree (`arl new env NAME`).
    #[command(subcommand)]
    New(New),
    /// Fold a LoRA adapter into its base model and write the full weights.
    Merge(Merge),
    /// Drive an environment by hand (`arl env replay`).
    #[command(subcommand)]
    Env(EnvCommand),
    /// A rollout worker of a run started with `--launcher procs|slurm` (the launcher starts them).
    Worker(Worker),
    /// Look at or end a run with rollout workers; check a folder is shared across nodes.
    #[command(subcommand)]
    Cluster(ClusterCommand),
}

impl Command {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Command::List(cmd) => cmd.execute(out),
            Command::Config(cmd) => cmd.execute(out),
            Command::Run(cmd) => cmd.execute(out),
            Command::Sft(cmd) => cmd.execute(out),
            Command::Eval(cmd) => cmd.execute(out),
            Command::Results(cmd) => cmd.execute(out),
            Command::Loss(cmd) => cmd.execute(out),
            Command::Advantages(cmd) => cmd.execute(out),
            Command::Tasks(cmd) => cmd.execute(out),
            Command::Grade(cmd) => cmd.execute(out),
            Command::Sandbox(cmd) => cmd.execute(out),
            Command::Score(cmd) => cmd.execute(out),
            Command::Generate(cmd) => cmd.execute(out),
            Command::Bench(cmd) => cmd.execute(out),
            Command::Render(cmd) => cmd.execute(out),
            Command::Convert(cmd) => cmd.execute(out),
            Command::Crosscheck(cmd) => cmd.execute(out),
            Command::Report(cmd) => cmd.execute(out),
            Command::New(cmd) => cmd.execute(out),
            Command::Merge(cmd) => cmd.execute(out),
            Command::Env(cmd) => cmd.execute(out),
            Command::Worker(cmd) => cmd.execute(out),
            Command::Cluster(cmd) => cmd.execute(out),
        }
    }
}

/// Read an input file named by `flag`: a path that is missing or not a file is a usage error
/// (exit 2), any other I/O failure a runtime one; both name the path.
pub fn read_input(path: &std::path::Path, flag: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    if !path.is_file() {
        return Err(crate::usage!("{flag} {}: no such file", path.display()));
    }
    std::fs::read_to_string(path).with_context(|| format!("{flag} {}: cannot read", path.display()))
}
