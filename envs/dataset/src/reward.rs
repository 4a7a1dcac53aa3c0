//! Reward functions by name: how a reply is compared with a line's `answer`.
//!
//! Each is a [`RewardFn`] in an `inventory` registry, so a crate linked into the binary can add
//! its own with [`register_reward!`](crate::register_reward). Built in:
//!
//! | name | the reply's answer | equal when |
//! |---|---|---|
//! | `exact` | the whole reply, trimmed | identical (`case_sensitive = false`: up to case) |
//! | `hash` | the text after the last `####` (GSM8K), first line, trimmed | identical after number normalization |
//! | `numeric` | the last number in the reply | equal to the answer's last number (or within `tolerance`, absolute, when one is set) |
//! | `regex` | capture group 1 (else the match) of the first match of `pattern` | identical after number normalization |
//! | `boxed` | the content of the last `\boxed{…}` (braces balanced) | identical after number normalization |
//!
//! Format rewards (`format: true`) give partial credit for the shape of a reply, never for its
//! answer; they are meant beside a correctness reward in a weighted list (`rewards`), and the
//! env refuses a list with no correctness reward in it:
//!
//! | name | 1 | 0.5 | 0 |
//! |---|---|---|---|
//! | `format-hash` | a `####` line whose text is a number | a `####` line with anything else | no `####` |
//! | `format-boxed` | a closed, non-empty `\boxed{…}` | `\boxed{` empty or unclosed | no `\boxed{` |
//! | `format-number` | the reply ends with a number (a trailing `.` allowed) | a number elsewhere | no number |
//! | `length` | at most `length_target` characters | (linear) | 2 × `length_target` characters or more |
//!
//! Number normalization: `1,234` → `1234`, `3.50` → `3.5`, `+7` → `7`, `2e3` → `2000`, a
//! trailing `.` dropped; text that is not a number is compared as it is, trimmed. Numbers are
//! compared exactly, whatever their size ([`crate::decimal`]): `18446744073709551617` is not
//! `18446744073709551616`, and `0.30000000000000004` is not `0.3` unless a `tolerance` says so.

use regex::Regex;

use crate::decimal::Decimal;

/// Settings the reward functions read (`[env.options]`).
#[derive(Debug, Clone)]
pub struct RewardSettings {
    /// `numeric`: the largest absolute difference that counts as equal; 0: exactly equal.
    pub tolerance: f64,
    pub pattern: Option<Regex>,
    pub case_sensitive: bool,
    /// `length`: the reply length (characters) that still earns the full reward.
    pub length_target: f64,
}

/// One reward function: `score(reply, answer, settings)` in [0, 1].
pub struct RewardFn {
    pub name: &'static str,
    pub about: &'static str,
    pub score: fn(&str, &str, &RewardSettings) -> f64,
    /// A format reward: it scores the reply's shape, not its answer, so it can never be the
    /// correctness component that decides whether an episode is solved.
    pub format: bool,
}

inventory::collect!(RewardFn);

/// Register a reward function for the `dataset` env.
#[macro_export]
macro_rules! register_reward {
    ($name:expr, $about:expr, $score:expr) => {
        $crate::inventory::submit! { $crate::reward::RewardFn { name: $name, about: $about, score: $score, format: false } }
    };
    ($name:expr, $about:expr, $score:expr, format) => {
        $crate::inventory::submit! { $crate::reward::RewardFn { name: $name, about: $about, score: $score, format: true } }
    };
}

/// Every registered reward function, by name.
pub fn all() -> Vec<&'static RewardFn> {
    let mut v: Vec<&'static RewardFn> = inventory::iter::<RewardFn>.into_iter().collect();
    v.sort_by_key(|r| r.name);
    v
}

/// The reward function `name`, or an error listing the valid names.
pub fn get(name: &str) -> Result<&'static RewardFn, String> {
    all().into_iter().find(|r| r.name == name).ok_or_else(|| {
        format!("env.options.reward: no reward function `{name}`; valid: {}", all().iter().map(|r| r.name).collect::<Vec<_>>().join(", "))
    })
}

