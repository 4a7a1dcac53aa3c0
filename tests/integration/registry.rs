//! The registry as a binary sees it: built-in plugins linked through `arl-plugins`.

use arl_core::registry::{self, EnvPlugin, LossPlugin};
use arl_core::{Split, config::EnvConfig};
use std::sync::Arc;

use crate::test_plugins::NullSandbox;

#[test]
fn the_example_env_plugin_is_linked_and_builds() {
    arl_plugins::link();
    let plugin = registry::get::<EnvPlugin>("sum").expect("sum is registered by plugins/sum");
    let env = (plugin.build)(&EnvConfig { name: "sum".into(), ..Default::default() }, Arc::new(NullSandbox)).unwrap();
    assert!(!env.tasks(Split::Heldout).unwrap().is_empty());
}

#[test]
fn an_unknown_name_lists_the_valid_ones() {
    let err = registry::get::<EnvPlugin>("no-such-env").err().unwrap().to_string();
    assert!(err.starts_with("unknown env `no-such-env`; valid envs: "), "{err}");
    assert!(err.contains("sum"), "{err}");
}

#[test]
fn plugins_registered_by_this_test_binary_are_found() {
    assert_eq!(registry::get::<LossPlugin>("test-zero").unwrap().name, "test-zero");
}
