//! Evaluate a loss on a small batch given as numbers, in f64 on the CPU (burn-flex through
//! `Dispatch`, with autodiff): the loss, its gradient w.r.t. `log_prob`, and the metrics.
//! This is `arl loss eval`, and the harness the tests use.

use arl_core::{Aggregation, LossError, LossInput, LossMetrics, Normalizer, PolicyLoss, T2};
use burn::tensor::{DType, Tensor, TensorData};
use burn::{Dispatch, DispatchDevice};
use serde::{Deserialize, Serialize};

/// A batch as `[rows][tokens]` arrays (the JSON `arl loss eval --input` reads).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Batch {
    pub log_prob: Vec<Vec<f64>>,
    pub old_log_prob: Vec<Vec<f64>>,
    pub advantages: Vec<Vec<f64>>,
    pub mask: Vec<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ref_log_prob: Option<Vec<Vec<f64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior_log_prob: Option<Vec<Vec<f64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entropy: Option<Vec<Vec<f64>>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Evaluation {
    pub loss: f64,
    pub grad_log_prob: Vec<Vec<f64>>,
    pub aggregation: Aggregation,
    pub metrics: LossMetrics,
}

/// The CPU training device: burn-flex under autodiff.
pub fn cpu_device() -> DispatchDevice {
    DispatchDevice::autodiff(DispatchDevice::Flex(Default::default()))
}

/// A `[rows, tokens]` f64 tensor; rows must have equal length.
pub fn tensor(rows: &[Vec<f64>], device: &DispatchDevice) -> Result<T2, LossError> {
    let width = rows.first().map_or(0, Vec::len);
    if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != width) {
        return Err(LossError::Shape(format!("row {i} has {} tokens but row 0 has {width}", r.len())));
    }
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    Ok(Tensor::<Dispatch, 2>::from_data(TensorData::new(flat, [rows.len(), width]), (device, DType::F64)))
}

fn to_rows(t: Tensor<Dispatch, 2>) -> Vec<Vec<f64>> {
    let [_, width] = t.dims();
    let flat = t.into_data().convert::<f64>().to_vec::<f64>().expect("f64 data");
    if width == 0 {
        return Vec::new();
    }
    flat.chunks(width).map(<[f64]>::to_vec).collect()
}

impl Batch {
    /// The loss input on `device`, with `log_prob` requiring gradients.
    pub fn input(&self, device: &DispatchDevice) -> Result<LossInput, LossError> {
        let opt = |x: &Option<Vec<Vec<f64>>>| x.as_ref().map(|r| tensor(r, device)).transpose();
        Ok(LossInput {
            log_prob: tensor(&self.log_prob, device)?.require_grad(),
            old_log_prob: tensor(&self.old_log_prob, device)?,
            advantages: tensor(&self.advantages, device)?,
            mask: tensor(&self.mask, device)?,
            ref_log_prob: opt(&self.ref_log_prob)?,
            behavior_log_prob: opt(&self.behavior_log_prob)?,
            entropy: opt(&self.entropy)?,
        })
    }

    /// Rows `range` of every array (a micro-batch).
    pub fn rows(&self, range: std::ops::Range<usize>) -> Batch {
        let cut = |x: &Vec<Vec<f64>>| x[range.clone()].to_vec();
        Batch {
            log_prob: cut(&self.log_prob),
            old_log_prob: cut(&self.old_log_prob),
            advantages: cut(&self.advantages),
            mask: cut(&self.mask),
            ref_log_prob: self.ref_log_prob.as_ref().map(cut),
            behavior_log_prob: self.behavior_log_prob.as_ref().map(cut),
            entropy: self.entropy.as_ref().map(cut),
        }
    }

    /// The normalizer of this whole batch as one minibatch.
    pub fn normalizer(&self, aggregation: Aggregation, horizon: Option<f64>) -> Result<Normalizer, LossError> {
        let lengths: Vec<f64> = self.mask.iter().map(|r| r.iter().sum()).collect();
        Normalizer::from_lengths(aggregation, horizon, &lengths, self.mask.first().map_or(0, Vec::len))
    }
}

/// The loss of one micro-batch under `normalizer`, its gradient w.r.t. `log_prob`, metrics.
pub fn evaluate_with(loss: &dyn PolicyLoss, batch: &Batch, normalizer: &Normalizer) -> Result<Evaluation, LossError> {
    let device = cpu_device();
    let input = batch.input(&device)?;
    let token = loss.token_loss(&input)?;
    let total = normalizer.reduce(token.loss, &input.mask);
    let value = total.clone().into_data().convert::<f64>().to_vec::<f64>().expect("f64 data")[0];
    let grads = total.backward();
    let grad = input.log_prob.grad(&grads).unwrap_or_else(|| input.log_prob.zeros_like());
    Ok(Evaluation { loss: value, grad_log_prob: to_rows(grad), aggregation: normalizer.aggregation, metrics: token.metrics })
}

/// The loss of `batch` as one minibatch (the aggregation resolved from the loss's default).
pub fn evaluate(
    loss: &dyn PolicyLoss,
    aggregation: Option<Aggregation>,
    horizon: Option<f64>,
    batch: &Batch,
) -> Result<Evaluation, LossError> {
    let aggregation = Aggregation::resolve(aggregation, loss);
    evaluate_with(loss, batch, &batch.normalizer(aggregation, horizon)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_become_f64_tensors_on_the_cpu() {
        let t = tensor(&[vec![1.0, 2.0], vec![3.0, 4.0]], &cpu_device()).unwrap();
        assert_eq!(t.dtype(), DType::F64);
        assert_eq!(t.dims(), [2, 2]);
        // 1 + 1e-12 survives (it would round to 1 in f32).
        let t = tensor(&[vec![1.0 + 1e-12]], &cpu_device()).unwrap();
        assert_eq!(t.into_data().to_vec::<f64>().unwrap(), vec![1.0 + 1e-12]);
        assert!(tensor(&[vec![1.0], vec![1.0, 2.0]], &cpu_device()).is_err());
    }
}