fn score(equal: bool) -> f64 {
    if equal { 1.0 } else { 0.0 }
}

/// `1,234` → `1234`, `3.50` → `3.5`, `+7` → `7`, `-0` → `0`, exactly at any size; other
/// text trimmed.
pub fn normalize(s: &str) -> String {
    let t = s.trim().trim_end_matches('.').replace(',', "");
    match Decimal::parse(&t) {
        Some(x) => x.to_plain(),
        None => s.trim().to_string(),
    }
}

fn exact(reply: &str, answer: &str, s: &RewardSettings) -> f64 {
    let (r, a) = (reply.trim(), answer.trim());
    score(if s.case_sensitive { r == a } else { r.to_lowercase() == a.to_lowercase() })
}

/// The text after the last `####`, up to the end of its line.
pub fn after_hashes(reply: &str) -> Option<&str> {
    let i = reply.rfind("####")?;
    reply[i + 4..].lines().next().map(str::trim).or(Some(""))
}

fn hash(reply: &str, answer: &str, _: &RewardSettings) -> f64 {
    score(after_hashes(reply).is_some_and(|x| !x.is_empty() && normalize(x) == normalize(answer)))
}

/// Every number in the text, in order (`-3`, `1,234.5`, `2e-3`), exactly.
fn numbers(text: &str) -> Vec<Decimal> {
    static NUMBER: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = NUMBER.get_or_init(|| Regex::new(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?").expect("number regex"));
    re.find_iter(text).filter_map(|m| Decimal::parse(&m.as_str().replace(',', ""))).collect()
}

fn numeric(reply: &str, answer: &str, s: &RewardSettings) -> f64 {
    let Some(want) = numbers(answer).pop() else { return 0.0 };
    let Some(got) = numbers(reply).pop() else { return 0.0 };
    if s.tolerance == 0.0 {
        return score(got == want);
    }
    let tolerance = Decimal::from_f64(s.tolerance).unwrap_or_else(|| Decimal::parse("0").expect("zero"));
    score(got.within(&want, &tolerance))
}

fn regex(reply: &str, answer: &str, s: &RewardSettings) -> f64 {
    let Some(re) = &s.pattern else { return 0.0 };
    let got = re.captures(reply).and_then(|c| c.get(1).or_else(|| c.get(0))).map(|m| m.as_str());
    score(got.is_some_and(|g| normalize(g) == normalize(answer)))
}

/// The content of the last `\boxed{…}`, braces balanced.
pub fn last_boxed(reply: &str) -> Option<&str> {
    let start = reply.rfind("\\boxed{")? + "\\boxed{".len();
    let mut depth = 1;
    for (i, c) in reply[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&reply[start..start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

fn boxed(reply: &str, answer: &str, _: &RewardSettings) -> f64 {
    score(last_boxed(reply).is_some_and(|b| normalize(b) == normalize(answer)))
}

register_reward!("exact", "the whole reply equals the answer (trimmed; `case_sensitive`)", exact);
register_reward!("hash", "the text after the last `####` equals the answer (GSM8K's format)", hash);
register_reward!("numeric", "the last number in the reply is within `tolerance` of the answer", numeric);
register_reward!("regex", "capture group 1 of `pattern`'s first match equals the answer", regex);
register_reward!("boxed", "the content of the last \\boxed{…} equals the answer", boxed);

fn is_number(text: &str) -> bool {
    let t = text.trim().trim_end_matches('.').replace(',', "");
    !t.is_empty() && Decimal::parse(&t).is_some()
}

fn format_hash(reply: &str, _: &str, _: &RewardSettings) -> f64 {
    match after_hashes(reply) {
        Some(x) if is_number(x) => 1.0,
        Some(_) => 0.5,
        None => 0.0,
    }
}

fn format_boxed(reply: &str, _: &str, _: &RewardSettings) -> f64 {
    match last_boxed(reply) {
        Some(b) if !b.trim().is_empty() => 1.0,
        _ if reply.contains("\\boxed{") => 0.5,
        _ => 0.0,
    }
}

fn format_number(reply: &str, _: &str, _: &RewardSettings) -> f64 {
    let last = reply.split_whitespace().next_back().unwrap_or("");
    if is_number(last) {
        1.0
    } else if !numbers(reply).is_empty() {
        0.5
    } else {
        0.0
    }
}

fn length(reply: &str, _: &str, s: &RewardSettings) -> f64 {
    let chars = reply.trim().chars().count() as f64;
    (2.0 - chars / s.length_target).clamp(0.0, 1.0)
}

register_reward!("format-hash", "format credit: a `####` line (0.5), its text a number (1)", format_hash, format);
register_reward!("format-boxed", "format credit: a \\boxed{ (0.5), closed and not empty (1)", format_boxed, format);
register_reward!("format-number", "format credit: a number in the reply (0.5), the reply ends with one (1)", format_number, format);
register_reward!("length", "1 up to `length_target` characters, falling linearly to 0 at twice that", length, format);

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RewardSettings {
        RewardSettings { tolerance: 0.0, pattern: None, case_sensitive: true, length_target: 10.0 }
    }

    fn r(name: &str, reply: &str, answer: &str, s: &RewardSettings) -> f64 {
        (get(name).unwrap().score)(reply, answer, s)
    }

    #[test]
    fn every_reward_function_accepts_the_right_answer_and_rejects_a_wrong_one() {
        let s = settings();
        assert_eq!(r("exact", "  Paris \n", "Paris", &s), 1.0);
        assert_eq!(r("exact", "paris", "Paris", &s), 0.0);
        assert_eq!(r("exact", "paris", "Paris", &RewardSettings { case_sensitive: false, ..s.clone() }), 1.0);
        // GSM8K: the final answer after the last ####, with thousands separators.
        assert_eq!(r("hash", "3 + 4 = 7 apples.\n#### 1,234\n", "1234", &s), 1.0);
        assert_eq!(r("hash", "#### 12 #### 7", "7", &s), 1.0, "the last ####");
        assert_eq!(r("hash", "The answer is 1234", "1234", &s), 0.0, "no ####");
        assert_eq!(r("hash", "####", "0", &s), 0.0, "nothing after ####");
        assert_eq!(r("numeric", "so x = 3.14159 roughly", "3.14159", &s), 1.0);
        assert_eq!(r("numeric", "first 3, then 4", "3", &s), 0.0, "the last number counts");
        assert_eq!(r("numeric", "about 3.1", "3.14", &RewardSettings { tolerance: 0.05, ..s.clone() }), 1.0);
        assert_eq!(r("numeric", "-1,500.5 dollars", "-1500.5", &s), 1.0);
        let re = RewardSettings { pattern: Some(Regex::new(r"(?i)answer:\s*(\S+)").unwrap()), ..s.clone() };
        assert_eq!(r("regex", "Work... Answer: 42.", "42", &re), 1.0);
        assert_eq!(r("regex", "Answer: 41", "42", &re), 0.0);
        assert_eq!(r("regex", "42", "42", &s), 0.0, "no pattern, no match");
        assert_eq!(r("boxed", r"so \boxed{\frac{1}{2}} and", r"\frac{1}{2}", &s), 1.0, "nested braces");
        assert_eq!(r("boxed", r"\boxed{3} no, \boxed{4}", "4", &s), 1.0, "the last box");
        assert_eq!(r("boxed", r"\boxed{4", "4", &s), 0.0, "unclosed");
    }

    #[test]
    fn numbers_are_normalized_and_text_is_not() {
        assert_eq!(normalize(" 1,234 "), "1234");
        assert_eq!(normalize("3.50"), "3.5");
        assert_eq!(normalize("+7."), "7");
        assert_eq!(normalize("-0"), "0");
        assert_eq!(normalize("x = 2"), "x = 2");
        assert_eq!(normalize("inf"), "inf", "not a number, compared as text");
    }

    /// Issue #50: `numeric` and `hash` compared as f64, so a reply of 2^64 earned 1 for an
    /// answer of 2^64 + 1. Integers and decimals compare exactly; tolerance only where set.
    #[test]
    fn numbers_compare_exactly_at_any_size() {
        let s = settings();
        let (p64, p64_1) = ("18446744073709551616", "18446744073709551617");
        for name in ["numeric", "hash", "boxed"] {
            let reply = |x: &str| match name {
                "hash" => format!("#### {x}"),
                "boxed" => format!("\\boxed{{{x}}}"),
                _ => format!("it is {x}"),
            };
            assert_eq!(r(name, &reply(p64), p64_1, &s), 0.0, "{name}: 2^64 for 2^64 + 1");
            assert_eq!(r(name, &reply(p64_1), p64_1, &s), 1.0, "{name}");
            assert_eq!(r(name, &reply("0.30000000000000004"), "0.3", &s), 0.0, "{name}");
            assert_eq!(r(name, &reply("123456789012345678901234567890.25"), "123456789012345678901234567890.250", &s), 1.0, "{name}");
            assert_eq!(r(name, &reply("1.0000000000000000001"), "1", &s), 0.0, "{name}");
        }
        let re = RewardSettings { pattern: Some(Regex::new(r"= (\S+)").unwrap()), ..s.clone() };
        assert_eq!(r("regex", &format!("x = {p64}"), p64_1, &re), 0.0);
        // A tolerance, where one is set, is applied exactly too.
        let loose = RewardSettings { tolerance: 1.0, ..s.clone() };
        assert_eq!(r("numeric", p64, p64_1, &loose), 1.0);
        assert_eq!(r("numeric", "18446744073709551618.5", p64_1, &loose), 0.0);
        assert_eq!(r("numeric", "0.30000000000000004", "0.3", &RewardSettings { tolerance: 1e-9, ..s.clone() }), 1.0);
        // Huge exponents are text, not a way to make the comparison allocate.
        assert_eq!(r("numeric", "1e999999999", "1", &s), 0.0);
        assert_eq!(normalize("1e999999999"), "1e999999999");
    }

    #[test]
    fn an_unknown_reward_names_the_valid_ones() {
        let Err(err) = get("gsm8k") else { panic!("found") };
        assert_eq!(
            err,
            "env.options.reward: no reward function `gsm8k`; valid: boxed, exact, format-boxed, format-hash, format-number, hash, length, numeric, regex"
        );
    }

    #[test]
    fn format_rewards_give_partial_credit_for_the_shape_alone() {
        let s = settings();
        assert_eq!(r("format-hash", "so\n#### 1,234\n", "9", &s), 1.0, "a number after ####, whatever the answer");
        assert_eq!(r("format-hash", "#### seven", "7", &s), 0.5);
        assert_eq!(r("format-hash", "7", "7", &s), 0.0);
        assert_eq!(r("format-boxed", r"\boxed{x+1}", "2", &s), 1.0);
        assert_eq!(r("format-boxed", r"\boxed{}", "2", &s), 0.5);
        assert_eq!(r("format-boxed", r"\boxed{3", "3", &s), 0.5);
        assert_eq!(r("format-boxed", "3", "3", &s), 0.0);
        assert_eq!(r("format-number", "it is 12.", "3", &s), 1.0);
        assert_eq!(r("format-number", "12 apples", "3", &s), 0.5);
        assert_eq!(r("format-number", "none", "3", &s), 0.0);
        assert_eq!(r("length", "short", "", &s), 1.0, "≤ 10 characters");
        assert_eq!(r("length", "fifteen chars!!", "", &s), 0.5);
        assert_eq!(r("length", &"x".repeat(25), "", &s), 0.0);
        for name in ["format-hash", "format-boxed", "format-number", "length"] {
            assert!(get(name).unwrap().format, "{name}");
        }
        assert!(!get("hash").unwrap().format);
    }
}
