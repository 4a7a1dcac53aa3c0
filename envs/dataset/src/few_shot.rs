//! The few-shot block (`env.options.few_shot`): solved examples from a file of their own, in the
//! data set's line format, shown before every task as user/assistant turns. The examples never
//! come from the held-out split, and an example whose answer is a held-out task's answer is
//! refused unless `few_shot_allow_overlap` says the overlap is meant: a few-shot block that
//! spells out a held-out answer would inflate the held-out pass rate.

use std::path::Path;

use arl_core::{Message, Role};

use crate::data::{self, Item};

/// The block: the first `n` examples of `path` (all without `n`), each as its messages (the
/// prompt) and an assistant turn with its `solution`, else its `answer`.
pub fn read(path: &Path, n: Option<usize>) -> Result<Vec<Item>, String> {
    let mut examples = data::read(path, "env.options.few_shot", None)?;
    for ex in &examples {
        if ex.messages.iter().any(|m| m.role == Role::System) {
            return Err(format!(
                "{} line {}: a few-shot example holds a system message; the task's own comes first (set it with env.options.system)",
                path.display(),
                ex.line
            ));
        }
    }
    if let Some(n) = n {
        if n == 0 || n > examples.len() {
            return Err(format!(
                "env.options.few_shot_n: {n} is out of range; valid: 1 to {} (the examples in {})",
                examples.len(),
                path.display()
            ));
        }
        examples.truncate(n);
    }
    Ok(examples)
}

/// Refuse an example that is a held-out task (the same prompt) or, unless `allow_overlap`,
/// whose answer is a held-out task's answer (the strings equal, trimmed).
pub fn check_heldout(examples: &[Item], heldout: &[Item], path: &Path, allow_overlap: bool) -> Result<(), String> {
    let prompt = |it: &Item| -> Vec<Message> { it.messages.iter().filter(|m| m.role != Role::System).cloned().collect() };
    for ex in examples {
        let at = |what: String| format!("{} line {}: {what}", path.display(), ex.line);
        if let Some(h) = heldout.iter().find(|h| prompt(h) == ex.messages) {
            return Err(at(format!("this example is held-out task `{}`; take examples from outside the held-out split", h.id)));
        }
        if allow_overlap {
            continue;
        }
        if let Some(h) = heldout.iter().find(|h| h.answer.trim() == ex.answer.trim()) {
            return Err(at(format!(
                "the example's answer `{}` is held-out task `{}`'s answer, so the block could leak it; pick another example, or set env.options.few_shot_allow_overlap = true if that is meant",
                ex.answer.trim(),
                h.id
            )));
        }
    }
    Ok(())
}

/// The task's messages with the block inserted after its leading system messages.
pub fn insert(messages: &mut Vec<Message>, examples: &[Item]) {
    let at = messages.iter().take_while(|m| m.role == Role::System).count();
    let block = examples.iter().flat_map(|ex| {
        let reply = ex.solution.clone().unwrap_or_else(|| ex.answer.clone());
        ex.messages.iter().cloned().chain(std::iter::once(Message::assistant(reply)))
    });
    messages.splice(at..at, block);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(prompt: &str, answer: &str) -> Item {
        Item { id: prompt.into(), messages: vec![Message::user(prompt)], answer: answer.into(), solution: None, line: 1 }
    }

    #[test]
    fn the_block_goes_after_the_system_message_with_solutions_as_replies() {
        let mut ex = item("2+2?", "4");
        ex.solution = Some("2 + 2 = 4\n#### 4".into());
        let examples = [ex, item("1+1?", "2")];
        let mut messages = vec![Message::system("Be brief."), Message::user("3+3?")];
        insert(&mut messages, &examples);
        let got: Vec<(Role, &str)> = messages.iter().map(|m| (m.role, m.content.as_str())).collect();
        assert_eq!(
            got,
            [
                (Role::System, "Be brief."),
                (Role::User, "2+2?"),
                (Role::Assistant, "2 + 2 = 4\n#### 4"),
                (Role::User, "1+1?"),
                (Role::Assistant, "2"),
                (Role::User, "3+3?"),
            ]
        );
        let mut plain = vec![Message::user("3+3?")];
        insert(&mut plain, &examples[1..]);
        assert_eq!(plain.iter().map(|m| m.role).collect::<Vec<_>>(), [Role::User, Role::Assistant, Role::User]);
    }

    #[test]
    fn an_example_that_leaks_a_held_out_answer_is_refused_unless_allowed() {
        let path = Path::new("shots.jsonl");
        let heldout = [item("What is 6*7?", "42"), item("Capital of Peru?", "Lima")];
        let mut held_system = item("What is 9-1?", "8");
        held_system.messages.insert(0, Message::system("Be brief."));
        let examples = [item("What is 40+2?", " 42 ")];
        let err = check_heldout(&examples, &heldout, path, false).unwrap_err();
        assert!(err.starts_with("shots.jsonl line 1: the example's answer `42` is held-out task `What is 6*7?`'s answer"), "{err}");
        assert!(err.contains("few_shot_allow_overlap = true") && err.lines().count() == 1, "{err}");
        check_heldout(&examples, &heldout, path, true).unwrap();
        check_heldout(&[item("What is 1+1?", "2")], &heldout, path, false).unwrap();
        // A held-out task itself is refused even when overlap is allowed (its system message aside).
        let err = check_heldout(&[item("What is 9-1?", "8")], &[held_system], path, true).unwrap_err();
        assert!(err.contains("this example is held-out task `What is 9-1?`"), "{err}");
    }
}
