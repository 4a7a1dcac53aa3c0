//! [`BugTask`]: one generated task, and its generation from the templates and a seed.

use arl_core::{Split, Task};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::TaskError;
use crate::bank::{Template, templates};
use crate::names::{fresh_names, rename};
use crate::rng::{Rng, hash};

/// One hidden test as the grader holds it. `expected` never enters a sandbox.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HiddenCase {
    pub args: Value,
    pub expected: Value,
}

/// An edit the `edit` gym offers: replace the exact snippet `old` by `new`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditOp {
    pub name: String,
    pub old: String,
    pub new: String,
}

impl EditOp {
    /// The source with this edit applied, or `None` when `old` is not in it exactly once.
    pub fn apply(&self, source: &str) -> Option<String> {
        (source.matches(&self.old).count() == 1).then(|| source.replacen(&self.old, &self.new, 1))
    }
}

/// A generated bug-fix task: what `Task::data` holds for the coding gyms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BugTask {
    pub id: String,
    pub family: String,
    pub split: Split,
    /// The template it came from (`family/name`).
    pub template: String,
    /// The function's (possibly randomized) name; its file is `<function>.py`.
    pub function: String,
    /// The buggy source the model starts from.
    pub source: String,
    /// The reference fix.
    pub reference: String,
    /// `test_<function>.py`: plain `test_*` functions, visible to the model.
    pub public_tests: String,
    /// Reward only; never shown to the model.
    pub hidden: Vec<HiddenCase>,
    /// The fix and the distractors, shuffled, named `A`, `B`, ….
    pub ops: Vec<EditOp>,
    /// Name of the op that fixes the bug.
    pub fix: String,
}

impl BugTask {
    pub fn source_file(&self) -> String {
        format!("{}.py", self.function)
    }
    pub fn test_file(&self) -> String {
        format!("test_{}.py", self.function)
    }
    pub fn op(&self, name: &str) -> Option<&EditOp> {
        self.ops.iter().find(|op| op.name == name)
    }

    pub fn to_task(&self) -> Task {
        Task {
            id: self.id.clone(),
            family: self.family.clone(),
            split: self.split,
            data: serde_json::to_value(self).expect("a BugTask serializes"),
        }
    }

    pub fn from_task(task: &Task) -> Result<Self, TaskError> {
        serde_json::from_value(task.data.clone()).map_err(|e| TaskError::BadTask { id: task.id.clone(), message: e.to_string() })
    }

    /// The same task with its edits listed in another order drawn from `seed`, renamed `A`,
    /// `B`, … in that order (`fix` follows the fixing edit): one episode's menu when the
    /// order is drawn per episode (`env.options.menu_order = "episode"`).
    pub fn shuffle_menu(&mut self, seed: u64) {
        let fix = self.op(&self.fix).cloned().expect("a task's fix is one of its ops");
        Rng::new(seed).shuffle(&mut self.ops);
        self.fix = name_ops(&mut self.ops, &fix);
    }
}

/// Name `ops` `A`, `B`, … in their order; the name the edit equal to `fix` gets.
fn name_ops(ops: &mut [EditOp], fix: &EditOp) -> String {
    let mut fix_name = String::new();
    for (i, op) in ops.iter_mut().enumerate() {
        op.name = ((b'A' + i as u8) as char).to_string();
        if op.old == fix.old && op.new == fix.new {
            fix_name = op.name.clone();
        }
    }
    fix_name
}

/// How the bank is instantiated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BankOptions {
    pub seed: u64,
    pub randomize_names: bool,
    /// Tasks per training template (different names and op orders); 1 without randomization.
    pub train_instances: usize,
    /// Tasks per held-out template.
    pub heldout_instances: usize,
    /// Held-out tasks per training template: other names and operand orders than any training
    /// task of it ([`Split::HeldoutInstances`]); none without name randomization.
    pub heldout_train_instances: usize,
}

impl Default for BankOptions {
    fn default() -> Self {
        Self { seed: 0, randomize_names: true, train_instances: 4, heldout_instances: 1, heldout_train_instances: 1 }
    }
}

/// The generator keys of held-out instances of training templates start here: training
/// instances take keys `0..train_instances`, and `train_instances` is at most
/// [`crate::BankEnvOptions::MAX_INSTANCES`], so the two never share a key.
pub const FIRST_HELDOUT_INSTANCE_KEY: u64 = 1 << 32;

