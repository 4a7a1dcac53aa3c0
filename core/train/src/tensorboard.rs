//! TensorBoard event files (`output.tensorboard`): every number of a step's `metrics.jsonl`
//! line as a scalar at that step (nested objects as `rewards/hash`, `finish/length`), readable by
//! `tensorboard --logdir DIR`.
//!
//! The format is small enough to write by hand, which keeps protobuf code generation out of the
//! build: a file of TFRecords (length, masked CRC-32C of the length, payload, masked CRC-32C of
//! the payload), each payload an `Event` protobuf — first `{wall_time, file_version:
//! "brain.Event:2"}`, then per step `{wall_time, step, summary {value {tag, simple_value}}…}`.
//! A run's file is named after its run id, so a resume replaces it and rewrites the steps it
//! keeps, as it rewrites `metrics.jsonl`.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::metrics::StepMetrics;

/// One run's event file, open for appending steps.
pub struct EventWriter {
    file: File,
    path: PathBuf,
}

impl EventWriter {
    /// Create `dir` if needed and start this run's event file there, removing the file an
    /// earlier start of the same run (`run_id`) wrote.
    pub fn create(dir: &Path, run_id: Option<&str>) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let suffix = format!(".arl-{}", run_id.unwrap_or("run"));
        if run_id.is_some() {
            for entry in std::fs::read_dir(dir)? {
                let name = entry?.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("events.out.tfevents.") && name.ends_with(&suffix) {
                    std::fs::remove_file(dir.join(&*name))?;
                }
            }
        }
        let now = wall_time();
        let path = dir.join(format!("events.out.tfevents.{}{suffix}", now as u64));
        let mut writer = Self { file: File::create(&path)?, path };
        let mut event = Vec::new();
        put_double(&mut event, 1, now);
        put_bytes(&mut event, 3, b"brain.Event:2");
        writer.record(&event)?;
        Ok(writer)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every scalar of the step's `metrics.jsonl` line, at its step.
    pub fn step(&mut self, m: &StepMetrics) -> io::Result<()> {
        let value = serde_json::to_value(m).expect("metrics serialize");
        let mut summary = Vec::new();
        for (tag, x) in scalars(&value) {
            let mut v = Vec::new();
            put_bytes(&mut v, 1, tag.as_bytes());
            put_float(&mut v, 2, x as f32);
            put_bytes(&mut summary, 1, &v);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time());
        put_varint(&mut event, 2 << 3); // step: int64, wire type 0
        put_varint(&mut event, u64::from(m.step));
        put_bytes(&mut event, 5, &summary);
        self.record(&event)?;
        self.file.flush()
    }

    fn record(&mut self, payload: &[u8]) -> io::Result<()> {
        let len = (payload.len() as u64).to_le_bytes();
        let mut out = Vec::with_capacity(payload.len() + 16);
        out.extend_from_slice(&len);
        out.extend_from_slice(&masked_crc(&len).to_le_bytes());
        out.extend_from_slice(payload);
        out.extend_from_slice(&masked_crc(payload).to_le_bytes());
        self.file.write_all(&out)
    }
}

/// The numbers of a metrics line as `(tag, value)`: nested keys joined by `/`, array
/// elements by their index; `step` (the event's own step), strings and nulls left out.
pub fn scalars(line: &Value) -> Vec<(String, f64)> {
    fn walk(tag: String, v: &Value, out: &mut Vec<(String, f64)>) {
        match v {
            Value::Number(n) => out.extend(n.as_f64().map(|x| (tag, x))),
            Value::Bool(b) => out.push((tag, f64::from(u8::from(*b)))),
            Value::Object(map) => map.iter().for_each(|(k, v)| walk(join(&tag, k), v, out)),
            Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| walk(join(&tag, &i.to_string()), v, out)),
            Value::String(_) | Value::Null => {}
        }
    }
    fn join(tag: &str, key: &str) -> String {
        if tag.is_empty() { key.to_string() } else { format!("{tag}/{key}") }
    }
    let mut out = Vec::new();
    if let Value::Object(map) = line {
        map.iter().filter(|(k, _)| k.as_str() != "step").for_each(|(k, v)| walk(k.clone(), v, &mut out));
    }
    out
}

