//! The JSONL file: one task per line, read whole before anything loads; a bad line is refused
//! with its number and what is wrong.

use std::path::Path;

use arl_core::{Message, Role, Split, Task};
use serde_json::{Value, json};

/// One line: its messages (the prompt) and the answer, as text.
#[derive(Debug, Clone)]
pub struct Item {
    pub id: String,
    pub messages: Vec<Message>,
    pub answer: String,
    /// The line's optional `"solution"`: the worked reply a few-shot example shows (a task
    /// line's is not used).
    pub solution: Option<String>,
    /// The 1-based line number in its file.
    pub line: usize,
}

impl Item {
    pub fn task(&self, split: Split) -> Task {
        Task { id: self.id.clone(), family: "dataset".into(), split, data: json!({ "messages": self.messages, "answer": self.answer }) }
    }
}

/// Read every line of `path` (the file of config key `key`, named in its errors); `system`
/// goes before each `prompt` line.
pub fn read(path: &Path, key: &str, system: Option<&str>) -> Result<Vec<Item>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{key} {}: {e}", path.display()))?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "line".into());
    let mut items = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |what: String| format!("{} line {}: {what}", path.display(), i + 1);
        let v: Value = serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        let obj = v.as_object().ok_or_else(|| at("not a JSON object; want {\"prompt\" or \"messages\", \"answer\"}".into()))?;
        let answer = match obj.get("answer") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => return Err(at("`answer` must be a string or a number".into())),
            None => return Err(at("no `answer`".into())),
        };
        let messages = match (obj.get("prompt"), obj.get("messages")) {
            (Some(Value::String(p)), None) => {
                let mut m: Vec<Message> = system.map(Message::system).into_iter().collect();
                m.push(Message::user(p.clone()));
                m
            }
            (None, Some(m)) => {
                let m: Vec<Message> = serde_json::from_value(m.clone()).map_err(|e| at(format!("`messages`: {e}")))?;
                match m.last() {
                    None => return Err(at("`messages` is empty".into())),
                    Some(last) if last.role == Role::Assistant => {
                        return Err(at("`messages` ends with an assistant message; the model writes that turn".into()));
                    }
                    Some(_) => m,
                }
            }
            (Some(_), Some(_)) => return Err(at("both `prompt` and `messages`; give one".into())),
            (Some(_), None) => return Err(at("`prompt` must be a string".into())),
            (None, None) => return Err(at("no `prompt` or `messages`".into())),
        };
        let id = match obj.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => format!("{stem}-{}", i + 1),
        };
        if !ids.insert(id.clone()) {
            return Err(at(format!("id `{id}` appears twice")));
        }
        let solution = match obj.get("solution") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(at("`solution` must be a string".into())),
        };
        items.push(Item { id, messages, answer, solution, line: i + 1 });
    }
    if items.is_empty() {
        return Err(format!("{key} {}: no tasks in the file", path.display()));
    }
    Ok(items)
}

/// A seeded `frac` of the items held out (at least one when `frac` > 0), the rest for training.
pub fn split(mut items: Vec<Item>, frac: f64, seed: u64) -> (Vec<Item>, Vec<Item>) {
    arl_core::rng::SplitMix64(seed ^ 0x5851_f42d_4c95_7f2d).shuffle(&mut items);
    let n = if frac > 0.0 { ((items.len() as f64 * frac).round() as usize).max(1) } else { 0 };
    let train = items.split_off(n.min(items.len()));
    (train, items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("arl-dataset-{}-{name}.jsonl", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn prompts_and_conversations_are_read_with_their_answers() {
        let p = file(
            "ok",
            "{\"prompt\": \"2+2?\", \"answer\": 4}\n\n{\"id\": \"q2\", \"messages\": [{\"role\": \"user\", \"content\": \"Capital of France?\"}], \"answer\": \"Paris\"}\n",
        );
        let items = read(&p, "env.options.path", Some("Be brief.")).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(
            (items[0].id.as_str(), items[0].answer.as_str(), items[0].messages.len()),
            (&*format!("{}-1", p.file_stem().unwrap().to_string_lossy()), "4", 2)
        );
        assert_eq!(items[0].messages[0].role, Role::System);
        assert_eq!((items[1].id.as_str(), items[1].messages.len()), ("q2", 1), "no system before a conversation");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_bad_line_is_refused_with_its_number() {
        let cases = [
            ("{\"prompt\": \"a\", \"answer\": 1}\n{\"prompt\": \"b\"}\n", "line 2: no `answer`"),
            ("{\"prompt\": \"a\", \"answer\": 1}\nnot json\n", "line 2: not JSON"),
            ("[1, 2]\n", "line 1: not a JSON object"),
            ("{\"answer\": 1}\n", "line 1: no `prompt` or `messages`"),
            ("{\"prompt\": \"a\", \"messages\": [], \"answer\": 1}\n", "line 1: both `prompt` and `messages`"),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}], \"answer\": 1}\n",
                "line 1: `messages` ends with an assistant message",
            ),
            ("{\"messages\": [{\"role\": \"robot\"}], \"answer\": 1}\n", "line 1: `messages`: unknown variant `robot`"),
            ("{\"id\": 1, \"prompt\": \"a\", \"answer\": [1]}\n", "line 1: `answer` must be a string or a number"),
            (
                "{\"id\": 1, \"prompt\": \"a\", \"answer\": 1}\n{\"id\": 1, \"prompt\": \"b\", \"answer\": 2}\n",
                "line 2: id `1` appears twice",
            ),
            ("\n", "no tasks in the file"),
        ];
        for (k, (text, says)) in cases.iter().enumerate() {
            let p = file(&format!("bad{k}"), text);
            let err = read(&p, "env.options.path", None).unwrap_err();
            assert!(err.contains(says), "{err} (want {says})");
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn the_split_is_seeded_disjoint_and_complete() {
        let items: Vec<Item> =
            (0..50).map(|i| Item { id: format!("t{i}"), messages: vec![], answer: i.to_string(), solution: None, line: i + 1 }).collect();
        let (train, held) = split(items.clone(), 0.2, 7);
        assert_eq!((train.len(), held.len()), (40, 10));
        let (train2, held2) = split(items.clone(), 0.2, 7);
        assert_eq!(held.iter().map(|i| &i.id).collect::<Vec<_>>(), held2.iter().map(|i| &i.id).collect::<Vec<_>>());
        let mut all: Vec<String> = train2.iter().chain(&held2).map(|i| i.id.clone()).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 50);
        let (_, other) = split(items, 0.2, 8);
        assert_ne!(
            held.iter().map(|i| &i.id).collect::<Vec<_>>(),
            other.iter().map(|i| &i.id).collect::<Vec<_>>(),
            "another seed, another split"
        );
    }
}
