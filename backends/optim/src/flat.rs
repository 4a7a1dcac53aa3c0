//! AdamW and the global clip over flat buffers: the gradients of all trainable parameters of
//! one dtype (and one step count) concatenated into one vector, the norm, the clip, both
//! moments and the update computed on it — a dozen tensor ops per step instead of ~19 per
//! parameter (burn's `OptimizerAdaptor<AdamW>` and a per-tensor clip: ~5.9k ops for the 310
//! parameters of Qwen3-0.6B, each a kernel launch on a GPU). The moments live flat between
//! steps. On a device that computes in host memory (burn-flex, libtorch's CPU) every parameter
//! is its own group: no launches to save there, and no concatenation to pay. The arithmetic is burn 0.21's `AdamW`, op for op and with the same f32 scalars, so
//! the weights and moments are burn's bit for bit; only the norm's summation order differs
//! (one sum over the buffer, not one per tensor), so a clipped step equals it to rounding.
//!
//! A parameter without a gradient in a step is not touched (no decay, no moment decay, its
//! step count kept), as burn does; parameters are grouped by dtype and step count, so such a
//! step regroups the buffers (once; later steps reuse the new groups).

use std::collections::BTreeMap;

use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, ElementConversion, Tensor};

use crate::OptimConfig;

/// A flat buffer on the module's inner (non-autodiff) backend.
type Flat<B> = Tensor<<B as AutodiffBackend>::InnerBackend, 1>;

/// Parameters (index, value) under a key, in buffer order.
type Keyed<K, T> = Vec<(K, Vec<(usize, T)>)>;

/// One step's group: its key, members (index, size) and flat gradient.
type StepGroup<B> = ((DType, usize), Vec<(usize, usize)>, Flat<B>);

/// The moments of the parameters that share a dtype and a step count, flat.
#[derive(Clone)]
pub(crate) struct Group<B: AutodiffBackend> {
    pub dtype: DType,
    /// Steps taken (burn's `time`).
    pub time: usize,
    /// Trainable-parameter indices (visit order) and element counts, in buffer order.
    pub members: Vec<(usize, usize)>,
    pub m: Flat<B>,
    pub v: Flat<B>,
}

impl<B: AutodiffBackend> Group<B> {
    /// Where member `index` lies in the buffers.
    pub fn range(&self, index: usize) -> Option<core::ops::Range<usize>> {
        let mut at = 0;
        for &(i, n) in &self.members {
            if i == index {
                return Some(at..at + n);
            }
            at += n;
        }
        None
    }
}

/// One parameter's moments and step count, outside any group.
pub(crate) struct Moments<B: AutodiffBackend> {
    pub dtype: DType,
    pub time: usize,
    pub m: Flat<B>,
    pub v: Flat<B>,
}

/// AdamW's state: groups of flat moments.
#[derive(Clone)]
pub(crate) struct FlatAdamW<B: AutodiffBackend> {
    pub groups: Vec<Group<B>>,
}

/// What a step found before changing anything.
pub(crate) struct Outcome {
    pub grad_norm: f64,
    pub non_finite: bool,
}

impl<B: AutodiffBackend> FlatAdamW<B> {
    pub fn new() -> Self {
        Self { groups: Vec::new() }
    }

    /// Each parameter's moments, taken out of the groups (which are emptied).
    pub fn split(&mut self) -> BTreeMap<usize, Moments<B>> {
        let mut out = BTreeMap::new();
        for g in self.groups.drain(..) {
            let mut at = 0;
            for &(i, n) in &g.members {
                let part = |t: &Flat<B>| if g.members.len() == 1 { t.clone() } else { t.clone().narrow(0, at, n) };
                out.insert(i, Moments { dtype: g.dtype, time: g.time, m: part(&g.m), v: part(&g.v) });
                at += n;
            }
        }
        out
    }

