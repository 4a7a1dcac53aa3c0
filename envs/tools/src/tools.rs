//! The Claude-Code-style tool set: `Read`, `Edit`, `Write`, `Bash`, with Claude Code's
//! parameter names (SPEC.md §3). Schemas come from the argument structs below (schemars;
//! their fields' doc comments become the descriptions; the structs themselves carry plain
//! comments, since schemars would copy a struct's doc comment into the schema, repeating the
//! tool's description).
//!
//! A well-formed call the tool rejects (relative path, missing file, `old_string` absent,
//! unsupported shell command, …) is [`ToolOutcome::Failed`] with a message naming the
//! problem. A program that runs and exits non-zero is not a failed call: its output is the
//! observation.

use arl_core::{ToolCall, ToolContext, ToolOutcome, ToolSchema, ToolSet};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::{files, shell};

pub const READ: &str = "Read";
pub const EDIT: &str = "Edit";
pub const WRITE: &str = "Write";
pub const BASH: &str = "Bash";

// Read a file of the repository.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The absolute path to the file to read (under /repo).
    pub file_path: String,
    /// The line number to start reading from (1-based). Only provide if the file is too large to read at once.
    pub offset: Option<u64>,
    /// The number of lines to read. Only provide if the file is too large to read at once.
    pub limit: Option<u64>,
}

// Replace an exact string in a file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The absolute path to the file to modify.
    pub file_path: String,
    /// The text to replace.
    pub old_string: String,
    /// The text to replace it with (must be different from old_string).
    pub new_string: String,
    /// Replace all occurrences of old_string (default false).
    pub replace_all: Option<bool>,
}

// Write a whole file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The absolute path to the file to write (must be absolute, not relative).
    pub file_path: String,
    /// The content to write to the file.
    pub content: String,
}

// Run a shell command.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command to execute.
    pub command: String,
    /// Optional timeout in milliseconds (max 600000).
    pub timeout: Option<u64>,
    /// Clear, concise description of what this command does in 5-10 words.
    pub description: Option<String>,
}

/// Read, Edit, Write and Bash over the episode's [`Workspace`](arl_core::Workspace).
pub struct ClaudeCodeTools;

arl_core::register!(ToolSetPlugin {
    name: "claude-code",
    about: "Claude-Code-style Read, Edit, Write and an emulated Bash (python, pytest, ls, cat, grep, …) over /repo",
    build: build,
});

fn build(options: &serde_json::Map<String, serde_json::Value>) -> Result<Box<dyn ToolSet>, arl_core::PluginError> {
    if let Some(key) = options.keys().next() {
        return Err(arl_core::PluginError {
            kind: "tool set",
            name: "claude-code".into(),
            message: format!("takes no options, got `{key}`"),
        });
    }
    Ok(Box::new(ClaudeCodeTools))
}

/// What `Bash` says of itself under a real shell.
const REAL_BASH: &str = "Runs a bash command (bash -c COMMAND) in the repository's sandbox and returns its output (stdout and \
stderr merged, at most 30000 characters). The working directory starts at /repo and persists between calls; shell \
variables do not. python, pytest and the usual command-line tools are available; there is no network.";

/// What `Bash` says of itself in the emulated shell when pytest is real (`wasm` with pytest).
const EMULATED_BASH_REAL_PYTEST: &str = "Runs a command in the repository's shell (working directory /repo). Supported: \
python FILE.py, python -c CODE, pytest / python -m pytest with any pytest options (real pytest), and ls, cat, head, tail, \
grep, wc, pwd; commands may be joined with && or ;.";

impl ClaudeCodeTools {
    /// The schemas, with `Bash` described as a real shell when `real_shell`, and as the
    /// emulated one with real pytest when `real_pytest` (and no real shell).
    pub fn schemas_for(real_shell: bool, real_pytest: bool) -> Vec<ToolSchema> {
        let mut schemas = ClaudeCodeTools.schemas();
        let description = match (real_shell, real_pytest) {
            (true, _) => REAL_BASH,
            (false, true) => EMULATED_BASH_REAL_PYTEST,
            (false, false) => return schemas,
        };
        let bash = schemas.iter_mut().find(|s| s.name == BASH).expect("Bash is a tool");
        *bash = ToolSchema::from_type::<BashArgs>(BASH, description);
        schemas
    }
}

impl ToolSet for ClaudeCodeTools {
    fn schemas(&self) -> Vec<ToolSchema> {
        vec![
            ToolSchema::from_type::<ReadArgs>(
                READ,
                "Reads a file from the repository. file_path must be absolute (/repo/...). Returns up to 2000 lines \
                 in cat -n format: line number, a tab, the line.",
            ),
            ToolSchema::from_type::<EditArgs>(
                EDIT,
                "Performs an exact string replacement in a file. The file must have been Read first. old_string must \
                 occur exactly once in the file unless replace_all is true; do not include line-number prefixes.",
            ),
            ToolSchema::from_type::<WriteArgs>(
                WRITE,
                "Writes a file, overwriting it if it exists (an existing file must have been Read first). Prefer Edit \
                 for changing existing files.",
            ),
            ToolSchema::from_type::<BashArgs>(
                BASH,
                "Runs a command in the repository's shell (working directory /repo). Supported: python FILE.py, \
                 python -c CODE, pytest / python -m pytest [-q] [-v] [-x] [-k EXPR] [FILE[::TEST]], and ls, cat, \
                 head, tail, grep, wc, pwd; commands may be joined with && or ;.",
            ),
        ]
    }

    fn call(&self, ctx: &mut ToolContext<'_>, call: &ToolCall) -> ToolOutcome {
        match call.name.as_str() {
            READ => with_args(call, |a| files::read(ctx, a)),
            EDIT => with_args(call, |a| files::edit(ctx, a)),
            WRITE => with_args(call, |a| files::write(ctx, a)),
            BASH => with_args(call, |a| shell::bash(ctx, a)),
            other => ToolOutcome::Malformed(format!("unknown tool `{other}`; tools: {READ}, {EDIT}, {WRITE}, {BASH}")),
        }
    }
}

/// Deserialize the arguments (already checked against the schema by the parser); a value
/// the schema admits but the type does not (a fractional `offset`) is malformed.
fn with_args<T: DeserializeOwned>(call: &ToolCall, run: impl FnOnce(T) -> ToolOutcome) -> ToolOutcome {
    match serde_json::from_value::<T>(serde_json::Value::Object(call.arguments.clone())) {
        Ok(args) => run(args),
        Err(e) => ToolOutcome::Malformed(format!("malformed tool call: {}: {e}", call.name)),
    }
}
