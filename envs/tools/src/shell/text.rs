//! The read-only commands: `ls`, `cat`, `head`, `tail`, `grep`, `wc`, `cd`. Each accepts the
//! options models commonly use and refuses others with a usage message.

use regex::RegexBuilder;

use super::{Exec, Shell};
use crate::paths::{self, ROOT};

/// Split short flags (`-la` → `l`, `a`) from operands; `--` ends options. Options that take
/// a value are returned by [`take_value`] callers before this runs.
fn flags(program: &str, args: &[String], allowed: &str) -> Result<(Vec<char>, Vec<String>), Exec> {
    let mut flags = Vec::new();
    let mut operands = Vec::new();
    let mut options_done = false;
    for arg in args {
        if !options_done && arg == "--" {
            options_done = true;
        } else if !options_done && arg.len() > 1 && arg.starts_with('-') {
            for f in arg[1..].chars() {
                if !allowed.contains(f) {
                    let shown: Vec<String> = allowed.chars().map(|c| format!("-{c}")).collect();
                    return Err(Exec::usage(format!(
                        "{program}: unsupported option `{arg}` in this shell (supported: {})",
                        shown.join(" ")
                    )));
                }
                flags.push(f);
            }
        } else {
            operands.push(arg.clone());
        }
    }
    Ok((flags, operands))
}

pub fn cd(_: &mut Shell<'_, '_>, args: &[String]) -> Exec {
    match args {
        [] => Exec::ok(String::new()),
        [dir] if paths::resolve_shell(dir).is_ok_and(|k| k.is_empty()) => Exec::ok(String::new()),
        _ => Exec::usage(format!("cd: the working directory stays {ROOT} in this shell; use paths relative to it")),
    }
}

pub fn ls(sh: &mut Shell<'_, '_>, args: &[String]) -> Exec {
    let (flags, mut operands) = match flags("ls", args, "la1AhFR") {
        Ok(x) => x,
        Err(e) => return e,
    };
    let long = flags.contains(&'l');
    if operands.is_empty() {
        operands.push(".".into());
    }
    let mut out = String::new();
    let mut status = 0;
    let many = operands.len() > 1;
    for (i, operand) in operands.iter().enumerate() {
        let key = match paths::resolve_shell(operand) {
            Ok(k) => k,
            Err(e) => {
                out.push_str(&format!("ls: {}\n", e.0));
                status = 2;
                continue;
            }
        };
        if let Some(text) = sh.ctx.workspace.files.get(&key) {
            out.push_str(&entry_line(operand, false, text.len(), long));
            continue;
        }
        if !paths::is_dir(sh.ctx.workspace.files.keys(), &key) {
            out.push_str(&format!("ls: cannot access '{operand}': No such file or directory\n"));
            status = 2;
            continue;
        }
        if many {
            out.push_str(&format!("{}{operand}:\n", if i > 0 { "\n" } else { "" }));
        }
        for (name, is_dir) in sh.entries(&key) {
            let full = if key.is_empty() { name.clone() } else { format!("{key}/{name}") };
            let size = sh.ctx.workspace.files.get(&full).map_or(4096, String::len);
            out.push_str(&entry_line(&name, is_dir, size, long));
        }
    }
    Exec { output: out, status, usage_error: status == 2 }
}

fn entry_line(name: &str, is_dir: bool, size: usize, long: bool) -> String {
    match (long, is_dir) {
        (false, false) => format!("{name}\n"),
        (false, true) => format!("{name}/\n"),
        (true, false) => format!("-rw-r--r-- 1 user user {size:>6} {name}\n"),
        (true, true) => format!("drwxr-xr-x 2 user user {size:>6} {name}/\n"),
    }
}

pub fn cat(sh: &mut Shell<'_, '_>, args: &[String]) -> Exec {
    let (flags, operands) = match flags("cat", args, "n") {
        Ok(x) => x,
        Err(e) => return e,
    };
    if operands.is_empty() {
        return Exec::usage("cat: a file operand is required (there is no standard input)".into());
    }
    let mut out = String::new();
    let mut n = 0;
    for path in &operands {
        match sh.file("cat", path) {
            Ok((_, text)) => {
                if flags.contains(&'n') {
                    for line in text.lines() {
                        n += 1;
                        out.push_str(&format!("{n:>6}\t{line}\n"));
                    }
                } else {
                    out.push_str(text);
                }
            }
            Err(message) => return Exec::usage(message),
        }
    }
    Exec::ok(out)
}

