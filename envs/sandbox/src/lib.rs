//! arl-sandbox — the `rlimit` sandbox: model-influenced Python runs in a child process
//! that has been fenced in before it runs a single line of job code.
//!
//! Per job: a fresh temporary directory holding copies of the job's files (deleted
//! afterwards), `python3 -I -S -B`, an environment of only `PATH`, `HOME` (the temp dir) and
//! `LANG`, a new session (so the whole process group can be killed), a new network namespace
//! (no network), rlimits (CPU, address space, file size, no core files, NPROC 0), and — when
//! started as root — a drop to an unprivileged per-job uid/gid, since NPROC does not bind
//! root. The parent enforces a wall-clock timeout by killing the process group, reads stdout
//! and stderr concurrently with a cap (a flood cannot deadlock it), and reports resource use
//! from `wait4`. A job that crashes, hangs or attacks is a [`JobOutcome`](arl_core::JobOutcome);
//! only a sandbox that cannot start jobs at all is an error.
//!
//! Started without root there is no uid drop: jobs keep the caller's uid, so they could
//! signal the caller's own processes, and network isolation falls back to a user namespace
//! where the kernel allows one. Run the trainer as root (as CI does) for the full fence.
//!
//! It deliberately knows nothing about tasks, tests or grading: it runs files. Linux only.
//! No cargo features.

mod capture;
mod child;
mod python;
mod rlimit;

pub use python::find_python;
pub use rlimit::{RlimitSandbox, RlimitSettings};

use std::sync::Arc;

use arl_core::config::SandboxConfig;
use arl_core::{PluginError, Sandbox};

arl_core::register!(SandboxPlugin {
    name: "rlimit",
    about: "child process with rlimits, no network, unprivileged uid, wall-clock kill (Linux)",
    build: build,
});

fn build(config: &SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError> {
    let sandbox = RlimitSandbox::new(RlimitSettings::from_config(config)).map_err(|e| PluginError {
        kind: "sandbox",
        name: "rlimit".into(),
        message: e.to_string(),
    })?;
    Ok(Arc::new(sandbox))
}

#[cfg(test)]
mod attacks;