/// The tasks of a split, in a fixed order. The held-out split is fixed by the bank (two
/// templates per family, marked `heldout`), so it never shares a template with training. The
/// held-out instances are training templates under keys training never uses
/// ([`FIRST_HELDOUT_INSTANCE_KEY`] on, ids `<template>-h<k>`), and a key whose source equals a
/// training instance's (or an earlier held-out one's) is passed over, so no held-out instance is
/// a task training can draw.
pub fn generate(options: &BankOptions, split: Split) -> Vec<BugTask> {
    let instances = match split {
        Split::Train => options.train_instances,
        Split::Heldout => options.heldout_instances,
        // With the original names every instance of a template is the same task.
        Split::HeldoutInstances if !options.randomize_names => 0,
        Split::HeldoutInstances => options.heldout_train_instances,
    };
    let instances = if options.randomize_names { instances } else { instances.min(1) };
    let id = |t: &Template, k: usize| format!("{}-{k}", t.id.replace('/', "-"));
    templates()
        .iter()
        .filter(|t| t.heldout == (split == Split::Heldout))
        .flat_map(|t| match split {
            Split::HeldoutInstances => heldout_instances(t, options, instances),
            _ => (0..instances).map(|k| instantiate(t, options, split, k as u64, id(t, k))).collect(),
        })
        .collect()
}

/// `n` instances of training template `t` that are no training task (see [`generate`]).
fn heldout_instances(t: &Template, options: &BankOptions, n: usize) -> Vec<BugTask> {
    let train_instances = if options.randomize_names { options.train_instances } else { options.train_instances.min(1) };
    let mut seen: std::collections::HashSet<String> =
        (0..train_instances).map(|k| instantiate(t, options, Split::Train, k as u64, String::new()).source).collect();
    let mut out = Vec::with_capacity(n);
    let mut key = FIRST_HELDOUT_INSTANCE_KEY;
    // Names are drawn from pools far larger than any bank, so a clash is rare: a bounded search.
    while out.len() < n && key < FIRST_HELDOUT_INSTANCE_KEY + 64 * n as u64 + 64 {
        let task = instantiate(t, options, Split::HeldoutInstances, key, format!("{}-h{}", t.id.replace('/', "-"), out.len()));
        key += 1;
        if seen.insert(task.source.clone()) {
            out.push(task);
        }
    }
    out
}

/// Find a task by id in any split.
pub fn find(options: &BankOptions, id: &str) -> Result<BugTask, TaskError> {
    [Split::Train, Split::Heldout, Split::HeldoutInstances]
        .into_iter()
        .flat_map(|s| generate(options, s))
        .find(|t| t.id == id)
        .ok_or_else(|| TaskError::UnknownTask(id.to_string()))
}

