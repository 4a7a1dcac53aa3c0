//! [`Optim`]: accumulate micro-batch gradients, clip globally, take an AdamW step.

use burn::Dispatch;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::flat::FlatAdamW;

/// AdamW and clipping settings (torch's defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OptimConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Global gradient-norm clip; 0 disables it.
    pub grad_clip: f64,
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0, grad_clip: 1.0 }
    }
}

/// What one optimizer step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepStats {
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    pub clipped: bool,
    /// Micro-batches whose gradients went into the step.
    pub micro_batches: u32,
    /// The gradient norm was NaN or infinite: the step was not taken (weights and AdamW
    /// moments unchanged) and the gradients were dropped.
    #[serde(default)]
    pub non_finite: bool,
}

/// The optimizer of a module on `B` (burn's `Dispatch` unless a test records its ops): the
/// global clip and AdamW run over flat buffers ([`crate::flat`]), burn's AdamW to rounding.
pub struct Optim<M: AutodiffModule<B>, B: AutodiffBackend = Dispatch> {
    pub(crate) config: OptimConfig,
    pub(crate) adamw: FlatAdamW<B>,
    accumulated: GradientsAccumulator<M>,
    micro_batches: u32,
}

impl<B: AutodiffBackend, M: AutodiffModule<B>> Optim<M, B> {
    pub fn new(config: OptimConfig) -> Self {
        Self { config, adamw: FlatAdamW::new(), accumulated: GradientsAccumulator::new(), micro_batches: 0 }
    }

    pub fn config(&self) -> &OptimConfig {
        &self.config
    }

    /// Backpropagate one micro-batch's (already normalized) scalar loss and add its
    /// gradients to the accumulated ones.
    pub fn backward(&mut self, module: &M, loss: Tensor<B, 1>) {
        let grads = GradientsParams::from_grads(loss.backward(), module);
        self.accumulated.accumulate(module, grads);
        self.micro_batches += 1;
    }

    /// Add a zero gradient for every trainable parameter (`require_grad`), counted as one
    /// micro-batch, so the next [`Optim::step`] is an AdamW step on a zero gradient, as torch
    /// takes after a backward through a loss weighted by zero: the moments decay, the step
    /// count advances, momentum and weight decay move the weights.
    pub fn backward_zero(&mut self, module: &M) {
        let mut zeros = ZeroGrads::<B> { grads: GradientsParams::new(), backend: std::marker::PhantomData };
        module.visit(&mut zeros);
        self.accumulated.accumulate(module, zeros.grads);
        self.micro_batches += 1;
    }

    /// Clip the accumulated gradients globally and take one AdamW step at `lr`.
    /// With nothing accumulated the module is returned unchanged; so it is when the
    /// gradient norm is not finite (`non_finite`), since one NaN would reach every weight.
    pub fn step(&mut self, module: M, lr: f64) -> (M, StepStats) {
        let micro_batches = std::mem::take(&mut self.micro_batches);
        if micro_batches == 0 {
            return (module, StepStats::default());
        }
        let grads = self.accumulated.grads();
        let (module, outcome) = self.adamw.step(module, grads, &self.config, lr);
        let grad_norm = outcome.grad_norm;
        if outcome.non_finite {
            return (module, StepStats { grad_norm, clipped: false, micro_batches, non_finite: true });
        }
        let clipped = self.config.grad_clip > 0.0 && grad_norm + 1e-6 > self.config.grad_clip;
        (module, StepStats { grad_norm, clipped, micro_batches, non_finite: false })
    }

    /// Drop accumulated gradients without stepping.
    pub fn zero_grad(&mut self) {
        let _ = self.accumulated.grads();
        self.micro_batches = 0;
    }
}

