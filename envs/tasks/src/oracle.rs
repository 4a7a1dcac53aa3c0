//! What the bank's gyms script as their oracle ([`arl_core::Env::oracle`]): read the source,
//! apply the task's fix, run the public tests, finish — each step perturbed by
//! [`OracleNoise`]. The gyms turn a [`Plan`] into their own tool calls.

use arl_core::OracleNoise;

use crate::rng::{Rng, hash};
use crate::{BugTask, EditOp};

/// One demonstration's choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Read the source before editing.
    pub read: bool,
    /// The edit applied: the fix, or (a wrong edit) one of the distractors.
    pub edit: EditOp,
    /// Whether `edit` is the task's fix.
    pub fixes: bool,
    /// Run the public tests after the edit.
    pub test: bool,
}

/// The plan for `bug`, deterministic in (`seed`, the task's id).
pub fn plan(bug: &BugTask, noise: &OracleNoise, seed: u64) -> Plan {
    let mut rng = Rng::new(seed ^ hash(&bug.id) ^ 0x6f72_6163_6c65);
    let mut coin = |p: f64| ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p;
    let read = !coin(noise.skip_read_rate);
    let wrong = coin(noise.wrong_edit_rate);
    let test = !coin(noise.skip_test_rate);
    let fix = bug.op(&bug.fix).expect("a bank task names its fix").clone();
    let distractors: Vec<&EditOp> = bug.ops.iter().filter(|op| op.name != bug.fix).collect();
    let edit = if wrong && !distractors.is_empty() { distractors[rng.below(distractors.len())].clone() } else { fix.clone() };
    Plan { read, fixes: edit == fix, edit, test }
}

/// `edit` as a whole-line replacement in `source`, as an agent copies a line: the lines
/// that hold `edit.old` (which occurs exactly once), before and after the edit. `None` when
/// the edit does not apply.
pub fn line_edit(source: &str, edit: &EditOp) -> Option<(String, String)> {
    if source.matches(&edit.old).count() != 1 {
        return None;
    }
    let at = source.find(&edit.old)?;
    let start = source[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = source[at + edit.old.len()..].find('\n').map_or(source.len(), |i| at + edit.old.len() + i);
    let old = &source[start..end];
    Some((old.to_string(), old.replacen(&edit.old, &edit.new, 1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BankOptions, generate};
    use arl_core::Split;

    #[test]
    fn without_noise_the_plan_is_the_expert_script() {
        for bug in generate(&BankOptions::default(), Split::Train) {
            let p = plan(&bug, &OracleNoise::default(), 0);
            assert!(p.read && p.test && p.fixes, "{}", bug.id);
            assert_eq!(p.edit.apply(&bug.source).as_deref(), Some(bug.reference.as_str()));
        }
    }

    #[test]
    fn noise_rates_are_honoured_and_wrong_edits_never_fix() {
        let bugs = generate(&BankOptions::default(), Split::Train);
        let noise = OracleNoise { wrong_edit_rate: 0.3, skip_read_rate: 0.2, skip_test_rate: 0.1 };
        let plans: Vec<Plan> = (0..8).flat_map(|seed| bugs.iter().map(move |b| plan(b, &noise, seed))).collect();
        let frac = |f: &dyn Fn(&Plan) -> bool| plans.iter().filter(|p| f(p)).count() as f64 / plans.len() as f64;
        assert!((frac(&|p| !p.fixes) - 0.3).abs() < 0.05, "wrong {}", frac(&|p| !p.fixes));
        assert!((frac(&|p| !p.read) - 0.2).abs() < 0.05);
        assert!((frac(&|p| !p.test) - 0.1).abs() < 0.05);
        for (p, b) in plans.iter().zip(bugs.iter().cycle()) {
            if !p.fixes {
                assert_ne!(p.edit.apply(&b.source).as_deref(), Some(b.reference.as_str()), "{}", b.id);
            }
        }
        assert_eq!(plan(&bugs[0], &noise, 3), plan(&bugs[0], &noise, 3));
    }

    #[test]
    fn a_line_edit_copies_whole_lines_and_makes_the_same_change() {
        for bug in generate(&BankOptions::default(), Split::Train) {
            for op in &bug.ops {
                let Some(expected) = op.apply(&bug.source) else { continue };
                let (old, new) = line_edit(&bug.source, op).unwrap();
                assert!(bug.source.lines().any(|l| old.starts_with(l)), "{}: {old:?}", bug.id);
                assert_eq!(bug.source.matches(&old).count(), 1);
                assert_eq!(bug.source.replacen(&old, &new, 1), expected, "{}", bug.id);
            }
        }
    }
}