/// `head`/`tail` with `-n N`, `-nN`, `-N`, and for tail `-n +N` (from line N).
pub fn head_tail(sh: &mut Shell<'_, '_>, args: &[String], head: bool) -> Exec {
    let program = if head { "head" } else { "tail" };
    let mut count: Option<String> = None;
    let mut operands = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "-n" {
            match it.next() {
                Some(v) => count = Some(v.clone()),
                None => return Exec::usage(format!("{program}: option requires an argument -- 'n'")),
            }
        } else if let Some(v) = arg.strip_prefix("-n") {
            count = Some(v.to_string());
        } else if arg.len() > 1 && arg.starts_with('-') && arg[1..].chars().all(|c| c.is_ascii_digit()) {
            count = Some(arg[1..].to_string());
        } else if arg.starts_with('-') && arg.len() > 1 {
            return Exec::usage(format!("{program}: unsupported option `{arg}` in this shell (supported: -n N, -N)"));
        } else {
            operands.push(arg.clone());
        }
    }
    let count = count.unwrap_or_else(|| "10".into());
    let (from_start, digits) = match count.strip_prefix('+') {
        Some(d) if !head => (true, d),
        _ => (false, count.as_str()),
    };
    let Ok(n) = digits.parse::<usize>() else {
        return Exec::usage(format!("{program}: invalid number of lines: '{count}'"));
    };
    if operands.is_empty() {
        return Exec::usage(format!("{program}: a file operand is required (there is no standard input)"));
    }
    let mut out = String::new();
    for (i, path) in operands.iter().enumerate() {
        let text = match sh.file(program, path) {
            Ok((_, text)) => text,
            Err(message) => return Exec::usage(message),
        };
        if operands.len() > 1 {
            out.push_str(&format!("{}==> {path} <==\n", if i > 0 { "\n" } else { "" }));
        }
        let lines: Vec<&str> = text.lines().collect();
        let chosen: &[&str] = if head {
            &lines[..n.min(lines.len())]
        } else if from_start {
            &lines[n.saturating_sub(1).min(lines.len())..]
        } else {
            &lines[lines.len().saturating_sub(n)..]
        };
        for line in chosen {
            out.push_str(line);
            out.push('\n');
        }
    }
    Exec::ok(out)
}

