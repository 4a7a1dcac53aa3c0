//! No CLI input makes `arl` panic: the JSON inputs of `score`, `loss eval` and `advantages`,
//! and `grade`'s candidate source, mutated a few hundred times from valid seeds (deterministic:
//! a seeded splitmix64). Every run must end in output or in a one-line error.
//! `ARL_FUZZ_ROUNDS=5000 cargo test -p arl-tests --test integration fuzz` hunts longer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use arl_core::rng::SplitMix64;
use arl_tests::{arl_status, scratch_dir};
use serde_json::{Value, json};

struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values a mutation puts in place of a node: edge numbers, wrong types, empty containers.
fn odd_value(rng: &mut Rng) -> Value {
    let pool = [
        json!(0),
        json!(-1),
        json!(1),
        json!(1.5),
        json!(-0.0),
        json!(1e308),
        json!(-1e308),
        json!(4294967295u64),
        json!(4294967296u64),
        json!(u64::MAX),
        json!(-9223372036854775808i64),
        json!(null),
        json!(true),
        json!("x"),
        json!([]),
        json!([[]]),
        json!({}),
        json!([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
        json!([[1e300, -1e300]]),
    ];
    pool[rng.below(pool.len())].clone()
}

/// One structural mutation somewhere in `v`: replace a node, drop a key or an element, grow
/// or shrink an array.
fn mutate(v: &mut Value, rng: &mut Rng, depth: usize) {
    let depth_stop = depth > 0 && rng.below(8) == 0;
    match v {
        Value::Object(map) if !map.is_empty() && !depth_stop => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.below(keys.len())];
            match rng.below(10) {
                0 => {
                    map.remove(key);
                }
                1 => {
                    map.insert(format!("{key}_extra"), odd_value(rng));
                }
                _ => mutate(map.get_mut(key).unwrap(), rng, depth + 1),
            }
        }
        Value::Array(items) if !items.is_empty() && !depth_stop => match rng.below(10) {
            0 => {
                items.remove(rng.below(items.len()));
            }
            1 => {
                let i = rng.below(items.len());
                let copy = items[i].clone();
                items.push(copy);
            }
            2 => items.push(odd_value(rng)),
            3 => items.iter_mut().for_each(|item| {
                // Empty every inner array (or the array itself when it holds none).
                if let Value::Array(inner) = item {
                    inner.clear()
                }
            }),
            _ => {
                let i = rng.below(items.len());
                mutate(&mut items[i], rng, depth + 1)
            }
        },
        // A number mostly stays a number (an edge one), so the mutation reaches the computation.
        Value::Number(_) if rng.below(3) > 0 => {
            let pool = [json!(0), json!(-1), json!(2), json!(0.5), json!(-0.0), json!(1e308), json!(-1e308), json!(1e-320), json!(700.0)];
            *v = pool[rng.below(pool.len())].clone();
        }
        other => *other = odd_value(rng),
    }
}

/// Text-level damage: cut, delete or insert a character.
fn garble(text: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    match rng.below(3) {
        0 => chars.truncate(rng.below(chars.len() + 1)),
        1 if !chars.is_empty() => {
            chars.remove(rng.below(chars.len()));
        }
        _ => {
            let pool: Vec<char> = "[]{},:\"-0123456789.eE \u{0}é".chars().collect();
            let at = rng.below(chars.len() + 1);
            chars.insert(at, pool[rng.below(pool.len())]);
        }
    }
    chars.into_iter().collect()
}

/// Run `args` with `{input}` replaced by a file holding `text`; it must not panic, and an
/// error must be one line. Returns whether it succeeded.
fn survives(args: &[&str], input: &Path, text: &str) -> bool {
    std::fs::write(input, text).unwrap();
    let input_s = input.to_str().unwrap();
    let args: Vec<&str> = args.iter().map(|a| if *a == "{input}" { input_s } else { a }).collect();
    let result = catch_unwind(AssertUnwindSafe(|| arl_status(&args)));
    let (code, out) = result.unwrap_or_else(|_| panic!("arl {args:?} panicked on input:\n{text}"));
    match out {
        Ok(_) => true,
        Err(e) => {
            assert!(code == 1 || code == 2, "{args:?}: exit {code} for {e}");
            assert_eq!(e.lines().count(), 1, "{args:?} on {text}: the error is one line: {e}");
            false
        }
    }
}

