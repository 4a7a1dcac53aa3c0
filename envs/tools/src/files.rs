//! Read, Edit and Write over the in-memory repository, with Claude Code's rules: Edit and
//! an overwriting Write need a prior Read of the file; Edit's `old_string` must occur
//! (exactly once unless `replace_all`) and differ from `new_string`. Every result is bounded
//! before it is built: Write's content and Edit's edited file (its size computed from the
//! match count first) are at most [`MAX_FILE_BYTES`], the repository at most [`MAX_FILES`].

use arl_core::{ToolContext, ToolOutcome};

use crate::counters as c;
use crate::paths::{self, PathError};
use crate::tools::{EditArgs, ReadArgs, WriteArgs};

/// Lines a Read returns by default, and the longest line it shows whole.
pub const READ_LINES: usize = 2000;
pub const LINE_CHARS: usize = 2000;
/// Largest file a Write may create (bytes) and most files the repository may hold.
pub const MAX_FILE_BYTES: usize = 64 * 1024;
pub const MAX_FILES: usize = 64;
/// Lines of context shown around an Edit.
const SNIPPET_CONTEXT: usize = 4;

/// The task's source and test file keys (`<fn>.py`, `test_<fn>.py`), when the task names a
/// function (every bank task does).
pub fn task_files(ctx: &ToolContext<'_>) -> (Option<String>, Option<String>) {
    match ctx.task.data.get("function").and_then(|f| f.as_str()) {
        Some(f) => (Some(format!("{f}.py")), Some(format!("test_{f}.py"))),
        None => (None, None),
    }
}

fn resolve(ctx: &mut ToolContext<'_>, path: &str) -> Result<String, ToolOutcome> {
    paths::resolve_absolute(path).map_err(|PathError(message)| {
        ctx.stats.bump(c::PATH_ERRORS);
        ToolOutcome::Failed(message)
    })
}

/// A file that must exist: its key, or the failure the model sees.
fn existing(ctx: &mut ToolContext<'_>, path: &str) -> Result<String, ToolOutcome> {
    let key = resolve(ctx, path)?;
    if paths::is_dir(ctx.workspace.files.keys(), &key) {
        return Err(ToolOutcome::Failed(format!("{} is a directory, not a file (list it with Bash `ls`)", paths::display(&key))));
    }
    if !ctx.workspace.files.contains_key(&key) {
        return Err(ToolOutcome::Failed(format!("File does not exist: {}", paths::display(&key))));
    }
    Ok(key)
}

/// `cat -n` style: the 1-based number right-aligned in six columns, a tab, the line.
pub fn numbered<'a>(lines: impl IntoIterator<Item = (usize, &'a str)>) -> String {
    let mut out = String::new();
    for (n, line) in lines {
        let shown: String = line.chars().take(LINE_CHARS).collect();
        out.push_str(&format!("{n:>6}\t{shown}\n"));
    }
    out
}

pub fn read(ctx: &mut ToolContext<'_>, args: ReadArgs) -> ToolOutcome {
    let key = match existing(ctx, &args.file_path) {
        Ok(key) => key,
        Err(outcome) => return outcome,
    };
    let text = &ctx.workspace.files[&key];
    let lines: Vec<&str> = text.lines().collect();
    let offset = args.offset.unwrap_or(1).max(1) as usize;
    let limit = args.limit.map_or(READ_LINES, |l| l as usize);
    if limit == 0 {
        return ToolOutcome::Failed("limit must be at least 1".into());
    }
    if lines.is_empty() {
        ctx.workspace.read.insert(key.clone());
        ctx.stats.bump(c::READ_CALLS);
        return ToolOutcome::Ok(format!("(the file {} exists but is empty)", paths::display(&key)));
    }
    if offset > lines.len() {
        return ToolOutcome::Failed(format!("offset {offset} is past the end of {} ({} lines)", paths::display(&key), lines.len()));
    }
    let shown = numbered(lines.iter().enumerate().skip(offset - 1).take(limit).map(|(i, l)| (i + 1, *l)));
    ctx.workspace.read.insert(key);
    ctx.stats.bump(c::READ_CALLS);
    ToolOutcome::Ok(shown)
}