/// `grep [-n -i -v -c -l -w -F -E -r -R -H -h] [-A N -B N -C N] PATTERN [FILE…]` (Rust regex syntax, close to
/// ERE; basic-regex `\|` is read as alternation). Without files, or with `-r`, it searches
/// the whole repository. Exit 1 when nothing matches.
pub fn grep(sh: &mut Shell<'_, '_>, args: &[String]) -> Exec {
    let mut patterns: Vec<String> = Vec::new();
    let (mut after, mut before) = (0usize, 0usize);
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let valued = ["-e", "-A", "-B", "-C"].into_iter().find(|o| arg.starts_with(o));
        let Some(option) = valued else {
            rest.push(arg.clone());
            continue;
        };
        let value = if arg.len() > 2 {
            arg[2..].to_string()
        } else {
            match it.next() {
                Some(v) => v.clone(),
                None => return Exec::usage(format!("grep: option requires an argument -- '{}'", &option[1..])),
            }
        };
        if option == "-e" {
            patterns.push(value);
            continue;
        }
        let Ok(n) = value.parse::<usize>() else {
            return Exec::usage(format!("grep: {value}: invalid context length argument"));
        };
        match option {
            "-A" => after = n,
            "-B" => before = n,
            _ => (after, before) = (n, n),
        }
    }
    let (flags, mut operands) = match flags("grep", &rest, "niIvclwFErRHhs") {
        Ok(x) => x,
        Err(e) => return e,
    };
    if patterns.is_empty() {
        if operands.is_empty() {
            return Exec::usage("grep: a pattern is required: grep [OPTIONS] PATTERN [FILE...]".into());
        }
        patterns.push(operands.remove(0));
    }
    let pattern = patterns.join("` or `");
    let has = |f: char| flags.contains(&f);
    // Several -e patterns match when any does.
    let alternatives: Vec<String> =
        patterns.iter().map(|p| format!("(?:{})", if has('F') { regex::escape(p) } else { p.replace("\\|", "|") })).collect();
    let source = alternatives.join("|");
    let source = if has('w') { format!(r"\b(?:{source})\b") } else { source };
    let re = match RegexBuilder::new(&source).case_insensitive(has('i')).build() {
        Ok(re) => re,
        Err(e) => return Exec::usage(format!("grep: invalid pattern `{pattern}`: {}", e.to_string().lines().last().unwrap_or(""))),
    };
    // The files to search: each operand (a directory means its files, with -r or not).
    let recursive = has('r') || has('R') || operands.is_empty();
    if operands.is_empty() {
        operands.push(".".into());
    }
    let mut files: Vec<(String, String)> = Vec::new(); // (shown path, key)
    for operand in &operands {
        let key = match paths::resolve_shell(operand) {
            Ok(k) => k,
            Err(e) => return Exec::usage(format!("grep: {}", e.0)),
        };
        if sh.ctx.workspace.files.contains_key(&key) {
            files.push((operand.clone(), key));
        } else if paths::is_dir(sh.ctx.workspace.files.keys(), &key) {
            if !recursive {
                return Exec::usage(format!("grep: {operand}: Is a directory"));
            }
            let prefix = if key.is_empty() { String::new() } else { format!("{key}/") };
            for file in sh.ctx.workspace.files.keys().filter(|f| f.starts_with(&prefix)) {
                let shown =
                    if operand == "." { file.clone() } else { format!("{}/{}", operand.trim_end_matches('/'), &file[prefix.len()..]) };
                files.push((shown, file.clone()));
            }
        } else {
            return Exec::usage(format!("grep: {operand}: No such file or directory"));
        }
    }
    let with_names = (files.len() > 1 || recursive || has('H')) && !has('h');
    let mut out = String::new();
    let mut any = false;
    for (shown, key) in &files {
        let lines: Vec<&str> = sh.ctx.workspace.files[key].lines().collect();
        let hits: Vec<usize> = (0..lines.len()).filter(|i| re.is_match(lines[*i]) != has('v')).collect();
        let count = hits.len();
        any |= count > 0;
        if !(has('c') || has('l')) {
            // Matching lines use `:` after the name and number, context lines `-`; groups
            // that do not touch are separated by `--`, as GNU grep prints them.
            let mut last: Option<usize> = None;
            for &hit in &hits {
                let from = hit.saturating_sub(before).max(last.map_or(0, |l| l + 1));
                let to = (hit + after).min(lines.len().saturating_sub(1));
                if (before > 0 || after > 0) && last.is_some_and(|l| from > l + 1) {
                    out.push_str("--\n");
                }
                for (i, line) in lines.iter().enumerate().take(to.max(hit) + 1).skip(from) {
                    if last.is_some_and(|l| i <= l) {
                        continue;
                    }
                    let sep = if hits.binary_search(&i).is_ok() { ':' } else { '-' };
                    let name = if with_names { format!("{shown}{sep}") } else { String::new() };
                    let number = if has('n') { format!("{}{sep}", i + 1) } else { String::new() };
                    out.push_str(&format!("{name}{number}{line}\n"));
                    last = Some(i);
                }
            }
        }
        if has('l') && count > 0 {
            out.push_str(&format!("{shown}\n"));
        } else if has('c') {
            out.push_str(&if with_names { format!("{shown}:{count}\n") } else { format!("{count}\n") });
        }
    }
    Exec::status(out, if any { 0 } else { 1 })
}

pub fn wc(sh: &mut Shell<'_, '_>, args: &[String]) -> Exec {
    let (flags, operands) = match flags("wc", args, "lwcm") {
        Ok(x) => x,
        Err(e) => return e,
    };
    if operands.is_empty() {
        return Exec::usage("wc: a file operand is required (there is no standard input)".into());
    }
    let all = flags.is_empty();
    let mut out = String::new();
    let mut totals = [0usize; 3];
    for path in &operands {
        let text = match sh.file("wc", path) {
            Ok((_, text)) => text,
            Err(message) => return Exec::usage(message),
        };
        let counts = [text.matches('\n').count(), text.split_whitespace().count(), text.len()];
        for (t, c) in totals.iter_mut().zip(counts) {
            *t += c;
        }
        out.push_str(&wc_line(&counts, &flags, all, path));
    }
    if operands.len() > 1 {
        out.push_str(&wc_line(&totals, &flags, all, "total"));
    }
    Exec::ok(out)
}

