//! `arl results schema`: the JSON Schema of `results.json` (what `arl run` writes);
//! `arl results compare`: the paired difference of two evaluations of the same held-out tasks.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use arl_core::eval::{Bootstrap, TaskCount, paired_difference};
use arl_train::trainer::RunReport;
use serde::Deserialize;

#[derive(Debug, clap::Subcommand)]
pub enum ResultsCommand {
    /// Print the JSON Schema of a run's results.json.
    Schema,
    /// The paired difference AFTER − BEFORE of two `arl eval` outputs on the same held-out
    /// tasks (e.g. two checkpoints), matched by task id, with a task-level bootstrap interval.
    #[command(after_help = "Example:\n  arl eval --model sft/checkpoints/final --split heldout-instances > sft.json\n  \
                            arl eval --model grpo/checkpoints/final --split heldout-instances > grpo.json\n  \
                            arl results compare sft.json grpo.json")]
    Compare {
        /// The baseline evaluation (`arl eval`'s JSON).
        before: PathBuf,
        /// The evaluation compared with it.
        after: PathBuf,
        /// Seed of the bootstrap.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print the difference as JSON instead of a line.
        #[arg(long)]
        json: bool,
    },
}

/// What `compare` reads of an evaluation.
#[derive(Deserialize)]
struct Evaluated {
    split: String,
    per_task: Vec<TaskCount>,
}

fn read(path: &Path) -> anyhow::Result<Evaluated> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| crate::usage!("{}: not an `arl eval` output ({e}); give the JSON `arl eval` printed", path.display()))
}

impl ResultsCommand {
    pub fn execute(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            ResultsCommand::Schema => {
                writeln!(out, "{}", serde_json::to_string_pretty(&schemars::schema_for!(RunReport))?)?;
            }
            ResultsCommand::Compare { before, after, seed, json } => {
                let (b, a) = (read(&before)?, read(&after)?);
                if b.split != a.split {
                    return Err(crate::usage!(
                        "{} is split {}, {} is split {}; compare evaluations of one split",
                        before.display(),
                        b.split,
                        after.display(),
                        a.split
                    ));
                }
                let ids = |e: &Evaluated| e.per_task.iter().map(|t| t.task_id.clone()).collect::<std::collections::BTreeSet<_>>();
                if ids(&b) != ids(&a) {
                    return Err(crate::usage!(
                        "{} and {} hold other tasks ({} and {}); evaluate both with the same env options and split",
                        before.display(),
                        after.display(),
                        b.per_task.len(),
                        a.per_task.len()
                    ));
                }
                let d = paired_difference(&b.per_task, &a.per_task, &Bootstrap { seed, ..Bootstrap::default() })
                    .map_err(|e| anyhow::anyhow!(e))?;
                if json {
                    writeln!(out, "{}", serde_json::to_string_pretty(&d)?)?;
                } else {
                    writeln!(
                        out,
                        "pass@1 {} − {}, {}: {:+.3}  95% CI [{:+.3}, {:+.3}]  p = {:.3}  ({} tasks)",
                        after.display(),
                        before.display(),
                        a.split,
                        d.mean,
                        d.ci.lo,
                        d.ci.hi,
                        d.p_value,
                        d.tasks
                    )?;
                }
            }
        }
        Ok(())
    }
}
