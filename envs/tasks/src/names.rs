//! Name randomization: identifiers replaced by unrelated words, so a name carries no hint
//! about the bug (`largest` becomes `cedar_orbit`).

use crate::rng::Rng;

/// Neutral words: no Python keyword, builtin or common stdlib name among them.
const WORDS: &[&str] = &[
    "acorn", "amber", "basil", "birch", "bramble", "brook", "cedar", "cliff", "cobalt", "comet", "copper", "coral", "delta", "drift",
    "dune", "ember", "fern", "fjord", "flint", "garnet", "glacier", "grove", "harbor", "hazel", "heron", "indigo", "jasper", "juniper",
    "kelp", "knoll", "lagoon", "lark", "lotus", "maple", "marble", "marsh", "meadow", "moss", "nectar", "nutmeg", "ochre", "onyx", "orbit",
    "orchid", "pebble", "plume", "prairie", "quartz", "quill", "raven", "reef", "ridge", "rook", "saffron", "sepia", "shore", "sierra",
    "thistle", "tundra", "umber", "urchin", "velvet", "willow", "wren", "yarrow", "yucca", "zephyr", "zinnia",
];

/// Pick a fresh name for each of `names` (the first, the function, gets two words), avoiding
/// every identifier already present in `texts`.
pub fn fresh_names(names: &[String], texts: &[&str], rng: &mut Rng) -> Vec<(String, String)> {
    let taken: Vec<String> = texts.iter().flat_map(|t| identifiers(t)).collect();
    let mut used: Vec<String> = Vec::new();
    let pick = |rng: &mut Rng, used: &mut Vec<String>| loop {
        let w = WORDS[rng.below(WORDS.len())];
        if !used.iter().any(|u| u == w) && !taken.iter().any(|t| t == w) {
            used.push(w.to_string());
            return w.to_string();
        }
    };
    names
        .iter()
        .enumerate()
        .map(|(i, old)| {
            let new = if i == 0 {
                let (a, b) = (pick(rng, &mut used), pick(rng, &mut used));
                format!("{a}_{b}")
            } else {
                pick(rng, &mut used)
            };
            (old.clone(), new)
        })
        .collect()
}

/// Replace whole identifiers (maximal runs of `[A-Za-z0-9_]`) by their new names.
pub fn rename(text: &str, map: &[(String, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match map.iter().find(|(old, _)| old == word) {
            Some((_, new)) => out.push_str(new),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn identifiers(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_whole_identifiers_only() {
        let map = vec![("best".to_string(), "cedar".to_string()), ("values".to_string(), "moss".to_string())];
        assert_eq!(rename("best = values[0]; best_x = bests(values)", &map), "cedar = moss[0]; best_x = bests(moss)");
    }

    #[test]
    fn fresh_names_are_distinct_and_avoid_existing_words() {
        let names: Vec<String> = ["f", "a", "b"].iter().map(|s| s.to_string()).collect();
        let map = fresh_names(&names, &["amber basil cedar"], &mut Rng::new(1));
        assert!(map[0].1.contains('_'));
        let all: Vec<&str> = map.iter().flat_map(|(_, n)| n.split('_')).collect();
        for (i, w) in all.iter().enumerate() {
            assert!(!["amber", "basil", "cedar"].contains(w));
            assert!(!all[..i].contains(w));
        }
    }
}