/// A zero gradient for every parameter that trains.
struct ZeroGrads<B> {
    grads: GradientsParams,
    backend: std::marker::PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for ZeroGrads<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if param.val().is_require_grad() {
            self.grads.register::<B::InnerBackend, D>(param.id, param.val().inner().zeros_like());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    use crate::testing::{Two, device, two};
    use crate::{clip_global_norm, global_grad_norm};

    fn model() -> Two<Dispatch> {
        two(vec![1.0, -2.0, 0.5, 3.0], vec![0.25, -1.0])
    }

    /// loss = Σ a·ca + Σ b·cb, so the gradients are exactly ca and cb.
    fn linear_loss(m: &Two<Dispatch>, scale: f32) -> Tensor<Dispatch, 1> {
        let d = device();
        let ca = Tensor::<Dispatch, 2>::from_data(TensorData::new(vec![3.0f32, 0.0, -4.0, 0.0], [2, 2]), &d);
        let cb = Tensor::<Dispatch, 1>::from_data(TensorData::new(vec![0.0f32, 12.0], [2]), &d);
        ((m.a.val() * ca).sum() + (m.b.val() * cb).sum()).mul_scalar(scale)
    }

    fn values(t: Tensor<Dispatch, 2>) -> Vec<f32> {
        t.into_data().to_vec().unwrap()
    }

    #[test]
    fn global_norm_and_clip_match_torch_clip_grad_norm() {
        let m = model();
        let mut grads = GradientsParams::from_grads(linear_loss(&m, 1.0).backward(), &m);
        // ‖(3, 0, −4, 0, 0, 12)‖ = 13, by hand.
        let norm = clip_global_norm::<Dispatch, _>(&m, &mut grads, 1.0);
        assert!((norm - 13.0).abs() < 1e-5, "{norm}");
        let ga: Tensor<Dispatch, 2> = grads.get(m.a.id).unwrap();
        let coef = 1.0 / (13.0 + 1e-6);
        for (got, want) in values(ga).iter().zip([3.0, 0.0, -4.0, 0.0]) {
            assert!((*got as f64 - want * coef).abs() < 1e-6, "{got} vs {}", want * coef);
        }
        let after = global_grad_norm::<Dispatch, _>(&m, &grads);
        assert!((after - 1.0).abs() < 1e-5, "clipped norm {after}");
    }

    /// bf16 gradients: the squares and their sum are taken in f32, so the norm is the norm of
    /// the bf16 gradient values to f32 accuracy (a bf16 sum keeps 8 mantissa bits: 0.1% off).
    #[test]
    fn the_global_norm_of_bf16_gradients_is_accumulated_in_f32() {
        use burn::module::{Module, Param};
        use burn::tensor::DType;
        #[derive(Module, Debug)]
        struct Wide<B: burn::tensor::backend::Backend> {
            w: Param<Tensor<B, 1>>,
        }
        let n = 4096;
        let d = device();
        let m = Wide { w: Param::from_tensor(Tensor::<Dispatch, 1>::from_data(TensorData::new(vec![0.5f32; n], [n]), (&d, DType::BF16))) };
        let coef: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 / n as f32).collect();
        let c = Tensor::<Dispatch, 1>::from_data(TensorData::new(coef.clone(), [n]), (&d, DType::BF16));
        let grads = GradientsParams::from_grads((m.w.val() * c).sum().backward(), &m);
        let g: Tensor<Dispatch, 1> = grads.get(m.w.id).unwrap();
        assert_eq!(g.dtype(), DType::BF16);
        let g: Vec<f64> = g.into_data().convert::<f64>().to_vec::<f64>().unwrap();
        assert_eq!(g.len(), n);
        let exact = g.iter().map(|x| x * x).sum::<f64>().sqrt();
        let norm = global_grad_norm::<Dispatch, _>(&m, &grads);
        // An f32 sum of 4096 squares is within ~1e-5 here; the bf16 one is 1e-3 off.
        assert!((norm - exact).abs() <= 1e-4 * exact, "norm {norm} vs {exact} (f64 over the bf16 values)");
    }

    #[test]
    fn clip_leaves_small_gradients_alone() {
        let m = model();
        let mut grads = GradientsParams::from_grads(linear_loss(&m, 0.01).backward(), &m);
        let norm = clip_global_norm::<Dispatch, _>(&m, &mut grads, 1.0);
        assert!((norm - 0.13).abs() < 1e-6);
        let ga: Tensor<Dispatch, 2> = grads.get(m.a.id).unwrap();
        assert!((values(ga)[0] - 0.03).abs() < 1e-7);
    }

