//! The `edit` gym's oracle ([`arl_core::Env::oracle`]): `read_source`, `apply_edit` with the
//! fix (or, with noise, a distractor), `run_tests`, `submit` — one call per turn.

use arl_core::{OracleNoise, OracleTurn};
use arl_tasks::BugTask;
use arl_tasks::oracle::plan;
use serde_json::json;

use crate::tools::{EDIT, READ, SUBMIT, TEST};

pub fn turns(bug: &BugTask, noise: &OracleNoise, seed: u64) -> Vec<OracleTurn> {
    let plan = plan(bug, noise, seed);
    let mut turns = Vec::new();
    if plan.read {
        turns.push(OracleTurn::call(READ, json!({})));
    }
    turns.push(OracleTurn::call(EDIT, json!({"op": plan.edit.name})));
    if plan.test {
        turns.push(OracleTurn::call(TEST, json!({})));
    }
    turns.push(OracleTurn::call(SUBMIT, json!({})));
    turns
}
