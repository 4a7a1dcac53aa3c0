//! Batched sampling with a KV cache. Prompts of different lengths are left-padded into one
//! batch (padding keys masked, rotary positions counted from each row's first real token);
//! the prefill runs once per distinct prompt, then every step runs the model on the one new
//! token per row against the cache, written in place ([`KvCache`]). Finished rows leave the
//! batch (their cache rows are dropped) once a quarter of it has finished; until then they
//! decode a placeholder whose outputs are dropped.
//!
//! What is prefilled: with a [`PrefixCache`] ([`generate_cached`]), a prompt that extends an
//! earlier call's row (the next turn of an episode) reuses that row's keys and values and
//! prefills only the new suffix; identical prompts in a batch (a group's G episodes) are
//! prefilled once; and distinct new prompts with a long common prefix (the system prompt and
//! tool schemas) prefill it once. [`generate`] keeps nothing between calls.
//!
//! Each token is drawn from the row's own seeded ChaCha8 stream (seed, row), so a row's sample
//! does not depend on which other rows share its batch. On a GPU without top-k/top-p the draw
//! happens on the device ([`device_draw`]: the same inverse-CDF draw as [`draw`], one uniform
//! per row from the host), so only the ids and log-probabilities reach the host; with
//! truncation, and always on the CPU (where the logits already are in host memory), the host
//! draws. The recorded log-probability is under the distribution actually sampled from
//! (temperature, then top-k, then top-p, renormalised).

use arl_core::policy::{FinishReason, Generation, SamplingParams};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::prefix::{Hit, PrefixCache, RowKv};
use crate::{KvCache, ModelError, Qwen3};

/// New prompts of one call that share fewer leading tokens than this with each other are
/// prefilled on their own (a tiny shared prefix is not worth a separate pass). A cached row
/// is reused whatever the length of the common prefix.
const MIN_SHARED: usize = 8;

/// Wall-clock split of one [`generate_timed`] call (seconds) and what was prefilled.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenTimings {
    /// Prompt forward until the first tokens are drawn.
    pub prefill_s: f64,
    /// Every later step (sampling included).
    pub decode_s: f64,
    /// Tokens fed through decode steps (one per active row per step).
    pub decode_tokens: usize,
    /// Prompt tokens run through the model (padding not counted).
    pub prefill_tokens: usize,
    /// Prompt positions whose keys and values came from the prefix cache or another row.
    pub reused_tokens: usize,
}

/// Sample a continuation of each prompt; see the module docs.
pub fn generate<B: Backend>(model: &Qwen3<B>, prompts: &[Vec<u32>], opts: &SamplingParams) -> Result<Vec<Generation>, ModelError> {
    generate_timed(model, prompts, opts).map(|(g, _)| g)
}

/// [`generate`], also returning where the time went.
pub fn generate_timed<B: Backend>(
    model: &Qwen3<B>,
    prompts: &[Vec<u32>],
    opts: &SamplingParams,
) -> Result<(Vec<Generation>, GenTimings), ModelError> {
    generate_cached(model, prompts, opts, &mut PrefixCache::new(0))
}

