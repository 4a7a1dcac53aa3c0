//! Reading a run configuration: a TOML file, then overrides (flags and `--set`), then
//! serde with `deny_unknown_fields`, reporting the dotted key of any error.

use std::path::Path;

use toml::{Table, Value};

use super::RunConfig;
use crate::ConfigError;

/// Dotted-key overrides applied over the config file, in order (later wins).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    entries: Vec<(String, Value)>,
}

impl Overrides {
    /// Set `key` (dotted, e.g. `trainer.steps`) to a typed value.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) -> &mut Self {
        self.entries.push((key.to_string(), value.into()));
        self
    }

    /// Add a `--set key=value` argument; the value is read as a TOML value (`3`, `1e-6`,
    /// `true`, `"text"`, `[1, 2]`), or taken as a plain string when it is not one.
    pub fn push_set(&mut self, arg: &str) -> Result<&mut Self, ConfigError> {
        let (key, value) = parse_set(arg)?;
        self.entries.push((key, value));
        Ok(self)
    }

    fn apply(&self, table: &mut Table) -> Result<(), ConfigError> {
        for (key, value) in &self.entries {
            let mut parts: Vec<&str> = key.split('.').collect();
            let last = parts.pop().expect("split yields at least one part");
            let mut node = &mut *table;
            for (i, part) in parts.iter().enumerate() {
                let entry = node.entry(part.to_string()).or_insert_with(|| Value::Table(Table::new()));
                node = entry.as_table_mut().ok_or_else(|| ConfigError::Invalid {
                    key: parts[..=i].join("."),
                    message: format!("is a value, not a section, so `{key}` cannot be set"),
                })?;
            }
            // A table merges into a table already there (`--lora` adds `[lora]` without
            // dropping the keys a config file set in it); anything else replaces.
            match (node.get_mut(last), value) {
                (Some(Value::Table(have)), Value::Table(add)) => have.extend(add.clone()),
                _ => {
                    node.insert(last.to_string(), value.clone());
                }
            }
        }
        Ok(())
    }
}

/// Split `key=value` and type the value.
pub fn parse_set(arg: &str) -> Result<(String, Value), ConfigError> {
    let bad = |message: &str| ConfigError::Override { arg: arg.to_string(), message: message.to_string() };
    let (key, raw) = arg.split_once('=').ok_or_else(|| bad("expected key=value, e.g. trainer.steps=10"))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|p| p.is_empty()) {
        return Err(bad("the key must be a dotted name such as trainer.steps"));
    }
    let value = toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()));
    Ok((key.to_string(), value))
}

impl RunConfig {
    /// Defaults ← `file` ← `overrides`. Errors name the file or the dotted key.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Self, ConfigError> {
        let mut table = match file {
            Some(path) => {
                let label = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: label.clone(), source })?;
                parse_table(&text, &label)?
            }
            None => Table::new(),
        };
        overrides.apply(&mut table)?;
        Self::from_table(table)
    }

    /// Parse a TOML document (no overrides).
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        Self::from_table(parse_table(text, "<string>")?)
    }

    fn from_table(mut table: Table) -> Result<Self, ConfigError> {
        // An algorithm preset fills only the keys the file, flags and --set left unset.
        super::preset::apply(&mut table)?;
        serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
            let key = e.path().to_string();
            // toml appends "in `key`" on a second line; the key is already named.
            let message = e.into_inner().to_string();
            let first = message.lines().next().unwrap_or_default().trim();
            ConfigError::Invalid { key, message: with_range(first) }
        })
    }
}

/// serde names integer types (`expected u32`); say the range instead.
fn with_range(message: &str) -> String {
    let ranges = [
        ("expected u32", "expected a whole number from 0 to 4294967295"),
        ("expected u64", "expected a whole number from 0 to 18446744073709551615"),
        ("expected usize", "expected a whole number ≥ 0"),
    ];
    let mut out = message.to_string();
    for (from, to) in ranges {
        if out.ends_with(from) {
            out = format!("{}{to}", &out[..out.len() - from.len()]);
        }
    }
    out
}

fn parse_table(text: &str, label: &str) -> Result<Table, ConfigError> {
    text.parse::<Table>().map_err(|e| ConfigError::Syntax {
        path: label.to_string(),
        message: e.to_string().lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(" "),
    })
}
