//! Helpers for arl's own tests: visible skips and a stand-in env.

use std::io::Write;

use crate::{EnvError, EnvSession, EpisodeStats, Message, Outcome, SingleTurn, Split, Task, ToolSchema};

/// A stand-in env for tests of the loop: four one-turn tasks (`l0` … `l3`, the prompt `say
/// letters <id>`), no tools; the reward is the fraction of the reply's characters that are
/// lowercase ASCII letters, so a random model's episodes differ in reward and every step has
/// advantages, gradients and optimizer moments to get right.
pub struct Letters;

impl crate::Env for Letters {
    fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
        Ok((0..4).map(|i| Task { id: format!("l{i}"), family: "letters".into(), split, data: serde_json::json!(i) }).collect())
    }
    fn tools(&self) -> Vec<ToolSchema> {
        vec![]
    }
    fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
        let grade = |text: &str, _truncated: bool| {
            let n = text.chars().count().max(1) as f64;
            let reward = text.chars().filter(|c| c.is_ascii_lowercase()).count() as f64 / n;
            Outcome { reward, stats: EpisodeStats { turns: 1, ..Default::default() } }
        };
        Ok(Box::new(SingleTurn::new(vec![Message::user(format!("say letters {}", task.id))], grade)))
    }
}

/// Say that the running test skips its check, and why, where a reader sees it: on stderr
/// (shown with `--nocapture`) and, when `ARL_TEST_SKIPS` names a file, as a line
/// `test-name: why` appended to it — `scripts/test.sh` prints that file after the tests, so a
/// skip is never mistaken for a pass. The test then returns early.
pub fn skip(why: &str) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    eprintln!("skipped {test}: {why}");
    if let Some(path) = std::env::var_os("ARL_TEST_SKIPS") {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(&path);
        // One write per line: concurrent tests and test binaries append whole lines.
        if let Ok(mut file) = file {
            let _ = file.write_all(format!("{test}: {why}\n").as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_skip_names_the_test_and_why_in_the_file() {
        let path = std::env::temp_dir().join(format!("arl-skips-{}", std::process::id()));
        // SAFETY: (edition 2024 `set_var`) no other test of this crate reads ARL_TEST_SKIPS.
        unsafe { std::env::set_var("ARL_TEST_SKIPS", &path) };
        super::skip("no chromium here");
        // SAFETY: as above.
        unsafe { std::env::remove_var("ARL_TEST_SKIPS") };
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(text, "testing::tests::a_skip_names_the_test_and_why_in_the_file: no chromium here\n");
    }
}