    /// Groups from single parameters' moments: by dtype and step count, in index order.
    pub fn join(parts: BTreeMap<usize, Moments<B>>) -> Vec<Group<B>> {
        let mut keyed: Keyed<(DType, usize), Moments<B>> = Vec::new();
        for (i, mo) in parts {
            let key = (mo.dtype, mo.time);
            match keyed.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push((i, mo)),
                None => keyed.push((key, vec![(i, mo)])),
            }
        }
        keyed
            .into_iter()
            .map(|((dtype, time), parts)| {
                let members = parts.iter().map(|(i, mo)| (*i, mo.m.dims()[0])).collect();
                let (ms, vs): (Vec<_>, Vec<_>) = parts.into_iter().map(|(_, mo)| (mo.m, mo.v)).unzip();
                Group { dtype, time, members, m: cat(ms), v: cat(vs) }
            })
            .collect()
    }

    /// Clip `grads` globally at `config.grad_clip` and take one AdamW step at `lr`. With a
    /// non-finite norm nothing changes (module and moments).
    pub fn step<M: AutodiffModule<B>>(&mut self, module: M, grads: GradientsParams, config: &OptimConfig, lr: f64) -> (M, Outcome) {
        // The gradients, flat, in parameter order.
        let mut taken = Take::<B> { grads, index: 0, found: Vec::new() };
        module.visit(&mut taken);
        let found = taken.found;
        // This step's groups: by dtype and the step count before it; on a device that computes
        // in host memory one per parameter (below).
        let per_parameter = found.first().is_some_and(|(_, g)| computes_on_host::<B::InnerBackend>(&g.device()));
        let time_of = |i: usize| self.groups.iter().find(|g| g.range(i).is_some()).map_or(0, |g| g.time);
        let mut keyed: Keyed<(DType, usize, usize), Flat<B>> = Vec::new();
        for (i, g) in found {
            let key = (g.dtype(), time_of(i), if per_parameter { i } else { 0 });
            match keyed.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push((i, g)),
                None => keyed.push((key, vec![(i, g)])),
            }
        }
        let mut flat: Vec<StepGroup<B>> = keyed
            .into_iter()
            .map(|((dtype, time, _), parts)| {
                let members = parts.iter().map(|(i, g)| (*i, g.dims()[0])).collect();
                ((dtype, time), members, cat(parts.into_iter().map(|(_, g)| g).collect()))
            })
            .collect();
        // The global norm (squares summed in f32), then the clip: torch's `clip_grad_norm_`.
        let sq = flat.iter().map(|(_, _, g)| to_f32(g.clone()).powi_scalar(2).sum()).reduce(|a, b| a + b);
        let grad_norm = sq.map_or(0.0, |s| s.into_scalar().elem::<f64>().sqrt());
        if !grad_norm.is_finite() {
            return (module, Outcome { grad_norm, non_finite: true });
        }
        if config.grad_clip > 0.0 {
            let coef = config.grad_clip / (grad_norm + 1e-6);
            if coef < 1.0 {
                for (_, _, g) in &mut flat {
                    *g = g.clone().mul_scalar(coef);
                }
            }
        }
        // The moments of exactly these groups, regrouped when the membership changed.
        let same = self.groups.len() == flat.len()
            && flat.iter().all(|((dtype, time), members, _)| {
                self.groups.iter().any(|g| g.dtype == *dtype && g.time == *time && g.members == *members)
            });
        let mut prior: Vec<Option<[Flat<B>; 2]>> = Vec::with_capacity(flat.len());
        let mut idle = Vec::new();
        if same {
            for (_, members, _) in &flat {
                let at = self.groups.iter().position(|g| g.members == *members).expect("a group with these members");
                let g = self.groups.swap_remove(at);
                prior.push(Some([g.m, g.v]));
            }
        } else {
            let mut parts = self.split();
            for ((_, time), members, _) in &flat {
                if *time == 0 {
                    prior.push(None);
                    continue;
                }
                let (ms, vs): (Vec<_>, Vec<_>) = members
                    .iter()
                    .map(|(i, _)| {
                        let mo = parts.remove(i).expect("moments of a parameter that stepped before");
                        (mo.m, mo.v)
                    })
                    .unzip();
                prior.push(Some([cat(ms), cat(vs)]));
            }
            // Parameters without a gradient this step keep their moments and count.
            idle = Self::join(parts);
        }
        // burn 0.21's AdamW (`AdaptiveMomentumW::transform`, `AdamW::step`), on the buffers.
        let (b1, b2, eps, wd) = (config.beta1 as f32, config.beta2 as f32, config.eps as f32, config.weight_decay as f32);
        let (f1, f2) = (1.0 - b1, 1.0 - b2);
        let mut steps = BTreeMap::new();
        let mut groups = idle;
        for (((dtype, time), members, g), prior) in flat.into_iter().zip(prior) {
            let (m, v) = match prior {
                Some([m, v]) => (m.mul_scalar(b1).add(g.clone().mul_scalar(f1)), v.mul_scalar(b2).add(g.square().mul_scalar(f2))),
                None => (g.clone().mul_scalar(f1), g.square().mul_scalar(f2)),
            };
            let time = time + 1;
            let m_hat = m.clone().div_scalar(1f32 - b1.powi(time as i32));
            let v_hat = v.clone().div_scalar(1f32 - b2.powi(time as i32));
            let delta = m_hat.div(v_hat.sqrt().add_scalar(eps)).mul_scalar(lr);
            let mut at = 0;
            for &(i, n) in &members {
                let part = if members.len() == 1 { delta.clone() } else { delta.clone().narrow(0, at, n) };
                steps.insert(i, part);
                at += n;
            }
            groups.push(Group { dtype, time, members, m, v });
        }
        self.groups = groups;
        let decay_rate = lr * (wd as f64);
        let module = module.map(&mut Apply::<B> { steps, decay_rate, index: 0 });
        (module, Outcome { grad_norm, non_finite: false })
    }
}

