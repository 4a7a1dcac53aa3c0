//! The flags of the commands that resolve a run configuration. Each flag is shorthand for one
//! config key, named after it, with the key and its default in the help; `--set` reaches any
//! key. [`ConfigArgs`] are what every such command reads (`run`, `eval`, `config show`);
//! [`TrainArgs`] only training reads (`run`, `config show`), so `arl eval` does not accept them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use anyhow::Context;
use arl_core::RunConfig;
use arl_core::config::Overrides;

/// `about (key) [default: value]`, the value read from [`RunConfig::default`] so the help
/// never drifts from the code.
pub fn key_help(about: &str, key: &str) -> String {
    static DEFAULTS: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    let defaults = DEFAULTS.get_or_init(|| {
        let mut out = BTreeMap::new();
        let value = toml::Value::try_from(RunConfig::default()).expect("the default config serializes");
        flatten("", &value, &mut out);
        out
    });
    match defaults.get(key) {
        Some(v) => format!("{about} ({key}) [default: {v}]"),
        None => format!("{about} ({key}) [default: unset]"),
    }
}

fn flatten(prefix: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                flatten(&if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Flags every command that resolves a run configuration takes.
#[derive(Debug, Default, clap::Args)]
pub struct ConfigArgs {
    #[arg(long, value_name = "FILE", help = "TOML run configuration (`arl config show` prints one); flags and --set override it")]
    pub config: Option<PathBuf>,
    #[arg(long, value_name = "NAME", help = key_help("Environment (`arl list`)", "env.name"))]
    pub env: Option<String>,
    #[arg(long, value_name = "NAME", help = key_help("Sandbox for model-written code (`arl list`)", "sandbox.name"))]
    pub sandbox: Option<String>,
    #[command(flatten)]
    pub model: ModelKeyArgs,
    #[arg(
        long,
        value_name = "BACKEND[:GPU]",
        help = key_help("Async training: sample on this device (cuda:1, tch-cuda:1, cpu) while the update runs on --backend", "model.rollout_device")
    )]
    pub rollout_device: Option<String>,
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        help = key_help("New tokens per assistant turn; unset: the env's own", "sampling.max_new_tokens")
    )]
    pub max_new_tokens: Option<i64>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Assistant turns per episode", "env.max_turns"))]
    pub max_turns: Option<i64>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Episodes per held-out task in evaluation (0: none)", "eval.n"))]
    pub eval_n: Option<i64>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Seed of the task order, the sampler and the bootstrap", "trainer.seed"))]
    pub seed: Option<i64>,
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        help = key_help("Episodes decoded at once; unset: as many as trainer.gen_tokens (131,072 KV-cache tokens) allows", "trainer.gen_batch")
    )]
    pub gen_batch: Option<i64>,
    #[arg(
        long = "set",
        value_name = "KEY=VALUE",
        help = "Set any config key, e.g. --set loss.clip_high=0.28 (repeatable, applied last; `arl config schema` lists the keys)"
    )]
    pub set: Vec<String>,
}

/// The model and device flags of every command that resolves a run configuration (`run`,
/// `eval`, `config show`, `sft`), each the shorthand of its `model.*` key.
#[derive(Debug, Default, clap::Args)]
pub struct ModelKeyArgs {
    #[arg(
        long,
        value_name = "SOURCE",
        help = key_help("Model: a directory, a Hugging Face repo id in the local cache (never downloaded) or a preset", "model.source")
    )]
    pub model: Option<String>,
    #[arg(
        long,
        value_name = "DIR",
        help = key_help("LoRA adapter directory (arl's or PEFT's) on --model; with --lora it is the adapter that trains", "model.adapter")
    )]
    pub adapter: Option<String>,
    #[arg(
        long,
        value_name = "DIR",
        help = key_help("Directory with tokenizer.json and the chat template; unset: the model's own (a preset's documented one)", "model.tokenizer")
    )]
    pub tokenizer: Option<String>,
    #[arg(long, value_name = "BACKEND", help = key_help("cpu | cuda | tch | tch-cuda (`arl list` shows those compiled in)", "model.backend"))]
    pub backend: Option<String>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("GPU ordinal for cuda and tch-cuda", "model.device_index"))]
    pub device_index: Option<i64>,
    #[arg(long, value_name = "DTYPE", help = key_help("f32 | bf16 | f16: weights and compute (logprobs always f32; with --lora the frozen base's)", "model.dtype"))]
    pub dtype: Option<String>,
}

impl ModelKeyArgs {
    /// Each flag given into `o` under its key.
    pub fn overrides(&self, o: &mut Overrides) {
        set_flags!(o, self;
            model => "model.source",
            adapter => "model.adapter",
            tokenizer => "model.tokenizer",
            backend => "model.backend",
            device_index => "model.device_index",
            dtype => "model.dtype",
        );
    }
}

