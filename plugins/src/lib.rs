//! The linkage crate. A crate that only registers plugins is dropped by the linker unless
//! something references it; this crate references every built-in plugin crate, and every
//! binary and test binary calls [`link`] so the registry sees them all.
//!
//! Adding a built-in plugin crate: add it to this crate's Cargo.toml and a `use … as _;`
//! line below. Cargo feature `wasm` (default on) links the `wasm` sandbox.

use arl_env_dataset as _;
use arl_env_edit as _;
use arl_env_harness as _;
use arl_env_process as _;
use arl_env_sum as _;
use arl_env_tools as _;
use arl_losses as _;
use arl_sandbox as _;
#[cfg(feature = "wasm")]
use arl_sandbox_wasm as _;

/// Reference this crate (and so every built-in plugin). Call once from `main` and from
/// test binaries.
pub fn link() {}

#[cfg(not(feature = "wasm"))]
mod wasm_disabled;
