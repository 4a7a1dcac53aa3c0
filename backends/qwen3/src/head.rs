//! The LM head over many rows, a chunk of rows at a time, so `[rows, vocab]` f32 logits never
//! exist for all scored tokens at once (the full-vocabulary logits of every policy token are
//! what runs a long episode out of memory: slime #2253, SkyRL #1610).
//!
//! - [`chunk_scores`]: `log p(target)` and the entropy of each row's next-token distribution
//!   at a temperature, from its logits, in burn's own ops (so on an autodiff device it is
//!   differentiable, and the graph keeps each chunk's softmax: that bounds a forward's
//!   transient memory, not a backward's).
//! - [`DeferredHead`], for the trainer: the forward runs the head *outside* the autodiff graph
//!   (the body's graph ends at the normed hidden rows) and hands the loss leaf tensors; once
//!   the loss's backward has given `g = ∂loss/∂score`, [`DeferredHead::surrogate`] recomputes
//!   each chunk's logits `z`, forms `∂loss/∂z = (g_lp·(onehot − p) − g_H·p·(log p + H)) / T`,
//!   multiplies it into `∂h` and `∂W`, and returns `Σ h·∂h + Σ W·∂W`, whose backward carries
//!   exactly the head's gradient into the body and the head weight. Memory: one chunk of
//!   logits whatever the number of policy tokens; cost: the head's matmul once more.
//!
//! On a host device (burn-flex) the element-wise work runs fused ([`fused`]), and with f32
//! weights a chunk is a group of rows against a block of the vocabulary rather than a few
//! rows against all of it ([`crate::host_head`]: the weight is then read once per group).

use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{DType, IndexingUpdateOp, Int, Tensor, TensorData};

use crate::Qwen3;
use crate::fused;
use crate::host_head::{Blocks, HostHead};
use crate::layers::{to_dtype, to_f32};

/// Logits per chunk (4M: 16 MiB in f32); the rows per chunk follow from the vocabulary.
/// Below the 32 MiB above which glibc maps each allocation afresh (`apps/arl/src/main.rs`), so
/// a chunk's logits reuse the freed memory of the last chunk instead of zero-filled new pages
/// (with 64 MiB chunks, the kernel's page clearing under the head's logits was ~5 % of an
/// update's profile on the SmolLM2 shape).
pub const CHUNK_LOGITS: usize = 1 << 22;

/// Rows of logits per chunk for a vocabulary of `vocab`.
pub fn chunk_rows(vocab: usize) -> usize {
    (CHUNK_LOGITS / vocab.max(1)).max(1)
}

/// `[rows, hidden]` normed hidden rows → `[rows, vocab]` logits in f32 (the model's own head:
/// tied to the embeddings, or its `[hidden, vocab]` matrix).
pub fn project<B: Backend>(model: &Qwen3<B>, normed: Tensor<B, 2>) -> Tensor<B, 2> {
    let logits = match &model.lm_head {
        Some(w) => crate::layers::matmul(normed, w.val()),
        None => crate::layers::matmul(normed, model.embed_tokens.val().transpose()),
    };
    to_f32(logits)
}

/// Per-row scores of one chunk of logits `[c, vocab]` (f32) at `inv_t = 1/T`: the log-prob of
/// `targets` (`[c, 1]`) and, if asked, the entropy; also the log-sum-exp of the scaled logits.
pub struct ChunkScores<B: Backend> {
    pub logprobs: Tensor<B, 1>,
    pub entropy: Option<Tensor<B, 1>>,
    pub lse: Tensor<B, 2>,
}

