#!/usr/bin/env python3
"""Peer benchmark: arl against HF transformers / PyTorch eager on the same shapes and weights.

    python3 scripts/bench/peer.py compare --arl target/release/arl --model small
    python3 scripts/bench/peer.py compare --arl target/release/arl --model llama-135m --runs 2
    python3 scripts/bench/peer.py compare --arl NEW/arl --arl-before OLD/arl --model small

With `--arl-before`, a second arl binary (an older build) takes its turn in every round too
(before, arl, peer, …) and the table gains its column and the ratios before/peer and arl/before.
`--before-args` gives that binary extra flags and `--before-label` names its column, e.g. the
libtorch backend beside burn-flex (a `--features tch` build, `scripts/with-libtorch.sh`):

    python3 scripts/bench/peer.py compare --arl NEW/arl --arl-before TCH/arl --before-args "--backend tch" \
        --before-label "arl tch" --model llama-135m --what score

`--column 'LABEL|BINARY|FLAGS'` (repeatable) adds more binaries the same way, each its own column
and ratios (the GPU check puts the fusion build and libtorch's CUDA beside burn-cuda):

    python3 scripts/bench/peer.py compare --arl cuda/arl --column 'arl fusion|fusion/arl' \
        --column 'arl tch-cuda|tch/arl|--backend tch-cuda' --model qwen3-0.6b --backend cuda --dtype bf16

`compare` exports the model's weights with `arl bench export` (a preset's seeded random
weights; a directory is used as it is), then runs, as separate processes taking turns
(arl, peer, arl, peer, …, `--runs` pairs):

- gen:   `arl bench gen` against HF `generate` (do_sample, temperature 1, no top-k/top-p,
         exactly `--new-tokens` per row, KV cache) on the same random prompts;
- score: `arl bench score` against a PyTorch eager GRPO step (forward, LM head on the last
         `policy_frac · seq_len` positions, log-softmax + gather, clipped surrogate, backward,
         `clip_grad_norm_(1.0)`, AdamW with torch's defaults at lr 1e-6) on the same random
         sequences and advantages.

It prints a Markdown table of medians with the ratio arl/peer (> 1: arl is faster; for memory
< 1: arl uses less), and, as a correctness check of the step being timed, the warm-up step's
loss and gradient norm on both sides. Each side reports its own timings (the model load is not
timed) and the process's peak RSS (getrusage). Threads: torch gets `--threads` (default: all
cores, as arl's thread pool).

On a GPU, `--backend cuda` (or `tch-cuda`) and `--dtype bf16` give arl those flags and run the
peer on `cuda` in the same dtype, timed with `torch.cuda.synchronize()`; the peer also reports
its device's peak allocated memory (arl's figure is host RSS only):

    ARL_PEER_VENV=$(python3 -c 'import sys; print(sys.prefix)') \
        python3 scripts/bench/peer.py compare --arl dist/gpu/arl --model qwen3-0.6b --backend cuda --dtype bf16

The peer side alone (`gen` / `score` sub-commands) prints one JSON line with arl's keys.
Runs in the venv at $ARL_PEER_VENV (default ~/.cache/arl/venv-hf); if that has no
torch/transformers, it is created with `pip install torch==2.9.0 transformers safetensors`
(PyPI; the wheel brings CUDA packages but everything here runs on the CPU). Set to the running
interpreter's prefix (as above), the interpreter's own torch is used and nothing is installed.
"""
import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV = Path(os.environ.get("ARL_PEER_VENV", Path.home() / ".cache/arl/venv-hf"))


def ensure_venv():
    py = VENV / "bin/python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not py.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    if subprocess.run([str(py), "-c", "import torch, transformers, safetensors"], capture_output=True).returncode != 0:
        subprocess.check_call([str(py), "-m", "pip", "install", "-q", "torch==2.9.0", "transformers", "safetensors"])
    os.execv(str(py), [str(py), __file__, *sys.argv[1:]])


def random_ids(rows, length, vocab, seed):
    """arl's `bench::random_ids` (splitmix64), bit for bit."""
    mask = (1 << 64) - 1
    s = (seed + 0x9E3779B97F4A7C15) & mask
    out = []
    for _ in range(rows):
        row = []
        for _ in range(length):
            s = (s + 0x9E3779B97F4A7C15) & mask
            z = s
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
            z ^= z >> 31
            row.append(z % vocab)
        out.append(row)
    return out


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / (1024 * 1024)


DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def load(a):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(a.threads)
    dtype = getattr(torch, DTYPES[a.dtype])
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=dtype, attn_implementation=a.attn).to(a.device)
    return torch, model


def sync(torch, device):
    """Waits for the device's queued work, so a wall-clock time covers it (CUDA runs async)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def device_peak(torch, device):
    """The device's peak allocated memory in MB (CUDA), else None."""
    return torch.cuda.max_memory_allocated() / (1024 * 1024) if device.startswith("cuda") else None


def peer_gen(a):
    torch, model = load(a)
    model.eval()
    ids = torch.tensor(random_ids(a.batch, a.prompt_len, model.config.vocab_size, a.seed), device=a.device)
    mask = torch.ones_like(ids)

    def generate(n):
        return model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=n,
            min_new_tokens=n,
            pad_token_id=0,
        )

    with torch.inference_mode():
        torch.manual_seed(a.seed)
        for _ in range(a.warmup):
            generate(2)
        sync(torch, a.device)
        t = time.perf_counter()
        # As `generate`'s own prefill: the LM head on the last position only (without
        # `logits_to_keep` the forward projected every prompt position onto the vocabulary,
        # which `generate` does not, so prefill_s was too long and decode_s too short).
        model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        sync(torch, a.device)
        prefill_s = time.perf_counter() - t
        t = time.perf_counter()
        out = generate(a.new_tokens)
        sync(torch, a.device)
        total_s = time.perf_counter() - t
    assert out.shape == (a.batch, a.prompt_len + a.new_tokens), out.shape
    decode_s = max(total_s - prefill_s, 1e-9)
    print(json.dumps({
        "bench": "gen",
        "side": "hf-generate",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "attn": a.attn,
        "device": a.device,
        "dtype": a.dtype,
        "batch": a.batch,
        "prompt_len": a.prompt_len,
        "new_tokens": a.new_tokens,
        "prefill_s": prefill_s,
        "decode_s": decode_s,
        "prefill_tokens_per_s": a.batch * a.prompt_len / prefill_s,
        "decode_tokens_per_s": a.batch * (a.new_tokens - 1) / decode_s,
        "new_tokens_per_s": a.batch * a.new_tokens / total_s,
        "peak_rss_mb": peak_rss_mb(),
        "peak_device_mb": device_peak(torch, a.device),
    }))


