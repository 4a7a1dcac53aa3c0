//! Grading that does not trust the sandbox.
//!
//! A candidate's hidden tests are (arguments, expected value) pairs. Only the arguments go
//! into the sandbox: the runner (`runner/grade_runner.py`) calls the function and prints
//! what it *returned*, serialized from exact builtin types only, one line per case behind a
//! marker chosen per call. The grader, here, compares those values with the expected ones,
//! which never leave this process. So a rigged `__eq__` serializes as "unserializable", an
//! early exit leaves cases missing, and a forged or repeated result line (even with the real
//! marker, dug out of the runner's frames) makes the whole report void: reward 0.

use arl_core::{EpisodeStats, Job, JobFile, JobOutcome, Limits, Sandbox, SandboxError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::task::BugTask;

const GRADE_RUNNER: &str = include_str!("runner/grade_runner.py");
const TEST_RUNNER: &str = include_str!("runner/test_runner.py");
const GRADE_ENTRY: &str = "arl_grade_runner.py";
const TEST_ENTRY: &str = "arl_test_runner.py";

/// What one hidden case came to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", content = "detail", rename_all = "lowercase")]
pub enum Got {
    /// The function returned this value.
    Value(Value),
    /// It raised (exception type name).
    Raised(String),
    /// It returned something that is not plain data (type name).
    Unserializable(String),
    /// No result line: the job crashed, exited early or timed out.
    Missing,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    pub args: Value,
    pub expected: Value,
    pub got: Got,
    pub passed: bool,
}

/// The grade of one candidate source.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradeReport {
    /// 1 iff every hidden case passed.
    pub reward: f64,
    pub passed: usize,
    pub total: usize,
    pub cases: Vec<CaseResult>,
    /// Why the report is void or incomplete, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The job timed out, was killed or failed before the runner reported that it was ready
    /// to import the candidate: the harness, not the candidate, failed (an infrastructure
    /// failure; the candidate's code had not run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub harness_failed: bool,
}

/// A fresh random marker (128 bits from the kernel).
pub fn fresh_marker() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    bytes[0] ^= nanos as u8;
    format!("ARL{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The job that runs `source` on the task's hidden inputs (and nothing else).
pub fn grade_job(task: &BugTask, source: &str, marker: &str, limits: Limits) -> Job {
    let request = json!({
        "marker": marker,
        "module": task.function,
        "function": task.function,
        "cases": task.hidden.iter().map(|c| c.args.to_string()).collect::<Vec<_>>(),
    });
    Job {
        files: vec![
            JobFile { path: task.source_file(), contents: source.to_string() },
            JobFile { path: GRADE_ENTRY.into(), contents: GRADE_RUNNER.into() },
        ],
        entry: GRADE_ENTRY.into(),
        args: Vec::new(),
        stdin: Some(request.to_string()),
        limits,
    }
}

/// Compare the job's reported values with the expected ones.
pub fn read_grade(task: &BugTask, outcome: &JobOutcome, marker: &str) -> GradeReport {
    let n = task.hidden.len();
    let mut got: Vec<Option<Got>> = vec![None; n];
    let mut void: Option<String> = None;
    let mut import_error = None;
    let mut ready = false;
    for line in outcome.stdout.lines() {
        let Some(rest) = line.strip_prefix(marker).and_then(|r| r.strip_prefix(' ')) else { continue };
        if rest == "ready" {
            // Printed before the candidate is imported; a copy from the candidate changes nothing.
            ready = true;
            continue;
        }
        if let Some(kind) = rest.strip_prefix("import ") {
            import_error = Some(kind.to_string());
            continue;
        }
        let mut parts = rest.splitn(3, ' ');
        let (index, status, payload) = (parts.next(), parts.next(), parts.next().unwrap_or(""));
        let parsed = index.and_then(|i| i.parse::<usize>().ok()).filter(|i| *i < n);
        let value = match status {
            Some("ok") => serde_json::from_str(payload).ok().map(Got::Value),
            Some("raise") => Some(Got::Raised(payload.to_string())),
            Some("unserializable") => Some(Got::Unserializable(payload.to_string())),
            _ => None,
        };
        match (parsed, value) {
            (Some(i), Some(v)) if got[i].is_none() => got[i] = Some(v),
            (Some(i), Some(_)) => void = Some(format!("case {i} reported twice: forged result lines")),
            _ => void = Some(format!("malformed result line `{}`: forged result lines", truncate(line, 80))),
        }
    }
    let cases: Vec<CaseResult> = task
        .hidden
        .iter()
        .zip(got)
        .map(|(case, got)| {
            let got = got.unwrap_or(Got::Missing);
            let passed = void.is_none() && matches!(&got, Got::Value(v) if values_match(&case.expected, v));
            CaseResult { args: case.args.clone(), expected: case.expected.clone(), got, passed }
        })
        .collect();
    let passed = cases.iter().filter(|c| c.passed).count();
    let note = void
        .or(import_error.map(|e| format!("importing the source failed: {e}")))
        .or_else(|| cases.iter().any(|c| c.got == Got::Missing).then(|| summary(outcome)));
    let harness_failed = !ready && !outcome.success();
    GradeReport { reward: if passed == n && n > 0 && !harness_failed { 1.0 } else { 0.0 }, passed, total: n, cases, note, harness_failed }
}

/// Grade `source` against the task's hidden tests in `sandbox`.
pub fn grade(sandbox: &dyn Sandbox, task: &BugTask, source: &str) -> Result<GradeReport, SandboxError> {
    let marker = fresh_marker();
    let outcome = sandbox.run(&grade_job(task, source, &marker, Limits::default()))?;
    Ok(read_grade(task, &outcome, &marker))
}

/// An episode's reward for `source`: its grade, or 0 for an infrastructure failure, which
/// marks the episode (`stats.infra_failed`, so the trainer drops it instead of training on a
/// zero the model did not earn) and counts why: the sandbox could not start the grading job
/// ([`SANDBOX_EXHAUSTED`](arl_core::SANDBOX_EXHAUSTED), [`SANDBOX_FAILED`](arl_core::SANDBOX_FAILED)),
/// or the job died before the runner reached the candidate ([`HARNESS_FAILED`](arl_core::HARNESS_FAILED)).
/// A full disk costs one episode, not the run; nothing is retried.
pub fn episode_reward(sandbox: &dyn Sandbox, task: &BugTask, source: &str, stats: &mut EpisodeStats) -> f64 {
    match grade(sandbox, task, source) {
        Ok(report) if report.harness_failed => {
            stats.infra_failure(arl_core::HARNESS_FAILED);
            0.0
        }
        Ok(report) => report.reward,
        Err(e) => {
            stats.sandbox_error(&e);
            0.0
        }
    }
}

/// Equal as plain data; numbers compare numerically within 1e-9 (relative), so `2` equals
/// `2.0` and float rounding in the last place does not matter. Booleans are not numbers.
pub fn values_match(expected: &Value, got: &Value) -> bool {
    match (expected, got) {
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
            _ => false,
        },
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_match(x, y)),
        (Value::Object(a), Value::Object(b)) => a.len() == b.len() && a.iter().all(|(k, x)| b.get(k).is_some_and(|y| values_match(x, y))),
        _ => expected == got,
    }
}