pub fn edit(ctx: &mut ToolContext<'_>, args: EditArgs) -> ToolOutcome {
    if args.old_string == args.new_string {
        ctx.stats.bump(c::EDIT_IDENTICAL_STRINGS);
        return ToolOutcome::Failed("No changes to make: old_string and new_string are exactly the same.".into());
    }
    let key = match existing(ctx, &args.file_path) {
        Ok(key) => key,
        Err(outcome) => return outcome,
    };
    if !ctx.workspace.read.contains(&key) {
        ctx.stats.bump(c::EDIT_BEFORE_READ);
        return ToolOutcome::Failed(format!("File has not been read yet: Read {} before editing it.", paths::display(&key)));
    }
    let text = &ctx.workspace.files[&key];
    let count = if args.old_string.is_empty() { 0 } else { text.matches(&args.old_string).count() };
    let replace_all = args.replace_all.unwrap_or(false);
    if count == 0 {
        ctx.stats.bump(c::EDIT_OLD_STRING_ABSENT);
        return ToolOutcome::Failed(format!(
            "String to replace not found in {}. old_string must match the file exactly, including indentation \
             (without the line-number prefix Read shows).",
            paths::display(&key)
        ));
    }
    if count > 1 && !replace_all {
        ctx.stats.bump(c::EDIT_OLD_STRING_NOT_UNIQUE);
        return ToolOutcome::Failed(format!(
            "Found {count} matches of old_string in {}, but replace_all is false. To replace every occurrence set \
             replace_all to true; to replace one, add surrounding context to old_string so it is unique.",
            paths::display(&key)
        ));
    }
    // The edited file's size, before it exists: a `replace_all` of a long `new_string` would
    // otherwise multiply the file (64 bytes to 64 MB in two calls).
    let replaced = if replace_all { count } else { 1 };
    let size = (text.len() - replaced * args.old_string.len()).saturating_add(replaced.saturating_mul(args.new_string.len()));
    if size > MAX_FILE_BYTES {
        return ToolOutcome::Failed(format!(
            "the edit would make {} {size} bytes; files are limited to {MAX_FILE_BYTES}",
            paths::display(&key)
        ));
    }
    let first = text.find(&args.old_string).expect("counted above");
    let edited =
        if replace_all { text.replace(&args.old_string, &args.new_string) } else { text.replacen(&args.old_string, &args.new_string, 1) };
    // The snippet: the lines around the (first) change, as they are now.
    let start_line = text[..first].matches('\n').count();
    let changed_lines = args.new_string.matches('\n').count() + 1;
    let lines: Vec<&str> = edited.lines().collect();
    let from = start_line.saturating_sub(SNIPPET_CONTEXT);
    let to = (start_line + changed_lines + SNIPPET_CONTEXT).min(lines.len());
    let snippet = numbered((from..to).map(|i| (i + 1, lines[i])));
    let (_, test) = task_files(ctx);
    if test.as_deref() == Some(key.as_str()) {
        ctx.stats.bump(c::EDIT_TEST_FILE);
    }
    ctx.stats.bump(c::EDIT_CALLS);
    let shown = paths::display(&key);
    ctx.workspace.files.insert(key, edited);
    let what = if replace_all && count > 1 { format!(" ({count} occurrences replaced)") } else { String::new() };
    ToolOutcome::Ok(format!(
        "The file {shown} has been updated{what}. Here's the result of running `cat -n` on a snippet of the edited file:\n{snippet}"
    ))
}

