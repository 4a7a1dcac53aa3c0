//! `output.tensorboard` (`--tensorboard DIR`): the event files read back by TensorBoard's own
//! reader (`EventAccumulator`, from `scripts/setup/tensorboard.sh`), which checks every
//! record's CRC, hold every number of `metrics.jsonl` at its step; a directory that cannot be
//! written is refused before anything loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use arl_tests::{arl, arl_status, scratch_dir};

const LINES: &str = r#"{"prompt": "What is 2 + 3? End with #### and the answer.", "answer": 5}
{"prompt": "What is 10 * 4? End with #### and the answer.", "answer": 40}
{"prompt": "What is 7 - 2? End with #### and the answer.", "answer": 5}
{"prompt": "What is 9 + 9? End with #### and the answer.", "answer": 18}
{"prompt": "What is 6 / 3? End with #### and the answer.", "answer": 2}
"#;

/// The reader's site-packages and the python3 its numpy wheel was downloaded for.
fn reader() -> (PathBuf, String) {
    let dir = PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/arl/assets/tensorboard");
    let python = std::fs::read_to_string(dir.join("python")).unwrap_or_default();
    assert!(
        dir.join("site-packages/tensorboard").is_dir() && !python.is_empty(),
        "no TensorBoard in {}; run scripts/setup/tensorboard.sh",
        dir.display()
    );
    (dir.join("site-packages"), python.trim().to_string())
}

/// `{tag: [[step, value], …]}` as TensorBoard's `EventAccumulator` reads `dir`.
fn read_scalars(dir: &Path) -> BTreeMap<String, Vec<(u64, f64)>> {
    let (site, python) = reader();
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[2], size_guidance={"scalars": 0})
acc.Reload()
print(json.dumps({t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}))
"#;
    let out = Command::new(&python).args(["-I", "-S", "-B", "-c", script]).arg(&site).arg(dir).output().expect("python3 runs");
    assert!(out.status.success(), "the reader failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the reader's JSON")
}

/// The numbers of a metrics line, keyed as a path (`rewards/hash`), the step left out.
fn numbers(line: &serde_json::Value) -> BTreeMap<String, f64> {
    fn walk(path: String, v: &serde_json::Value, out: &mut BTreeMap<String, f64>) {
        match v {
            serde_json::Value::Number(n) => {
                out.insert(path, n.as_f64().unwrap());
            }
            serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| walk(format!("{path}/{k}"), v, out)),
            serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(format!("{path}/{i}"), v, out)),
            _ => {}
        }
    }
    let mut out = BTreeMap::new();
    for (k, v) in line.as_object().unwrap() {
        if k != "step" {
            walk(k.clone(), v, &mut out);
        }
    }
    out
}

#[test]
fn every_number_of_metrics_jsonl_is_a_tensorboard_scalar_at_its_step() {
    let root = scratch_dir("tensorboard");
    let data = root.join("tasks.jsonl");
    std::fs::write(&data, LINES).unwrap();
    let (out, tb) = (root.join("run"), root.join("tb/run"));
    let path = format!("env.options.path={:?}", data.to_str().unwrap());
    let rewards = r#"env.options.rewards=[{name="hash", weight=1.0}, {name="format-hash", weight=0.2}]"#;
    let mut args = vec!["run", "--env", "dataset", "--set", &path, "--set", rewards, "--model", "tiny", "--steps", "2"];
    args.extend(["--prompts", "2", "--group-size", "2", "--eval-n", "0", "--set", "env.options.max_new_tokens=4"]);
    args.extend(["--set", "output.checkpoints=false", "--out", out.to_str().unwrap(), "--tensorboard", tb.to_str().unwrap()]);
    let log = arl(&args).unwrap();
    assert!(log.contains("tensorboard: "), "{log}");
    let scalars = read_scalars(&tb);
    let mut want: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for line in std::fs::read_to_string(out.join("metrics.jsonl")).unwrap().lines() {
        let m: serde_json::Value = serde_json::from_str(line).unwrap();
        let step = m["step"].as_u64().unwrap();
        for (tag, x) in numbers(&m) {
            want.entry(tag).or_default().push((step, x));
        }
    }
    assert!(want.contains_key("rewards/hash") && want.contains_key("rewards/format-hash"), "{want:?}");
    assert!(want.contains_key("reward_mean") && want.contains_key("loss"), "{want:?}");
    assert_eq!(scalars.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "the same tags");
    for (tag, points) in &want {
        let got = &scalars[tag];
        assert_eq!(got.len(), points.len(), "{tag}: {got:?} vs {points:?}");
        for (&(step, x), &(s, y)) in points.iter().zip(got) {
            // Scalars are f32 in the event file (the reader's JSON may round the last digit).
            let close = ((x as f32) as f64 - y).abs() <= 1e-12 * y.abs().max(1.0);
            assert!(s == step && close, "{tag}: step {step} value {x} read back as step {s} value {y}");
        }
    }
}

#[test]
fn a_tracker_directory_that_cannot_be_written_is_refused_before_anything_loads() {
    let root = scratch_dir("tensorboard-bad");
    let data = root.join("tasks.jsonl");
    std::fs::write(&data, LINES).unwrap();
    let out = root.join("run");
    let path = format!("env.options.path={:?}", data.to_str().unwrap());
    let under_a_file = data.join("tb");
    let args = ["run", "--env", "dataset", "--set", &path, "--model", "tiny", "--out", out.to_str().unwrap()];
    let mut argv = args.to_vec();
    argv.extend(["--tensorboard", under_a_file.to_str().unwrap()]);
    let (code, result) = arl_status(&argv);
    let err = result.expect_err("must fail");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("config key `output.tensorboard`") && err.contains("tasks.jsonl is not a directory"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!out.exists(), "nothing written");
}