/// One public test's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublicResult {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// The result of running the public tests: per-test verdicts and the text the model sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublicReport {
    pub results: Vec<PublicResult>,
    /// Every test passed (and there was at least one).
    pub all_passed: bool,
    pub text: String,
}

/// The job that runs the task's public tests against `source`.
pub fn public_job(task: &BugTask, source: &str, marker: &str, limits: Limits) -> Job {
    let module = format!("test_{}", task.function);
    Job {
        files: vec![
            JobFile { path: task.source_file(), contents: source.to_string() },
            JobFile { path: task.test_file(), contents: task.public_tests.clone() },
            JobFile { path: TEST_ENTRY.into(), contents: TEST_RUNNER.into() },
        ],
        entry: TEST_ENTRY.into(),
        args: Vec::new(),
        stdin: Some(json!({"marker": marker, "module": module}).to_string()),
        limits,
    }
}

pub fn read_public(outcome: &JobOutcome, marker: &str) -> PublicReport {
    let mut results = Vec::new();
    let mut errors = Vec::new();
    for line in outcome.stdout.lines() {
        let Some(rest) = line.strip_prefix(marker).and_then(|r| r.strip_prefix(' ')) else { continue };
        let (verdict, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let (name, detail) = rest.split_once(' ').unwrap_or((rest, ""));
        match verdict {
            "PASS" | "FAIL" => results.push(PublicResult { name: name.into(), passed: verdict == "PASS", detail: detail.into() }),
            _ => errors.push(rest.to_string()),
        }
    }
    let passed = results.iter().filter(|r| r.passed).count();
    let mut text = format!("{passed} passed, {} failed", results.len() - passed);
    for r in &results {
        text.push_str(&format!("\n{} {}", if r.passed { "PASS" } else { "FAIL" }, r.name));
        if !r.detail.is_empty() {
            text.push_str(&format!(": {}", r.detail));
        }
    }
    for e in &errors {
        text.push_str(&format!("\nERROR {e}"));
    }
    if results.is_empty() || outcome.timed_out || outcome.signal.is_some() {
        text.push_str(&format!("\n{}", summary(outcome)));
        let tail: String = outcome.stderr.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        if !tail.is_empty() {
            text.push_str(&format!("\n{tail}"));
        }
    }
    PublicReport { all_passed: !results.is_empty() && passed == results.len() && errors.is_empty(), results, text }
}

/// Run the public tests against `source`.
pub fn run_public(sandbox: &dyn Sandbox, task: &BugTask, source: &str) -> Result<PublicReport, SandboxError> {
    let marker = fresh_marker();
    let outcome = sandbox.run(&public_job(task, source, &marker, Limits::default()))?;
    Ok(read_public(&outcome, &marker))
}

fn summary(outcome: &JobOutcome) -> String {
    if outcome.timed_out {
        "the job timed out".into()
    } else if let Some(sig) = outcome.signal {
        format!("the job was killed by signal {sig}")
    } else {
        format!("the job exited with status {}", outcome.exit_code.map_or("?".into(), |c| c.to_string()))
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}
