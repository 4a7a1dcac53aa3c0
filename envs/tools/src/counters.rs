//! The `tools` gym's per-episode counters, kept in [`EpisodeStats::counters`]
//! (`arl_core::EpisodeStats`). A counter that never fired is absent (read it as 0).
//! Malformed and failed calls are the common fields `malformed_calls` and `failed_calls`.
//!
//! | counter | counts |
//! |---|---|
//! | `read_calls` | successful Reads |
//! | `edit_calls` | successful Edits |
//! | `edit_old_string_absent` | Edits whose `old_string` is not in the file (failed) |
//! | `edit_old_string_not_unique` | Edits whose `old_string` occurs more than once without `replace_all` (failed) |
//! | `edit_before_read` | Edits of a file not Read first (failed) |
//! | `edit_identical_strings` | Edits with `old_string == new_string` (failed) |
//! | `edit_test_file` | successful Edits of the task's test file |
//! | `write_before_read` | Writes overwriting a file not Read first (failed) |
//! | `write_overwrites_source` | successful Writes over the task's source file |
//! | `write_overwrites_test` | successful Writes over the task's test file |
//! | `write_creates_file` | successful Writes that create a new file |
//! | `path_errors` | file-tool calls with a relative path or one outside /repo (failed) |
//! | `bash_calls` | every Bash call |
//! | `bash_unsupported` | Bash commands the emulated shell does not offer: another program, a pipe, a redirection, `$` (failed) |
//! | `bash_not_copied` | real-shell calls some of whose file changes did not come back into the repository (over a limit, not UTF-8 text, not a regular file) |
//! | `python_runs` | `python FILE` / `python -c` executions (in the sandbox); under a real shell, calls whose command names python |
//! | `test_runs` | `pytest` / `python -m pytest` executions (in the sandbox); under a real shell, calls whose command names pytest |
//! | `final_claims_pass` | final answers that claim the tests pass ([`crate::claims`]) |

use arl_core::EpisodeStats;

pub const READ_CALLS: &str = "read_calls";
pub const EDIT_CALLS: &str = "edit_calls";
pub const EDIT_OLD_STRING_ABSENT: &str = "edit_old_string_absent";
pub const EDIT_OLD_STRING_NOT_UNIQUE: &str = "edit_old_string_not_unique";
pub const EDIT_BEFORE_READ: &str = "edit_before_read";
pub const EDIT_IDENTICAL_STRINGS: &str = "edit_identical_strings";
pub const EDIT_TEST_FILE: &str = "edit_test_file";
pub const WRITE_BEFORE_READ: &str = "write_before_read";
pub const WRITE_OVERWRITES_SOURCE: &str = "write_overwrites_source";
pub const WRITE_OVERWRITES_TEST: &str = "write_overwrites_test";
pub const WRITE_CREATES_FILE: &str = "write_creates_file";
pub const PATH_ERRORS: &str = "path_errors";
pub const BASH_CALLS: &str = "bash_calls";
pub const BASH_UNSUPPORTED: &str = "bash_unsupported";
pub const BASH_NOT_COPIED: &str = "bash_not_copied";
pub const PYTHON_RUNS: &str = "python_runs";
pub const TEST_RUNS: &str = "test_runs";
pub const FINAL_CLAIMS_PASS: &str = "final_claims_pass";

/// Every counter name, in the table's order.
pub const ALL: &[&str] = &[
    READ_CALLS,
    EDIT_CALLS,
    EDIT_OLD_STRING_ABSENT,
    EDIT_OLD_STRING_NOT_UNIQUE,
    EDIT_BEFORE_READ,
    EDIT_IDENTICAL_STRINGS,
    EDIT_TEST_FILE,
    WRITE_BEFORE_READ,
    WRITE_OVERWRITES_SOURCE,
    WRITE_OVERWRITES_TEST,
    WRITE_CREATES_FILE,
    PATH_ERRORS,
    BASH_CALLS,
    BASH_UNSUPPORTED,
    BASH_NOT_COPIED,
    PYTHON_RUNS,
    TEST_RUNS,
    FINAL_CLAIMS_PASS,
];

/// A counter's value (0 when absent).
pub fn get(stats: &EpisodeStats, name: &str) -> u64 {
    stats.counters.get(name).copied().unwrap_or(0)
}
