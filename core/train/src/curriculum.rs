//! Which training tasks a step draws (`trainer.task_sampler`).
//!
//! - **uniform**: a seeded permutation of the tasks, handed out in turn (round after round);
//!   its only state is the data position.
//! - **difficulty** (prime-rl's difficulty pools, AReaL's dynamic filter): every task keeps
//!   its pass counts over its last `window` groups; draws favour tasks whose rate is inside the
//!   band ([`DifficultyConfig`]), with shares of unseen and of solved/failed tasks. The state
//!   (the generator and every task's counts) is checkpointed, so `--resume` draws exactly what
//!   an uninterrupted run would have drawn.

use std::collections::{BTreeMap, HashMap, VecDeque};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use arl_core::config::{DifficultyConfig, TaskSampler, TrainerConfig};
use arl_core::rng::SplitMix64;
use arl_core::{Episode, Task};

/// The size of each difficulty pool when a step starts drawing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PoolSizes {
    pub unseen: usize,
    pub too_hard: usize,
    pub learning: usize,
    pub too_easy: usize,
}

/// The difficulty sampler's state, as checkpoints hold it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DifficultyState {
    /// The generator's raw state.
    pub rng: u64,
    /// Per task id: `[passed, episodes]` of its last groups, oldest first.
    pub recent: BTreeMap<String, VecDeque<[u32; 2]>>,
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    Unseen,
    TooHard,
    Learning,
    TooEasy,
}

/// A run's task sampler over its training tasks (indices into the `tasks` it was made for).
pub struct Curriculum {
    ids: Vec<String>,
    index: HashMap<String, usize>,
    kind: Kind,
    /// Tasks handed out so far (the uniform sampler's data position).
    used: usize,
}

enum Kind {
    Uniform { order: Vec<usize> },
    Difficulty { config: DifficultyConfig, rng: SplitMix64, recent: Vec<VecDeque<[u32; 2]>>, this_step: Vec<usize> },
}

impl Curriculum {
    /// The sampler `config` names over `tasks`, continuing from `used` tasks handed out and,
    /// for `difficulty`, from `state` (a checkpoint's; `None`: a fresh start).
    pub fn new(config: &TrainerConfig, tasks: &[Task], used: usize, state: Option<&DifficultyState>) -> Result<Self, String> {
        let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
        let index: HashMap<String, usize> = ids.iter().enumerate().map(|(i, id)| (id.clone(), i)).collect();
        if index.len() != ids.len() {
            let dup = ids.iter().enumerate().find(|(i, id)| index[*id] != *i).map(|(_, id)| id.clone()).unwrap_or_default();
            return Err(format!("training task id `{dup}` appears twice; task ids must be unique"));
        }
        let kind = match config.task_sampler {
            TaskSampler::Uniform => Kind::Uniform { order: super::trainer::shuffled(tasks.len(), config.seed) },
            TaskSampler::Difficulty => {
                let mut recent = vec![VecDeque::new(); tasks.len()];
                let rng = match state {
                    Some(s) => {
                        for (id, counts) in &s.recent {
                            let i = index
                                .get(id)
                                .ok_or_else(|| format!("the checkpoint's task sampler knows task `{id}`, which this env does not have"))?;
                            recent[*i] = counts.clone();
                        }
                        s.rng
                    }
                    None => config.seed ^ 0xd1ff_1c01_7a5c_0de5,
                };
                Kind::Difficulty { config: config.difficulty.clone(), rng: SplitMix64(rng), recent, this_step: Vec::new() }
            }
        };
        Ok(Self { ids, index, kind, used })
    }

    /// Tasks handed out so far.
    pub fn used(&self) -> usize {
        self.used
    }

    /// The pool sizes before this step's draws (`None` for the uniform sampler).
    pub fn pools(&self) -> Option<PoolSizes> {
        let Kind::Difficulty { config, recent, .. } = &self.kind else { return None };
        let mut p = PoolSizes::default();
        for r in recent {
            match pool(r, config) {
                Pool::Unseen => p.unseen += 1,
                Pool::TooHard => p.too_hard += 1,
                Pool::Learning => p.learning += 1,
                Pool::TooEasy => p.too_easy += 1,
            }
        }
        Some(p)
    }