/// Flags only training reads.
#[derive(Debug, Default, clap::Args)]
pub struct TrainArgs {
    #[arg(
        long,
        value_name = "NAME",
        help = key_help("Algorithm preset (`arl list`): sets loss, advantage and clip keys beneath every key you set", "algo")
    )]
    pub algo: Option<String>,
    #[arg(long, value_name = "NAME", help = key_help("Policy loss (`arl list`)", "loss.name"))]
    pub loss: Option<String>,
    #[arg(long, value_name = "NAME", help = key_help("Advantage estimator (`arl list`)", "advantage.name"))]
    pub advantage: Option<String>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Training steps", "trainer.steps"))]
    pub steps: Option<i64>,
    #[arg(long, value_name = "G", allow_negative_numbers = true, help = key_help("Episodes per task per step", "trainer.group_size"))]
    pub group_size: Option<i64>,
    #[arg(long, value_name = "P", allow_negative_numbers = true, help = key_help("Tasks per step", "trainer.prompts"))]
    pub prompts: Option<i64>,
    #[arg(long, value_name = "LR", allow_negative_numbers = true, help = key_help("Peak learning rate", "trainer.lr"))]
    pub lr: Option<f64>,
    #[arg(
        long,
        value_name = "ROWS",
        allow_negative_numbers = true,
        help = key_help("Rows per micro-batch; unset: as many as trainer.micro_tokens (2048 padded tokens) allows", "trainer.micro")
    )]
    pub micro: Option<i64>,
    #[arg(long, value_name = "DIR", help = key_help("Run folder", "output.dir"))]
    pub out: Option<String>,
    #[arg(
        long,
        value_name = "DIR",
        help = key_help("Also write TensorBoard event files here: every number of metrics.jsonl, per step", "output.tensorboard")
    )]
    pub tensorboard: Option<String>,
    #[arg(long, value_name = "NAME", help = key_help("Where rollouts run: local | procs (worker child processes) | slurm (sbatch jobs)", "cluster.launcher"))]
    pub launcher: Option<String>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Rollout workers (--launcher procs or slurm)", "cluster.rollout_workers"))]
    pub rollout_workers: Option<i64>,
    #[arg(long, help = key_help("Continue the run in --out from its last checkpoint, with the same settings", "trainer.resume"))]
    pub resume: bool,
    /// Train LoRA adapters on the frozen base (adds the `[lora]` section with its defaults,
    /// rank 16, alpha 16, every linear layer; `--set lora.rank=8` changes them).
    #[arg(long)]
    pub lora: bool,
}

/// Each flag given (`Some`) into `o` under the config key it names:
/// `set_flags!(o, args; field => "section.key", …)`.
macro_rules! set_flags {
    ($o:expr, $args:expr; $($field:ident => $key:literal),* $(,)?) => {
        $(
            if let Some(v) = &$args.$field {
                $o.set($key, v.clone());
            }
        )*
    };
}
pub(crate) use set_flags;

impl ConfigArgs {
    fn overrides(&self, o: &mut Overrides) {
        self.model.overrides(o);
        set_flags!(o, self;
            env => "env.name",
            sandbox => "sandbox.name",
            rollout_device => "model.rollout_device",
            max_new_tokens => "sampling.max_new_tokens",
            max_turns => "env.max_turns",
            eval_n => "eval.n",
            seed => "trainer.seed",
            gen_batch => "trainer.gen_batch",
        );
    }

    /// Defaults ← --algo preset ← --config ← flags ← --set, then validated
    /// ([`RunConfig::validate`]). The preset only fills keys nothing else set (`algo` itself
    /// follows the usual order: --set algo=… beats --algo, which beats the file's `algo`).
    pub fn resolve(&self, train: Option<&TrainArgs>) -> anyhow::Result<RunConfig> {
        let mut o = Overrides::default();
        if let Some(t) = train {
            set_flags!(o, t;
                algo => "algo",
                loss => "loss.name",
                advantage => "advantage.name",
                steps => "trainer.steps",
                group_size => "trainer.group_size",
                prompts => "trainer.prompts",
                lr => "trainer.lr",
                micro => "trainer.micro",
                out => "output.dir",
                tensorboard => "output.tensorboard",
                launcher => "cluster.launcher",
                rollout_workers => "cluster.rollout_workers",
            );
            if t.resume {
                o.set("trainer.resume", true);
            }
            if t.lora {
                o.set("lora", toml::Value::Table(Default::default()));
            }
        }
        self.overrides(&mut o);
        for arg in &self.set {
            o.push_set(arg)?;
        }
        let config = RunConfig::load(self.config.as_deref(), &o)?;
        config.validate()?;
        Ok(config)
    }

    /// As [`resolve`](Self::resolve), with the config file named in the error context.
    pub fn resolve_with_context(&self, train: Option<&TrainArgs>) -> anyhow::Result<RunConfig> {
        match &self.config {
            Some(path) => self.resolve(train).with_context(|| format!("run configuration {}", path.display())),
            None => self.resolve(train),
        }
    }
}
