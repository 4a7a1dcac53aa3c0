//! The `edit` gym's tool menu, as a [`ToolSet`].

use arl_core::{ToolCall, ToolContext, ToolOutcome, ToolSchema, ToolSet};
use arl_tasks::{BugTask, run_public};
use schemars::JsonSchema;
use serde::Deserialize;

pub const READ: &str = "read_source";
pub const EDIT: &str = "apply_edit";
pub const TEST: &str = "run_tests";
pub const SUBMIT: &str = "submit";

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Apply one of the listed edits.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The edit's name, as listed in the task (e.g. "A").
    pub op: String,
}

pub struct EditTools;

arl_core::register!(ToolSetPlugin {
    name: "edit",
    about: "the edit gym's menu: read_source, apply_edit (one authored edit by name), run_tests, submit",
    build: build,
});

fn build(options: &serde_json::Map<String, serde_json::Value>) -> Result<Box<dyn ToolSet>, arl_core::PluginError> {
    if let Some(key) = options.keys().next() {
        return Err(arl_core::PluginError { kind: "tool set", name: "edit".into(), message: format!("takes no options, got `{key}`") });
    }
    Ok(Box::new(EditTools))
}

impl ToolSet for EditTools {
    fn schemas(&self) -> Vec<ToolSchema> {
        vec![
            ToolSchema::from_type::<NoArgs>(READ, "Show the current source of the function's file, with line numbers."),
            ToolSchema::from_type::<EditArgs>(
                EDIT,
                "Apply one of the task's listed edits by name. Only one edit may be applied per episode.",
            ),
            ToolSchema::from_type::<NoArgs>(TEST, "Run the public tests against the current source."),
            ToolSchema::from_type::<NoArgs>(SUBMIT, "Submit the current source for grading; ends the episode."),
        ]
    }

    /// Dispatch a well-formed call. `submit` is the session's business (it ends the
    /// episode); here it only acknowledges.
    fn call(&self, ctx: &mut ToolContext<'_>, call: &ToolCall) -> ToolOutcome {
        let task = match BugTask::from_task(ctx.task) {
            Ok(task) => task,
            Err(e) => return ToolOutcome::Failed(e.to_string()),
        };
        let file = task.source_file();
        let source = ctx.workspace.files.get(&file).cloned().unwrap_or_default();
        match call.name.as_str() {
            READ => {
                ctx.workspace.read.insert(file.clone());
                ctx.stats.bump("reads");
                ToolOutcome::Ok(format!("{file}:\n{}", numbered(&source)))
            }
            EDIT => {
                let name = call.arguments.get("op").and_then(|v| v.as_str()).unwrap_or_default();
                if ctx.stats.counters.get("edits").copied().unwrap_or(0) > 0 {
                    return ToolOutcome::Failed("an edit was already applied (one per episode); run the tests or submit".into());
                }
                let Some(op) = task.op(name) else {
                    let names: Vec<&str> = task.ops.iter().map(|o| o.name.as_str()).collect();
                    return ToolOutcome::Failed(format!("no edit named `{name}`; the edits are {}", names.join(", ")));
                };
                let Some(edited) = op.apply(&source) else {
                    return ToolOutcome::Failed(format!("edit {name} no longer applies to the source"));
                };
                ctx.workspace.files.insert(file.clone(), edited.clone());
                ctx.stats.bump("edits");
                ToolOutcome::Ok(format!("Applied edit {name}. {file} is now:\n{}", numbered(&edited)))
            }
            TEST => {
                ctx.stats.bump("test_runs");
                match run_public(ctx.sandbox, &task, &source) {
                    Ok(report) => ToolOutcome::Ok(report.text),
                    Err(e) => {
                        ctx.stats.sandbox_error(&e);
                        ToolOutcome::Failed(format!("the tests could not run: {e}"))
                    }
                }
            }
            SUBMIT => ToolOutcome::Ok("Submitted.".into()),
            other => ToolOutcome::Failed(format!("no tool `{other}`")),
        }
    }
}

/// `source` with 1-based line numbers, as a model reads code best.
pub fn numbered(source: &str) -> String {
    source.lines().enumerate().map(|(i, l)| format!("{:>3}  {l}\n", i + 1)).collect()
}
