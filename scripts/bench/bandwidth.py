#!/usr/bin/env python3
# Memory read bandwidth on this machine: torch's sum over a 1 GiB f32 tensor (2 threads), and
# the time to stream SmolLM2-135M's f32 weights once at that rate. Run with the venv that has
# torch: ~/.cache/arl/venv-torch/bin/python scripts/bench/bandwidth.py
import time, torch
torch.set_num_threads(2)
a = torch.ones(2**28)  # 1 GiB
a.sum()
best = min((lambda t0: (a.sum(), time.perf_counter() - t0)[1])(time.perf_counter()) for _ in range(7))
gbs = a.numel() * 4 / best / 1e9
params = 134_515_008  # SmolLM2-135M (tied head) — printed by the script for the record
print(f"read bandwidth: {gbs:.1f} GB/s (best of 7 sums over 1 GiB, 2 threads)")
print(f"one pass over {params} f32 weights: {params*4/gbs/1e6:.1f} ms -> at most {8/(params*4/gbs/1e9):.0f} tok/s decoding 8 rows")