/// `rounds` mutated inputs (`ARL_FUZZ_ROUNDS` overrides it, for a longer hunt by hand).
fn fuzz(name: &str, args: &[&str], seed_doc: Value, rounds: usize) {
    let rounds = std::env::var("ARL_FUZZ_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(rounds);
    let dir = scratch_dir(&format!("fuzz-{name}"));
    let input = dir.join("input.json");
    let mut rng = Rng(SplitMix64(name.len() as u64 * 7919));
    // The seed itself is valid.
    std::fs::write(&input, seed_doc.to_string()).unwrap();
    let input_s = input.to_str().unwrap().to_string();
    let valid: Vec<&str> = args.iter().map(|a| if *a == "{input}" { input_s.as_str() } else { a }).collect();
    assert_eq!(arl_status(&valid).0, 0, "{name}: the seed input runs: {:?}", arl_status(&valid).1);
    let mut ok = 0;
    for round in 0..rounds {
        let mut doc = seed_doc.clone();
        for _ in 0..1 + rng.below(2) {
            mutate(&mut doc, &mut rng, 0);
        }
        let text = if round % 4 == 3 { garble(&doc.to_string(), &mut rng) } else { doc.to_string() };
        ok += survives(args, &input, &text) as usize;
    }
    eprintln!("fuzz {name}: {rounds} mutated inputs, {ok} ran, {} refused", rounds - ok);
    // Not vacuous: the mutations reach both the refusals and the computation.
    assert!(ok > 0 && ok < rounds, "fuzz {name}: {ok} of {rounds} ran");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn score_never_panics_on_mutated_token_files() {
    let args = ["score", "--model", "tiny-vocab512", "--entropy", "--input", "{input}"];
    fuzz("score", &args, json!({"sequences": [[1, 2, 3, 4], [5, 6]], "positions": [[1, 3], [1]]}), 100);
    // Without positions every mutated sequence is scored at every position.
    fuzz("score-all", &args, json!({"sequences": [[1, 2, 3, 4], [5, 6]]}), 100);
}

#[test]
fn loss_eval_never_panics_on_mutated_batches() {
    let seed = json!({
        "log_prob": [[-1.0, -0.5, -2.0], [-0.1, -0.2, -0.3]],
        "old_log_prob": [[-1.1, -0.4, -2.0], [-0.1, -0.25, -0.3]],
        "advantages": [[1.0, 1.0, 1.0], [-0.5, -0.5, -0.5]],
        "mask": [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]],
        "behavior_log_prob": [[-1.0, -0.5, -2.0], [-0.1, -0.2, -0.3]],
    });
    for (loss, extra) in [("grpo", vec![]), ("gspo", vec![]), ("cispo", vec!["--set", "tis.cap=2.0"]), ("dppo-tv", vec![])] {
        let mut args = vec!["loss", "eval", "--loss", loss, "--input", "{input}"];
        args.extend(extra);
        fuzz(&format!("loss-{loss}"), &args, seed.clone(), 80);
    }
}

#[test]
fn advantages_never_panic_on_mutated_rewards() {
    let seed = json!({"rewards": [1.0, 0.0, 0.5, 0.5], "group_ids": [0, 0, 1, 1], "token_counts": [3.0, 4.0, 5.0, 1.0]});
    for name in ["grpo", "rloo", "reinforce++", "drgrpo"] {
        fuzz(&format!("adv-{name}"), &["advantages", "--advantage", name, "--input", "{input}"], seed.clone(), 100);
    }
}

#[test]
fn grade_never_panics_on_mangled_sources() {
    let tasks: Value = serde_json::from_str(&arl_tests::arl(&["tasks", "--env", "edit", "--split", "heldout", "--json"]).unwrap()).unwrap();
    let id = tasks[0]["id"].as_str().unwrap().to_string();
    let dump = scratch_dir("fuzz-grade-dump");
    arl_tests::arl(&["tasks", "--env", "edit", "--split", "heldout", "--dump", dump.to_str().unwrap()]).unwrap();
    let reference = std::fs::read_to_string(dump.join(&id).join("reference.py")).unwrap();
    let dir = scratch_dir("fuzz-grade");
    let input = dir.join("fix.py");
    let mut rng = Rng(SplitMix64(17));
    let args = ["grade", "--env", "edit", "--task", id.as_str(), "--source", "{input}"];
    let mut sources = vec![String::new(), "\u{0}\u{1}".repeat(100), "import os\nos._exit(0)\n".into(), "x".repeat(1 << 16)];
    for _ in 0..8 {
        let mut text = reference.clone();
        for _ in 0..1 + rng.below(4) {
            text = garble(&text, &mut rng);
        }
        sources.push(text);
    }
    let ran = sources.iter().filter(|text| survives(&args, &input, text)).count();
    eprintln!("fuzz grade: {} sources, {ran} graded", sources.len());
    assert!(ran > 0, "the mangled sources were graded, not refused");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&dump).unwrap();
}