    #[test]
    fn micro_batches_accumulate_to_the_full_gradient() {
        // Two halves of a loss give the gradient of the whole: check through the norm.
        let m = model();
        let mut optim = Optim::<Two<Dispatch>>::new(OptimConfig { grad_clip: 0.0, ..Default::default() });
        optim.backward(&m, linear_loss(&m, 0.5));
        optim.backward(&m, linear_loss(&m, 0.5));
        let grads = optim.accumulated.grads();
        assert!((global_grad_norm::<Dispatch, _>(&m, &grads) - 13.0).abs() < 1e-5);
    }

    #[test]
    fn adamw_steps_follow_the_torch_update_rule() {
        // Constant gradient g: every bias-corrected Adam step moves a parameter by
        // lr·g/(|g|+ε); with decay, p ← p(1 − lr·wd) − lr·g/(|g|+ε) (torch AdamW).
        let (lr, wd, eps) = (0.1, 0.5, 1e-8);
        let mut m = model();
        let mut optim = Optim::<Two<Dispatch>>::new(OptimConfig { grad_clip: 0.0, weight_decay: wd, eps, ..Default::default() });
        let mut expected: Vec<f64> = vec![1.0, -2.0, 0.5, 3.0];
        let g = [3.0f64, 0.0, -4.0, 0.0];
        for _ in 0..2 {
            optim.backward(&m, linear_loss(&m, 1.0));
            let (next, stats) = optim.step(m, lr);
            m = next;
            assert_eq!(stats.micro_batches, 1);
            for (p, g) in expected.iter_mut().zip(g) {
                *p = *p * (1.0 - lr * wd) - lr * g / (g.abs() + eps);
            }
        }
        for (got, want) in values(m.a.val()).iter().zip(&expected) {
            assert!((*got as f64 - want).abs() < 1e-5, "{got} vs {want}");
        }
    }

    /// After one step on g, a step on a zero gradient (`backward_zero`) is torch's AdamW step
    /// with g = 0: m ← β₁m, v ← β₂v, bias corrections of step 2, decay, and the momentum moves
    /// the weights again; without `backward_zero` nothing moves.
    #[test]
    fn a_step_on_a_zero_gradient_follows_the_torch_update_rule() {
        let (lr, wd, eps, b1, b2) = (0.1, 0.5, 1e-8, 0.9f64, 0.999f64);
        let config = OptimConfig { grad_clip: 0.0, weight_decay: wd, eps, ..Default::default() };
        let mut m = model();
        let mut optim = Optim::<Two<Dispatch>>::new(config);
        optim.backward(&m, linear_loss(&m, 1.0));
        m = optim.step(m, lr).0;
        optim.backward_zero(&m);
        let (m, stats) = optim.step(m, lr);
        assert_eq!((stats.grad_norm, stats.micro_batches, stats.non_finite), (0.0, 1, false));
        let mut expected: Vec<f64> = vec![1.0, -2.0, 0.5, 3.0];
        for (p, g) in expected.iter_mut().zip([3.0f64, 0.0, -4.0, 0.0]) {
            // Step 1 on g, then step 2 on 0 with the moments of step 1.
            *p = *p * (1.0 - lr * wd) - lr * g / (g.abs() + eps);
            let (m2, v2) = (b1 * (1.0 - b1) * g, b2 * (1.0 - b2) * g * g);
            let (m_hat, v_hat) = (m2 / (1.0 - b1 * b1), v2 / (1.0 - b2 * b2));
            *p = *p * (1.0 - lr * wd) - lr * m_hat / (v_hat.sqrt() + eps);
        }
        let got = values(m.a.val());
        for (got, want) in got.iter().zip(&expected) {
            assert!((*got as f64 - want).abs() < 1e-5, "{got} vs {want}");
        }
        // a[0] was 0.85 after step 1; decay alone would leave 0.85·0.95 = 0.8075, and the
        // momentum takes about 0.67·lr more.
        assert!((got[0] as f64) < 0.8075 - 0.05, "{got:?}");
    }