fn wc_line(counts: &[usize; 3], flags: &[char], all: bool, name: &str) -> String {
    let mut parts = Vec::new();
    for (i, f) in ['l', 'w', 'c'].iter().enumerate() {
        if all || flags.contains(f) || (*f == 'c' && flags.contains(&'m')) {
            parts.push(format!("{:>7}", counts[i]));
        }
    }
    format!("{} {name}\n", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing::{Repo, failed, ok};

    #[test]
    fn ls_lists_the_repository() {
        let mut repo = Repo::new();
        assert_eq!(ok(repo.bash("ls")), "count_positive.py\ntest_count_positive.py\n");
        ok(repo.call("Write", json!({"file_path": "/repo/pkg/a.py", "content": "A = 1\n"})));
        assert_eq!(ok(repo.bash("ls /repo")), "count_positive.py\npkg/\ntest_count_positive.py\n");
        assert_eq!(ok(repo.bash("ls pkg")), "a.py\n");
        assert!(ok(repo.bash("ls -la")).contains("-rw-r--r-- 1 user user "));
        assert_eq!(ok(repo.bash("ls *.py")), "count_positive.py\ntest_count_positive.py\n");
        assert_eq!(ok(repo.bash("ls test_*")), "test_count_positive.py\n");
        assert!(failed(repo.bash("ls nope")).contains("No such file or directory"));
        assert!(failed(repo.bash("ls -Z")).contains("unsupported option `-Z`"));
    }

    #[test]
    fn cat_head_tail_wc() {
        let mut repo = Repo::new();
        let src = repo.source().to_string();
        assert_eq!(ok(repo.bash("cat count_positive.py")), src);
        assert_eq!(ok(repo.bash("cat /repo/count_positive.py")), src);
        assert!(ok(repo.bash("cat -n count_positive.py")).starts_with("     1\tdef count_positive"));
        assert_eq!(ok(repo.bash("head -n 1 count_positive.py")), "def count_positive(values):\n");
        assert_eq!(ok(repo.bash("head -1 count_positive.py")), "def count_positive(values):\n");
        assert_eq!(ok(repo.bash("tail -n 1 count_positive.py")), "    return count\n");
        assert_eq!(ok(repo.bash("tail -n +7 count_positive.py")), "    return count\n");
        assert_eq!(ok(repo.bash("wc -l count_positive.py")), "      7 count_positive.py\n");
        assert!(ok(repo.bash("wc count_positive.py test_count_positive.py")).ends_with(" total\n"));
        assert!(failed(repo.bash("cat nope.py")).contains("nope.py: No such file or directory"));
        assert!(failed(repo.bash("cat")).contains("file operand"));
        assert!(failed(repo.bash("head -n x count_positive.py")).contains("invalid number"));
        assert!(failed(repo.bash("cat /etc/passwd")).contains("outside the repository"));
    }

    #[test]
    fn grep_searches_files_and_the_repository() {
        let mut repo = Repo::new();
        assert_eq!(ok(repo.bash("grep -n 'v >= 0' count_positive.py")), "5:        if v >= 0:\n");
        assert_eq!(
            ok(repo.bash("grep -rn count_positive .")),
            "count_positive.py:1:def count_positive(values):\n\
             test_count_positive.py:1:from count_positive import count_positive\n\
             test_count_positive.py:5:    assert count_positive([3, -1, 4]) == 2\n"
        );
        assert_eq!(ok(repo.bash("grep -c count count_positive.py")), "4\n");
        assert_eq!(ok(repo.bash("grep -l def *.py")), "count_positive.py\ntest_count_positive.py\n");
        assert_eq!(ok(repo.bash("grep -iw RETURN count_positive.py")), "    return count\n");
        assert_eq!(ok(repo.bash("grep -F '(values)' count_positive.py")), "def count_positive(values):\n");
        assert_eq!(ok(repo.bash("grep -n -A1 'if v' count_positive.py")), "5:        if v >= 0:\n6-            count += 1\n");
        assert_eq!(
            ok(repo.bash("grep -C 1 count count_positive.py")),
            "def count_positive(values):\n    \"\"\"Count the numbers in `values` that are strictly greater than zero.\"\"\"\n    count = 0\n    for v in values:\n        if v >= 0:\n            count += 1\n    return count\n"
        );
        assert_eq!(ok(repo.bash("grep -n -B1 'return' count_positive.py")), "6-            count += 1\n7:    return count\n");
        assert_eq!(ok(repo.bash("grep -n -A0 -e def -e x count_positive.py")), "1:def count_positive(values):\n");
        assert!(failed(repo.bash("grep -A x def count_positive.py")).contains("invalid context length"));
        // No match: exit status 1, a normal outcome.
        assert_eq!(ok(repo.bash("grep zebra count_positive.py")), "Exit code 1");
        assert!(failed(repo.bash("grep '(' count_positive.py")).contains("invalid pattern"));
        assert!(failed(repo.bash("grep -P x count_positive.py")).contains("unsupported option"));
    }

    #[test]
    fn cd_pwd_echo() {
        let mut repo = Repo::new();
        assert_eq!(ok(repo.bash("pwd")), "/repo\n");
        assert_eq!(ok(repo.bash("cd /repo && pwd")), "/repo\n");
        assert!(failed(repo.bash("cd /tmp")).contains("working directory stays /repo"));
        assert_eq!(ok(repo.bash("echo 'hello world'")), "hello world\n");
    }
}
