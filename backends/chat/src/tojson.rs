//! HF's `tojson` filter: Python `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`. minijinja's built-in escapes `< > & '` as `\u003c`…
//! and prints compactly; HF templates need Python's `", "` / `": "` spacing, raw non-ASCII
//! text and keys in insertion order.

use std::io;

use minijinja::value::{Kwargs, Value};
use minijinja::{Error, ErrorKind};
use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// The filter: `x | tojson`, `x | tojson(indent=2)`, `x | tojson(sort_keys=true)`.
pub fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    kwargs.assert_all_used()?;
    let mut json = serde_json::to_value(value).map_err(|e| Error::new(ErrorKind::BadSerialization, format!("tojson: {e}")))?;
    if sort_keys == Some(true) {
        sort(&mut json);
    }
    let text = dumps(&json, indent, ensure_ascii.unwrap_or(false));
    Ok(Value::from_safe_string(text))
}

/// `json.dumps` of a JSON value, Python's way.
pub fn dumps(value: &serde_json::Value, indent: Option<usize>, ensure_ascii: bool) -> String {
    let mut out = Vec::new();
    let formatter = PyFormatter { indent, ensure_ascii, depth: 0, empty: false };
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut ser).expect("writing JSON to memory cannot fail");
    String::from_utf8(out).expect("JSON is UTF-8")
}

fn sort(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.sort_keys();
            map.values_mut().for_each(sort);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(sort),
        _ => {}
    }
}

/// Separators `", "` and `": "` (`","` and `": "` with an indent, as Python), floats as
/// Python's `repr`, and with `ensure_ascii` every non-ASCII char as `\uXXXX` (surrogate pairs).
struct PyFormatter {
    indent: Option<usize>,
    ensure_ascii: bool,
    depth: usize,
    empty: bool,
}

impl PyFormatter {
    fn newline<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
        if let Some(n) = self.indent {
            w.write_all(b"\n")?;
            for _ in 0..n * self.depth {
                w.write_all(b" ")?;
            }
        }
        Ok(())
    }
    fn open<W: ?Sized + io::Write>(&mut self, w: &mut W, c: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.empty = true;
        w.write_all(c)
    }
    /// `empty` is true only when nothing was written since the matching `open`: any value
    /// written inside (even a nested container, once closed) clears it.
    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, c: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if !std::mem::replace(&mut self.empty, false) {
            self.newline(w)?;
        }
        w.write_all(c)
    }
    fn item<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(if self.indent.is_some() { b"," } else { b", " })?;
        }
        self.newline(w)
    }
}

impl Formatter for PyFormatter {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.empty = false;
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.empty = false;
        Ok(())
    }
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        w.write_all(py_float_repr(value).as_bytes())
    }
    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(w, value as f64)
    }
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        if !self.ensure_ascii {
            return w.write_all(fragment.as_bytes());
        }
        for c in fragment.chars() {
            if c.is_ascii() {
                w.write_all(&[c as u8])?;
            } else {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
            }
        }
        Ok(())
    }
    fn write_char_escape<W: ?Sized + io::Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        // Python writes control characters as lowercase `\u00XX`, like serde_json.
        match escape {
            CharEscape::AsciiControl(byte) => write!(w, "\\u{byte:04x}"),
            other => serde_json::ser::CompactFormatter.write_char_escape(w, other),
        }
    }
}

/// Python's `repr(float)`: shortest round-trip digits, `1.0` for integral values,
/// exponent form `1e+16` from 1e16 up and below 1e-4, `Infinity`/`NaN` as json.dumps writes them.
fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        // Rust's `{:e}` gives the shortest digits: `1e16`, `1.5e-7`; Python: `1e+16`, `1.5e-07`.
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').expect("exponent form");
        let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(value: serde_json::Value, expected: &str) {
        assert_eq!(dumps(&value, None, false), expected);
    }

    #[test]
    fn python_spacing_raw_unicode_and_insertion_order() {
        check(json!({"b": 1, "a": [1, 2, {}], "c": "<é & '>\n\"\u{1}"}), r#"{"b": 1, "a": [1, 2, {}], "c": "<é & '>\n\"\u0001"}"#);
        check(json!([]), "[]");
        check(json!({"x": [], "y": {}}), r#"{"x": [], "y": {}}"#);
    }

    #[test]
    fn floats_as_python_repr() {
        check(json!([1.0, 0.5, 1e16, 1.5e-7, 123456.75, -0.0001]), "[1.0, 0.5, 1e+16, 1.5e-07, 123456.75, -0.0001]");
    }

    #[test]
    fn indent_and_ascii_as_python() {
        let v = json!({"a": [1, "é"], "b": {}});
        assert_eq!(dumps(&v, Some(2), true), "{\n  \"a\": [\n    1,\n    \"\\u00e9\"\n  ],\n  \"b\": {}\n}");
    }
}
