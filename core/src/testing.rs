//! Helpers for arl's own tests.

use std::io::Write;

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