    /// The next `n` tasks (indices into the tasks), for one rollout round of the current step.
    pub fn draw(&mut self, n: usize) -> Vec<usize> {
        let start = self.used;
        self.used += n;
        match &mut self.kind {
            Kind::Uniform { order } => (0..n).map(|j| order[(start + j) % order.len()]).collect(),
            Kind::Difficulty { config, rng, recent, this_step } => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    let pick = draw_one(config, rng, recent, this_step);
                    this_step.push(pick);
                    out.push(pick);
                }
                out
            }
        }
    }

    /// Record a step's groups (every sampled episode; those lost to infrastructure failures are
    /// already out) and end the step.
    pub fn observe(&mut self, episodes: &[Episode]) {
        let Kind::Difficulty { config, recent, this_step, .. } = &mut self.kind else { return };
        this_step.clear();
        // A group is one task's episodes of this step: `[passed, episodes]` per group, in order.
        let mut groups: Vec<(usize, usize, [u32; 2])> = Vec::new();
        for e in episodes {
            let Some(&task) = self.index.get(&e.task_id) else { continue };
            let at = match groups.iter().position(|(g, _, _)| *g == e.group) {
                Some(at) => at,
                None => {
                    groups.push((e.group, task, [0, 0]));
                    groups.len() - 1
                }
            };
            groups[at].2[0] += e.solved() as u32;
            groups[at].2[1] += 1;
        }
        for (_, task, counts) in groups {
            let r = &mut recent[task];
            r.push_back(counts);
            while r.len() > config.window as usize {
                r.pop_front();
            }
        }
    }

    /// The state a checkpoint keeps (`None` for the uniform sampler, whose state is `used`).
    pub fn state(&self) -> Option<DifficultyState> {
        let Kind::Difficulty { rng, recent, .. } = &self.kind else { return None };
        let recent = recent.iter().enumerate().filter(|(_, r)| !r.is_empty()).map(|(i, r)| (self.ids[i].clone(), r.clone())).collect();
        Some(DifficultyState { rng: rng.0, recent })
    }
}

fn pool(recent: &VecDeque<[u32; 2]>, config: &DifficultyConfig) -> Pool {
    let (passed, n) = recent.iter().fold((0u32, 0u32), |(p, n), c| (p + c[0], n + c[1]));
    if n == 0 {
        return Pool::Unseen;
    }
    let rate = passed as f64 / n as f64;
    if rate <= config.band[0] {
        Pool::TooHard
    } else if rate >= config.band[1] {
        Pool::TooEasy
    } else {
        Pool::Learning
    }
}

