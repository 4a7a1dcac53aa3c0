//! Built without the `wasm` feature, `--sandbox wasm` still names a sandbox: one whose build
//! fails with a line saying how to get the real one (crate arl-sandbox-wasm).

use std::sync::Arc;

use arl_core::config::SandboxConfig;
use arl_core::{PluginError, Sandbox};

arl_core::register!(SandboxPlugin { name: "wasm", about: "(not in this build: cargo feature `wasm` is off)", build: build });

fn build(_: &SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError> {
    Err(PluginError {
        kind: "sandbox",
        name: "wasm".into(),
        message: "this arl was built without the cargo feature `wasm`; rebuild with default features (or `--features wasm`), or use `--sandbox rlimit`".into(),
    })
}