/// [`generate_timed`] with a [`PrefixCache`]: prompts reuse the keys and values of earlier
/// rows they extend, and every finished row's are kept in `cache` for later calls.
pub fn generate_cached<B: Backend>(
    model: &Qwen3<B>,
    prompts: &[Vec<u32>],
    opts: &SamplingParams,
    cache: &mut PrefixCache<B>,
) -> Result<(Vec<Generation>, GenTimings), ModelError> {
    check(model, prompts, opts)?;
    let mut timings = GenTimings::default();
    let start = std::time::Instant::now();
    let stop_ids = opts.stop_ids.clone().unwrap_or_else(|| model.config.eos_token_ids.clone());
    let device = model.device();
    let b = prompts.len();
    let mut out: Vec<Generation> =
        (0..b).map(|_| Generation { ids: vec![], sampler_logprobs: vec![], finish: FinishReason::Length }).collect();
    if opts.max_new_tokens == 0 {
        return Ok((out, timings));
    }
    let mut rngs: Vec<ChaCha8Rng> =
        (0..b).map(|r| ChaCha8Rng::seed_from_u64(opts.seed ^ (r as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect();

    // Prefill each distinct prompt once, on top of what is cached.
    let plan = Plan::new(prompts, cache);
    let p = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let pads: Vec<usize> = prompts.iter().map(|x| p - x.len()).collect();
    let cap = p + opts.max_new_tokens - 1;
    let (mut kv, mut logits) = if plan.all_new_and_distinct() {
        // Nothing to share: the prefill's own cache, reserved at the decode capacity, is the
        // decode cache (its padding keys are masked there as in the prefill).
        let suffixes: Vec<&[u32]> = prompts.iter().map(|x| x.as_slice()).collect();
        prefill_cache(model, None, &suffixes, cap, &mut timings)
    } else {
        let (job_kv, job_logits) = plan.run(model, prompts, cache, &mut timings);
        let mut kv = KvCache::new(model.config.num_hidden_layers);
        kv.allocate(b, model.config.num_key_value_heads, cap, model.config.head_dim, p, &device, model.dtype());
        for (r, &j) in plan.job_of_row.iter().enumerate() {
            kv.write_row(r, pads[r], &job_kv[j]);
        }
        drop(job_kv);
        let logits = if plan.job_of_row.iter().enumerate().all(|(r, &j)| r == j) {
            job_logits
        } else {
            let rows = plan.job_of_row.iter().map(|&j| j as i64).collect();
            job_logits.select(0, Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [b]), &device))
        };
        (kv, logits)
    };

    // Each cache row's original row, and whether it is still generating. Finished rows stay
    // in the batch (decoding a placeholder, their outputs dropped) until a quarter of it has
    // finished, then leave together: dropping rows copies every live row's cache, and doing
    // that at each finish copied a 64-row turn's whole cache up to 63 times. A row's draws
    // and logits do not depend on the other rows of its batch.
    let mut slots: Vec<(usize, bool)> = (0..b).map(|row| (row, true)).collect();
    let live_rows = |slots: &[(usize, bool)]| -> Vec<usize> { (0..slots.len()).filter(|&i| slots[i].1).collect() };
    let index = |rows: &[usize]| {
        let rows: Vec<i64> = rows.iter().map(|&i| i as i64).collect();
        let n = rows.len();
        Tensor::<B, 1, Int>::from_data(TensorData::new(rows, [n]), &device)
    };
    // Static shapes where each op is a launch (a GPU): every decode step attends over the
    // cache's whole capacity, the keys not written yet masked, so its ops keep one shape
    // across steps (kernels compiled and tuned once). On the CPU attending over the keys so
    // far is cheaper (a long generation's early steps would read the whole capacity).
    let static_shapes = !computes_on_host::<B>(&device);
    let mut decode_start = None;
    loop {
        let live = live_rows(&slots);
        let active: Vec<usize> = live.iter().map(|&i| slots[i].0).collect();
        let drawn = draw_rows(logits, &active, opts, &mut rngs);
        if decode_start.is_none() {
            timings.prefill_s = start.elapsed().as_secs_f64();
            decode_start = Some(std::time::Instant::now());
        }
        for ((&i, &row), (id, lp)) in live.iter().zip(&active).zip(drawn) {
            let g = &mut out[row];
            g.ids.push(id);
            g.sampler_logprobs.push(lp);
            if stop_ids.contains(&id) {
                g.finish = FinishReason::Stop;
            } else if g.ids.len() < opts.max_new_tokens {
                continue;
            }
            slots[i].1 = false;
            if cache.is_enabled() {
                // Its keys and values so far: the prompt and every sampled token but the last.
                let ids: Vec<u32> = prompts[row].iter().chain(&g.ids[..g.ids.len() - 1]).copied().collect();
                cache.insert(ids, kv.row(i, pads[row]));
            }
        }
        let mut live = live_rows(&slots);
        if live.is_empty() {
            timings.decode_s = decode_start.map_or(0.0, |t| t.elapsed().as_secs_f64());
            return Ok((out, timings));
        }
        if 4 * (slots.len() - live.len()) >= slots.len() {
            kv.retain_rows(index(&live));
            slots.retain(|&(_, on)| on);
            live = live_rows(&slots);
        }
        // Decode: one new token per cache row at key index `l`; padding keys stay masked. A
        // finished row repeats its last token at its last position (any finite input will do).
        let l = kv.len();
        let ids: Vec<Vec<u32>> = slots.iter().map(|&(row, _)| vec![*out[row].ids.last().expect("a drawn token")]).collect();
        let positions: Vec<Vec<usize>> = slots.iter().map(|&(row, _)| vec![prompts[row].len() + out[row].ids.len() - 1]).collect();
        // Keys `pad..=l` of each row (with static shapes the bias spans the capacity, which
        // holds every step's keys: it was reserved for the whole generation).
        let whole = static_shapes && kv.capacity() > l;
        kv.set_static(whole);
        let keys = if whole { kv.capacity() } else { l + 1 };
        let bias: Vec<f32> = slots
            .iter()
            .flat_map(|&(row, _)| {
                let pad = pads[row];
                (0..keys).map(move |j| if j >= pad && j <= l { 0.0 } else { f32::NEG_INFINITY })
            })
            .collect();
        let bias = Tensor::<B, 3>::from_data(TensorData::new(bias, [slots.len(), 1, keys]), &device);
        let rows = (live.len() < slots.len()).then(|| index(&live));
        logits = crate::device::on_pool(|| {
            let hidden = model.hidden(&ids, &positions, Some(bias), Some(&mut kv));
            // The LM head on the live rows only.
            model.head(match rows {
                Some(rows) => hidden.select(0, rows),
                None => hidden,
            })
        });
        timings.decode_tokens += live.len();
    }
}

/// Which prompts are prefilled, on top of which cached prefix.
struct Plan {
    /// Distinct prompts (index into `prompts`) with the prefix they start from.
    jobs: Vec<(usize, Base)>,
    job_of_row: Vec<usize>,
    /// A prefix shared by new prompts, prefilled once first: `prompts[.0][..len]`.
    shared: Option<(usize, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Base {
    None,
    Cached(Hit),
    /// The first `len` positions of the shared prefix.
    Shared(usize),
}

impl Plan {
    fn new<B: Backend>(prompts: &[Vec<u32>], cache: &mut PrefixCache<B>) -> Self {
        let mut jobs: Vec<(usize, Base)> = Vec::new();
        let mut job_of_row = Vec::with_capacity(prompts.len());
        for (r, prompt) in prompts.iter().enumerate() {
            match jobs.iter().position(|&(q, _)| prompts[q] == *prompt) {
                Some(j) => job_of_row.push(j),
                None => {
                    let base = cache.lookup(prompt, 1).map_or(Base::None, Base::Cached);
                    job_of_row.push(jobs.len());
                    jobs.push((r, base));
                }
            }
        }
        // New prompts with a long common prefix: prefill it once.
        let fresh: Vec<usize> = jobs.iter().filter(|(_, b)| *b == Base::None).map(|&(q, _)| q).collect();
        let mut shared = None;
        if fresh.len() > 1 {
            let first = &prompts[fresh[0]];
            let len = fresh[1..]
                .iter()
                .map(|&q| crate::prefix::common_prefix(first, &prompts[q]))
                .chain(fresh.iter().map(|&q| prompts[q].len() - 1))
                .min()
                .unwrap_or(0);
            if len >= MIN_SHARED {
                shared = Some((fresh[0], len));
                for job in jobs.iter_mut().filter(|(_, b)| *b == Base::None) {
                    job.1 = Base::Shared(len);
                }
            }
        }
        Self { jobs, job_of_row, shared }
    }

    /// Every row its own job, prefilled from scratch (no cached base, no shared prefix).
    fn all_new_and_distinct(&self) -> bool {
        self.shared.is_none()
            && self.jobs.iter().all(|&(_, base)| base == Base::None)
            && self.job_of_row.iter().enumerate().all(|(r, &j)| r == j)
    }

    /// Each job's keys and values (compact, `prompt.len()` positions) and last logits `[jobs, vocab]`.
    fn run<B: Backend>(
        &self,
        model: &Qwen3<B>,
        prompts: &[Vec<u32>],
        cache: &PrefixCache<B>,
        timings: &mut GenTimings,
    ) -> (Vec<RowKv<B>>, Tensor<B, 2>) {
        let shared = self.shared.map(|(q, len)| {
            let (mut kv, _) = prefill(model, None, &[&prompts[q][..len]], timings);
            kv.pop().expect("one row")
        });
        // Jobs with the same base are prefilled together.
        let mut groups: Vec<(Base, Vec<usize>)> = Vec::new();
        for (j, &(_, base)) in self.jobs.iter().enumerate() {
            match groups.iter_mut().find(|(b, _)| *b == base) {
                Some((_, js)) => js.push(j),
                None => groups.push((base, vec![j])),
            }
        }
        let mut kv: Vec<Option<RowKv<B>>> = (0..self.jobs.len()).map(|_| None).collect();
        // Each group's logits, its rows in the order of `order` (jobs, group after group).
        let (mut order, mut parts) = (Vec::with_capacity(self.jobs.len()), Vec::new());
        for (base, js) in groups {
            let base_kv = match base {
                Base::None => None,
                Base::Cached(hit) => Some(cache.kv(hit)),
                Base::Shared(_) => shared.clone(),
            };
            let c = match base {
                Base::None => 0,
                Base::Cached(hit) => hit.len,
                Base::Shared(len) => len,
            };
            timings.reused_tokens += c * js.len();
            let suffixes: Vec<&[u32]> = js.iter().map(|&j| &prompts[self.jobs[j].0][c..]).collect();
            let (rows, l) = prefill(model, base_kv.as_deref(), &suffixes, timings);
            for (&j, row) in js.iter().zip(rows) {
                kv[j] = Some(row);
            }
            order.extend(js);
            parts.push(l);
        }
        // The head's logits are a strided view: copy them once, not row by row (a cat of
        // one-row slices cost a tenth of a prefill on a 152k vocabulary).
        let logits = if parts.len() == 1 { parts.pop().expect("one group") } else { Tensor::cat(parts, 0) };
        let logits = if order.iter().enumerate().all(|(i, &j)| i == j) {
            logits
        } else {
            let mut at = vec![0i64; order.len()];
            for (i, &j) in order.iter().enumerate() {
                at[j] = i as i64;
            }
            let device = logits.device();
            logits.select(0, Tensor::<B, 1, Int>::from_data(TensorData::new(at, [order.len()]), &device))
        };
        (kv.into_iter().map(|k| k.expect("every job prefilled")).collect(), logits)
    }
}

/// Prefill `suffixes` (left-padded to one length) on top of `base` (per layer `[1, kv, c,
/// head_dim]`, shared by every row; rotary positions continue from `c`). Returns each row's
/// keys and values over base and suffix (`[1, kv, c + len, head_dim]`, its own tensors) and
/// the logits after its last token, `[rows, vocab]`.
fn prefill<B: Backend>(
    model: &Qwen3<B>,
    base: Option<&[(Tensor<B, 4>, Tensor<B, 4>)]>,
    suffixes: &[&[u32]],
    timings: &mut GenTimings,
) -> (Vec<RowKv<B>>, Tensor<B, 2>) {
    let c = base.and_then(|b| b.first()).map_or(0, |(k, _)| k.dims()[2]);
    let s = suffixes.iter().map(|x| x.len()).max().unwrap_or(0);
    let (cache, logits) = prefill_cache(model, base, suffixes, c + s, timings);
    let rows = suffixes.iter().enumerate().map(|(r, x)| cache.row_positions(r, (0..c).chain(c + s - x.len()..c + s))).collect();
    (rows, logits)
}

/// The prefill of [`prefill`], returning its cache (room for `capacity ≥ c + s` positions;
/// row `r` holds the base, then its suffix left-padded to `s`) and the last logits.
fn prefill_cache<B: Backend>(
    model: &Qwen3<B>,
    base: Option<&[(Tensor<B, 4>, Tensor<B, 4>)]>,
    suffixes: &[&[u32]],
    capacity: usize,
    timings: &mut GenTimings,
) -> (KvCache<B>, Tensor<B, 2>) {
    let device = model.device();
    let c = base.and_then(|b| b.first()).map_or(0, |(k, _)| k.dims()[2]);
    let j = suffixes.len();
    let s = suffixes.iter().map(|x| x.len()).max().unwrap_or(0);
    let pads: Vec<usize> = suffixes.iter().map(|x| s - x.len()).collect();
    timings.prefill_tokens += suffixes.iter().map(|x| x.len()).sum::<usize>();
    let mut cache = KvCache::with_capacity(model.config.num_hidden_layers, capacity);
    if let Some(base) = base {
        cache.allocate(j, model.config.num_key_value_heads, capacity, model.config.head_dim, c, &device, model.dtype());
        for r in 0..j {
            cache.write_row(r, 0, base);
        }
    }
    // A padding query sees only itself (keeps softmax finite); a real one sees the base and
    // its row's real suffix tokens up to itself.
    let padded: Vec<Vec<u32>> =
        suffixes.iter().map(|x| std::iter::repeat_n(x[0], s - x.len()).chain(x.iter().copied()).collect()).collect();
    let positions: Vec<Vec<usize>> = pads.iter().map(|&pad| (0..s).map(|i| c + i.saturating_sub(pad)).collect()).collect();
    let mut bias = Vec::with_capacity(j * s * (c + s));
    for &pad in &pads {
        for i in 0..s {
            let real = i >= pad;
            bias.extend((0..c).map(|_| if real { 0.0 } else { f32::NEG_INFINITY }));
            bias.extend((0..s).map(|k| if k <= i && (k >= pad || k == i) { 0.0 } else { f32::NEG_INFINITY }));
        }
    }
    let bias = Tensor::<B, 3>::from_data(TensorData::new(bias, [j, s, c + s]), &device);
    let hidden = model.hidden(&padded, &positions, Some(bias), Some(&mut cache));
    let last: Vec<i64> = (0..j).map(|r| (r * s + s - 1) as i64).collect();
    let logits = model.head(hidden.select(0, Tensor::<B, 1, Int>::from_data(TensorData::new(last, [j]), &device)));
    (cache, logits)
}

/// Draw one token for each batch row (`active[i]` is its original row, whose stream it uses).
fn draw_rows<B: Backend>(logits: Tensor<B, 2>, active: &[usize], opts: &SamplingParams, rngs: &mut [ChaCha8Rng]) -> Vec<(u32, f32)> {
    let truncated = opts.top_k.is_some_and(|k| k < logits.dims()[1]) || opts.top_p.is_some_and(|p| p < 1.0);
    if (opts.temperature > 0.0 && truncated) || computes_on_host::<B>(&logits.device()) {
        let vocab = logits.dims()[1];
        let host = logits.into_data().convert::<f32>().to_vec::<f32>().expect("f32 logits");
        // Rows in parallel, each with its own stream (the active rows are distinct).
        let mut streams: Vec<Option<&mut ChaCha8Rng>> = rngs.iter_mut().map(Some).collect();
        let mine: Vec<&mut ChaCha8Rng> = active.iter().map(|&row| streams[row].take().expect("distinct rows")).collect();
        return host.par_chunks(vocab).zip(mine).map(|(row, rng)| draw(row, opts, rng)).collect();
    }
    let uniforms: Vec<f64> = if opts.temperature == 0.0 { vec![] } else { active.iter().map(|&row| rngs[row].random::<f64>()).collect() };
    device_draw(logits, opts.temperature, &uniforms)
}

/// Whether `device` computes in host memory (burn-flex, ndarray, libtorch on the CPU). There
/// the host [`draw`] is used even without truncation: the logits are already on the host, and
/// its two passes over a row beat [`device_draw`]'s dozen tensor ops over `[rows, vocab]`,
/// each allocating its result (on the CPU the device draw made generation 0.55× as fast on a
/// 152k vocabulary); the two draws agree bit for bit there anyway. A GPU keeps the device draw.
fn computes_on_host<B: Backend>(device: &B::Device) -> bool {
    let name = B::name(device);
    ["flex", "ndarray", "libtorch<cpu>"].iter().any(|n| name.contains(n))
}

/// The inverse-CDF draw sums the vocabulary by blocks of this many tokens: each block's
/// probabilities in order, then the block sums in order. [`draw`] and [`device_draw`] do the
/// same additions, so they agree bit for bit; on a GPU the device draw's running sums are
/// then a cumulative sum within each block and one over the block sums (burn-cubecl's
/// `cumsum` is a naive O(n²) kernel: over a 151,936-wide row it was ~V²/2 additions per row,
/// by blocks it is ~V·64 + (V/128)²/2).
pub const DRAW_BLOCK: usize = 128;

/// [`draw`] for a batch of rows on the device, without top-k/top-p: greedy at temperature 0,
/// else the inverse-CDF draw of `draw` in f64 with `uniforms[i]` (one per row) as its uniform.
/// The row is cut into blocks of [`DRAW_BLOCK`] (padded with −∞, probability 0): the max
/// is taken per block then over blocks, the running sums within blocks and over the block
/// sums, the block holding the target found first and then the token inside it, so no op
/// runs over a whole row on one thread. Only per-row values leave the device (the ids, the
/// max and the normaliser). On the CPU the arithmetic is `draw`'s, op for op, so the two
/// agree bit for bit (a test checks it).
pub fn device_draw<B: Backend>(logits: Tensor<B, 2>, temperature: f64, uniforms: &[f64]) -> Vec<(u32, f32)> {
    let [b, vocab] = logits.dims();
    let device = logits.device();
    let n = DRAW_BLOCK;
    let nb = vocab.div_ceil(n);
    let ints = |t: Tensor<B, 2, Int>| t.into_data().convert::<i64>().to_vec::<i64>().expect("int ids");
    let floats = |t: Tensor<B, 2>| t.into_data().convert::<f64>().to_vec::<f64>().expect("f64 values");
    let padded = if nb * n == vocab {
        logits.clone()
    } else {
        let pad = Tensor::<B, 2>::full([b, nb * n - vocab], f32::NEG_INFINITY, (&device, logits.dtype()));
        Tensor::cat(vec![logits.clone(), pad], 1)
    };
    let blocks = padded.reshape([b, nb, n]);
    // Block `k` of each row, `[b, n]`.
    let block_of = |t: Tensor<B, 3>, k: Tensor<B, 2, Int>| t.gather(1, k.reshape([b, 1, 1]).expand([b, 1, n])).reshape([b, n]);
    if temperature == 0.0 {
        // The first block holding the row's max, then its first max: the row's first max.
        let k = blocks.clone().max_dim(2).reshape([b, nb]).argmax(1);
        let inner = block_of(blocks, k.clone()).argmax(1);
        return ints(k.mul_scalar(n as i64) + inner).into_iter().map(|id| (id as u32, 0.0)).collect();
    }
    let inv_t = 1.0 / temperature;
    let x = blocks.cast(DType::F64).mul_scalar(inv_t);
    let m = x.clone().max_dim(2).max_dim(1);
    let p = (x - m.clone()).exp();
    // Running sums within each block, then over the blocks' sums.
    let within = p.clone().cumsum(2);
    let ends = within.clone().slice([0..b, 0..nb, n - 1..n]).reshape([b, nb]).cumsum(1);
    let total = ends.clone().slice([0..b, nb - 1..nb]);
    let u = Tensor::<B, 2>::from_data(TensorData::new(uniforms.to_vec(), [b, 1]), (&device, DType::F64));
    let target = u * total.clone();
    // The first block whose running sum exceeds the target (`nb` when rounding leaves the
    // target at the total), then the first token of it whose running sum does.
    let k = ends.clone().lower_equal(target.clone().expand([b, nb])).int().sum_dim(1);
    let kc = k.clone().clamp_max(nb as i64 - 1);
    let base = ends.gather(1, (kc.clone() - 1).clamp_min(0)).mask_fill(kc.clone().equal_elem(0), 0.0);
    let j = (block_of(within, kc.clone()) + base).lower_equal(target.expand([b, n])).int().sum_dim(1).clamp_max(n as i64 - 1);
    let found = ints(Tensor::cat(vec![k, kc.mul_scalar(n as i64) + j], 1));
    let mut ids: Vec<i64> = found.chunks(2).map(|kj| kj[1].min(vocab as i64 - 1)).collect();
    if found.chunks(2).any(|kj| kj[0] >= nb as i64) {
        // … or, when no block does, the last token with mass.
        let index = Tensor::<B, 1, Int>::arange(0..(nb * n) as i64, &device).reshape([1, nb * n]);
        let last = ints((p.reshape([b, nb * n]).greater_elem(0.0).int() * index).max_dim(1));
        for ((id, kj), last) in ids.iter_mut().zip(found.chunks(2)).zip(last) {
            if kj[0] >= nb as i64 {
                *id = last;
            }
        }
    }
    let index = Tensor::<B, 2, Int>::from_data(TensorData::new(ids.clone(), [b, 1]), &device);
    let picked = logits.gather(1, index).cast(DType::F64);
    let values = floats(Tensor::cat(vec![picked, m.reshape([b, 1]), total], 1));
    ids.iter().zip(values.chunks(3)).map(|(&id, v)| (id as u32, (v[0] * inv_t - v[1] - v[2].ln()) as f32)).collect()
}

fn check<B: Backend>(model: &Qwen3<B>, prompts: &[Vec<u32>], opts: &SamplingParams) -> Result<(), ModelError> {
    let bad = |m: String| Err(ModelError::Request(m));
    let vocab = model.config.vocab_size;
    for (r, x) in prompts.iter().enumerate() {
        if x.is_empty() {
            return bad(format!("prompt {r} is empty (give at least one token id)"));
        }
        if let Some(&id) = x.iter().find(|&&id| id as usize >= vocab) {
            return bad(format!("prompt {r}: token id {id} is outside the vocabulary (size {vocab})"));
        }
    }
    if !(opts.temperature >= 0.0 && opts.temperature.is_finite()) {
        return bad(format!("temperature {} must be finite and ≥ 0", opts.temperature));
    }
    if let Some(tp) = opts.top_p
        && !(tp > 0.0 && tp <= 1.0)
    {
        return bad(format!("top_p {tp} must be in (0, 1]"));
    }
    if opts.top_k == Some(0) {
        return bad("top_k must be ≥ 1".into());
    }
    Ok(())
}

/// Draw one token from `logits` (one row) and return it with its log-probability under the
/// sampling distribution (f64 arithmetic on the f32 logits).
pub fn draw(logits: &[f32], opts: &SamplingParams, rng: &mut impl Rng) -> (u32, f32) {
    if opts.temperature == 0.0 {
        let (id, _) = logits.iter().enumerate().fold((0, f32::NEG_INFINITY), |best, (i, &x)| if x > best.1 { (i, x) } else { best });
        return (id as u32, 0.0);
    }
    let inv_t = 1.0 / opts.temperature;
    let truncated = opts.top_k.is_some_and(|k| k < logits.len()) || opts.top_p.is_some_and(|p| p < 1.0);
    if !truncated {
        // The whole vocabulary: one pass for the normaliser (keeping each exp) by blocks of
        // DRAW_BLOCK, the block sums added in order (the device draw's additions), then the
        // block and the token in it where the running sum first exceeds the target.
        let m = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64 * inv_t;
        let exps: Vec<f64> = logits.iter().map(|&x| (x as f64 * inv_t - m).exp()).collect();
        let mut ends = Vec::with_capacity(exps.len().div_ceil(DRAW_BLOCK));
        let mut total = 0.0;
        for block in exps.chunks(DRAW_BLOCK) {
            total += block.iter().fold(0.0, |a, &p| a + p);
            ends.push(total);
        }
        let target = rng.random::<f64>() * total;
        let k = ends.partition_point(|&end| end <= target);
        let id = if k < ends.len() {
            let base = if k == 0 { 0.0 } else { ends[k - 1] };
            let block = &exps[k * DRAW_BLOCK..((k + 1) * DRAW_BLOCK).min(exps.len())];
            let mut cum = 0.0;
            let j = block.iter().position(|&p| {
                cum += p;
                base + cum > target
            });
            k * DRAW_BLOCK + j.unwrap_or(block.len() - 1)
        } else {
            // Rounding left the target at the total: the last token with mass.
            exps.iter().rposition(|&p| p > 0.0).unwrap_or(0)
        };
        return (id as u32, (logits[id] as f64 * inv_t - m - total.ln()) as f32);
    }
    // Candidates (id, scaled logit): the kept set after top-k, then top-p.
    let mut cand: Vec<(u32, f64)> = logits.iter().enumerate().map(|(i, &x)| (i as u32, x as f64 * inv_t)).collect();
    {
        let order = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if let Some(k) = opts.top_k.filter(|&k| k < cand.len()) {
            cand.select_nth_unstable_by(k.max(1) - 1, order);
            cand.truncate(k.max(1));
        }
        cand.sort_by(order);
        if let Some(top_p) = opts.top_p.filter(|&p| p < 1.0) {
            // Keep the smallest prefix whose probability reaches top_p (always ≥ 1 token).
            let lse = log_sum_exp(&cand);
            let mut cum = 0.0;
            let mut keep = cand.len();
            for (i, &(_, z)) in cand.iter().enumerate() {
                cum += (z - lse).exp();
                if cum >= top_p {
                    keep = i + 1;
                    break;
                }
            }
            cand.truncate(keep);
        }
    }
    let lse = log_sum_exp(&cand);
    let u: f64 = rng.random::<f64>();
    let mut cum = 0.0;
    for &(id, z) in &cand {
        cum += (z - lse).exp();
        if u < cum {
            return (id, (z - lse) as f32);
        }
    }
    // Rounding left `cum` a hair under 1: take the last candidate with nonzero mass.
    let &(id, z) = cand.iter().rev().find(|(_, z)| (z - lse).exp() > 0.0).unwrap_or(&cand[0]);
    (id, (z - lse) as f32)
}

fn log_sum_exp(cand: &[(u32, f64)]) -> f64 {
    let m = cand.iter().map(|c| c.1).fold(f64::NEG_INFINITY, f64::max);
    m + cand.iter().map(|c| (c.1 - m).exp()).sum::<f64>().ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(temperature: f64, top_k: Option<usize>, top_p: Option<f64>) -> SamplingParams {
        SamplingParams { temperature, top_k, top_p, ..Default::default() }
    }

    #[test]
    fn logprob_is_under_the_truncated_distribution() {
        let logits = [2.0f32, 1.0, 0.0, -1.0];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for _ in 0..50 {
            let (id, lp) = draw(&logits, &opts(1.0, Some(2), None), &mut rng);
            assert!(id < 2);
            let z = (logits[0] as f64).exp() + (logits[1] as f64).exp();
            assert!((lp as f64 - (logits[id as usize] as f64 - z.ln())).abs() < 1e-6);
        }
        // top_p 0.5: token 0 alone has p = 0.644 ≥ 0.5, so it is always drawn, with log-prob 0.
        let (id, lp) = draw(&logits, &opts(1.0, None, Some(0.5)), &mut rng);
        assert_eq!((id, lp), (0, 0.0));
        // temperature 2 halves the logits.
        let (id, lp) = draw(&logits, &opts(2.0, None, None), &mut rng);
        let lse = logits.iter().map(|&x| (x as f64 / 2.0).exp()).sum::<f64>().ln();
        assert!((lp as f64 - (logits[id as usize] as f64 / 2.0 - lse)).abs() < 1e-6);
    }

    /// The device draw is the host draw, bit for bit, on the same uniforms (the recorded
    /// streams of `tests/fixtures/qwen3/sampler-streams.json` rest on this).
    #[test]
    fn the_device_draw_is_the_host_draw() {
        let device = crate::cpu();
        for (vocab, temperature) in [(7usize, 1.0), (300, 0.7), (300, 1.6), (151_936, 1.0), (5, 0.0)] {
            let mut noise = ChaCha8Rng::seed_from_u64(vocab as u64);
            let rows: Vec<Vec<f32>> = (0..4).map(|_| (0..vocab).map(|_| noise.random::<f32>() * 12.0 - 6.0).collect()).collect();
            for seed in 0..20u64 {
                let mut host_rngs: Vec<ChaCha8Rng> = (0..4).map(|r| ChaCha8Rng::seed_from_u64(seed * 10 + r)).collect();
                let mut dev_rngs = host_rngs.clone();
                let host: Vec<(u32, f32)> =
                    rows.iter().zip(&mut host_rngs).map(|(l, rng)| draw(l, &opts(temperature, None, None), rng)).collect();
                let uniforms: Vec<f64> = if temperature == 0.0 { vec![] } else { dev_rngs.iter_mut().map(|r| r.random::<f64>()).collect() };
                let flat: Vec<f32> = rows.iter().flatten().copied().collect();
                let logits = Tensor::<burn::Dispatch, 2>::from_data(TensorData::new(flat, [4, vocab]), &device);
                assert_eq!(device_draw(logits, temperature, &uniforms), host, "vocab {vocab}, T {temperature}, seed {seed}");
            }
        }
    }

    /// No op of the device draw runs along a whole 151,936-wide row: every cumulative sum
    /// and every reduction covers one block or the row's block sums (burn-cubecl runs a
    /// reduction with one thread per output and `cumsum` in O(n²) of its length), and on the
    /// recording backend the draw is still the host draw, sampled and greedy.
    #[test]
    fn the_device_draw_never_runs_along_a_whole_row() {
        use arl_optim::opcount::{self, Counting};
        use burn::backend::ir::{NumericOperationIr, OperationIr};
        let _lock = opcount::lock();
        let vocab: usize = 151_936;
        let longest = DRAW_BLOCK.max(vocab.div_ceil(DRAW_BLOCK));
        let mut noise = ChaCha8Rng::seed_from_u64(7);
        let rows: Vec<Vec<f32>> = (0..3).map(|_| (0..vocab).map(|_| noise.random::<f32>() * 12.0 - 6.0).collect()).collect();
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        for temperature in [1.0, 0.0] {
            let mut rngs: Vec<ChaCha8Rng> = (0..3).map(|r| ChaCha8Rng::seed_from_u64(40 + r)).collect();
            let mut dev_rngs = rngs.clone();
            let host: Vec<(u32, f32)> = rows.iter().zip(&mut rngs).map(|(l, rng)| draw(l, &opts(temperature, None, None), rng)).collect();
            let uniforms: Vec<f64> = if temperature == 0.0 { vec![] } else { dev_rngs.iter_mut().map(|r| r.random::<f64>()).collect() };
            let logits = Tensor::<Counting, 2>::from_data(TensorData::new(flat.clone(), [3, vocab]), &Default::default());
            opcount::take();
            assert_eq!(device_draw(logits, temperature, &uniforms), host, "T {temperature}");
            let ops = opcount::take();
            let mut along = Vec::new();
            for op in &ops {
                let (input, axis) = match op {
                    OperationIr::NumericFloat(_, n) | OperationIr::NumericInt(_, n) => match n {
                        NumericOperationIr::CumSum(d) => (&d.input, d.axis),
                        NumericOperationIr::SumDim(d)
                        | NumericOperationIr::MeanDim(d)
                        | NumericOperationIr::MaxDim(d)
                        | NumericOperationIr::ArgMax(d) => (&d.input, d.axis),
                        _ => continue,
                    },
                    _ => continue,
                };
                along.push((opcount::name(op), input.shape[axis]));
            }
            assert!(along.iter().any(|(name, _)| name.contains("CumSum")) || temperature == 0.0, "{along:?}");
            assert!(along.iter().all(|&(_, len)| len <= longest), "T {temperature}: an op runs along {along:?}");
        }
    }

    /// Where each op is a launch (the recording backend stands in for burn-cuda) every decode
    /// step attends over the cache's whole capacity, later keys masked: the attention products
    /// have one shape across steps (two before: prefill and decode), and the generation is
    /// burn-flex's, whose steps attend over the keys so far (same ids, log-probabilities within
    /// 1e-5), with a left-padded row and a row that leaves the batch early.
    #[test]
    fn decode_steps_keep_one_shape_where_each_op_is_a_launch() {
        use arl_optim::opcount::{self, Counting};
        use burn::backend::ir::{FloatOperationIr, OperationIr};
        let _lock = opcount::lock();
        let preset = crate::presets::find("tiny-vocab512").unwrap();
        let prompts = vec![vec![3u32, 17, 42, 9, 5], vec![7, 8, 9], vec![11, 12, 13, 14]];
        // Row 2 stops at its first 0 if it draws one; stop ids make rows leave the batch.
        let opts = SamplingParams { temperature: 1.0, max_new_tokens: 7, seed: 5, stop_ids: Some(vec![0, 1, 2, 3]), ..Default::default() };
        let cpu = Qwen3::<burn::Dispatch>::random(preset.config(), preset.seed, preset.init_std, &crate::cpu());
        let want = generate(&cpu, &prompts, &opts).unwrap();
        let gpu_like = Qwen3::<Counting>::random(preset.config(), preset.seed, preset.init_std, &Default::default());
        opcount::take();
        let got = generate(&gpu_like, &prompts, &opts).unwrap();
        let ops = opcount::take();
        for (r, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!((&g.ids, g.finish), (&w.ids, w.finish), "row {r}");
            let gap = g.sampler_logprobs.iter().zip(&w.sampler_logprobs).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
            assert!(gap <= 1e-5, "row {r}: log-probabilities differ by {gap}");
        }
        // Attention's products are the 4-D ones: (lhs, rhs) shapes without the batch rows.
        let mut shapes: Vec<(Vec<usize>, Vec<usize>)> = ops
            .iter()
            .filter_map(|op| match op {
                OperationIr::Float(_, FloatOperationIr::Matmul(m)) if m.lhs.shape.num_dims() == 4 => {
                    Some((m.lhs.shape.dims::<4>()[1..].to_vec(), m.rhs.shape.dims::<4>()[1..].to_vec()))
                }
                _ => None,
            })
            .collect();
        shapes.sort();
        shapes.dedup();
        assert_eq!(shapes.len(), 4, "scores and values, prefill and decode: {shapes:?}");
    }

    #[test]
    fn the_cpu_devices_draw_on_the_host() {
        use burn::{Dispatch, DispatchDevice};
        let flex = DispatchDevice::Flex(Default::default());
        assert!(computes_on_host::<Dispatch>(&flex), "{}", <Dispatch as Backend>::name(&flex));
        let autodiff = DispatchDevice::autodiff(flex);
        assert!(computes_on_host::<Dispatch>(&autodiff), "{}", <Dispatch as Backend>::name(&autodiff));
    }

    #[test]
    fn greedy_takes_the_argmax_with_a_point_mass() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(draw(&[0.1, 3.0, 2.0], &opts(0.0, None, None), &mut rng), (1, 0.0));
    }
}
