//! arl-sandbox-wasm — the `wasm` sandbox: model-influenced Python runs as CPython compiled to
//! WebAssembly (WASI preview 1) inside wasmtime, in this process, on the calling thread.
//!
//! Per job: a fresh temporary directory holding copies of the job's files (deleted
//! afterwards), preopened read-write as the guest's `/` — the only host directory the guest
//! can name (the standard library is embedded in `python.wasm`, so nothing else is
//! preopened); `python -I -S -B <entry>` with an environment of only `PATH`, `HOME` (`/`) and
//! `LANG`; no sockets (WASI preview 1 cannot open one; wasmtime-wasi's network is left
//! denied); no processes (WASI has no fork, exec or signals). The same [`Limits`] as `rlimit`:
//! linear memory through a [`wasmtime::ResourceLimiter`] (`memory_bytes`); the wall clock
//! (`wall_timeout`) by dropping the running call, which also ends a guest blocked in a host
//! call such as `time.sleep`; CPU (`cpu_seconds`) by epoch interruption every 10 ms, which
//! reads the job thread's CPU clock; file size (`file_size_bytes`) by the same 10 ms check
//! walking the job directory — a poll, so a job can overshoot by what it writes in 10 ms
//! before it is stopped; stdout and stderr captured in memory up to `output_bytes` each
//! (the rest dropped, flagged truncated). A stopped job reports the signal `rlimit` would
//! have seen (SIGKILL at the wall clock, SIGXCPU, SIGXFSZ; SIGSEGV for other traps) and a
//! line on stderr saying why. `cpu_ms` is the job thread's CPU time and `max_rss_kb` the
//! peak linear memory.
//!
//! The interpreter is found at the config's `python_wasm`, else
//! `$HOME/.cache/arl/assets/python-wasm/python.wasm` (fetched by
//! `scripts/setup/python-wasm.sh`). Its Cranelift compilation (≈13 s on 2 cores) is cached next
//! to it, keyed by the wasm's hash and wasmtime's compatibility hash, and the compiled module
//! is shared by every job of a sandbox, so a job starts in milliseconds after the first.
//!
//! It deliberately knows nothing about tasks, tests or grading: it runs files. Linked into
//! `arl` by `arl-plugins`' default-on cargo feature `wasm`; this crate has no features.

mod assets;
mod capture;
mod hostcalls;
mod jobdir;
mod sandbox;
mod watch;

pub use assets::{SETUP_SCRIPT, default_python_wasm};
pub use sandbox::{WasmSandbox, WasmSettings};

use std::sync::Arc;

use arl_core::config::SandboxConfig;
use arl_core::{PluginError, Sandbox};

arl_core::register!(SandboxPlugin {
    name: "wasm",
    about: "CPython on WASI inside wasmtime: only the job dir, no network or processes, CPU and file size checked every 10 ms",
    build: build,
});

fn build(config: &SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError> {
    let sandbox = WasmSandbox::new(WasmSettings::from_config(config)).map_err(|e| PluginError {
        kind: "sandbox",
        name: "wasm".into(),
        message: e.to_string(),
    })?;
    Ok(Arc::new(sandbox))
}

#[cfg(test)]
mod attacks;