fn instantiate(t: &Template, options: &BankOptions, split: Split, key: u64, id: String) -> BugTask {
    let mut rng = Rng::new(options.seed ^ hash(&t.id) ^ key.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let map = if options.randomize_names { fresh_names(&t.names, &[&t.source, &t.public], &mut rng) } else { Vec::new() };
    let r = |text: &str| rename(text, &map);
    let function = r(t.function());
    let source = r(&t.source);
    let fix = EditOp { name: String::new(), old: r(&t.fix.old), new: r(&t.fix.new) };
    let reference = fix.apply(&source).expect("bank tests check every edit matches once");
    let mut ops: Vec<EditOp> = std::iter::once(fix.clone())
        .chain(t.distractors.iter().map(|d| EditOp { name: String::new(), old: r(&d.old), new: r(&d.new) }))
        .collect();
    rng.shuffle(&mut ops);
    let fix_name = name_ops(&mut ops, &fix);
    BugTask {
        id,
        family: t.family.clone(),
        split,
        template: t.id.clone(),
        public_tests: format!("from {function} import {function}\n\n\n{}", r(&t.public)),
        function,
        source,
        reference,
        hidden: t.hidden.iter().map(|c| HiddenCase { args: c.args.clone(), expected: c.expected.clone() }).collect(),
        ops,
        fix: fix_name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shuffled menu holds the same edits, named in order, its fix the same edit; over
    /// seeds the fix takes every place.
    #[test]
    fn a_shuffled_menu_keeps_its_edits_and_its_fix() {
        let task = generate(&BankOptions::default(), Split::Train).swap_remove(0);
        let edit = |t: &BugTask, name: &str| t.op(name).map(|op| (op.old.clone(), op.new.clone())).unwrap();
        let mut places = std::collections::BTreeSet::new();
        for seed in 0..32 {
            let mut shuffled = task.clone();
            shuffled.shuffle_menu(seed);
            let edits = |t: &BugTask| t.ops.iter().map(|op| (op.old.clone(), op.new.clone())).collect::<std::collections::BTreeSet<_>>();
            assert_eq!(edits(&shuffled), edits(&task));
            assert!(shuffled.ops.iter().enumerate().all(|(i, op)| op.name == ((b'A' + i as u8) as char).to_string()));
            assert_eq!(edit(&shuffled, &shuffled.fix), edit(&task, &task.fix));
            let mut again = task.clone();
            again.shuffle_menu(seed);
            assert_eq!(again, shuffled, "deterministic in the seed");
            places.insert(shuffled.fix.clone());
        }
        assert_eq!(places.len(), task.ops.len(), "{places:?}");
    }

    #[test]
    fn generation_is_deterministic_and_depends_on_the_seed() {
        let a = generate(&BankOptions::default(), Split::Train);
        assert_eq!(a, generate(&BankOptions::default(), Split::Train));
        let b = generate(&BankOptions { seed: 1, ..BankOptions::default() }, Split::Train);
        assert_ne!(a, b);
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn splits_are_disjoint_by_template_and_balanced() {
        let o = BankOptions::default();
        let train = generate(&o, Split::Train);
        let held = generate(&o, Split::Heldout);
        assert!(held.iter().all(|h| train.iter().all(|t| t.template != h.template && t.id != h.id)));
        for family in crate::FAMILIES {
            assert_eq!(held.iter().filter(|t| t.family == family).count(), 2, "{family}");
        }
    }

    #[test]
    fn heldout_instances_never_share_a_template_instance_or_a_source_with_training() {
        for train_instances in [1, 4, 40] {
            let o = BankOptions { train_instances, heldout_train_instances: 3, ..BankOptions::default() };
            let train = generate(&o, Split::Train);
            let held = generate(&o, Split::HeldoutInstances);
            let templates_trained = templates().iter().filter(|t| !t.heldout).count();
            assert_eq!(held.len(), 3 * templates_trained);
            let ids: std::collections::HashSet<&str> = train.iter().chain(&held).map(|t| t.id.as_str()).collect();
            assert_eq!(ids.len(), train.len() + held.len(), "ids are unique across the splits");
            for h in &held {
                assert_eq!(h.split, Split::HeldoutInstances);
                assert!(train.iter().any(|t| t.template == h.template), "{}: a training template", h.id);
                let same_template = train.iter().chain(&held).filter(|t| t.template == h.template && t.id != h.id);
                for t in same_template {
                    assert_ne!(t.source, h.source, "{} and {} are the same task", t.id, h.id);
                }
            }
            for h in [&held[0], &held[held.len() - 1]] {
                assert_eq!(find(&o, &h.id).unwrap(), *h);
            }
            // Deterministic, and the training tasks are what they were without the split.
            assert_eq!(held, generate(&o, Split::HeldoutInstances));
            assert_eq!(train, generate(&BankOptions { heldout_train_instances: 0, ..o.clone() }, Split::Train));
        }
        // Without name randomization every instance is the same task: no such split.
        let plain = BankOptions { randomize_names: false, ..BankOptions::default() };
        assert!(generate(&plain, Split::HeldoutInstances).is_empty());
    }

    #[test]
    fn randomized_names_hide_the_original_names() {
        let o = BankOptions::default();
        for task in generate(&o, Split::Train).iter().chain(&generate(&o, Split::Heldout)) {
            let template = templates().iter().find(|t| t.id == task.template).unwrap();
            for name in &template.names {
                let words: Vec<&str> = task.source.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).collect();
                assert!(!words.contains(&name.as_str()), "{}: `{name}` still in\n{}", task.id, task.source);
            }
            assert!(task.source.starts_with(&format!("def {}(", task.function)));
        }
    }

    #[test]
    fn plain_names_when_randomization_is_off() {
        let o = BankOptions { randomize_names: false, ..BankOptions::default() };
        let tasks = generate(&o, Split::Train);
        assert_eq!(tasks.len(), templates().iter().filter(|t| !t.heldout).count());
        assert!(tasks.iter().any(|t| t.function == "largest"));
    }

    #[test]
    fn the_fix_op_rebuilds_the_reference_and_round_trips_through_task_data() {
        let task = &generate(&BankOptions::default(), Split::Train)[3];
        assert_eq!(task.op(&task.fix).unwrap().apply(&task.source).as_deref(), Some(task.reference.as_str()));
        assert_eq!(&BugTask::from_task(&task.to_task()).unwrap(), task);
    }
}
