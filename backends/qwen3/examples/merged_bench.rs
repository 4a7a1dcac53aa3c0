//! A/B in one process on burn-flex: a Qwen3-0.6B layer's q/k/v and gate/up projections as
//! separate `Linear`s (before), as a `MergedLinear` (its CPU path: a GEMM per column view of
//! the merged weight) and as one GEMM on the merged weight then column slices (the path taken
//! off the CPU). The variants take turns call by call, in a rotating order, so a load that
//! drifts (a shared machine) weighs on each alike; prints the median time of each and the
//! median of the per-round ratios to `separate`.
//!
//!     cargo build --workspace --example merged_bench && $CARGO_TARGET_DIR/debug/examples/merged_bench [ROUNDS]
//!
//! (the dev profile builds burn-flex and arl-qwen3 at opt-level 2, as `arl bench` is measured).

use arl_qwen3::layers::{Linear, MergedLinear, matmul};
use arl_qwen3::weights::RandomInit;
use burn::Dispatch;
use burn::tensor::{Distribution, Tensor};
use std::time::Instant;

type B = Dispatch;
/// A variant's name and one call (returning the output width, so the work is used).
type Variant<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(30, |a| a.parse().expect("ROUNDS"));
    let device = arl_qwen3::cpu();
    let d_in = 1024;
    let sets: [(&str, Vec<(&str, usize)>); 2] =
        [("q/k/v", vec![("q", 2048), ("k", 1024), ("v", 1024)]), ("gate/up", vec![("gate", 3072), ("up", 3072)])];
    for (set, outs) in &sets {
        let mut src = RandomInit { seed: 1, std: 0.02 };
        let parts: Vec<(String, usize)> = outs.iter().map(|(n, o)| (n.to_string(), *o)).collect();
        let merged = MergedLinear::<B>::load(&mut src, &parts, d_in, false, &device).unwrap();
        let single: Vec<Linear<B>> = outs.iter().map(|(n, o)| Linear::load(&mut src, n, d_in, *o, false, &device).unwrap()).collect();
        for rows in [8, 512] {
            let x = Tensor::<B, 2>::random([rows, d_in], Distribution::Normal(0.0, 1.0), &device);
            let variants: [Variant; 3] = [
                ("separate", Box::new(|| single.iter().map(|l| l.forward(x.clone()).dims()[1]).sum())),
                ("column views", Box::new(|| merged.forward(x.clone()).iter().map(|y| y.dims()[1]).sum())),
                (
                    "one GEMM + slices",
                    Box::new(|| {
                        let y = matmul(x.clone(), merged.weight.val());
                        merged.ranges().into_iter().map(|r| y.clone().slice([0..rows, r]).dims()[1]).sum()
                    }),
                ),
            ];
            let mut times = vec![Vec::new(); variants.len()];
            for round in 0..rounds + 2 {
                for k in 0..variants.len() {
                    let i = (round + k) % variants.len();
                    let t = Instant::now();
                    std::hint::black_box((variants[i].1)());
                    if round >= 2 {
                        times[i].push(t.elapsed().as_secs_f64());
                    }
                }
            }
            for (i, (name, _)) in variants.iter().enumerate() {
                let ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(t, s)| t / s).collect();
                println!(
                    "{set} rows {rows:>3} {name:<18} median {:>8.3} ms, median ratio to separate {:.3}",
                    median(times[i].clone()) * 1e3,
                    median(ratios)
                );
            }
        }
    }
}
