//! The whole bank, validated in the `rlimit` sandbox: every buggy source fails at least one
//! hidden test, every reference fix passes every public and hidden test, every distractor
//! edit fails at least one hidden test. Checked with randomized names (seed 0), so renaming
//! is validated too.

use arl_core::Split;
use arl_sandbox::{RlimitSandbox, RlimitSettings};

use crate::{BankOptions, BugTask, generate, grade, run_public};

fn check(sandbox: &RlimitSandbox, task: &BugTask) -> Vec<String> {
    let mut problems = Vec::new();
    let buggy = grade(sandbox, task, &task.source).unwrap();
    if buggy.passed == buggy.total {
        problems.push(format!("{}: the buggy source passes every hidden test", task.template));
    }
    let reference = grade(sandbox, task, &task.reference).unwrap();
    if reference.reward != 1.0 {
        problems.push(format!("{}: the reference fails hidden tests: {:?}", task.template, reference));
    }
    let public = run_public(sandbox, task, &task.reference).unwrap();
    if !public.all_passed {
        problems.push(format!("{}: the reference fails public tests:\n{}", task.template, public.text));
    }
    for op in task.ops.iter().filter(|op| op.name != task.fix) {
        let edited = op.apply(&task.source).unwrap();
        let report = grade(sandbox, task, &edited).unwrap();
        if report.reward != 0.0 {
            problems.push(format!("{}: distractor `{}` => `{}` passes every hidden test", task.template, op.old, op.new));
        }
    }
    problems
}

#[test]
fn every_task_of_the_bank_validates_in_the_sandbox() {
    let sandbox = RlimitSandbox::new(RlimitSettings::default()).unwrap();
    let options = BankOptions { train_instances: 1, ..BankOptions::default() };
    let tasks: Vec<BugTask> = [Split::Train, Split::Heldout].into_iter().flat_map(|s| generate(&options, s)).collect();
    assert!(tasks.len() >= 40);
    let problems: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = tasks
            .chunks(tasks.len().div_ceil(4))
            .map(|chunk| scope.spawn(|| chunk.iter().flat_map(|t| check(&sandbox, t)).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
}