pub fn chunk_scores<B: Backend>(logits: Tensor<B, 2>, targets: Tensor<B, 2, Int>, inv_t: f64, entropy: bool) -> ChunkScores<B> {
    let c = logits.dims()[0];
    let z = if inv_t == 1.0 { logits } else { logits.mul_scalar(inv_t) };
    let picked = z.clone().gather(1, targets);
    // log Σ exp z = m + log Σ exp(z − m); the shift is a constant for the gradient.
    let m = z.clone().detach().max_dim(1);
    let (e, zc) = if entropy { ((z.clone() - m.clone()).exp(), Some(z)) } else { ((z - m.clone()).exp(), None) };
    let s = e.clone().sum_dim(1);
    let lse = m + s.clone().log();
    let logprobs = (picked - lse.clone()).reshape([c]);
    // H = −Σ p log p = lse − Σ p z, with p = e / s.
    let entropy = zc.map(|z| (lse.clone() - (e * z).sum_dim(1) / s).reshape([c]));
    ChunkScores { logprobs, entropy, lse }
}

/// Scores of `normed` rows (`[n, hidden]`) for `targets`, `rows` at a time; see [`chunk_scores`].
pub fn scores<B: Backend>(
    model: &Qwen3<B>,
    normed: Tensor<B, 2>,
    targets: &[u32],
    temperature: f64,
    entropy: bool,
    rows: usize,
) -> (Tensor<B, 1>, Option<Tensor<B, 1>>) {
    let (n, hidden) = (normed.dims()[0], normed.dims()[1]);
    let device = normed.device();
    if !B::ad_enabled(&device) && fused::fuses_on_host::<B>(&device) {
        // Nothing to differentiate: the fused host pass (`fused`).
        let stats = host_stats(&InnerHead::of(model), &normed, targets, temperature, rows);
        return (stat_column(&stats, |s| s.logprob, &device), entropy.then(|| stat_column(&stats, |s| s.entropy, &device)));
    }
    let (mut lps, mut ents) = (Vec::new(), Vec::new());
    for start in (0..n).step_by(rows) {
        let end = (start + rows).min(n);
        let chunk = normed.clone().slice([start..end, 0..hidden]);
        let out = chunk_scores(project(model, chunk), int2(&targets[start..end], &device), 1.0 / temperature, entropy);
        lps.push(out.logprobs);
        ents.extend(out.entropy);
    }
    (cat1(lps), entropy.then(|| cat1(ents)))
}

fn cat1<B: Backend>(mut parts: Vec<Tensor<B, 1>>) -> Tensor<B, 1> {
    if parts.len() == 1 { parts.pop().expect("one part") } else { Tensor::cat(parts, 0) }
}

/// `[ids.len(), 1]` int tensor.
fn int2<B: Backend>(ids: &[u32], device: &B::Device) -> Tensor<B, 2, Int> {
    let v: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
    Tensor::from_data(TensorData::new(v, [ids.len(), 1]), device)
}

/// The trainer's head, run outside the graph; see the module docs.
pub struct DeferredHead<B: AutodiffBackend> {
    /// `[n, hidden]` normed hidden rows, carrying the body's graph.
    normed: Tensor<B, 2>,
    targets: Vec<u32>,
    /// Where each row's score sits in the flattened `[rows · tokens]` leaves.
    slots: Vec<i64>,
    temperature: f64,
    /// Per row, from the forward: the log-sum-exp of the scaled logits and the entropy.
    lse: Tensor<B::InnerBackend, 1>,
    entropy_values: Option<Tensor<B::InnerBackend, 1>>,
    rows: usize,
    /// The leaves handed to the loss (`[rows, tokens]`).
    pub logprobs: Tensor<B, 2>,
    pub entropy: Option<Tensor<B, 2>>,
}