/// Whether `device` computes in host memory (burn-flex, ndarray, libtorch on the CPU). There a
/// launch costs nothing worth saving and the concatenation is one more pass over every
/// gradient (the optimizer step measured 1.1–1.2× slower flat on burn-flex), so each parameter
/// is a group of its own: the same arithmetic, burn's per-tensor ops.
fn computes_on_host<B: burn::tensor::backend::Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    ["flex", "ndarray", "libtorch<cpu>"].iter().any(|n| name.contains(n))
}

fn cat<B: burn::tensor::backend::Backend>(mut parts: Vec<Tensor<B, 1>>) -> Tensor<B, 1> {
    if parts.len() == 1 { parts.pop().expect("one part") } else { Tensor::cat(parts, 0) }
}

fn to_f32<B: burn::tensor::backend::Backend>(t: Tensor<B, 1>) -> Tensor<B, 1> {
    if t.dtype() == DType::F32 { t } else { t.cast(DType::F32) }
}

/// Takes each trainable parameter's gradient out of the set, flat, with its index.
struct Take<B: AutodiffBackend> {
    grads: GradientsParams,
    index: usize,
    found: Vec<(usize, Flat<B>)>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Take<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if !param.val().is_require_grad() {
            return;
        }
        let i = self.index;
        self.index += 1;
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let n = g.shape().num_elements();
            self.found.push((i, g.reshape([n])));
        }
    }
}

/// `p ← p·(1 − lr·wd) − step` on each parameter that has a step.
struct Apply<B: AutodiffBackend> {
    steps: BTreeMap<usize, Flat<B>>,
    decay_rate: f64,
    index: usize,
}

impl<B: AutodiffBackend> ModuleMapper<B> for Apply<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        if !param.is_require_grad() {
            return param;
        }
        let i = self.index;
        self.index += 1;
        let Some(step) = self.steps.remove(&i) else { return param };
        let (id, tensor, mapper): (ParamId, Tensor<B, D>, _) = param.consume();
        let inner = tensor.inner();
        let dims = inner.dims();
        let decayed = if self.decay_rate == 0.0 { inner } else { inner.mul_scalar(1.0 - self.decay_rate) };
        let updated = Tensor::from_inner(decayed - step.reshape(dims)).require_grad();
        Param::from_mapped_value(id, updated, mapper)
    }
}

#[cfg(test)]
mod tests {
    use burn::Dispatch;

    /// burn-flex (plain and autodiff's inner device) keeps a group per parameter; the
    /// recording backend, standing in for a GPU, concatenates.
    #[test]
    fn cpu_devices_step_per_parameter() {
        let flex = burn::DispatchDevice::Flex(Default::default());
        assert!(super::computes_on_host::<Dispatch>(&flex));
        assert!(!super::computes_on_host::<crate::opcount::Counting>(&Default::default()));
    }
}
