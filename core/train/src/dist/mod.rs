//! Rollout workers on a shared filesystem: the trainer ([`Coordinator`], a
//! [`RolloutExecutor`](super::rounds::RolloutExecutor)) issues rollout rounds and publishes
//! weights; workers ([`worker::run`]) claim rounds, roll them out and write the results. Every
//! file is opened by name (no directory listing on a hot path), claims are `O_CREAT|O_EXCL`
//! and every other write is tmp + rename, which local filesystems, NFSv3+ and Lustre keep
//! atomic.
//!
//! Files under `<output.dir>/dist/` ([`Layout`]):
//! - `index.json`: the rounds issued and not yet collected, each with its attempt; written only
//!   by the trainer, with its incarnation and arl version;
//! - `claims/{incarnation}.r{id}.a{attempt}`: the worker that took that attempt of a round
//!   (names carry the trainer's incarnation, so a worker still busy with a round of a trainer
//!   that died never takes or answers a round of the one that resumed);
//! - `workers/w{N}.json`: worker N's heartbeat (a counter it moves while alive);
//! - `trainer.json`: the trainer's heartbeat; a worker whose trainer's has not moved for
//!   `cluster.worker_idle_timeout_s` exits (the trainer died without `STOP`);
//! - `results/{incarnation}.r{id}.a{attempt}.cbor`: the round's episodes, bit-exact ([`wire`]); a round's
//!   claims and results are deleted once the trainer has collected it;
//! - `weights/v{N}/`: the weights after N steps ([`TrainablePolicy::save`](arl_core::policy::TrainablePolicy::save):
//!   LoRA's adapter only), pruned once no issued round names them;
//! - `STOP`: the run is over; workers exit.
//!
//! Faults: a claimed round whose worker's heartbeat has not moved for `cluster.lease_timeout_s`
//! is issued again under the next attempt; any worker re-runs it with the same outcome (a
//! round is a pure function of its spec); the first result of any attempt is taken and a late
//! one ignored; a round issued `cluster.max_round_attempts` times stops the run.

pub mod coordinator;
pub mod wire;
pub mod worker;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use coordinator::Coordinator;

use super::TrainError;
use super::rounds::RoundSpec;

/// The protocol's version: a worker refuses an index of another.
pub const PROTOCOL: u32 = 1;

/// The paths of the protocol's files under one run folder.
#[derive(Clone, Debug)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    /// The protocol folder of run folder `run_dir`.
    pub fn of(run_dir: &Path) -> Self {
        Self { root: run_dir.join("dist") }
    }
    pub fn index(&self) -> PathBuf {
        self.root.join("index.json")
    }
    pub fn trainer(&self) -> PathBuf {
        self.root.join("trainer.json")
    }
    pub fn stop(&self) -> PathBuf {
        self.root.join("STOP")
    }
    pub fn claim(&self, incarnation: &str, round: u64, attempt: u32) -> PathBuf {
        self.root.join("claims").join(format!("{incarnation}.r{round}.a{attempt}"))
    }
    pub fn result(&self, incarnation: &str, round: u64, attempt: u32) -> PathBuf {
        self.root.join("results").join(format!("{incarnation}.r{round}.a{attempt}.cbor"))
    }
    pub fn heartbeat(&self, worker: u32) -> PathBuf {
        self.root.join("workers").join(format!("w{worker}.json"))
    }
    pub fn weights(&self, version: u32) -> PathBuf {
        self.root.join("weights").join(format!("v{version}"))
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// Create the folders (`claims/`, `results/`, `workers/`, `weights/`, `logs/`).
    pub fn create(&self) -> Result<(), TrainError> {
        for sub in ["claims", "results", "workers", "weights", "logs"] {
            let dir = self.root.join(sub);
            std::fs::create_dir_all(&dir).map_err(TrainError::at(&dir))?;
        }
        Ok(())
    }
}

/// `index.json`: what the trainer has issued and not yet collected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Index {
    pub protocol: u32,
    pub arl_version: String,
    /// The trainer's incarnation (a new one at every start or resume).
    pub incarnation: String,
    pub rounds: Vec<Issued>,
}

/// A round as issued: its spec and the attempt a worker may claim now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Issued {
    pub round: RoundSpec,
    pub attempt: u32,
}

/// Who holds a claim (`claims/{incarnation}.r{id}.a{attempt}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub worker: u32,
    pub pid: u32,
    pub host: String,
}

/// A worker's heartbeat (`workers/w{N}.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub worker: u32,
    pub pid: u32,
    /// Moves at every beat; the trainer watches it with its own clock (no clock is shared).
    pub beat: u64,
    /// The round and attempt it is rolling out (`r3.a0`).
    pub round: Option<String>,
    /// The weights version it has loaded.
    pub version: Option<u32>,
}

/// The trainer's heartbeat (`trainer.json`), moved by a thread of its own while it lives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainerBeat {
    pub incarnation: String,
    pub beat: u64,
}

/// Write `bytes` to `path` atomically: a temporary file beside it, then a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(TrainError::at(&tmp))?;
    std::fs::rename(&tmp, path).map_err(TrainError::at(path))
}

/// Take `path` if nobody has (`O_CREAT|O_EXCL`), writing `claim` into it. `Ok(false)`: taken,
/// or its folder is gone (a new trainer incarnation is recreating `dist/`).
pub fn try_claim(path: &Path, claim: &Claim) -> Result<bool, TrainError> {
    match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(mut f) => {
            let text = serde_json::to_vec(claim).expect("a claim serializes");
            f.write_all(&text).map_err(TrainError::at(path))?;
            Ok(true)
        }
        Err(e) if matches!(e.kind(), std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound) => Ok(false),
        Err(e) => Err(TrainError::File { path: path.to_path_buf(), error: e }),
    }
}

/// Read a JSON file another process writes atomically; `None` when it is not there (yet).
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, TrainError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| TrainError::Other(format!("{}: not a valid protocol file ({e})", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TrainError::File { path: path.to_path_buf(), error: e }),
    }
}

/// This machine's host name (for claims), or `unknown`.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_taken_once() {
        let dir = std::env::temp_dir().join(format!("arl-dist-claim-{}", std::process::id()));
        let layout = Layout { root: dir.clone() };
        layout.create().unwrap();
        let claim = Claim { worker: 1, pid: 2, host: "h".into() };
        let path = layout.claim("i", 3, 0);
        assert!(try_claim(&path, &claim).unwrap());
        assert!(!try_claim(&path, &Claim { worker: 2, ..claim.clone() }).unwrap());
        assert_eq!(read_json::<Claim>(&path).unwrap(), Some(claim));
        assert_eq!(read_json::<Claim>(&layout.claim("i", 3, 1)).unwrap(), None);
        assert_eq!(read_json::<Claim>(&layout.claim("j", 3, 0)).unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