impl<B: AutodiffBackend> DeferredHead<B> {
    /// Run the head on `normed` (with the body's graph) without recording it, `rows` rows at
    /// a time; scores land at `slots` of `[shape[0], shape[1]]` leaves.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        model: &Qwen3<B>,
        normed: Tensor<B, 2>,
        targets: Vec<u32>,
        slots: Vec<i64>,
        shape: [usize; 2],
        temperature: f64,
        entropy: bool,
        rows: usize,
    ) -> Self {
        let inner = inner_model(model);
        let (n, hidden) = (normed.dims()[0], normed.dims()[1]);
        let h = normed.clone().inner();
        // Tensors are made on the autodiff device and taken inside, so they carry its
        // checkpointing strategy as `h` does (burn-dispatch refuses to mix strategies).
        let ad = normed.device();
        let (mut lps, mut lses, mut ents) = (Vec::new(), Vec::new(), Vec::new());
        if fused::fuses_on_host::<B::InnerBackend>(&h.device()) {
            let stats = host_stats(&inner, &h, &targets, temperature, rows);
            let host = |f: fn(&fused::RowStats) -> f32| stat_column::<B>(&stats, f, &ad).inner();
            lps.push(host(|s| s.logprob));
            lses.push(host(|s| s.lse));
            if entropy {
                ents.push(host(|s| s.entropy));
            }
        } else {
            for start in (0..n).step_by(rows) {
                let end = (start + rows).min(n);
                let chunk = h.clone().slice([start..end, 0..hidden]);
                let out = chunk_scores(inner.project(chunk), int2::<B>(&targets[start..end], &ad).inner(), 1.0 / temperature, entropy);
                lps.push(out.logprobs);
                lses.push(out.lse.reshape([end - start]));
                ents.extend(out.entropy);
            }
        }
        let slots_t = Tensor::<B, 1, Int>::from_data(TensorData::new(slots.clone(), [n]), &ad).inner();
        let place = |values: Tensor<B::InnerBackend, 1>| -> Tensor<B, 2> {
            let full = Tensor::<B, 1>::zeros([shape[0] * shape[1]], &ad).inner().scatter(0, slots_t.clone(), values, IndexingUpdateOp::Add);
            Tensor::from_inner(full.reshape(shape)).require_grad()
        };
        let entropy_values = entropy.then(|| cat1(ents));
        Self {
            logprobs: place(cat1(lps)),
            entropy: entropy_values.clone().map(place),
            normed,
            targets,
            slots,
            temperature,
            rows,
            lse: cat1(lses),
            entropy_values,
        }
    }

    /// Given the gradients of the loss's backward, the scalar whose backward puts the head's
    /// gradient into the body and the head weight (module docs).
    pub fn surrogate(self, grads: &B::Gradients, model: &Qwen3<B>) -> Tensor<B, 1> {
        let inner = inner_model(model);
        let (n, hidden) = (self.normed.dims()[0], self.normed.dims()[1]);
        let h = self.normed.clone().inner();
        let ad = self.normed.device();
        let dtype = h.dtype();
        let slots = Tensor::<B, 1, Int>::from_data(TensorData::new(self.slots.clone(), [n]), &ad).inner();
        let [rows_, cols_] = self.logprobs.dims();
        let shape_len = rows_ * cols_;
        let upstream = |leaf: &Tensor<B, 2>| leaf.grad(grads).map(|g| g.reshape([shape_len]).select(0, slots.clone()));
        let g_lp = upstream(&self.logprobs).unwrap_or_else(|| Tensor::<B, 1>::zeros([n], &ad).inner());
        let g_ent = self.entropy.as_ref().and_then(upstream);
        let inv_t = 1.0 / self.temperature;
        let rows = self.rows;
        let mut grad_h = Vec::new();
        let mut grad_w: Option<Tensor<B::InnerBackend, 2>> = None;
        // On the fused path, ∂W is summed in one host buffer (`[vocab, hidden]` tied, else `[hidden, vocab]`).
        let mut w_host: Option<Vec<f32>> = None;
        let on_host = fused::fuses_on_host::<B::InnerBackend>(&h.device()).then(|| {
            let v = |t: &Tensor<B::InnerBackend, 1>| t.clone().into_data().convert::<f32>().into_vec::<f32>().expect("f32 values");
            (v(&self.lse), v(&g_lp), g_ent.as_ref().zip(self.entropy_values.as_ref()).map(|(g, e)| (v(g), v(e))))
        });
        if let Some((lse, g_lp, ent)) = &on_host
            && let Some(host) = inner.host()
        {
            // f32 on a host device: by vocabulary blocks (`host_head`).
            let up = fused::Upstream { logprob: g_lp, entropy: ent.as_ref().map(|(g, e)| (&g[..], &e[..])) };
            let blocks = Blocks::for_budget(n, host.vocab, rows * host.vocab);
            let tensor = |d: TensorData| Tensor::<B, 2>::from_data(d, &ad).inner();
            let (gh, gw) = host.backward(&h, &self.targets, inv_t as f32, lse, &up, blocks, tensor);
            let grad_h = Tensor::<B, 2>::from_data(TensorData::new(gh, [n, hidden]), &ad);
            let grad_w = Tensor::<B, 2>::from_data(TensorData::new(gw, inner.weight.dims()), &ad);
            return (self.normed * grad_h).sum() + (InnerHead::of(model).weight * grad_w).sum();
        }
        for start in (0..n).step_by(rows) {
            let end = (start + rows).min(n);
            let c = end - start;
            let col = |t: &Tensor<B::InnerBackend, 1>| t.clone().narrow(0, start, c).reshape([c, 1]);
            let chunk = h.clone().slice([start..end, 0..hidden]);
            let z = inner.project(chunk.clone());
            if let Some((lse, g_lp, ent)) = &on_host {
                // The same ∂z as below, in one pass over the chunk's logits (`fused`).
                let vocab = z.dims()[1];
                let mut data = z.into_data();
                let up =
                    fused::Upstream { logprob: &g_lp[start..end], entropy: ent.as_ref().map(|(g, e)| (&g[start..end], &e[start..end])) };
                let values = data.as_mut_slice::<f32>().expect("f32 logits");
                fused::logits_grad(values, vocab, &self.targets[start..end], inv_t as f32, &lse[start..end], &up);
                let hc = chunk.into_data().convert::<f32>().into_vec::<f32>().expect("f32 rows");
                let acc = w_host.get_or_insert_with(|| vec![0.0; vocab * hidden]);
                fused::accumulate_weight_grad(acc, values, &hc, c, vocab, hidden, inner.tied);
                let dz = to_dtype(Tensor::<B, 2>::from_data(data, &ad).inner(), dtype);
                grad_h.push(inner.input_grad(dz));
                continue;
            }
            let z = if inv_t == 1.0 { z } else { z.mul_scalar(inv_t) };
            let logp = z - col(&self.lse);
            let p = logp.clone().exp();
            let g = col(&g_lp);
            let dz = match (&g_ent, &self.entropy_values) {
                // ∂H/∂z_j = −p_j (log p_j + H) / T.
                (Some(ge), Some(ent)) => (p * ((logp + col(ent)) * col(ge) + g.clone())).neg(),
                _ => {
                    drop(logp);
                    p * g.clone().neg()
                }
            };
            let dz = dz.scatter(1, int2::<B>(&self.targets[start..end], &ad).inner(), g, IndexingUpdateOp::Add);
            let dz = to_dtype(if inv_t == 1.0 { dz } else { dz.mul_scalar(inv_t) }, dtype);
            let (gh, gw) = inner.backward(chunk, dz);
            grad_h.push(gh);
            let gw = to_f32(gw);
            grad_w = Some(match grad_w {
                Some(acc) => acc + gw,
                None => gw,
            });
        }
        let grad_h = if grad_h.len() == 1 { grad_h.pop().expect("one chunk") } else { Tensor::cat(grad_h, 0) };
        let weight = InnerHead::of(model).weight;
        let grad_w = match w_host {
            Some(acc) => {
                let [r, c] = weight.dims();
                Tensor::<B, 2>::from_data(TensorData::new(acc, [r, c]), &ad).inner()
            }
            None => grad_w.expect("at least one row"),
        };
        let grad_w = to_dtype(grad_w, dtype);
        (self.normed * Tensor::from_inner(grad_h)).sum() + (weight * Tensor::from_inner(grad_w)).sum()
    }
}