/// One draw: a pool by the shares (falling back from an empty one), then a task of it
/// uniformly, never one already drawn this step (unless every task has been).
fn draw_one(config: &DifficultyConfig, rng: &mut SplitMix64, recent: &[VecDeque<[u32; 2]>], this_step: &[usize]) -> usize {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let wanted = if u < config.unseen_share {
        0
    } else if u < config.unseen_share + config.revisit_share {
        2
    } else {
        1
    };
    let members = |which: usize| -> Vec<usize> {
        (0..recent.len())
            .filter(|i| !this_step.contains(i))
            .filter(|&i| match pool(&recent[i], config) {
                Pool::Unseen => which == 0,
                Pool::Learning => which == 1,
                Pool::TooHard | Pool::TooEasy => which == 2,
            })
            .collect()
    };
    // The wanted pool, then learning, unseen, the rest; then any task at all.
    for which in [wanted, 1, 0, 2] {
        let m = members(which);
        if !m.is_empty() {
            return m[(rng.next_u64() % m.len() as u64) as usize];
        }
    }
    (rng.next_u64() % recent.len() as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::Split;

    fn tasks(n: usize) -> Vec<Task> {
        (0..n).map(|i| Task { id: format!("t{i}"), family: "f".into(), split: Split::Train, data: serde_json::Value::Null }).collect()
    }

    fn difficulty() -> TrainerConfig {
        TrainerConfig { task_sampler: TaskSampler::Difficulty, seed: 7, ..TrainerConfig::default() }
    }

    /// A step's episodes: task `i` passes `rate(i)` of its 4 episodes.
    fn episodes(drawn: &[usize], passes: impl Fn(usize) -> u32) -> Vec<Episode> {
        let mut out = Vec::new();
        for (g, &i) in drawn.iter().enumerate() {
            for k in 0..4 {
                out.push(Episode { task_id: format!("t{i}"), group: g, reward: (k < passes(i)) as u32 as f64, ..Episode::default() });
            }
        }
        out
    }

    /// Task i passes (i mod 5) of 4: rates 0, ¼, ½, ¾, 1.
    fn world(i: usize) -> u32 {
        (i % 5) as u32
    }

    #[test]
    fn uniform_hands_out_the_seeded_order_round_after_round() {
        let t = tasks(5);
        let c = TrainerConfig { seed: 3, ..TrainerConfig::default() };
        let mut a = Curriculum::new(&c, &t, 0, None).unwrap();
        let first: Vec<usize> = (0..4).flat_map(|_| a.draw(3)).collect();
        let order = crate::trainer::shuffled(5, 3);
        assert_eq!(first, (0..12).map(|j| order[j % 5]).collect::<Vec<_>>());
        // Resuming at a data position continues the same sequence.
        let mut b = Curriculum::new(&c, &t, 6, None).unwrap();
        assert_eq!(b.draw(6), first[6..12]);
        assert_eq!((a.used(), a.state(), a.pools()), (12, None, None));
    }

    #[test]
    fn difficulty_draws_mostly_tasks_inside_the_band() {
        let t = tasks(50);
        let mut c = Curriculum::new(&difficulty(), &t, 0, None).unwrap();
        let mut learning_draws = 0;
        let mut total = 0;
        for step in 0..60 {
            let pools = c.pools().unwrap();
            assert_eq!(pools.unseen + pools.too_hard + pools.learning + pools.too_easy, 50);
            let drawn = c.draw(4);
            let mut unique = drawn.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), 4, "no task twice in a step: {drawn:?}");
            if step >= 30 {
                learning_draws += drawn.iter().filter(|&&i| (1..4).contains(&world(i))).count();
                total += drawn.len();
            }
            c.observe(&episodes(&drawn, world));
        }
        // 60 % of the tasks learn; once the pools have filled, the sampler's draws are mostly
        // theirs (≈ 1 − revisit_share − the unseen share while unseen tasks remain).
        let share = learning_draws as f64 / total as f64;
        assert!(share > 0.8, "{learning_draws} of {total}");
        let p = c.pools().unwrap();
        assert_eq!(p.learning, 30, "{p:?}");
    }

    #[test]
    fn difficulty_state_resumes_to_the_same_draws() {
        let t = tasks(40);
        let mut whole = Curriculum::new(&difficulty(), &t, 0, None).unwrap();
        let mut straight = Vec::new();
        for _ in 0..12 {
            let d = whole.draw(3);
            whole.observe(&episodes(&d, world));
            straight.push(d);
        }
        // A run killed after step 5: its state through JSON, as `trainer_state.json` holds it.
        let mut first = Curriculum::new(&difficulty(), &t, 0, None).unwrap();
        for _ in 0..5 {
            let d = first.draw(3);
            first.observe(&episodes(&d, world));
        }
        let saved: DifficultyState = serde_json::from_str(&serde_json::to_string(&first.state().unwrap()).unwrap()).unwrap();
        let mut resumed = Curriculum::new(&difficulty(), &t, first.used(), Some(&saved)).unwrap();
        for want in &straight[5..] {
            let d = resumed.draw(3);
            assert_eq!(&d, want);
            resumed.observe(&episodes(&d, world));
        }
        assert_eq!(resumed.state(), whole.state());
        // Another seed draws otherwise.
        let other = TrainerConfig { seed: 8, ..difficulty() };
        let mut o = Curriculum::new(&other, &t, 0, None).unwrap();
        assert_ne!((0..3).map(|_| o.draw(3)).collect::<Vec<_>>(), straight[..3]);
    }

    #[test]
    fn the_window_keeps_only_the_newest_groups() {
        let t = tasks(1);
        let c = TrainerConfig { difficulty: DifficultyConfig { window: 2, ..DifficultyConfig::default() }, ..difficulty() };
        let mut s = Curriculum::new(&c, &t, 0, None).unwrap();
        for passes in [4, 0, 0] {
            let d = s.draw(1);
            s.observe(&episodes(&d, |_| passes));
        }
        assert_eq!(s.state().unwrap().recent["t0"], VecDeque::from([[0, 4], [0, 4]]));
        assert_eq!(s.pools().unwrap().too_hard, 1);
    }

    #[test]
    fn a_state_naming_an_unknown_task_is_refused() {
        let state = DifficultyState { rng: 1, recent: BTreeMap::from([("gone".to_string(), VecDeque::from([[1, 2]]))]) };
        let err = Curriculum::new(&difficulty(), &tasks(3), 0, Some(&state)).err().unwrap();
        assert!(err.contains("`gone`"), "{err}");
        let mut dup = tasks(2);
        dup[1].id = "t0".into();
        assert!(Curriculum::new(&difficulty(), &dup, 0, None).err().unwrap().contains("`t0`"));
    }
}
