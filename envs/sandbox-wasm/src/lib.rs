//! arl-sandbox-wasm — the `wasm` sandbox: model-influenced Python runs as CPython compiled to
//! WebAssembly (WASI preview 1) inside wasmtime, in this process, on the calling thread.
//!
//! Per job: a fresh temporary directory holding copies of the job's files (deleted
//! afterwards), preopened read-write as the guest's `/` — the only writable host directory the
//! guest can name (the standard library is embedded in `python.wasm`); where
//! `scripts/setup/pytest.sh` installed real pytest, its `site-packages` (a copy compiled once
//! for this interpreter, `bytecode`) is also preopened, read-only, at `/opt/arl/site-packages`
//! (`Sandbox::python_packages`; nothing else is); `python -I -S -B <entry>` with an
//! environment of only `PATH`, `HOME` (`/`) and `LANG`; no sockets (WASI preview 1 cannot
//! open one; wasmtime-wasi's network is left denied); no processes (WASI has no fork, exec or signals). The same [`Limits`] as `rlimit`:
//! linear memory through a [`wasmtime::ResourceLimiter`] (`memory_bytes`); the wall clock
//! (`wall_timeout`) by dropping the running call, which also ends a guest blocked in a host
//! call such as `time.sleep`; CPU (`cpu_seconds`) by epoch interruption every 10 ms, which
//! reads the job thread's CPU clock; files (`watch`, `hostcalls`): at most 64 open at once
//! (every guest open is a descriptor of the trainer's process), writes and growth checked
//! inside the WASI calls (a single call larger than `file_size_bytes` is refused, and the job
//! directory is measured after every write, so one call overshoots by at most its buffer),
//! entries counted as they are created (4096 beyond the job's own, as `rlimit`'s tmpfs), the
//! total held to 16 times `file_size_bytes`, and the whole directory measured again every
//! 10 ms — by a walk relative to directory descriptors (no host path is built, so none is
//! too long) that fails closed: anything it cannot inspect stops the job. Stdout and stderr
//! are captured in memory up to `output_bytes` each (the rest dropped, flagged truncated).
//! A stopped job reports the signal `rlimit` would have seen (SIGKILL at the wall clock,
//! SIGXCPU, SIGXFSZ for every file limit; SIGSEGV for other traps) and a line on stderr
//! saying why. `cpu_ms` is the job thread's CPU time and `max_rss_kb` the peak linear memory.
//! A temp dir where job directories cannot be made is a one-line error at start-up.
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
mod bytecode;
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
    about: "CPython on WASI inside wasmtime: only the job dir, no network or processes, file limits checked in the WASI calls",
    build: build,
});

fn build(config: &SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError> {
    let sandbox = WasmSandbox::new(WasmSettings::from_config(config)).map_err(|e| PluginError {
        kind: "sandbox",
        name: "wasm".into(),
        message: match e {
            arl_core::SandboxError::Setup(m) => m,
            other => other.to_string(),
        },
    })?;
    Ok(Arc::new(sandbox))
}

#[cfg(test)]
mod attacks;

/// A fresh, empty directory for one unit test (`arl-wasm-test-<name>-<pid>` in the temp dir).
#[cfg(test)]
fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("arl-wasm-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
