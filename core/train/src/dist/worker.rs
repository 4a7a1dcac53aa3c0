//! A rollout worker's loop: claim a round, load the weights version it names, roll it out
//! ([`run_round`]), write the result; a heartbeat thread beside it.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::wire::{self, RoundResult};
use super::{Claim, Heartbeat, Index, Layout, PROTOCOL, TrainerBeat, read_json, try_claim, write_atomic};
use crate::TrainError;
use crate::rounds::{RoundContext, run_round};
use arl_core::policy::Policy;

/// The environment variable of the fault hook (tests): `die-holding-round:N` makes the worker
/// that claims round N's first attempt kill itself (SIGKILL) while holding it;
/// `hang-holding-round:N` makes it hold that round for ever, beating (the trainer waits).
pub const FAULT_VAR: &str = "ARL_FAULT";

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Die (SIGKILL) right after claiming the first attempt of this round.
    DieHoldingRound(u64),
    /// Never finish the first attempt of this round, its heartbeat still moving.
    HangHoldingRound(u64),
}

impl Fault {
    /// The fault [`FAULT_VAR`] names, if any; a value it does not know is an error.
    pub fn from_env() -> Result<Option<Fault>, String> {
        let Ok(text) = std::env::var(FAULT_VAR) else { return Ok(None) };
        let round = |prefix: &str| text.strip_prefix(prefix).and_then(|n| n.parse().ok());
        match (round("die-holding-round:"), round("hang-holding-round:")) {
            (Some(n), _) => Ok(Some(Fault::DieHoldingRound(n))),
            (_, Some(n)) => Ok(Some(Fault::HangHoldingRound(n))),
            _ => Err(format!("{FAULT_VAR}={text}: unknown fault; valid: die-holding-round:N, hang-holding-round:N")),
        }
    }
}

/// Who this worker is and how it beats.
pub struct WorkerOptions {
    pub worker: u32,
    /// Seconds between heartbeats (well under `cluster.lease_timeout_s`).
    pub beat_every: Duration,
    pub fault: Option<Fault>,
    /// Exit when the trainer's heartbeat has not moved for this long between rounds.
    pub idle_timeout: Duration,
}

/// Loads the weights published in a `weights/v{N}` folder as a sampler.
pub type LoadWeights<'a> = dyn FnMut(&Path) -> Result<Box<dyn Policy>, String> + 'a;

/// Run rounds from `layout` until the trainer writes `STOP`. An error that is the worker's
/// own (its setup, its weights) is written as the round's result, so the trainer stops with
/// it; an error of the protocol itself ends the worker.
pub fn run(
    layout: &Layout,
    ctx: &RoundContext<'_>,
    opts: &WorkerOptions,
    load: &mut LoadWeights<'_>,
    log: &mut dyn FnMut(&str),
) -> Result<(), TrainError> {
    let status = Mutex::new(Heartbeat { worker: opts.worker, pid: std::process::id(), ..Heartbeat::default() });
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| beat(layout, &status, &done, opts.beat_every));
        let out = rounds(layout, ctx, opts, load, &status, log);
        done.store(true, Ordering::SeqCst);
        out
    })
}

/// Write the heartbeat every `every` until `done`.
fn beat(layout: &Layout, status: &Mutex<Heartbeat>, done: &AtomicBool, every: Duration) {
    let path = layout.heartbeat(status.lock().unwrap_or_else(|e| e.into_inner()).worker);
    while !done.load(Ordering::SeqCst) {
        let bytes = {
            let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
            s.beat += 1;
            serde_json::to_vec(&*s).expect("a heartbeat serializes")
        };
        // A beat that fails to land is retried at the next one; the lease allows several.
        let _ = write_atomic(&path, &bytes);
        std::thread::sleep(every);
    }
}

