//! The `tools` gym's oracle ([`arl_core::Env::oracle`]): `Read` the source, `Edit` it with
//! the fix's whole line copied as `old_string` (or, with noise, a distractor's), run the
//! public tests through `Bash`, and a short final answer that says what the tests said.
//! Skipping the read makes the first `Edit` fail (the tool demands a read), so the script
//! then reads and edits again — the recovery a policy should learn.

use arl_core::{OracleNoise, OracleTurn};
use arl_tasks::BugTask;
use arl_tasks::oracle::{line_edit, plan};
use serde_json::json;

use crate::paths::display;
use crate::tools::{BASH, EDIT, READ};

pub fn turns(bug: &BugTask, noise: &OracleNoise, seed: u64) -> Vec<OracleTurn> {
    let plan = plan(bug, noise, seed);
    let path = display(&bug.source_file());
    let (old, new) = line_edit(&bug.source, &plan.edit).expect("a bank edit applies to its source");
    let read = OracleTurn::call(READ, json!({"file_path": path}));
    let edit = OracleTurn::call(EDIT, json!({"file_path": path, "old_string": old, "new_string": new}));
    let mut turns = Vec::new();
    if !plan.read {
        turns.push(edit.clone());
    }
    turns.push(read);
    turns.push(edit);
    let f = &bug.function;
    let answer = if plan.test {
        turns.push(OracleTurn::call(BASH, json!({"command": format!("pytest -q {}", bug.test_file())})));
        if plan.fixes {
            format!("Fixed `{f}` in {path}; its tests pass.")
        } else {
            format!("I changed `{f}` in {path}, but its tests still fail.")
        }
    } else {
        format!("I changed `{f}` in {path}; I did not run the tests.")
    };
    turns.push(OracleTurn::Answer(answer));
    turns
}