/// [`fused::RowStats`] of every row of `h` (`[n, hidden]`) on a host device: by vocabulary
/// blocks ([`host_head`]) when the head's weight is f32, else `rows` at a time (a chunk of
/// `rows` rows holds as many logits as a block does).
fn host_stats<B: Backend>(head: &InnerHead<B>, h: &Tensor<B, 2>, targets: &[u32], temperature: f64, rows: usize) -> Vec<fused::RowStats> {
    let (n, hidden) = (h.dims()[0], h.dims()[1]);
    let inv_t = (1.0 / temperature) as f32;
    if let Some(host) = head.host() {
        return host.stats(h, targets, inv_t, Blocks::for_budget(n, host.vocab, rows * host.vocab));
    }
    let mut stats = Vec::with_capacity(n);
    for start in (0..n).step_by(rows) {
        let end = (start + rows).min(n);
        let z = head.project(h.clone().slice([start..end, 0..hidden]));
        let vocab = z.dims()[1];
        let data = z.into_data();
        stats.extend(fused::row_stats(data.as_slice::<f32>().expect("f32 logits"), vocab, &targets[start..end], inv_t));
    }
    stats
}

/// One statistic of every row, as a tensor on `device`.
fn stat_column<B: Backend>(stats: &[fused::RowStats], f: fn(&fused::RowStats) -> f32, device: &B::Device) -> Tensor<B, 1> {
    Tensor::from_data(TensorData::new(stats.iter().map(f).collect::<Vec<f32>>(), [stats.len()]), device)
}

