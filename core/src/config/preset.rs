//! Algorithm presets (`algo = "dapo"`, `--algo dapo`): a named set of config keys that
//! together make one published algorithm (loss, advantage, clip band, aggregation).
//!
//! A preset sits *beneath* everything the user writes: defaults ← preset ← `--config` file ←
//! flags ← `--set`. So `--algo dapo --set loss.clip_high=0.3` is DAPO with a wider band, and
//! only keys the user left unset take the preset's values. Presets are registered by the
//! crate that owns the algorithms (`arl-losses`) with [`register_preset!`](crate::register_preset).

use crate::registry::Kind;

/// One preset: its name, a one-line description, and `(dotted key, TOML value)` pairs.
pub struct AlgoPreset {
    /// The name `algo` and `--algo` select it by.
    pub name: &'static str,
    /// A one-line description, shown by `arl list`.
    pub about: &'static str,
    /// The keys it sets, as `(dotted key, TOML value)` pairs, e.g. `("loss.clip_high", "0.28")`.
    pub settings: &'static [(&'static str, &'static str)],
    /// The module that registered it (filled in by
    /// [`register_preset!`](crate::register_preset)).
    pub origin: &'static str,
}

inventory::collect!(AlgoPreset);

impl Kind for AlgoPreset {
    const KIND: &'static str = "algorithm preset";
    const PLURAL: &'static str = "algorithm presets";
    fn name(&self) -> &'static str {
        self.name
    }
    fn about(&self) -> &'static str {
        self.about
    }
    fn origin(&self) -> &'static str {
        self.origin
    }
}

/// Register an [`AlgoPreset`]:
///
/// ```ignore
/// arl_core::register_preset!(AlgoPreset { name: "dapo", about: "…",
///     settings: &[("loss.clip_high", "0.28")] });
/// ```
#[macro_export]
macro_rules! register_preset {
    (AlgoPreset { name: $name:expr, about: $about:expr, settings: $settings:expr $(,)? }) => {
        $crate::__inventory::submit! {
            $crate::config::AlgoPreset {
                name: $name,
                about: $about,
                settings: $settings,
                origin: ::core::module_path!(),
            }
        }
    };
}

/// Fill the keys a preset sets into `table` wherever the user left them unset. The preset is
/// named by the table's top-level `algo`; an unknown name lists the valid ones.
pub(crate) fn apply(table: &mut toml::Table) -> Result<(), crate::ConfigError> {
    let Some(toml::Value::String(name)) = table.get("algo") else { return Ok(()) };
    let preset =
        crate::registry::get::<AlgoPreset>(name).map_err(|e| crate::ConfigError::Invalid { key: "algo".into(), message: e.to_string() })?;
    for (key, raw) in preset.settings {
        let (key, value) = super::parse_set(&format!("{key}={raw}"))?;
        let parts: Vec<&str> = key.split('.').collect();
        fill(table, &parts, value);
    }
    Ok(())
}

/// Insert `value` at the dotted path unless something is already there (a user's value, or a
/// plain value where the path needs a section, which serde will then report).
fn fill(table: &mut toml::Table, parts: &[&str], value: toml::Value) {
    match parts {
        [] => {}
        [last] => {
            table.entry(last.to_string()).or_insert(value);
        }
        [first, rest @ ..] => {
            let entry = table.entry(first.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(inner) = entry.as_table_mut() {
                fill(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_keeps_what_is_there_and_adds_what_is_not() {
        let mut t: toml::Table = "[loss]\nclip_high = 0.3\n".parse().unwrap();
        fill(&mut t, &["loss", "clip_high"], toml::Value::Float(0.28));
        fill(&mut t, &["loss", "clip_low"], toml::Value::Float(0.2));
        fill(&mut t, &["loss", "icepop", "lower"], toml::Value::Float(0.5));
        assert_eq!(t["loss"]["clip_high"].as_float(), Some(0.3));
        assert_eq!(t["loss"]["clip_low"].as_float(), Some(0.2));
        assert_eq!(t["loss"]["icepop"]["lower"].as_float(), Some(0.5));
    }

    #[test]
    fn no_algo_changes_nothing() {
        let mut t: toml::Table = "[loss]\nname = \"ppo\"\n".parse().unwrap();
        let before = t.clone();
        apply(&mut t).unwrap();
        assert_eq!(t, before);
    }
}
