//! Global gradient-norm clipping over every float parameter of a module.

use std::marker::PhantomData;

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, ElementConversion, Tensor};

/// The L2 norm of all gradients of `module`'s parameters taken together.
pub fn global_grad_norm<B: AutodiffBackend, M: AutodiffModule<B>>(module: &M, grads: &GradientsParams) -> f64 {
    let mut visitor = SquaredNorm::<B> { grads, sum: None };
    module.visit(&mut visitor);
    visitor.sum.map(|s| s.into_scalar().elem::<f64>().sqrt()).unwrap_or(0.0)
}

/// Scale every gradient by `max_norm / (norm + 1e-6)` when that is below 1 (torch's
/// `clip_grad_norm_`). Returns the norm before clipping. `max_norm <= 0` disables clipping.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(module: &M, grads: &mut GradientsParams, max_norm: f64) -> f64 {
    let norm = global_grad_norm::<B, M>(module, grads);
    if max_norm > 0.0 {
        let coef = max_norm / (norm + 1e-6);
        if coef < 1.0 {
            module.visit(&mut Scale::<B> { grads, coef, backend: PhantomData });
        }
    }
    norm
}

struct SquaredNorm<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    sum: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquaredNorm<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            // Square and accumulate in f32 on the device (a bf16 sum of squares keeps 8
            // mantissa bits); one scalar leaves it at the end.
            let g = if g.dtype() == DType::F32 { g } else { g.cast(DType::F32) };
            let sq = g.powi_scalar(2).sum();
            self.sum = Some(match self.sum.take() {
                Some(s) => s + sq,
                None => sq,
            });
        }
    }
}

struct Scale<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    coef: f64,
    backend: PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            self.grads.register::<B::InnerBackend, D>(param.id, g.mul_scalar(self.coef));
        }
    }
}