/// The head's weight outside the graph.
struct InnerHead<B: Backend> {
    /// `[vocab, hidden]` (tied embeddings) or `[hidden, vocab]` (`lm_head`).
    weight: Tensor<B, 2>,
    tied: bool,
}

fn inner_model<B: AutodiffBackend>(model: &Qwen3<B>) -> InnerHead<B::InnerBackend> {
    let head = InnerHead::of(model);
    InnerHead { weight: head.weight.inner(), tied: head.tied }
}

impl<B: Backend> InnerHead<B> {
    /// The model's head weight: its `lm_head`, or the embeddings it is tied to.
    fn of(model: &Qwen3<B>) -> Self {
        match &model.lm_head {
            Some(w) => Self { weight: w.val(), tied: false },
            None => Self { weight: model.embed_tokens.val(), tied: true },
        }
    }

    /// The head by vocabulary blocks ([`HostHead`]), where its weight is f32 (the caller
    /// knows the device is a host one).
    fn host(&self) -> Option<HostHead<B>> {
        (self.weight.dtype() == DType::F32).then(|| HostHead::new(self.weight.clone(), self.tied))
    }

    fn project(&self, normed: Tensor<B, 2>) -> Tensor<B, 2> {
        let logits = if self.tied { normed.matmul(self.weight.clone().transpose()) } else { normed.matmul(self.weight.clone()) };
        to_f32(logits)
    }

    /// `(∂h, ∂W)` of `z = h·Wᵀ` (tied) or `z = h·W` given `∂z` (both in the weights' dtype).
    fn backward(&self, h: Tensor<B, 2>, dz: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
        let dw = if self.tied { dz.clone().transpose().matmul(h) } else { h.transpose().matmul(dz.clone()) };
        (self.input_grad(dz), dw)
    }

    /// `∂h` of `z = h·Wᵀ` (tied) or `z = h·W` given `∂z`.
    fn input_grad(&self, dz: Tensor<B, 2>) -> Tensor<B, 2> {
        if self.tied { dz.matmul(self.weight.clone()) } else { dz.matmul(self.weight.clone().transpose()) }
    }
}
