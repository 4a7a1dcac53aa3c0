//! The plugin registry: one per plugin kind, built on `inventory`.
//!
//! A plugin is a name, a one-line description and a factory `fn`. Crates register with
//! [`register!`](crate::register); lookups build a sorted table, reject duplicate names, and
//! answer an unknown name with the list of valid ones.
//!
//! A crate that only registers is dropped by the linker unless something references it:
//! `plugins` (crate `arl-plugins`) references every built-in plugin crate, and every
//! binary and test binary references `arl-plugins`.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::config::{AdvantageConfig, EnvConfig, LossConfig, SandboxConfig};
use crate::{AdvantageFn, Env, PluginError, PolicyLoss, RegistryError, Sandbox, ToolSet};

/// One registered plugin of some kind; `build` is the kind's factory.
pub struct Plugin<F: 'static> {
    /// The name configs and the command line select it by; unique within its kind.
    pub name: &'static str,
    /// A one-line description, shown by `arl list`.
    pub about: &'static str,
    /// The factory that builds the plugin from its configuration.
    pub build: F,
    /// The module that registered it (filled in by [`register!`](crate::register)).
    pub origin: &'static str,
}

/// Builds an environment from the `[env]` section and the sandbox it runs jobs in.
pub type EnvFactory = fn(&EnvConfig, Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError>;
/// Builds a tool set from its options (a JSON object; empty when none are given).
pub type ToolSetFactory = fn(&Map<String, Value>) -> Result<Box<dyn ToolSet>, PluginError>;
/// Builds a sandbox from the `[sandbox]` section, as an `Arc` so the envs can share it.
pub type SandboxFactory = fn(&SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError>;
/// Builds an advantage estimator from the `[advantage]` section.
pub type AdvantageFactory = fn(&AdvantageConfig) -> Result<Box<dyn AdvantageFn>, PluginError>;
/// Builds a policy loss from the `[loss]` section.
pub type LossFactory = fn(&LossConfig) -> Result<Box<dyn PolicyLoss>, PluginError>;

/// A registered environment (kind `env`).
pub type EnvPlugin = Plugin<EnvFactory>;
/// A registered tool set (kind `tool set`).
pub type ToolSetPlugin = Plugin<ToolSetFactory>;
/// A registered sandbox (kind `sandbox`).
pub type SandboxPlugin = Plugin<SandboxFactory>;
/// A registered advantage estimator (kind `advantage estimator`).
pub type AdvantagePlugin = Plugin<AdvantageFactory>;
/// A registered policy loss (kind `loss`).
pub type LossPlugin = Plugin<LossFactory>;

/// A plugin kind: the word used in messages ("env", "loss", …).
pub trait Kind: inventory::Collect + Sync + Sized + 'static {
    /// The kind in the singular, e.g. `env`, `tool set`.
    const KIND: &'static str;
    /// The kind in the plural, e.g. `envs`, `tool sets`.
    const PLURAL: &'static str;
    /// The plugin's [`Plugin::name`].
    fn name(&self) -> &'static str;
    /// The plugin's [`Plugin::about`].
    fn about(&self) -> &'static str;
    /// The plugin's [`Plugin::origin`].
    fn origin(&self) -> &'static str;
}

macro_rules! kinds {
    ($($ty:ty => $word:literal / $plural:literal),* $(,)?) => {$(
        inventory::collect!($ty);
        impl Kind for $ty {
            const KIND: &'static str = $word;
            const PLURAL: &'static str = $plural;
            fn name(&self) -> &'static str { self.name }
            fn about(&self) -> &'static str { self.about }
            fn origin(&self) -> &'static str { self.origin }
        }
    )*};
}

kinds! {
    EnvPlugin => "env" / "envs",
    ToolSetPlugin => "tool set" / "tool sets",
    SandboxPlugin => "sandbox" / "sandboxes",
    AdvantagePlugin => "advantage estimator" / "advantage estimators",
    LossPlugin => "loss" / "losses",
}

/// Register a plugin. `$kind` is one of `EnvPlugin`, `ToolSetPlugin`, `SandboxPlugin`,
/// `AdvantagePlugin`, `LossPlugin`:
///
/// ```ignore
/// arl_core::register!(EnvPlugin { name: "sum", about: "add two numbers", build: build_env });
/// ```
#[macro_export]
macro_rules! register {
    ($kind:ident { name: $name:expr, about: $about:expr, build: $build:expr $(,)? }) => {
        $crate::__inventory::submit! {
            $crate::registry::$kind {
                name: $name,
                about: $about,
                build: $build,
                origin: ::core::module_path!(),
            }
        }
    };
}

/// Every plugin of kind `P`, sorted by name; an error if two share a name.
pub fn all<P: Kind>() -> Result<Vec<&'static P>, RegistryError> {
    table(inventory::iter::<P>())
}

/// The plugin of kind `P` called `name`.
pub fn get<P: Kind>(name: &str) -> Result<&'static P, RegistryError> {
    let table = all::<P>()?;
    table.iter().find(|p| p.name() == name).copied().ok_or_else(|| RegistryError::Unknown {
        kind: P::KIND,
        plural: P::PLURAL,
        name: name.to_string(),
        valid: table.iter().map(|p| p.name()).collect(),
    })
}

/// Sort entries by name and reject duplicates.
pub fn table<P: Kind>(entries: impl IntoIterator<Item = &'static P>) -> Result<Vec<&'static P>, RegistryError> {
    let mut entries: Vec<&'static P> = entries.into_iter().collect();
    entries.sort_by_key(|p| p.name());
    for pair in entries.windows(2) {
        if pair[0].name() == pair[1].name() {
            let (a, b) = (pair[0].origin(), pair[1].origin());
            return Err(RegistryError::Duplicate { kind: P::KIND, name: pair[0].name(), first: a.min(b), second: a.max(b) });
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two test-only kinds, so the duplicate below cannot disturb real lookups.
    type Widget = Plugin<fn() -> u32>;
    type Clash = Plugin<fn() -> i64>;
    kinds! { Widget => "widget" / "widgets", Clash => "clash" / "clashes" }

    inventory::submit! { Widget { name: "beta", about: "b", build: || 2, origin: "test" } }
    inventory::submit! { Widget { name: "alpha", about: "a", build: || 1, origin: "test" } }
    inventory::submit! { Clash { name: "same", about: "1", build: || 1, origin: "crate_one" } }
    inventory::submit! { Clash { name: "same", about: "2", build: || 2, origin: "crate_two" } }

    #[test]
    fn lookup_by_name_builds_the_right_plugin() {
        assert_eq!((get::<Widget>("alpha").unwrap().build)(), 1);
        assert_eq!((get::<Widget>("beta").unwrap().build)(), 2);
    }

    #[test]
    fn table_is_sorted_by_name() {
        let names: Vec<_> = all::<Widget>().unwrap().iter().map(|p| p.name).collect();
        assert_eq!(names, ["alpha", "beta"]);
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let err = get::<Widget>("gamma").err().unwrap();
        assert_eq!(err.to_string(), "unknown widget `gamma`; valid widgets: alpha, beta");
    }

    #[test]
    fn duplicate_names_are_rejected_naming_both_origins() {
        let err = get::<Clash>("same").err().unwrap();
        assert_eq!(err, RegistryError::Duplicate { kind: "clash", name: "same", first: "crate_one", second: "crate_two" });
        assert!(all::<Clash>().is_err());
    }
}
