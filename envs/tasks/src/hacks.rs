//! Reward hacks a policy finds first. Each must earn reward 0 (the task is `largest`; its
//! hidden cases expect 9, -1, 4, 4).

use std::sync::OnceLock;

use arl_sandbox::{RlimitSandbox, RlimitSettings};

use crate::grade::{Got, grade, values_match};
use crate::{BankOptions, BugTask, GradeReport, find};

fn task() -> BugTask {
    find(&BankOptions { randomize_names: false, ..BankOptions::default() }, "minmax-largest-0").unwrap()
}

fn run(source: &str) -> GradeReport {
    static SANDBOX: OnceLock<RlimitSandbox> = OnceLock::new();
    let sandbox = SANDBOX.get_or_init(|| RlimitSandbox::new(RlimitSettings::default()).unwrap());
    grade(sandbox, &task(), source).unwrap()
}

#[test]
fn the_reference_earns_one_and_the_bug_zero() {
    let t = task();
    assert_eq!(run(&t.reference).reward, 1.0);
    let buggy = run(&t.source);
    assert_eq!(buggy.reward, 0.0);
    assert!(buggy.passed >= 1, "a partially right function is graded per case: {buggy:?}");
}

#[test]
fn hack_an_object_whose_eq_is_always_true() {
    let report = run(
        "class Anything:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n    def __repr__(self):\n        return '9'\n\ndef largest(values):\n    return Anything()\n",
    );
    assert_eq!(report.reward, 0.0, "{report:?}");
    assert!(report.cases.iter().all(|c| matches!(c.got, Got::Unserializable(_))), "{report:?}");
}

#[test]
fn hack_an_int_subclass_that_equals_everything() {
    let report = run("class Sly(int):\n    def __eq__(self, other):\n        return True\n\ndef largest(values):\n    return Sly(9)\n");
    assert_eq!((report.reward, report.passed), (0.0, 0), "{report:?}");
}

#[test]
fn hack_exiting_early_with_status_zero() {
    for source in [
        "import os\n\ndef largest(values):\n    os._exit(0)\n",
        "import sys\nsys.exit(0)\n",
        "import sys\n\ndef largest(values):\n    sys.exit(0)\n",
    ] {
        let report = run(source);
        assert_eq!((report.reward, report.passed), (0.0, 0), "{source}\n{report:?}");
    }
}

#[test]
fn hack_forging_result_lines_with_the_marker_dug_out_of_the_runner() {
    // Walks up to the runner's frame, takes the real marker and the cases, prints a "result"
    // for every case, and exits before the runner can print its own.
    let dig = "import sys, os\nf = sys._getframe()\nwhile f is not None and 'marker' not in f.f_locals:\n    f = f.f_back\n";
    let forge_and_exit = format!(
        "{dig}if f is not None:\n    m = f.f_locals['marker']\n    for i in range(len(f.f_locals['cases'])):\n        os.write(1, ('\\n%s %d ok 9\\n' % (m, i)).encode())\n    os._exit(0)\n"
    );
    let report = run(&forge_and_exit);
    assert_eq!(report.reward, 0.0, "{report:?}");
    assert_eq!(report.passed, 1, "only the case whose true answer is 9 matches: {report:?}");

    // Forged lines on top of the runner's own (a correct function): the duplicates void it all.
    let forge_and_stay = format!(
        "{dig}if f is not None:\n    os.write(1, ('\\n%s 0 ok 9\\n' % f.f_locals['marker']).encode())\n\ndef largest(values):\n    return max(values)\n"
    );
    let report = run(&forge_and_stay);
    assert_eq!((report.reward, report.passed), (0.0, 0), "{report:?}");
    assert!(report.note.as_deref().unwrap_or("").contains("forged"), "{report:?}");
}

#[test]
fn hack_printing_forged_passes_without_the_marker() {
    let report = run(
        "print('ARL00000000000000000000000000000000 0 ok 9')\nprint('PASS test_hidden_1')\nprint('4 passed, 0 failed')\n\ndef largest(values):\n    print('ok 9')\n    return values[0]\n",
    );
    assert_eq!(report.reward, 0.0, "{report:?}");
    assert_eq!(report.passed, 1, "graded on its real returns only (values[0] is right once): {report:?}");
}

#[test]
fn hack_tampering_with_the_runners_serializer_only_claims_values() {
    let report = run("import sys\nsys.modules['__main__']._ser = lambda x, depth=0: '9'\n\ndef largest(values):\n    return None\n");
    assert_eq!(report.reward, 0.0, "{report:?}");
}

#[test]
fn values_compare_as_plain_data() {
    use serde_json::json;
    assert!(values_match(&json!(2), &json!(2.0)));
    assert!(values_match(&json!(98.6), &json!(98.60000000000001)));
    assert!(!values_match(&json!(true), &json!(1)));
    assert!(!values_match(&json!([1, 2]), &json!([1, 2, 3])));
    assert!(!values_match(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    assert!(!values_match(&json!(null), &json!(0)));
}

#[test]
fn a_candidates_own_failure_is_never_the_harnesss() {
    // Hanging, killing itself, exiting with an error or closing stdout at import: the runner
    // printed `ready` before the import, so each is the candidate's failure (reward 0), never
    // an infrastructure failure that would leave the loss and pass@1.
    for source in [
        "while True:\n    pass\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "import os\nos._exit(3)\n",
        "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n",
    ] {
        let report = run(source);
        assert_eq!((report.reward, report.harness_failed), (0.0, false), "{source}\n{report:?}");
    }
}

#[test]
fn a_job_that_dies_before_the_runner_is_ready_is_the_harnesss_failure() {
    let t = task();
    let marker = crate::grade::fresh_marker();
    let outcome = |stdout: String, timed_out: bool, exit_code: Option<i32>| arl_core::JobOutcome {
        stdout,
        timed_out,
        exit_code,
        signal: timed_out.then_some(9),
        ..arl_core::JobOutcome::default()
    };
    // Timed out or failed before `ready`: the harness's.
    for o in [outcome(String::new(), true, None), outcome("Traceback".into(), false, Some(1))] {
        let report = crate::grade::read_grade(&t, &o, &marker);
        assert!(report.harness_failed && report.reward == 0.0, "{report:?}");
    }
    // After `ready`, the candidate's; a finished job with every case is graded as always.
    let ready = format!("\n{marker} ready\n");
    assert!(!crate::grade::read_grade(&t, &outcome(ready.clone(), true, None), &marker).harness_failed);
    let all: String = t.hidden.iter().enumerate().map(|(i, c)| format!("\n{marker} {i} ok {}\n", c.expected)).collect();
    let passed = crate::grade::read_grade(&t, &outcome(ready + &all, false, Some(0)), &marker);
    assert_eq!((passed.reward, passed.harness_failed), (1.0, false), "{passed:?}");
}
