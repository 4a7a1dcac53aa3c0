//! The trainer's side of the protocol: issue rounds, watch leases, collect results, publish
//! and prune weights.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::wire::{self, RoundResult};
use super::{Claim, Heartbeat, Index, Issued, Layout, PROTOCOL, TrainerBeat, read_json, write_atomic};
use crate::TrainError;
use crate::rounds::{Faults, RolloutExecutor, RoundOutput, RoundSpec};
use arl_core::config::ClusterConfig;
use arl_core::policy::{Policy, TrainablePolicy};

/// How often the trainer looks for results and stale leases.
const POLL: Duration = Duration::from_millis(10);

/// Called while the trainer waits for results; an error stops the run (a launcher that sees
/// all its workers gone says so here).
pub type Watch = Box<dyn FnMut() -> Result<(), String>>;

/// Rounds through rollout workers ([`super`]): the trainer's [`RolloutExecutor`].
pub struct Coordinator {
    layout: Layout,
    index: Index,
    lease: Duration,
    max_attempts: u32,
    /// Weights versions published and not yet pruned.
    published: BTreeSet<u32>,
    /// Per worker: the last beat seen and when (this process's clock) it last moved.
    beats: HashMap<u32, (Option<u64>, Instant)>,
    /// Workers declared lost (and not seen beating since).
    lost: BTreeSet<u32>,
    faults: Faults,
    watch: Option<Watch>,
    /// Ends the trainer's heartbeat thread.
    beating: Arc<AtomicBool>,
}

