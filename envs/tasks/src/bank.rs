//! The authored templates: one bug each, in `bank/<family>.txt` (format described at the
//! top of `bank/minmax.txt`), parsed once and checked by tests.

use std::sync::OnceLock;

use serde_json::Value;

/// The bug families, in display order.
pub const FAMILIES: [&str; 8] = ["minmax", "range", "compare", "zero", "init", "operator", "index", "logic"];

const FILES: [&str; 8] = [
    include_str!("../bank/minmax.txt"),
    include_str!("../bank/range.txt"),
    include_str!("../bank/compare.txt"),
    include_str!("../bank/zero.txt"),
    include_str!("../bank/init.txt"),
    include_str!("../bank/operator.txt"),
    include_str!("../bank/index.txt"),
    include_str!("../bank/logic.txt"),
];

/// A replacement of one exact snippet of the buggy source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replace {
    pub old: String,
    pub new: String,
}

/// One hidden test: arguments (a JSON array) and the expected return value.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub args: Value,
    pub expected: Value,
}

/// One authored bug: everything with its original (unrandomized) names.
#[derive(Clone, Debug)]
pub struct Template {
    /// `family/name`, e.g. `minmax/largest`.
    pub id: String,
    pub family: String,
    pub heldout: bool,
    /// Identifiers name randomization replaces; the function's name first.
    pub names: Vec<String>,
    pub source: String,
    pub fix: Replace,
    pub distractors: Vec<Replace>,
    /// Plain `test_*` functions (the import line is added when a task is built).
    pub public: String,
    pub hidden: Vec<Case>,
}

impl Template {
    pub fn function(&self) -> &str {
        &self.names[0]
    }
}

/// Every template, parsed once. Panics on a malformed bank file (a build-time asset; the
/// unit tests below parse it on every `cargo test`).
pub fn templates() -> &'static [Template] {
    static BANK: OnceLock<Vec<Template>> = OnceLock::new();
    BANK.get_or_init(|| FILES.iter().flat_map(|text| parse(text).unwrap_or_else(|e| panic!("task bank: {e}"))).collect())
}

/// Parse one bank file.
pub fn parse(text: &str) -> Result<Vec<Template>, String> {
    let mut out = Vec::new();
    for block in text.split("\n=== ").skip(1) {
        let (header, body) = block.split_once('\n').ok_or("empty template block")?;
        let mut words = header.split_whitespace();
        let id = words.next().ok_or("template without id")?.to_string();
        let heldout = words.next() == Some("heldout");
        let family = id.split_once('/').ok_or_else(|| format!("{id}: id must be family/name"))?.0.to_string();
        let (names_line, rest) = body.split_once('\n').ok_or_else(|| format!("{id}: no names"))?;
        let names: Vec<String> = names_line
            .strip_prefix("names:")
            .ok_or_else(|| format!("{id}: second line must be `names: …`"))?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let mut source = None;
        let mut fix = None;
        let mut distractors = Vec::new();
        let mut public = None;
        let mut hidden = Vec::new();
        for section in rest.split("--- ").filter(|s| !s.trim().is_empty()) {
            let (kind, content) = section.split_once('\n').unwrap_or((section, ""));
            let content = content.trim_end().to_string() + "\n";
            match kind.trim() {
                "source" => source = Some(content),
                "fix" => fix = Some(replace(&id, &content)?),
                "distractor" => distractors.push(replace(&id, &content)?),
                "public" => public = Some(content),
                "hidden" => {
                    for line in content.lines().filter(|l| !l.trim().is_empty()) {
                        let (args, expected) = line.split_once(" => ").ok_or_else(|| format!("{id}: hidden case `{line}` needs ` => `"))?;
                        let json = |s: &str| serde_json::from_str::<Value>(s.trim()).map_err(|e| format!("{id}: `{s}` is not JSON: {e}"));
                        let args = json(args)?;
                        if !args.is_array() {
                            return Err(format!("{id}: hidden args `{line}` must be a JSON array"));
                        }
                        hidden.push(Case { args, expected: json(expected)? });
                    }
                }
                other => return Err(format!("{id}: unknown section `{other}`")),
            }
        }
        let missing = |what: &str| format!("{id}: missing --- {what}");
        out.push(Template {
            family,
            heldout,
            names,
            source: source.ok_or_else(|| missing("source"))?,
            fix: fix.ok_or_else(|| missing("fix"))?,
            distractors,
            public: public.ok_or_else(|| missing("public"))?,
            hidden,
            id,
        });
    }
    Ok(out)
}

fn replace(id: &str, content: &str) -> Result<Replace, String> {
    let line = content.trim_end_matches('\n');
    let (old, new) = line.split_once(" => ").ok_or_else(|| format!("{id}: edit `{line}` needs ` => `"))?;
    Ok(Replace { old: old.to_string(), new: new.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bank_has_at_least_forty_templates_over_eight_families() {
        let all = templates();
        assert!(all.len() >= 40, "{} templates", all.len());
        for family in FAMILIES {
            let n = all.iter().filter(|t| t.family == family).count();
            assert!(n >= 5, "family {family} has {n} templates");
        }
        assert!(all.iter().all(|t| FAMILIES.contains(&t.family.as_str())));
        let mut ids: Vec<_> = all.iter().map(|t| &t.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "template ids are unique");
    }

    #[test]
    fn every_edit_matches_exactly_once_and_templates_are_complete() {
        for t in templates() {
            for op in std::iter::once(&t.fix).chain(&t.distractors) {
                assert_eq!(t.source.matches(&op.old).count(), 1, "{}: `{}` must occur once", t.id, op.old);
                assert_ne!(op.old, op.new, "{}", t.id);
            }
            assert!(t.distractors.len() >= 2, "{}: two distractors", t.id);
            assert!(t.hidden.len() >= 4, "{}: four hidden cases", t.id);
            assert!(t.public.contains("def test_"), "{}", t.id);
            assert!(t.source.starts_with(&format!("def {}(", t.function())), "{}", t.id);
        }
    }

    #[test]
    fn the_heldout_split_is_balanced_across_families() {
        for family in FAMILIES {
            let held = templates().iter().filter(|t| t.family == family && t.heldout).count();
            assert_eq!(held, 2, "family {family}");
        }
    }

    #[test]
    fn malformed_bank_text_is_rejected_with_the_template_id() {
        let err = parse("\n=== fam/x\nnames: f\n--- source\ndef f(): pass\n--- fix\nno arrow here\n").unwrap_err();
        assert!(err.contains("fam/x") && err.contains("=>"), "{err}");
    }
}