    #[test]
    fn a_non_finite_gradient_is_not_applied() {
        // loss = Σ sqrt(a − a₀): value 0 at the start, gradient +∞ (d sqrt(x)/dx at 0).
        let m = model();
        let before = values(m.a.val());
        let mut optim = Optim::<Two<Dispatch>>::new(OptimConfig::default());
        let shift = Tensor::<Dispatch, 2>::from_data(TensorData::new(before.clone(), [2, 2]), &device());
        optim.backward(&m, (m.a.val() - shift).sqrt().sum());
        let (m, stats) = optim.step(m, 0.1);
        assert!(stats.non_finite && !stats.grad_norm.is_finite(), "{stats:?}");
        assert_eq!(values(m.a.val()), before, "weights unchanged");
        // The next finite step is a first AdamW step: the bad gradient left no moment behind.
        optim.backward(&m, linear_loss(&m, 1.0));
        let (m, stats) = optim.step(m, 0.1);
        assert!(!stats.non_finite);
        let moved = values(m.a.val());
        assert!((moved[0] as f64 - (1.0 - 0.1)).abs() < 1e-5, "{moved:?}");
    }

    /// The step is burn's `OptimizerAdaptor<AdamW>` after the per-tensor global clip it
    /// replaced: bit for bit unclipped, to rounding clipped (the norm is summed in another
    /// order), over steps where one parameter has no gradient (its moments wait, the buffers
    /// regroup), with weight decay, in f32 and bf16 — on burn-flex (a group per parameter) and
    /// on the recording backend (flat buffers, as on a GPU).
    #[test]
    fn the_step_is_burns_adamw_step_flat_or_not() {
        use crate::opcount::CountingAutodiff;
        check_against_burn::<Dispatch>(&device());
        let _lock = crate::opcount::lock();
        check_against_burn::<CountingAutodiff>(&Default::default());
    }

    fn check_against_burn<B: burn::tensor::backend::AutodiffBackend>(d: &B::Device) {
        use burn::module::Module;
        use burn::optim::{AdamWConfig, Optimizer};
        use burn::tensor::DType;
        #[derive(Module, Debug)]
        struct Three<B: burn::tensor::backend::Backend> {
            a: Param<Tensor<B, 2>>,
            b: Param<Tensor<B, 1>>,
            c: Param<Tensor<B, 2>>,
        }
        let make = |dtype: DType| {
            let t = |v: Vec<f32>, s: [usize; 2]| Param::from_tensor(Tensor::<B, 2>::from_data(TensorData::new(v, s), (d, dtype)));
            Three {
                a: t(vec![1.0, -2.0, 0.5, 3.0, 0.7, -0.1], [2, 3]),
                b: Param::from_tensor(Tensor::<B, 1>::from_data(TensorData::new(vec![0.25f32, -1.0], [2]), (d, dtype))),
                c: t(vec![0.3, -0.6, 0.9], [3, 1]),
            }
        };
        // Step 2 leaves `c` out of the loss: no gradient, no step for it.
        let loss = |m: &Three<B>, step: usize| {
            let ab = m.a.val().powi_scalar(2).sum().mul_scalar(0.5) + (m.b.val() * m.b.val().exp()).sum();
            if step == 2 { ab } else { ab + m.c.val().sin().sum().mul_scalar(3.0) }
        };
        let host = |m: &Three<B>| -> Vec<f32> {
            [m.a.val().into_data(), m.b.val().into_data(), m.c.val().into_data()]
                .into_iter()
                .flat_map(|d| d.convert::<f32>().to_vec::<f32>().unwrap())
                .collect()
        };
        for dtype in [DType::F32, DType::BF16] {
            for clip in [0.0, 0.5] {
                let config = OptimConfig { weight_decay: 0.1, grad_clip: clip, ..Default::default() };
                let mut ours = Optim::<Three<B>, B>::new(config.clone());
                let mut theirs = AdamWConfig::new()
                    .with_beta_1(config.beta1 as f32)
                    .with_beta_2(config.beta2 as f32)
                    .with_epsilon(config.eps as f32)
                    .with_weight_decay(config.weight_decay as f32)
                    .init::<B, Three<B>>();
                let (mut m1, mut m2) = (make(dtype), make(dtype));
                for step in 0..5 {
                    ours.backward(&m1, loss(&m1, step).reshape([1]));
                    let (next, stats) = ours.step(m1, 0.05);
                    m1 = next;
                    let mut grads = GradientsParams::from_grads(loss(&m2, step).backward(), &m2);
                    let norm = clip_global_norm::<B, _>(&m2, &mut grads, clip);
                    m2 = theirs.step(0.05, m2, grads);
                    let what = format!("{}, {dtype:?}, clip {clip}, step {step}", B::name(d));
                    assert!((stats.grad_norm - norm).abs() <= 1e-6 * norm, "{what}: norm {} vs {norm}", stats.grad_norm);
                    assert_eq!(stats.clipped, clip > 0.0, "{what}: the clip is active ({norm})");
                    let (ours_v, theirs_v) = (host(&m1), host(&m2));
                    if clip == 0.0 {
                        assert_eq!(ours_v, theirs_v, "{what}");
                    } else {
                        // One rounding of the coefficient: an f32 hair, or one bf16 step.
                        let tol = if dtype == DType::BF16 { 1.0 / 128.0 } else { 1e-6 };
                        for (x, y) in ours_v.iter().zip(&theirs_v) {
                            assert!((x - y).abs() <= tol * y.abs().max(1.0), "{what}: {ours_v:?} vs {theirs_v:?}");
                        }
                    }
                }
            }
        }
    }