impl Coordinator {
    /// Start the protocol in `run_dir/dist/` as a new trainer incarnation: whatever an
    /// earlier incarnation left there (claims, results, weights) is removed first.
    pub fn create(run_dir: &Path, cluster: &ClusterConfig, incarnation: &str) -> Result<Self, TrainError> {
        let layout = Layout::of(run_dir);
        match std::fs::remove_dir_all(&layout.root) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(TrainError::File { path: layout.root, error: e }),
            _ => {}
        }
        layout.create()?;
        let index = Index {
            protocol: PROTOCOL,
            arl_version: env!("CARGO_PKG_VERSION").to_string(),
            incarnation: incarnation.to_string(),
            rounds: Vec::new(),
        };
        let me = Self {
            layout,
            index,
            lease: Duration::from_secs_f64(cluster.lease_timeout_s),
            max_attempts: cluster.max_round_attempts,
            published: BTreeSet::new(),
            beats: HashMap::new(),
            lost: BTreeSet::new(),
            faults: Faults::default(),
            watch: None,
            beating: Arc::new(AtomicBool::new(true)),
        };
        me.write_index()?;
        // The trainer's heartbeat, also while it updates, evaluates or checkpoints.
        let (path, beating) = (me.layout.trainer(), me.beating.clone());
        let every = Duration::from_secs_f64((cluster.worker_idle_timeout_s / 10.0).clamp(0.05, 5.0));
        let mut beat = TrainerBeat { incarnation: incarnation.to_string(), beat: 0 };
        std::thread::spawn(move || {
            while beating.load(Ordering::SeqCst) {
                beat.beat += 1;
                let _ = write_atomic(&path, &serde_json::to_vec(&beat).expect("a heartbeat serializes"));
                std::thread::sleep(every);
            }
        });
        Ok(me)
    }

    /// Check `watch` while waiting for results.
    pub fn set_watch(&mut self, watch: Watch) {
        self.watch = Some(watch);
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// End the run for the workers (`STOP`); they exit when they next look.
    pub fn stop(&self) -> Result<(), TrainError> {
        write_atomic(&self.layout.stop(), b"")
    }

    fn write_index(&self) -> Result<(), TrainError> {
        write_atomic(&self.layout.index(), &serde_json::to_vec_pretty(&self.index).expect("the index serializes"))
    }

    /// The first result of any attempt of `issued` so far.
    fn result_of(&self, issued: &Issued) -> Result<Option<RoundResult>, TrainError> {
        for attempt in 0..=issued.attempt {
            let path = self.layout.result(&self.index.incarnation, issued.round.id, attempt);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    let r = wire::decode(&bytes).map_err(|e| TrainError::Other(format!("{}: {e}", path.display())))?;
                    if r.round != issued.round {
                        return Err(TrainError::Other(format!(
                            "{}: the worker rolled out another round than the trainer issued as round {} \
                             (a worker of another run or version writing into this run folder?)",
                            path.display(),
                            issued.round.id
                        )));
                    }
                    return Ok(Some(r));
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(TrainError::File { path, error: e }),
            }
        }
        Ok(None)
    }

    /// Whether `worker`'s heartbeat has not moved for a lease (this process's clock).
    fn stale(&mut self, worker: u32) -> Result<bool, TrainError> {
        let beat = read_json::<Heartbeat>(&self.layout.heartbeat(worker)).ok().flatten().map(|h| h.beat);
        let now = Instant::now();
        let entry = self.beats.entry(worker).or_insert((beat, now));
        if entry.0 != beat {
            *entry = (beat, now);
            self.lost.remove(&worker);
        }
        Ok(now.duration_since(entry.1) > self.lease)
    }

    /// Issue again every pending round whose current attempt is held by a worker whose lease
    /// ran out. Returns whether the index changed.
    fn reissue_stale(&mut self, pending: &[usize]) -> Result<bool, TrainError> {
        let mut changed = false;
        for &i in pending {
            let (id, attempt) = (self.index.rounds[i].round.id, self.index.rounds[i].attempt);
            // A claim is created empty and then filled: unreadable for a moment.
            let Some(claim) = read_json::<Claim>(&self.layout.claim(&self.index.incarnation, id, attempt)).ok().flatten() else { continue };
            if !self.stale(claim.worker)? {
                continue;
            }
            if self.lost.insert(claim.worker) {
                self.faults.workers_lost += 1;
            }
            let next = attempt + 1;
            if next >= self.max_attempts {
                return Err(TrainError::Other(format!(
                    "round {id} was issued {} times and no worker finished it (the last, w{} on {} pid {}, stopped beating for \
                     {:.0} s); see {} and raise cluster.max_round_attempts or cluster.lease_timeout_s if workers are only slow",
                    next,
                    claim.worker,
                    claim.host,
                    claim.pid,
                    self.lease.as_secs_f64(),
                    self.layout.logs().display()
                )));
            }
            self.index.rounds[i].attempt = next;
            self.faults.rounds_retried += 1;
            changed = true;
        }
        Ok(changed)
    }

    /// Delete published versions no issued round names, except `keep`.
    fn prune(&mut self, keep: u32) -> Result<(), TrainError> {
        let needed: BTreeSet<u32> = self.index.rounds.iter().map(|r| r.round.version).chain([keep]).collect();
        let old: Vec<u32> = self.published.iter().copied().filter(|v| !needed.contains(v)).collect();
        for v in old {
            let dir = self.layout.weights(v);
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(TrainError::File { path: dir, error: e }),
                _ => {}
            }
            self.published.remove(&v);
        }
        Ok(())
    }
}