def peer_score(a):
    torch, model = load(a)
    model.train()
    b, l = a.batch, a.seq_len
    n_pol = min(max(round(a.policy_frac * l), 1), l - 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    times = []
    first = None
    for step in range(a.steps + 1):
        seqs = torch.tensor(random_ids(b, l, model.config.vocab_size, a.seed + step), device=a.device)
        adv = torch.where(seqs % 2 == 0, 1.0, -1.0)[:, l - n_pol:]
        sync(torch, a.device)
        t = time.perf_counter()
        hidden = model.model(input_ids=seqs).last_hidden_state  # final norm applied
        logits = model.lm_head(hidden[:, l - n_pol - 1:l - 1, :]).float()
        lp = torch.log_softmax(logits, dim=-1).gather(-1, seqs[:, l - n_pol:, None]).squeeze(-1)
        ratio = torch.exp(lp - lp.detach())
        surrogate = torch.minimum(ratio * adv, ratio.clamp(0.8, 1.2) * adv)
        loss = -surrogate.sum() / (b * n_pol)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync(torch, a.device)
        elapsed = time.perf_counter() - t
        if step == 0:
            first = (loss.item(), grad_norm.item())
        else:
            times.append(elapsed)
    step_s = statistics.median(times) if times else float("nan")
    print(json.dumps({
        "bench": "score",
        "side": "torch-eager",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "attn": a.attn,
        "device": a.device,
        "dtype": a.dtype,
        "batch": b,
        "seq_len": l,
        "policy_frac": a.policy_frac,
        "policy_tokens_per_row": n_pol,
        "steps": len(times),
        "step_s": step_s,
        "tokens_per_s": b * l / step_s,
        "first_loss": first[0],
        "first_grad_norm": first[1],
        "peak_rss_mb": peak_rss_mb(),
        "peak_device_mb": device_peak(torch, a.device),
    }))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def columns(a):
    """The extra arl columns, `(label, binary, flags)` in order: `--arl-before`, then each `--column`."""
    cols = []
    if a.arl_before:
        cols.append((a.before_label, a.arl_before, a.before_args))
    for c in a.column or []:
        parts = c.split("|", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            sys.exit(f"peer.py: --column {c!r}: expected LABEL|BINARY or LABEL|BINARY|FLAGS")
        cols.append((parts[0], parts[1], parts[2] if len(parts) == 3 else ""))
    return [(label, str(Path(b).resolve()), flags) for label, b, flags in cols]


def compare(a):
    arl = str(Path(a.arl).resolve())
    others = columns(a)
    me = [sys.executable, str(Path(__file__).resolve())]
    tmp = None
    model_dir = a.model
    if not Path(a.model).expanduser().is_dir():
        tmp = tempfile.TemporaryDirectory(prefix="arl-peer-")
        model_dir = tmp.name
        run_json([arl, "bench", "export", "--model", a.model, "--out", model_dir])
    model_dir = str(Path(model_dir).expanduser())
    # arl's backend and dtype; the peer runs on the matching torch device in the same dtype.
    on = ["--backend", a.backend, "--dtype", a.dtype]
    peer_device = "cuda" if a.backend in ("cuda", "tch-cuda") else "cpu"

    def with_on(extra):
        """`on`, less the flags that `extra` (a column's flags) sets itself, then `extra`."""
        kept = [x for i in range(0, len(on), 2) if on[i] not in extra for x in on[i:i + 2]]
        return [*kept, *extra]
    gen = ["--batch", str(a.batch), "--prompt-len", str(a.prompt_len), "--new-tokens", str(a.new_tokens), "--seed", str(a.seed)]
    score = ["--batch", str(a.score_batch), "--seq-len", str(a.seq_len), "--policy-frac", str(a.policy_frac),
             "--steps", str(a.steps), "--seed", str(a.seed)]
    peer_common = ["--model-dir", model_dir, "--threads", str(a.threads), "--attn", a.attn, "--device", peer_device,
                   "--dtype", a.dtype]
    pairs = []
    if "gen" in a.what:
        pairs.append(("gen", ["bench", "gen", "--model", model_dir, *gen], [*me, "gen", *peer_common, *gen]))
    if "score" in a.what:
        pairs.append(("score", ["bench", "score", "--model", model_dir, *score], [*me, "score", *peer_common, *score]))
    # Each run: (arl, peer, [each column's]), the columns first in every round.
    results = {}
    for name, arl_args, peer_cmd in pairs:
        runs = []
        for i in range(a.runs):
            cols = [run_json([b, *arl_args, *with_on(shlex.split(flags))]) for _, b, flags in others]
            ours = run_json([arl, *arl_args, *on])
            theirs = run_json(peer_cmd)
            runs.append((ours, theirs, cols))
            for (label, _, _), c in zip(others, cols):
                print(f"# {name} run {i + 1}/{a.runs}: {label} {json.dumps(c)}", file=sys.stderr)
            print(f"# {name} run {i + 1}/{a.runs}: arl {json.dumps(ours)}", file=sys.stderr)
            print(f"# {name} run {i + 1}/{a.runs}: peer {json.dumps(theirs)}", file=sys.stderr)
        results[name] = runs
    labels = [label for label, _, _ in others]
    sides = ", ".join([*labels, "arl"]) + " and peer"
    print(f"model `{a.model}`, arl `--backend {a.backend} --dtype {a.dtype}`, peer on {peer_device} in {a.dtype}; "
          f"{a.runs} run(s) of {sides}, taking turns; medians; ratios pair by pair, then the median: "
          "above 1 the first is faster in tokens/s, below 1 it uses less memory")
    print()
    head = [*labels, "arl", "peer", *(f"{lb} / peer" for lb in labels), "arl / peer" if labels else "ratio",
            *(f"arl / {lb}" for lb in labels)]
    print("| bench | figure | " + " | ".join(head) + " |")
    print("|---|---|" + "---|" * len(head))
    keys = {
        "gen": ["new_tokens_per_s", "prefill_tokens_per_s", "decode_tokens_per_s", "peak_rss_mb"],
        "score": ["tokens_per_s", "peak_rss_mb"],
    }

    def ratio(xs, ys):
        return statistics.median(x / y for x, y in zip(xs, ys))

    med = statistics.median
    for name, runs in results.items():
        peer_name = "HF generate" if name == "gen" else "PyTorch eager"
        for k in keys[name]:
            if any(r[0].get(k) is None or r[1].get(k) is None or any(c.get(k) is None for c in r[2]) for r in runs):
                continue
            ours = [r[0][k] for r in runs]
            theirs = [r[1][k] for r in runs]
            cols = [[r[2][j][k] for r in runs] for j in range(len(others))]
            cells = [*(f"{med(c):.4g}" for c in cols), f"{med(ours):.4g}", f"{med(theirs):.4g}",
                     *(f"{ratio(c, theirs):.3f}" for c in cols), f"{ratio(ours, theirs):.3f}",
                     *(f"{ratio(ours, c):.3f}" for c in cols)]
            print(f"| {name} (vs {peer_name}) | {k} | " + " | ".join(cells) + " |")
        device_mb = [r[1]["peak_device_mb"] for r in runs if r[1].get("peak_device_mb") is not None]
        if device_mb:
            cells = ["" for _ in labels] + ["", f"{med(device_mb):.4g}"] + ["" for _ in range(len(head) - len(labels) - 2)]
            print(f"| {name} (vs {peer_name}) | peer peak_device_mb (torch.cuda.max_memory_allocated) | " + " | ".join(cells) + " |")
        if name == "score":
            o, t, cs = runs[0]
            print()
            loss = "".join(f"{lb} {c['first_loss']:.6f} / " for lb, c in zip(labels, cs))
            grad = "".join(f"{lb} {c['first_grad_norm']:.6f} / " for lb, c in zip(labels, cs))
            print(f"warm-up step: loss {loss}arl {o['first_loss']:.6f} / torch {t['first_loss']:.6f}; "
                  f"grad norm {grad}arl {o['first_grad_norm']:.6f} / torch {t['first_grad_norm']:.6f}")
    if tmp:
        tmp.cleanup()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    for name in ["gen", "score"]:
        q = sub.add_parser(name)
        q.add_argument("--model-dir", required=True)
        q.add_argument("--batch", type=int, default=8 if name == "gen" else 4)
        q.add_argument("--seed", type=int, default=0)
        q.add_argument("--threads", type=int, default=os.cpu_count())
        q.add_argument("--attn", default="sdpa")
        q.add_argument("--warmup", type=int, default=1)
        q.add_argument("--device", default="cpu", help="torch device: cpu or cuda")
        q.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
        if name == "gen":
            q.add_argument("--prompt-len", type=int, default=64)
            q.add_argument("--new-tokens", type=int, default=64)
        else:
            q.add_argument("--seq-len", type=int, default=512)
            q.add_argument("--policy-frac", type=float, default=0.25)
            q.add_argument("--steps", type=int, default=3)
    q = sub.add_parser("compare")
    q.add_argument("--arl", required=True, help="the arl binary (a release build)")
    q.add_argument("--arl-before", help="an older arl binary to run in the same rounds (before/after)")
    q.add_argument("--before-args", default="", help="extra flags for --arl-before (e.g. \"--backend tch\")")
    q.add_argument("--before-label", default="arl before", help="the column name of --arl-before")
    q.add_argument("--column", action="append", metavar="LABEL|BINARY[|FLAGS]",
                   help="one more arl binary in the same rounds, its own column (repeatable; after --arl-before's)")
    q.add_argument("--model", required=True, help="arl preset name or HF model directory")
    q.add_argument("--what", default="gen,score")
    q.add_argument("--runs", type=int, default=3)
    q.add_argument("--batch", type=int, default=8)
    q.add_argument("--prompt-len", type=int, default=64)
    q.add_argument("--new-tokens", type=int, default=64)
    q.add_argument("--score-batch", type=int, default=4)
    q.add_argument("--seq-len", type=int, default=512)
    q.add_argument("--policy-frac", type=float, default=0.25)
    q.add_argument("--steps", type=int, default=3)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--threads", type=int, default=os.cpu_count())
    q.add_argument("--attn", default="sdpa")
    q.add_argument("--backend", default="cpu", help="arl's --backend (cuda or tch-cuda: the peer runs on cuda)")
    q.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    a = p.parse_args()
    {"gen": peer_gen, "score": peer_score, "compare": compare}[a.cmd](a)


if __name__ == "__main__":
    ensure_venv()
    main()
