//! `arl sft`: supervised fine-tuning on a JSONL file of conversations (arl-core's
//! `train::sft`), full weights or LoRA (`--lora`), with `arl run`'s run folder, checkpoints,
//! `--resume`, `metrics.jsonl` and `results.json`. The data is read and rendered through the
//! model's chat template before the model loads, so a bad line costs nothing.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use arl_core::RunConfig;
use arl_core::config::{LossConfig, Overrides};
use arl_core::policy::TrainablePolicy;
use arl_core::registry::{self, LossPlugin};
use arl_train::run_dir;
use arl_train::sft::{SftParts, load_data, read_jsonl, train_sft};

use super::run::load_policy;
use super::run_args::{ModelKeyArgs, key_help, set_flags};

const EXAMPLES: &str = "\
Examples:
  arl sft --data chats.jsonl --model ~/.cache/arl/models/smollm2-135m --out runs/sft
  arl sft --data chats.jsonl --heldout val.jsonl --lora --lr 2e-4 --steps 200 --out runs/sft-lora
  arl sft --data chats.jsonl --out runs/sft --resume      continue a killed run (same flags)
  arl run --model runs/sft/checkpoints/final ...          then RL from the SFT checkpoint

Each line of --data is {\"messages\": [...]} with optional \"tools\" and, on assistant
messages, \"weight\": 0 or 1. The loss is the token mean of -log p over the assistant turns
(sft.train_on = \"all\": every token), rendered as an `arl run` rollout would hold them.";

#[derive(Debug, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Sft {
    #[arg(long, value_name = "FILE", help = "TOML run configuration (`arl config show`); flags and --set override it")]
    pub config: Option<PathBuf>,
    #[arg(long, value_name = "FILE.jsonl", help = key_help("Training conversations, one {\"messages\": [...]} per line", "sft.data"))]
    pub data: Option<String>,
    #[arg(long, value_name = "FILE.jsonl", help = key_help("Held-out conversations; unset: the last sft.heldout_frac of --data", "sft.heldout"))]
    pub heldout: Option<String>,
    #[command(flatten)]
    pub model: ModelKeyArgs,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Optimizer steps", "trainer.steps"))]
    pub steps: Option<i64>,
    #[arg(long, value_name = "LR", allow_negative_numbers = true, help = key_help("Peak learning rate", "trainer.lr"))]
    pub lr: Option<f64>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Conversations per optimizer step", "sft.batch_size"))]
    pub batch_size: Option<i64>,
    #[arg(long, value_name = "ROWS", allow_negative_numbers = true, help = key_help("Conversations per micro-batch; unset: as many as trainer.micro_tokens (2048 padded tokens) allows", "trainer.micro"))]
    pub micro: Option<i64>,
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = key_help("Seed of the data order and of new LoRA adapters", "trainer.seed"))]
    pub seed: Option<i64>,
    #[arg(long, value_name = "DIR", help = key_help("Run folder", "output.dir"))]
    pub out: Option<String>,
    #[arg(long, help = key_help("Continue the run in --out from its last checkpoint, with the same settings", "trainer.resume"))]
    pub resume: bool,
    /// Replace the run in --out (its run files are removed once the new run has loaded).
    #[arg(long, conflicts_with = "resume")]
    pub overwrite: bool,
    /// Train LoRA adapters on the frozen base (the `[lora]` section with its defaults).
    #[arg(long)]
    pub lora: bool,
    #[arg(long = "set", value_name = "KEY=VALUE", help = "Set any config key, e.g. --set sft.train_on=\"all\" (repeatable, applied last)")]
    pub set: Vec<String>,
}

impl Sft {
    /// Defaults ← --config ← flags ← --set, validated for SFT ([`RunConfig::validate_sft`]).
    pub fn resolve(&self) -> anyhow::Result<RunConfig> {
        let mut o = Overrides::default();
        self.model.overrides(&mut o);
        set_flags!(o, self;
            data => "sft.data",
            heldout => "sft.heldout",
            steps => "trainer.steps",
            lr => "trainer.lr",
            batch_size => "sft.batch_size",
            micro => "trainer.micro",
            seed => "trainer.seed",
            out => "output.dir",
        );
        if self.resume {
            o.set("trainer.resume", true);
        }
        if self.lora {
            o.set("lora", toml::Value::Table(Default::default()));
        }
        for arg in &self.set {
            o.push_set(arg)?;
        }
        let config = RunConfig::load(self.config.as_deref(), &o)?;
        config.validate_sft()?;
        Ok(config)
    }

    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        let config = match &self.config {
            Some(path) => self.resolve().with_context(|| format!("run configuration {}", path.display()))?,
            None => self.resolve()?,
        };
        let out_dir = PathBuf::from(&config.output.dir);
        let start = run_dir::check_start(&out_dir, &config, self.overwrite)?;
        // Conversations with tools need a template that renders them (SmolLM2's ignores them).
        let has_tools = [Some(&config.sft.data), config.sft.heldout.as_ref()]
            .into_iter()
            .flatten()
            .any(|p| read_jsonl(std::path::Path::new(p)).is_ok_and(|exs| exs.iter().any(|e| !e.tools.is_empty())));
        let (codec, template_note) = super::chat_codec::load(&config.model, has_tools)?;
        let data = load_data(&config, &codec)?;
        let (mut policy, lora_note) = load_policy(&config)?;
        super::chat_codec::check_vocab(&codec, policy.model().config.vocab_size, &config.model)?;
        let loss_config = LossConfig { name: "cross-entropy".into(), ..LossConfig::default() };
        let loss = (registry::get::<LossPlugin>(&loss_config.name)?.build)(&loss_config)?;

        let (meta, mut log_file) =
            super::run_folder::claim(&config, &out_dir, &start, codec.dir(), format!("{:?}", TrainablePolicy::device(&policy)))?;
        let mut log = |line: &str| {
            let _ = writeln!(out, "{line}");
            let _ = writeln!(log_file, "{line}");
        };
        let d = &data.summary;
        log(&format!(
            "arl sft: data={} ({} conversations, {} target tokens; held out: {} conversations) model={} backend={} steps={} \
             batch_size={} → {}",
            config.sft.data,
            d.train_conversations,
            d.train_target_tokens,
            d.heldout_conversations,
            config.model.source,
            config.model.backend,
            config.trainer.steps,
            config.sft.batch_size,
            config.output.dir
        ));
        for note in template_note.iter().chain(&lora_note) {
            log(note);
        }
        let parts = SftParts { codec: &codec, policy: &mut policy, loss: loss.as_ref() };
        train_sft(parts, &config, meta, &data, &out_dir, &mut log)?;
        Ok(())
    }
}