impl RolloutExecutor for Coordinator {
    /// Save the weights to `weights/.v{N}.tmp` and rename it to `weights/v{N}`; older versions
    /// no issued round names are deleted.
    fn publish(&mut self, version: u32, policy: &dyn TrainablePolicy) -> Result<(), TrainError> {
        let dir = self.layout.weights(version);
        let tmp = dir.with_file_name(format!(".v{version}.tmp"));
        for stale in [&tmp, &dir] {
            match std::fs::remove_dir_all(stale) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(TrainError::File { path: stale.clone(), error: e }),
                _ => {}
            }
        }
        std::fs::create_dir_all(&tmp).map_err(TrainError::at(&tmp))?;
        policy.save(&tmp)?;
        std::fs::rename(&tmp, &dir).map_err(TrainError::at(&dir))?;
        self.published.insert(version);
        self.prune(version)
    }

    fn issue(&mut self, _: &mut dyn Policy, rounds: &[RoundSpec], _: &mut dyn FnMut(usize, usize)) -> Result<(), TrainError> {
        for round in rounds {
            if !self.published.contains(&round.version) {
                return Err(TrainError::Other(format!(
                    "round {} names weights version {} before it was published",
                    round.id, round.version
                )));
            }
            self.index.rounds.push(Issued { round: round.clone(), attempt: 0 });
        }
        self.write_index()
    }

    fn collect(&mut self, rounds: &[RoundSpec], progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<RoundOutput>, TrainError> {
        let place = |index: &Index, id: u64| index.rounds.iter().position(|r| r.round.id == id);
        if let Some(r) = rounds.iter().find(|r| place(&self.index, r.id).is_none()) {
            return Err(TrainError::Other(format!("round {} was collected before it was issued", r.id)));
        }
        let mut outputs: Vec<Option<RoundOutput>> = vec![None; rounds.len()];
        let mut done = 0;
        let total_rounds = rounds.len();
        // Progress counts rounds here: a worker reports nothing before its round is done.
        progress(0, total_rounds);
        while done < total_rounds {
            for (j, round) in rounds.iter().enumerate() {
                if outputs[j].is_some() {
                    continue;
                }
                let i = place(&self.index, round.id).expect("issued and not yet collected");
                let Some(result) = self.result_of(&self.index.rounds[i])? else { continue };
                let output = result.outcome.map_err(|message| {
                    TrainError::Other(format!("rollout worker w{} failed round {}: {message}", result.worker, result.round.id))
                })?;
                outputs[j] = Some(output);
                done += 1;
                progress(done, total_rounds);
            }
            if done == total_rounds {
                break;
            }
            let pending: Vec<usize> =
                rounds.iter().zip(&outputs).filter(|(_, o)| o.is_none()).filter_map(|(r, _)| place(&self.index, r.id)).collect();
            if self.reissue_stale(&pending)? {
                self.write_index()?;
            }
            if let Some(watch) = &mut self.watch {
                watch().map_err(TrainError::Other)?;
            }
            std::thread::sleep(POLL);
        }
        // Collected: out of the index (a late duplicate finds its round gone and is ignored),
        // then its claims and results are deleted (a late one written after is never read).
        let ids: BTreeSet<u64> = rounds.iter().map(|r| r.id).collect();
        let (collected, issued): (Vec<Issued>, Vec<Issued>) =
            std::mem::take(&mut self.index.rounds).into_iter().partition(|r| ids.contains(&r.round.id));
        self.index.rounds = issued;
        self.write_index()?;
        for issued in &collected {
            for attempt in 0..=issued.attempt {
                let inc = &self.index.incarnation;
                for path in [self.layout.claim(inc, issued.round.id, attempt), self.layout.result(inc, issued.round.id, attempt)] {
                    match std::fs::remove_file(&path) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(TrainError::File { path, error: e }),
                        _ => {}
                    }
                }
            }
        }
        Ok(outputs.into_iter().map(|o| o.expect("every round collected")).collect())
    }

    fn take_faults(&mut self) -> Faults {
        std::mem::take(&mut self.faults)
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.beating.store(false, Ordering::SeqCst);
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::dist::try_claim;
    use crate::dist::wire::RoundResult;
    use arl_core::policy::{Generation, PolicyError, SamplingParams, ScoreParams, Scores};

    /// The trainer's policy, which a coordinator never samples with.
    struct Unused;

    impl Policy for Unused {
        fn generate(&mut self, _: &[Vec<u32>], _: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
            unreachable!("workers sample")
        }
        fn score(&self, _: &[Vec<u32>], _: Option<&[Vec<usize>]>, _: ScoreParams) -> Result<Scores, PolicyError> {
            unreachable!("workers sample")
        }
    }

    fn coordinator(name: &str, max_round_attempts: u32) -> (Coordinator, Layout, RoundSpec) {
        let dir = std::env::temp_dir().join(format!("arl-coordinator-{name}-{}", std::process::id()));
        let cluster = ClusterConfig { lease_timeout_s: 0.05, max_round_attempts, ..ClusterConfig::default() };
        let mut c = Coordinator::create(&dir, &cluster, "test").unwrap();
        c.published.insert(0);
        let layout = c.layout().clone();
        let spec = RoundSpec { id: 0, version: 0, position: 4, group_base: 0, seed: 9, task_ids: vec!["t".into()] };
        (c, layout, spec)
    }

    /// The index as a worker reads it.
    fn issued(layout: &Layout) -> Vec<Issued> {
        read_json::<Index>(&layout.index()).unwrap().unwrap().rounds
    }

    fn claim(layout: &Layout, round: u64, attempt: u32, worker: u32) -> bool {
        try_claim(&layout.claim("test", round, attempt), &Claim { worker, pid: 0, host: "h".into() }).unwrap()
    }

    #[test]
    fn a_round_whose_workers_keep_dying_stops_the_run_in_one_line() {
        let (mut c, layout, spec) = coordinator("dying", 2);
        // The trainer's waits call this: a worker that claims every attempt and never beats.
        let w = layout.clone();
        c.set_watch(Box::new(move || {
            for r in issued(&w) {
                claim(&w, r.round.id, r.attempt, 7);
            }
            Ok(())
        }));
        let err = c.run(&mut Unused, &[spec], &mut |_, _| {}).unwrap_err().to_string();
        assert!(err.starts_with("round 0 was issued 2 times and no worker finished it (the last, w7 on h pid 0,"), "{err}");
        assert!(!err.contains('\n'));
        assert_eq!(c.take_faults(), Faults { rounds_retried: 1, workers_lost: 1 });
        let _ = std::fs::remove_dir_all(layout.root.parent().unwrap());
    }

    #[test]
    fn a_lost_round_is_issued_again_and_the_first_result_of_any_attempt_is_taken() {
        let (mut c, layout, spec) = coordinator("late", 3);
        let output = RoundOutput {
            episodes: vec![arl_core::Episode { task_id: "t".into(), reward: 0.5, ..Default::default() }],
            ..Default::default()
        };
        // w3 claims attempt 0 and stops beating; once the round is issued again, its result
        // arrives after all (slow, not dead): it is taken, and attempt 1 is never waited for.
        let (w, late) = (layout.clone(), output.clone());
        let polls = Arc::new(AtomicU32::new(0));
        let seen = polls.clone();
        c.set_watch(Box::new(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            for r in issued(&w) {
                match r.attempt {
                    0 => {
                        claim(&w, r.round.id, 0, 3);
                    }
                    _ => {
                        let result = RoundResult { protocol: PROTOCOL, worker: 3, round: r.round.clone(), outcome: Ok(late.clone()) };
                        write_atomic(&w.result("test", r.round.id, 0), &wire::encode(&result)).unwrap();
                    }
                }
            }
            Ok(())
        }));
        let got = c.run(&mut Unused, std::slice::from_ref(&spec), &mut |_, _| {}).unwrap();
        assert_eq!(got, vec![output]);
        assert_eq!(c.take_faults(), Faults { rounds_retried: 1, workers_lost: 1 });
        assert!(polls.load(Ordering::SeqCst) > 1);
        // Collected: the round left the index, and its files the folder.
        assert!(issued(&layout).is_empty());
        assert!(!layout.result("test", 0, 0).exists() && !layout.claim("test", 0, 0).exists());

        // A result for another spec than the one issued stops the run.
        let other = RoundSpec { id: 1, seed: 10, ..spec };
        let w = layout.clone();
        c.set_watch(Box::new(move || {
            for r in issued(&w) {
                let wrong = RoundSpec { seed: 11, ..r.round.clone() };
                let result = RoundResult { protocol: PROTOCOL, worker: 4, round: wrong, outcome: Ok(RoundOutput::default()) };
                write_atomic(&w.result("test", r.round.id, r.attempt), &wire::encode(&result)).unwrap();
            }
            Ok(())
        }));
        let err = c.run(&mut Unused, &[other], &mut |_, _| {}).unwrap_err().to_string();
        assert!(err.contains("the worker rolled out another round than the trainer issued as round 1"), "{err}");
        let _ = std::fs::remove_dir_all(layout.root.parent().unwrap());
    }
}