pub fn write(ctx: &mut ToolContext<'_>, args: WriteArgs) -> ToolOutcome {
    let key = match resolve(ctx, &args.file_path) {
        Ok(key) => key,
        Err(outcome) => return outcome,
    };
    let shown = paths::display(&key);
    if key.is_empty() || paths::is_dir(ctx.workspace.files.keys(), &key) {
        return ToolOutcome::Failed(format!("{shown} is a directory, not a file"));
    }
    // A file cannot sit where a directory of another file's path is.
    let mut prefix = String::new();
    for part in key.split('/').collect::<Vec<_>>().iter().rev().skip(1).rev() {
        prefix = if prefix.is_empty() { part.to_string() } else { format!("{prefix}/{part}") };
        if ctx.workspace.files.contains_key(&prefix) {
            return ToolOutcome::Failed(format!("{} is a file, not a directory", paths::display(&prefix)));
        }
    }
    if args.content.len() > MAX_FILE_BYTES {
        return ToolOutcome::Failed(format!("content is {} bytes; files are limited to {MAX_FILE_BYTES}", args.content.len()));
    }
    let exists = ctx.workspace.files.contains_key(&key);
    if exists && !ctx.workspace.read.contains(&key) {
        ctx.stats.bump(c::WRITE_BEFORE_READ);
        return ToolOutcome::Failed(format!("File has not been read yet: Read {shown} before overwriting it."));
    }
    if !exists && ctx.workspace.files.len() >= MAX_FILES {
        return ToolOutcome::Failed(format!("the repository already holds {MAX_FILES} files; no more can be created"));
    }
    let (source, test) = task_files(ctx);
    if !exists {
        ctx.stats.bump(c::WRITE_CREATES_FILE);
    } else if source.as_deref() == Some(key.as_str()) {
        ctx.stats.bump(c::WRITE_OVERWRITES_SOURCE);
    } else if test.as_deref() == Some(key.as_str()) {
        ctx.stats.bump(c::WRITE_OVERWRITES_TEST);
    }
    ctx.workspace.files.insert(key.clone(), args.content);
    ctx.workspace.read.insert(key);
    ToolOutcome::Ok(if exists {
        format!("The file {shown} has been overwritten.")
    } else {
        format!("File created successfully at: {shown}")
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::counters as c;
    use crate::testing::{Repo, failed, ok};

    const SRC: &str = "/repo/count_positive.py";

    #[test]
    fn read_numbers_lines_cat_n_style_and_honours_offset_and_limit() {
        let mut repo = Repo::new();
        let text = ok(repo.call("Read", json!({"file_path": SRC})));
        assert!(text.starts_with("     1\tdef count_positive(values):\n     2\t    \"\"\"Count"), "{text}");
        assert_eq!(text.lines().count(), repo.source().lines().count());
        let part = ok(repo.call("Read", json!({"file_path": SRC, "offset": 4, "limit": 2})));
        assert_eq!(part, "     4\t    for v in values:\n     5\t        if v >= 0:\n");
        assert_eq!(repo.counter(c::READ_CALLS), 2);
        assert!(repo.workspace.read.contains("count_positive.py"));
    }

    #[test]
    fn read_failures_name_the_problem() {
        let mut repo = Repo::new();
        assert!(failed(repo.call("Read", json!({"file_path": "count_positive.py"}))).contains("absolute path"));
        assert!(failed(repo.call("Read", json!({"file_path": "/etc/passwd"}))).contains("outside the repository"));
        assert!(failed(repo.call("Read", json!({"file_path": "/repo/nope.py"}))).contains("File does not exist"));
        assert!(failed(repo.call("Read", json!({"file_path": "/repo"}))).contains("is a directory"));
        assert!(failed(repo.call("Read", json!({"file_path": SRC, "offset": 99}))).contains("past the end"));
        assert!(failed(repo.call("Read", json!({"file_path": SRC, "limit": 0}))).contains("limit"));
        assert_eq!((repo.counter(c::PATH_ERRORS), repo.counter(c::READ_CALLS)), (2, 0));
        assert!(repo.workspace.read.is_empty());
        // Arguments that do not fit the schema are malformed, not failed.
        assert!(matches!(repo.call("Read", json!({"path": SRC})), arl_core::ToolOutcome::Malformed(_)));
        assert!(matches!(repo.call("Read", json!({"file_path": SRC, "offset": "3"})), arl_core::ToolOutcome::Malformed(_)));
        assert!(matches!(repo.call("Read", json!({"file_path": SRC, "offset": 1.5})), arl_core::ToolOutcome::Malformed(_)));
    }

    #[test]
    fn edit_replaces_once_and_shows_a_numbered_snippet() {
        let mut repo = Repo::new();
        ok(repo.call("Read", json!({"file_path": SRC})));
        let text = ok(repo.call("Edit", json!({"file_path": SRC, "old_string": "if v >= 0:", "new_string": "if v > 0:"})));
        assert!(text.starts_with("The file /repo/count_positive.py has been updated."), "{text}");
        assert!(text.contains("     5\t        if v > 0:\n"), "{text}");
        assert!(repo.source().contains("if v > 0:") && !repo.source().contains("v >= 0"));
        assert_eq!(repo.counter(c::EDIT_CALLS), 1);
    }

    #[test]
    fn edit_failure_modes_are_failed_and_counted() {
        let mut repo = Repo::new();
        let before = repo.source().to_string();
        let edit = |old: &str, new: &str| json!({"file_path": SRC, "old_string": old, "new_string": new});
        // Before Read.
        assert!(failed(repo.call("Edit", edit("v >= 0", "v > 0"))).contains("has not been read"));
        assert_eq!(repo.counter(c::EDIT_BEFORE_READ), 1);
        ok(repo.call("Read", json!({"file_path": SRC})));
        // Identical strings.
        assert!(failed(repo.call("Edit", edit("v >= 0", "v >= 0"))).contains("No changes to make"));
        // Absent (the Read prefix is not part of the file).
        assert!(failed(repo.call("Edit", edit("     5\t        if v >= 0:", "if v > 0:"))).contains("not found"));
        assert!(failed(repo.call("Edit", edit("", "x"))).contains("not found"));
        // Not unique without replace_all.
        assert!(failed(repo.call("Edit", edit("count", "total"))).contains("replace_all is false"));
        // Relative path, missing file.
        assert!(
            failed(repo.call("Edit", json!({"file_path": "count_positive.py", "old_string": "a", "new_string": "b"}))).contains("absolute")
        );
        assert!(
            failed(repo.call("Edit", json!({"file_path": "/repo/x.py", "old_string": "a", "new_string": "b"}))).contains("does not exist")
        );
        assert_eq!(repo.source(), before, "no failed edit changes the file");
        assert_eq!(
            (repo.counter(c::EDIT_IDENTICAL_STRINGS), repo.counter(c::EDIT_OLD_STRING_ABSENT), repo.counter(c::EDIT_OLD_STRING_NOT_UNIQUE)),
            (1, 2, 1)
        );
        assert_eq!(repo.counter(c::EDIT_CALLS), 0);
    }

    #[test]
    fn edit_replace_all_replaces_every_occurrence() {
        let mut repo = Repo::new();
        ok(repo.call("Read", json!({"file_path": SRC})));
        let text = ok(repo.call("Edit", json!({"file_path": SRC, "old_string": "count ", "new_string": "total ", "replace_all": true})));
        assert!(text.contains("(2 occurrences replaced)"), "{text}");
        assert!(repo.source().contains("total = 0") && repo.source().contains("total += 1") && repo.source().contains("return count"));
    }

    /// Issue #50: `replace_all` with a long `new_string` grew a 64-byte file to 64 MB in two
    /// Edits. The size is computed before the edit and held to Write's limit.
    #[test]
    fn an_edit_cannot_grow_a_file_past_the_file_limit() {
        let mut repo = Repo::new();
        ok(repo.call("Write", json!({"file_path": "/repo/small.py", "content": "x".repeat(64)})));
        let grow = |n: usize| json!({"file_path": "/repo/small.py", "old_string": "x", "new_string": "y".repeat(n), "replace_all": true});
        let text = failed(repo.call("Edit", grow(1025)));
        assert!(text.contains("would make /repo/small.py 65600 bytes; files are limited to 65536"), "{text}");
        let text = failed(repo.call("Edit", grow(1 << 20)));
        assert!(text.contains("67108864 bytes"), "{text}");
        assert_eq!(repo.workspace.files["small.py"], "x".repeat(64), "a refused edit changes nothing");
        // Up to the limit exactly is fine; one byte more is not, with or without replace_all.
        ok(repo.call("Edit", grow(1024)));
        assert_eq!(repo.workspace.files["small.py"].len(), super::MAX_FILE_BYTES);
        let full = format!("{}b", "a".repeat(super::MAX_FILE_BYTES - 1));
        ok(repo.call("Write", json!({"file_path": "/repo/full.py", "content": full})));
        let one = json!({"file_path": "/repo/full.py", "old_string": "b", "new_string": "bc"});
        assert!(failed(repo.call("Edit", one)).contains("65537 bytes"));
        assert_eq!(repo.workspace.files["full.py"].len(), super::MAX_FILE_BYTES);
        // A new_string that is too long on its own.
        let huge = json!({"file_path": SRC, "old_string": "count = 0", "new_string": "#".repeat(super::MAX_FILE_BYTES)});
        ok(repo.call("Read", json!({"file_path": SRC})));
        assert!(failed(repo.call("Edit", huge)).contains("files are limited to"));
    }

    #[test]
    fn edits_to_the_test_file_are_counted() {
        let mut repo = Repo::new();
        let tests = "/repo/test_count_positive.py";
        ok(repo.call("Read", json!({"file_path": tests})));
        ok(repo.call("Edit", json!({"file_path": tests, "old_string": "== 2", "new_string": "== 3"})));
        assert_eq!(repo.counter(c::EDIT_TEST_FILE), 1);
    }

    #[test]
    fn write_creates_files_and_overwrites_only_after_a_read() {
        let mut repo = Repo::new();
        let fixed = repo.bug.reference.clone();
        assert!(failed(repo.call("Write", json!({"file_path": SRC, "content": fixed}))).contains("has not been read"));
        assert_eq!(repo.counter(c::WRITE_BEFORE_READ), 1);
        ok(repo.call("Read", json!({"file_path": SRC})));
        assert!(ok(repo.call("Write", json!({"file_path": SRC, "content": fixed}))).contains("has been overwritten"));
        assert_eq!(repo.source(), repo.bug.reference);
        assert_eq!(repo.counter(c::WRITE_OVERWRITES_SOURCE), 1);
        // A new file needs no Read, and may then be edited.
        let created = ok(repo.call("Write", json!({"file_path": "/repo/sub/notes.py", "content": "x = 1\n"})));
        assert_eq!(created, "File created successfully at: /repo/sub/notes.py");
        ok(repo.call("Edit", json!({"file_path": "/repo/sub/notes.py", "old_string": "1", "new_string": "2"})));
        assert_eq!(repo.workspace.files["sub/notes.py"], "x = 2\n");
        assert_eq!(repo.counter(c::WRITE_CREATES_FILE), 1);
        // The test file.
        ok(repo.call("Read", json!({"file_path": "/repo/test_count_positive.py"})));
        ok(repo.call("Write", json!({"file_path": "/repo/test_count_positive.py", "content": "def test_x():\n    pass\n"})));
        assert_eq!(repo.counter(c::WRITE_OVERWRITES_TEST), 1);
    }

    #[test]
    fn write_failures() {
        let mut repo = Repo::new();
        assert!(failed(repo.call("Write", json!({"file_path": "x.py", "content": ""}))).contains("absolute"));
        assert!(failed(repo.call("Write", json!({"file_path": "/tmp/x.py", "content": ""}))).contains("outside the repository"));
        assert!(failed(repo.call("Write", json!({"file_path": "/repo", "content": ""}))).contains("directory"));
        assert!(failed(repo.call("Write", json!({"file_path": "/repo/count_positive.py/x.py", "content": ""}))).contains("is a file"));
        let big = "x".repeat(super::MAX_FILE_BYTES + 1);
        assert!(failed(repo.call("Write", json!({"file_path": "/repo/big.py", "content": big}))).contains("limited"));
        assert_eq!(repo.workspace.files.len(), 2);
        assert_eq!(repo.counter(c::PATH_ERRORS), 2);
    }
}