/// Refuse, before anything loads, a directory the event file cannot be written in: `dir`
/// itself, or (not there yet) the nearest folder above it that exists, must be a directory
/// this process can create a file in. Nothing is left behind.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let mut at = dir.to_path_buf();
    loop {
        match std::fs::metadata(&at) {
            Ok(md) if md.is_dir() => break,
            Ok(_) => {
                return Err(format!("{}: {} is not a directory; name a directory to write event files in", dir.display(), at.display()));
            }
            // Not there, or a path through a file (whose parent is then named).
            Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => {
                at = match at.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                    _ => PathBuf::from("."),
                };
            }
            Err(e) => return Err(format!("{}: {}: {e}; name a directory you can write", dir.display(), at.display())),
        }
    }
    let probe = at.join(format!(".arl-write-check-{}", std::process::id()));
    match File::create(&probe) {
        Ok(_) => std::fs::remove_file(&probe).map_err(|e| format!("{}: {e}", probe.display())),
        Err(e) => Err(format!("{}: cannot write in {}: {e}; name a directory you can write", dir.display(), at.display())),
    }
}

fn wall_time() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// Field `field` as a length-delimited value (wire type 2): strings and messages.
fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_varint(out, field << 3 | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Field `field` as a `double` (wire type 1).
fn put_double(out: &mut Vec<u8>, field: u64, x: f64) {
    put_varint(out, field << 3 | 1);
    out.extend_from_slice(&x.to_le_bytes());
}

/// Field `field` as a `float` (wire type 5).
fn put_float(out: &mut Vec<u8>, field: u64, x: f32) {
    put_varint(out, field << 3 | 5);
    out.extend_from_slice(&x.to_le_bytes());
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit: event files are small.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// TFRecord's masked CRC: rotated right by 15 bits plus a constant.
fn masked_crc(data: &[u8]) -> u32 {
    crc32c(data).rotate_right(15).wrapping_add(0xA282_EAD8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_its_check_value() {
        // The standard check value of CRC-32C, and RFC 3720's 32 bytes of zeros.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn protobuf_fields_are_encoded_as_the_wire_format_says() {
        let mut out = Vec::new();
        put_varint(&mut out, 300);
        assert_eq!(out, [0xAC, 0x02]);
        let mut v = Vec::new();
        put_bytes(&mut v, 1, b"loss");
        put_float(&mut v, 2, 1.5);
        assert_eq!(v, [0x0A, 4, b'l', b'o', b's', b's', 0x15, 0x00, 0x00, 0xC0, 0x3F]);
    }

    #[test]
    fn every_number_of_a_metrics_line_is_a_scalar_but_the_step() {
        let line = serde_json::json!({"step": 3, "loss": 0.5, "ratio_mean": null, "rewards": {"hash": 0.25},
            "finish": {"length": 2}, "tasks": ["a"], "off_policy": {"staleness": {"1": 4}}});
        let mut got = scalars(&line);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [("finish/length", 2.0), ("loss", 0.5), ("off_policy/staleness/1", 4.0), ("rewards/hash", 0.25)];
        assert_eq!(got, want.map(|(t, x)| (t.to_string(), x)));
    }

    #[test]
    fn a_resumed_run_replaces_its_own_event_file_and_no_other() {
        let dir = std::env::temp_dir().join(format!("arl-tb-resume-{}", std::process::id()));
        let names = || {
            let mut n: Vec<String> =
                std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            n.sort();
            n
        };
        let other = EventWriter::create(&dir, Some("b")).unwrap();
        EventWriter::create(&dir, Some("a")).unwrap().step(&StepMetrics { step: 1, ..Default::default() }).unwrap();
        let again = EventWriter::create(&dir, Some("a")).unwrap();
        let files = names();
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files.iter().any(|f| dir.join(f) == again.path()) && files.iter().any(|f| dir.join(f) == other.path()), "{files:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_that_cannot_be_written_is_refused() {
        let root = std::env::temp_dir().join(format!("arl-tb-check-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let file = root.join("a-file");
        std::fs::write(&file, "").unwrap();
        let err = check_dir(&file.join("tb")).unwrap_err();
        assert!(err.contains("a-file is not a directory") && err.lines().count() == 1, "{err}");
        check_dir(&root.join("new/deeper")).unwrap();
        assert!(!root.join("new").exists(), "the check creates nothing");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
