//! Tests against the independent reference (`tests/fixtures/reference.py`, its output
//! committed as `tests/fixtures/expected.json`), finite-difference gradient checks,
//! micro-batch invariance, and the refusals.

mod advantages;
mod gradients;
mod microbatch;
mod reference;
mod refusals;

use arl_core::PolicyLoss;
use arl_core::config::LossConfig;
use arl_core::registry::{self, LossPlugin};
use serde_json::Value;

use crate::eval::Batch;

pub fn fixture() -> Value {
    serde_json::from_str(include_str!("../../tests/fixtures/expected.json")).expect("fixture is JSON")
}

pub fn batch() -> Batch {
    serde_json::from_value(fixture()["batch"].clone()).expect("fixture batch")
}

/// The LossConfig of a fixture case: `{"name": loss, ..config}`.
pub fn config(case: &Value) -> LossConfig {
    let mut c = case["config"].as_object().cloned().unwrap_or_default();
    c.insert("name".into(), case["loss"].clone());
    serde_json::from_value(Value::Object(c)).expect("case config")
}

/// Build a loss through the registry, as the trainer will.
pub fn build(config: &LossConfig) -> Box<dyn PolicyLoss> {
    let plugin = registry::get::<LossPlugin>(&config.name).expect("registered");
    (plugin.build)(config).unwrap_or_else(|e| panic!("{e}"))
}

pub fn rows(v: &Value) -> Vec<Vec<f64>> {
    serde_json::from_value(v.clone()).expect("rows")
}

pub fn assert_close(what: &str, got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol * (1.0 + want.abs()), "{what}: got {got}, want {want} (tol {tol})");
}

/// Equal lengths, then every entry within `tol` (relative above 1).
pub fn assert_all_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: got {} values, want {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_close(&format!("{what}[{i}]"), *g, *w, tol);
    }
}

pub fn assert_rows_close(what: &str, got: &[Vec<f64>], want: &[Vec<f64>], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: row count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.len(), w.len(), "{what}: row {i} width");
        for (t, (a, b)) in g.iter().zip(w).enumerate() {
            assert_close(&format!("{what}[{i}][{t}]"), *a, *b, tol);
        }
    }
}