fn rounds(
    layout: &Layout,
    ctx: &RoundContext<'_>,
    opts: &WorkerOptions,
    load: &mut LoadWeights<'_>,
    status: &Mutex<Heartbeat>,
    log: &mut dyn FnMut(&str),
) -> Result<(), TrainError> {
    let set = |round: Option<String>, version: Option<u32>| {
        let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
        s.round = round;
        s.version = version;
    };
    let me = Claim { worker: opts.worker, pid: std::process::id(), host: super::host_name() };
    let mut loaded: Option<(String, u32, Box<dyn Policy>)> = None;
    // The trainer's last beat seen and when it moved (this process's clock).
    let mut trainer: (Option<TrainerBeat>, Instant) = (None, Instant::now());
    loop {
        if layout.stop().exists() {
            log(&format!("w{}: the trainer ended the run", opts.worker));
            return Ok(());
        }
        let beat = read_json::<TrainerBeat>(&layout.trainer()).ok().flatten();
        if beat != trainer.0 {
            trainer = (beat, Instant::now());
        } else if trainer.1.elapsed() > opts.idle_timeout {
            log(&format!(
                "w{}: the trainer's heartbeat ({}) has not moved for {:.0} s (cluster.worker_idle_timeout_s): it died without ending the run; exiting",
                opts.worker,
                layout.trainer().display(),
                opts.idle_timeout.as_secs_f64()
            ));
            return Ok(());
        }
        let Some(index) = read_json::<Index>(&layout.index())? else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        if index.protocol != PROTOCOL || index.arl_version != env!("CARGO_PKG_VERSION") {
            return Err(TrainError::Other(format!(
                "{} was written by arl {} (protocol {}), this worker is arl {} (protocol {PROTOCOL}); run workers of the trainer's version",
                layout.index().display(),
                index.arl_version,
                index.protocol,
                env!("CARGO_PKG_VERSION")
            )));
        }
        let mut claimed = None;
        for issued in &index.rounds {
            let (id, attempt) = (issued.round.id, issued.attempt);
            if layout.result(&index.incarnation, id, attempt).exists() {
                continue;
            }
            if try_claim(&layout.claim(&index.incarnation, id, attempt), &me)? {
                claimed = Some(issued.clone());
                break;
            }
        }
        let Some(issued) = claimed else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let (round, attempt) = (issued.round, issued.attempt);
        match opts.fault {
            Some(Fault::DieHoldingRound(r)) if r == round.id && attempt == 0 => {
                log(&format!("w{}: {FAULT_VAR}: dying while holding round {}", opts.worker, round.id));
                // SAFETY: signalling our own process.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            Some(Fault::HangHoldingRound(r)) if r == round.id && attempt == 0 => {
                log(&format!("w{}: {FAULT_VAR}: holding round {} for ever", opts.worker, round.id));
                set(Some(format!("r{}.a0", round.id)), None);
                loop {
                    std::thread::sleep(Duration::from_secs(1));
                }
            }
            _ => {}
        }
        set(Some(format!("r{}.a{attempt}", round.id)), loaded.as_ref().map(|l| l.1));
        // Weights of another incarnation or version are replaced.
        if loaded.as_ref().is_none_or(|(inc, v, _)| *inc != index.incarnation || *v != round.version) {
            loaded = None;
            let dir = layout.weights(round.version);
            match load(&dir) {
                Ok(policy) => loaded = Some((index.incarnation.clone(), round.version, policy)),
                Err(message) => {
                    // Pruned under us: the round was collected meanwhile, so nobody waits for it.
                    let still = read_json::<Index>(&layout.index())?
                        .is_some_and(|i| i.rounds.iter().any(|r| r.round.id == round.id && r.attempt == attempt));
                    if still {
                        let outcome = Err(format!("loading weights {}: {message}", dir.display()));
                        let result = RoundResult { protocol: PROTOCOL, worker: opts.worker, round, outcome };
                        write_atomic(&layout.result(&index.incarnation, result.round.id, attempt), &wire::encode(&result))?;
                    }
                    continue;
                }
            }
        }
        let (_, version, policy) = loaded.as_mut().expect("loaded above");
        set(Some(format!("r{}.a{attempt}", round.id)), Some(*version));
        let outcome = run_round(ctx, policy.as_mut(), &round, &mut |_, _| {}).map_err(|e| e.to_string());
        if let Err(message) = &outcome {
            log(&format!("w{}: round {} failed: {message}", opts.worker, round.id));
        }
        let result = RoundResult { protocol: PROTOCOL, worker: opts.worker, round, outcome };
        if let Err(e) = write_atomic(&layout.result(&index.incarnation, result.round.id, attempt), &wire::encode(&result)) {
            // The trainer that issued it is gone and a new one is recreating `dist/`: nobody
            // waits for this result.
            if read_json::<Index>(&layout.index()).ok().flatten().is_some_and(|i| i.incarnation == index.incarnation) {
                return Err(e);
            }
            log(&format!("w{}: round {} belongs to an ended trainer incarnation; dropped", opts.worker, result.round.id));
        }
        set(None, Some(*version));
    }
}
