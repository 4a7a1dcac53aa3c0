//! arl-sandbox — the `rlimit` sandbox: model-influenced Python runs in a process that has
//! been fenced in before it runs a single line of job code, with nothing of the host in
//! reach.
//!
//! Per job: a `clone` into new mount, PID, IPC, UTS, network and cgroup namespaces (plus a
//! user namespace when the trainer is not root), whose first process builds a minimal root
//! and `pivot_root`s into it ([`child`]): read-only binds of the interpreter, its ELF loader,
//! its standard library and the shared objects it maps — found by running it once on the
//! host ([`python::interpreter_binds`]), plus any configured extra binds ([`root`]); `/job`,
//! the job's directory, a tmpfs with byte and inode limits and the only writable place
//! (also `HOME`, and `/tmp` points to it); `/proc` of the job's own PID namespace; `/dev`
//! with `null`, `zero` and `urandom` only. The checkout, the `arl` binary (which embeds the
//! task bank), the trainer's files, other jobs, host processes, host unix sockets and SysV
//! IPC objects do not exist there. Then `python3 -I -S -B` with only `PATH`, `HOME` and
//! `LANG`, a new session, every inherited descriptor but 0–2 closed, rlimits (CPU, address
//! space, file size, no core files, 64 files, no processes), a fresh unprivileged uid per
//! job when the trainer is root ([`uid`]: never repeated within a run), `PR_SET_PDEATHSIG`,
//! `PR_SET_NO_NEW_PRIVS` and a seccomp allowlist ([`seccomp`]: the calls ordinary programs
//! make; socket families, io_uring, namespace, mount and keyring calls, another process's
//! descriptors denied; SysV IPC, POSIX message queues and AIO, whose memory and counts no
//! rlimit bounds, and every call not on the list, not implemented). Where the host lets the
//! trainer create cgroups (root with a memory controller: cgroup v1, or v2 with the
//! controller delegated), each job of several processes also gets a memory cgroup of its own ([`cgroup`]: its
//! address-space limit plus its tmpfs, no swap) that bounds all its processes together. A
//! directory shown elsewhere than on the host (the shell root's pytest) is an overlay named
//! by descriptor, so `/proc/self/mountinfo` shows no host path. The parent ([`collect`]) polls stdout, stderr and
//! the job's pidfd against the wall clock, kills the job's PID namespace at the deadline,
//! reads what is left without waiting and drops the pipes; `wall_ms` is taken at the end,
//! resources from `wait4`. Nothing is written to the host's disk.
//!
//! A job that crashes, hangs or attacks is a [`JobOutcome`](arl_core::JobOutcome). Where the
//! kernel refuses the namespaces, [`RlimitSandbox::new`] fails with one line naming what is
//! missing and pointing to `--sandbox wasm`: there is no weaker mode. A host that runs out
//! of memory, processes or namespaces while starting one job is
//! [`SandboxError::Exhausted`](arl_core::SandboxError::Exhausted), which a gym counts.
//!
//! It deliberately knows nothing about tasks, tests or grading: it runs files. Linux only
//! (x86_64, aarch64). No cargo features.

mod cgroup;
mod child;
mod collect;
pub mod conformance;
mod elf;
mod python;
mod rlimit;
mod root;
mod seccomp;
mod shell;
mod spawn;
mod uid;

pub use python::find_python;
pub use rlimit::{JOB_DIR, JOB_INODES, JOB_ROOM_FILES, RlimitSandbox, RlimitSettings};

use std::sync::Arc;

use arl_core::config::SandboxConfig;
use arl_core::{PluginError, Sandbox};

arl_core::register!(SandboxPlugin {
    name: "rlimit",
    about: "namespaced child process in a minimal read-only root: rlimits, seccomp, fresh uid, wall-clock kill (Linux)",
    build: build,
});

fn build(config: &SandboxConfig) -> Result<Arc<dyn Sandbox>, PluginError> {
    let sandbox = RlimitSandbox::new(RlimitSettings::from_config(config)).map_err(|e| PluginError {
        kind: "sandbox",
        name: "rlimit".into(),
        message: match e {
            arl_core::SandboxError::Setup(m) => m,
            other => other.to_string(),
        },
    })?;
    Ok(Arc::new(sandbox))
}

#[cfg(test)]
mod attacks;
