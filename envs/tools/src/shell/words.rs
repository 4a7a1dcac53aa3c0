//! Splitting a command line into words and the few operators the shell supports, with
//! POSIX quoting: '…' keeps everything, "…" allows \" \\ \$ \` escapes, \ escapes outside
//! quotes. Variable expansion, command substitution, pipes, redirections (except the
//! harmless `2>&1`), `||` and `&` are refused with a message.

/// A word, and whether it holds an unquoted `*` or `?` (a glob to expand).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    pub glob: bool,
}

/// One simple command of a chain, and the operator that joins it to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Simple {
    pub words: Vec<Word>,
    /// `Some(true)` for `&&` (run the next only on success), `Some(false)` for `;`.
    pub then: Option<bool>,
}

const UNSUPPORTED_OPS: &str = "pipes (|), redirections (>, <), `||` and background jobs (&) are not supported; \
run one command per call, or chain commands with && or ;";

/// Split `line` into simple commands joined by `&&` or `;`.
pub fn split(line: &str) -> Result<Vec<Simple>, String> {
    let mut commands = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut glob = false;
    let mut chars = line.chars().peekable();
    let finish = |words: &mut Vec<Word>, cur: &mut String, in_word: &mut bool, glob: &mut bool| {
        if *in_word {
            words.push(Word { text: std::mem::take(cur), glob: *glob });
        }
        *in_word = false;
        *glob = false;
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => finish(&mut words, &mut cur, &mut in_word, &mut glob),
            '\n' | ';' => {
                finish(&mut words, &mut cur, &mut in_word, &mut glob);
                if !words.is_empty() {
                    commands.push(Simple { words: std::mem::take(&mut words), then: Some(false) });
                }
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                finish(&mut words, &mut cur, &mut in_word, &mut glob);
                if words.is_empty() {
                    return Err("syntax error near `&&`: a command must come before it".into());
                }
                commands.push(Simple { words: std::mem::take(&mut words), then: Some(true) });
            }
            '2' if !in_word && line_rest_starts(&chars, ">&1") => {
                for _ in 0..3 {
                    chars.next();
                }
            }
            '|' | '&' | '>' | '<' => return Err(UNSUPPORTED_OPS.into()),
            '$' | '`' => {
                return Err("variables and command substitution ($, `) are not supported; write the value out".into());
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => cur.push(ch),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => cur.push(e),
                            Some('\n') => {}
                            Some(other) => {
                                cur.push('\\');
                                cur.push(other);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some('$') | Some('`') => {
                            return Err("variables and command substitution ($, `) are not supported; write the value out".into());
                        }
                        Some(ch) => cur.push(ch),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(ch) => cur.push(ch),
                    None => {}
                }
            }
            ch => {
                in_word = true;
                glob |= ch == '*' || ch == '?';
                cur.push(ch);
            }
        }
    }
    finish(&mut words, &mut cur, &mut in_word, &mut glob);
    if !words.is_empty() {
        commands.push(Simple { words, then: None });
    } else if let Some(last) = commands.last_mut() {
        if last.then == Some(true) {
            return Err("syntax error: `&&` at the end of the command".into());
        }
        last.then = None;
    }
    Ok(commands)
}

fn line_rest_starts(chars: &std::iter::Peekable<std::str::Chars<'_>>, text: &str) -> bool {
    chars.clone().take(text.len()).eq(text.chars())
}

/// Shell glob match of one path component (`*`, `?`; no brackets).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        split(line).unwrap().into_iter().map(|s| s.words.into_iter().map(|w| w.text).collect()).collect()
    }

    #[test]
    fn quoting_and_chains() {
        assert_eq!(words("grep -n 'def  x' f.py"), vec![vec!["grep", "-n", "def  x", "f.py"]]);
        assert_eq!(words(r#"python -c "print(\"hi\")""#), vec![vec!["python", "-c", r#"print("hi")"#]]);
        assert_eq!(words("cd /repo && pytest -q 2>&1; ls"), vec![vec!["cd", "/repo"], vec!["pytest", "-q"], vec!["ls"]]);
        let chain = split("a && b; c").unwrap();
        assert_eq!(chain.iter().map(|s| s.then).collect::<Vec<_>>(), vec![Some(true), Some(false), None]);
        assert_eq!(split("ls *.py").unwrap()[0].words[1], Word { text: "*.py".into(), glob: true });
        assert_eq!(split("ls '*.py'").unwrap()[0].words[1], Word { text: "*.py".into(), glob: false });
    }

    #[test]
    fn unsupported_syntax_is_refused_with_a_reason() {
        for line in ["cat f.py | head", "echo x > f.py", "a || b", "sleep 1 &", "cat < f"] {
            assert!(split(line).unwrap_err().contains("not supported"), "{line}");
        }
        assert!(split("echo $HOME").unwrap_err().contains("variables"));
        assert!(split("echo 'abc").unwrap_err().contains("unterminated"));
        assert!(split("ls &&").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("*.py", "f.py") && glob_match("test_*", "test_f.py") && glob_match("?.py", "a.py"));
        assert!(!glob_match("*.py", "f.pyc") && !glob_match("test_*", "f.py"));
    }
}