    /// A step is a dozen ops on the flat buffers and five per parameter (three of them views),
    /// not burn's AdamW's 15 per parameter plus the per-tensor clip's 4: counted on the
    /// recording backend and pinned.
    #[test]
    fn a_step_runs_a_few_ops_per_parameter() {
        use crate::opcount::{self, CountingAutodiff};
        use burn::module::Module;
        #[derive(Module, Debug)]
        struct Many<B: burn::tensor::backend::Backend> {
            ps: Vec<Param<Tensor<B, 2>>>,
        }
        let _lock = opcount::lock();
        let d = Default::default();
        let count = |n: usize| -> Vec<usize> {
            let values = |i: usize| TensorData::new((0..6).map(|j| (i * 6 + j) as f32 * 0.1 - 1.0).collect::<Vec<_>>(), [2, 3]);
            let mut m = Many { ps: (0..n).map(|i| Param::from_tensor(Tensor::<CountingAutodiff, 2>::from_data(values(i), &d))).collect() };
            let mut optim = Optim::<Many<CountingAutodiff>, CountingAutodiff>::new(OptimConfig { weight_decay: 0.1, ..Default::default() });
            (0..2)
                .map(|_| {
                    let loss = m.ps.iter().map(|p| p.val().powi_scalar(2).sum()).reduce(|a, b| a + b).unwrap();
                    optim.backward(&m, loss);
                    opcount::take();
                    let (next, stats) = optim.step(m.clone(), 0.1);
                    assert!(stats.clipped);
                    m = next;
                    opcount::names(&opcount::take()).len()
                })
                .collect()
        };
        let (few, many) = (count(2), count(12));
        // Per parameter, in the first step and a later one: three views (the gradient's
        // reshape, the update's slice and reshape), the decay and the subtraction — burn's
        // AdamW took 15 and the per-tensor clip 4 more.
        let per: Vec<usize> = few.iter().zip(&many).map(|(f, m)| (m - f) / 10).collect();
        assert_eq!(per, [5, 5], "ops per parameter: {few:?} for 2 parameters, {many:?} for 12");
        // On the flat buffers: the cat, the norm (square, sum), the clip, the moments (2 ops
        // fresh, 7 after), bias corrections, sqrt, ε, the division and the learning rate.
        assert_eq!(few, [13 + 2 * 5, 17 + 2 * 5], "ops of a step on 2 parameters");
    }

    #[test]
    fn a_step_without_gradients_changes_nothing() {
        let m = model();
        let before = values(m.a.val());
        let mut optim = Optim::<Two<Dispatch>>::new(OptimConfig::default());
        let (m, stats) = optim.step(m, 0.1);
        assert_eq!(stats, StepStats::default());
        assert_eq!(values(m.a.val()), before);
    }
}
