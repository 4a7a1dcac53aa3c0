#!/usr/bin/env bash
# GPU check for the CUDA backend, in two halves (the GPU machine reaches no registry).
#
#   scripts/gpu-check.sh build      # here: release builds of `arl` and the integration tests
#                                   # with --features cuda (CUDARC_CUDA_VERSION=13000, the GPU
#                                   # machine's driver), stripped and packed into one archive,
#                                   # dist/gpu/bin.tar.xz, beside the assets a run needs (Qwen3
#                                   # tokenizer, pytest), dist/gpu/assets.tar.gz: carry those two
#                                   # (and dist/tch-cuda/arl.xz for stage 6). ARL_GPU_BEFORE=PATH
#                                   # packs an earlier build's arl too, whose column stage 2's
#                                   # table then gains (before/after in one call).
#                                   # ARL_GPU_FEATURES: the cargo features (default `cuda`;
#                                   # `fusion` adds burn's kernel fusion and autotuning).
#   scripts/gpu-check.sh run [DIR]  # there: the stages below, each under its share of a time
#                                   # budget (ARL_GPU_BUDGET_S, default 480 s), highest value first;
#                                   # what each printed goes to DIR (default results/gpu-check/)
#
# The stages (each one's output file in DIR):
#   0. the cost of one launch: `arl bench ops` in f32 and bf16 (µs per trivial add and per
#      decode-sized matmul; decides whether fewer launches or faster kernels matter more)  bench.jsonl
#   1. crosscheck cpu,cuda: two fixtures (f32 within 1e-4: f32, not tf32), the Qwen3-0.6B
#      shape (random weights, 1e-3), a fixture in bf16                                   crosscheck.jsonl
#   2. the peer benchmark (#17): arl cuda vs HF generate / PyTorch eager on cuda, the
#      Qwen3-0.6B shape in bf16 (scripts/bench/peer.py, the machine's own torch), with
#      the earlier build's column if ARL_GPU_BEFORE packed one                         peer.md
#   3. the CUDA-side integration tests                                                  tests.txt
#   4. `arl bench gen` on cuda in f32 and bf16, nvidia-smi's utilization while it runs  bench.jsonl
#   5. the mission's command for two steps: `arl run --env tools --loss grpo --backend cuda`
#      on the Qwen3-0.6B shape (random weights, so reward 0: it shows the path runs)    run-tools.txt
#   6. libtorch's CUDA (`tch-cuda`, a second binary from scripts/tch-cuda-binary.sh build,
#      carried as dist/tch-cuda/arl.xz) against cpu on two fixtures, and its
#      `bench score` and `bench gen` in bf16 (a dev build: arl's own crates unoptimized),
#      if that binary is there                                                          tch-cuda.jsonl
# and log.txt: everything in order, with each stage's seconds; and autotune.tar.gz, burn's
# autotune results (`target/autotune`, written by the `cuda` build's kernel tuning): `build`
# packs DIR's last one (ARL_GPU_AUTOTUNE, default results/gpu-check/autotune.tar.gz) beside the
# binaries and `run` unpacks it first, so a later check starts tuned. At most 8 files (the
# device tool brings back 8).
#
# Without a GPU (no nvidia-smi), `run` is a dry run of the same stages with `cpu` standing in
# for `cuda` and tiny sizes, so the script itself is tested here (stage 2 needs a Python with
# torch and transformers in ARL_PEER_VENV, else it is skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=dist/gpu
case "${1:-run}" in
build)
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/arl/target-cuda}"
    export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"
    # One feature set for both (the tests link arl with its default `wasm`), so the
    # dependencies are compiled once. Cold, on 2 cores: ≈20 min (session 19).
    features="${ARL_GPU_FEATURES:-cuda}"
    test_bin=$(cargo test --release --locked -p arl-tests --features "$features" --no-run --message-format=json \
        | sed -n 's/.*"executable":"\([^"]*integration[^"]*\)".*/\1/p' | tail -1)
    cargo build --release --locked -p arl --features "$features" --bin arl
    rm -rf "$BIN" && mkdir -p "$BIN/bin"
    cp "$CARGO_TARGET_DIR/release/arl" "$BIN/bin/arl"
    cp "$test_bin" "$BIN/bin/integration"
    [ -z "${ARL_GPU_BEFORE:-}" ] || cp "$ARL_GPU_BEFORE" "$BIN/bin/arl-before"
    chmod +x "$BIN"/bin/* && strip "$BIN"/bin/*
    # Stripped 111 + 126 MB (release, `fusion`, + wasm; 71 + 77 with `cuda`), over the 64 MiB carry. One
    # archive whose dictionary is larger than any one binary lets xz find the code they share:
    # with a 71 MB earlier build, 29 MB for the three, against 49 MB packed one by one (≈3 min).
    tar -C "$BIN/bin" -cf - . | xz -T1 --lzma2=preset=6,dict=384MiB > "$BIN/bin.tar.xz"
    rm -rf "$BIN/bin"
    # The assets stages 3 and 5 read from ~/.cache/arl/assets (a fresh machine has none); not
    # the WASI interpreter's compiled-module cache, which a wasm run leaves under pytest/.
    tuned="${ARL_GPU_AUTOTUNE:-results/gpu-check/autotune.tar.gz}"
    [ ! -f "$tuned" ] || cp "$tuned" "$BIN/autotune.tar.gz"
    for setup in qwen3-tokenizer pytest; do bash "scripts/setup/$setup.sh" >&2; done
    tar -C "$HOME/.cache/arl/assets" --exclude='pytest/wasm-pyc-*' -czf "$BIN/assets.tar.gz" qwen3-tokenizer pytest
    ls -la "$BIN"
    du -sh "$BIN"
    ;;
run)
    out="${2:-results/gpu-check}"
    mkdir -p "$out"
    # The binaries, with Python's lzma (the GPU machine may have no xz): bin.tar.xz unpacked
    # into dist/gpu/, and dist/tch-cuda/arl.xz beside itself.
    if [ -f "$BIN/bin.tar.xz" ] && [ ! -x "$BIN/arl" ]; then
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$BIN/bin.tar.xz" "$BIN"
    fi
    if [ -f dist/tch-cuda/arl.xz ] && [ ! -x dist/tch-cuda/arl ]; then
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            dist/tch-cuda/arl.xz dist/tch-cuda/arl
        chmod +x dist/tch-cuda/arl
    fi
    if [ -f "$BIN/assets.tar.gz" ] && [ ! -d "$HOME/.cache/arl/assets/pytest" ]; then
        mkdir -p "$HOME/.cache/arl/assets" && tar -C "$HOME/.cache/arl/assets" -xzf "$BIN/assets.tar.gz"
    fi
    # burn's autotune cache lives under target/ of the tree holding Cargo.toml (this one).
    if [ -f "$BIN/autotune.tar.gz" ] && [ ! -d target/autotune ]; then
        mkdir -p target && tar -C target -xzf "$BIN/autotune.tar.gz"
    fi
    arl="$BIN/arl"
    [ -x "$arl" ] || arl="${ARL:-$(command -v arl || true)}"
    [ -x "$arl" ] || { echo "error: no $BIN/arl; run \`scripts/gpu-check.sh build\` first (or set ARL=path)" >&2; exit 1; }
    exec > >(tee -a "$out/log.txt") 2>&1
    budget="${ARL_GPU_BUDGET_S:-480}"
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        gpu=cuda; big=qwen3-0.6b; small="--samples 8 --max-new-tokens 32"
        # `bench gen` and `bench score` sizes, as scripts/bench/peer.py's defaults.
        gen="--batch 8 --prompt-len 64 --new-tokens 64"; score="--batch 4 --seq-len 512 --policy-frac 0.25 --steps 2"
        ops="--adds 10000 --matmuls 1000"
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    else
        echo "no GPU: dry run with cpu in place of cuda"
        gpu=cpu; big=tiny; small="--samples 2 --max-new-tokens 4"
        gen="--batch 2 --prompt-len 8 --new-tokens 4"; score="--batch 1 --seq-len 16 --steps 1"
        ops="--adds 100 --matmuls 2"
    fi
    left() { echo $((budget - SECONDS)); }
    # `stage NAME CAP FN`: runs the function FN (below) in a shell of its own under
    # min(CAP, what is left of the budget) seconds.
    stage() {
        local name=$1 cap=$2 fn=$3 t0=$SECONDS
        local lim=$(($(left) < cap ? $(left) : cap))
        if [ "$lim" -lt 10 ]; then echo "== $name: skipped, budget spent"; return 0; fi
        echo "== $name (up to ${lim}s)"
        timeout --kill-after=5 "$lim" bash -o pipefail -c "$fn" || echo "== $name: exit $? (124: out of time)"
        echo "== $name: $((SECONDS - t0))s"
    }
    launch() {
        local dt
        for dt in f32 bf16; do
            "$arl" bench ops --backend "$gpu" --dtype "$dt" $ops | tee -a "$out/bench.jsonl"
        done
    }
    crosscheck() {
        for fx in qwen3-a llama; do
            "$arl" crosscheck --model "tests/fixtures/qwen3/$fx" --backends "cpu,$gpu" $small --tolerance 1e-4 \
                >> "$out/crosscheck.jsonl" || echo "($fx above tolerance)"
        done
        "$arl" crosscheck --model "$big" --backends "cpu,$gpu" --samples 2 --prompt-len 16 --max-new-tokens 16 \
            --tolerance 1e-3 >> "$out/crosscheck.jsonl" || echo "($big above tolerance)"
        "$arl" crosscheck --model tests/fixtures/qwen3/qwen3-a --backends "cpu,$gpu" --dtype bf16 $small \
            --tolerance 0.25 >> "$out/crosscheck.jsonl" || echo "(qwen3-a bf16 above tolerance)"
        cat "$out/crosscheck.jsonl"
    }
    peer() {
        local py
        if [ "$gpu" = cuda ]; then py=python3; else py="${ARL_PEER_VENV:+$ARL_PEER_VENV/bin/python}"; fi
        [ -n "$py" ] && "$py" -c 'import torch, transformers' 2>/dev/null || { echo "no torch/transformers: skipped"; return 0; }
        local size=(--runs 1 --steps 2)
        [ "$gpu" = cpu ] && size+=(--batch 2 --prompt-len 8 --new-tokens 4 --score-batch 1 --seq-len 16 --steps 1)
        [ -x "$BIN/arl-before" ] && size+=(--arl-before "$BIN/arl-before")
        ARL_PEER_VENV=$("$py" -c 'import sys; print(sys.prefix)') "$py" scripts/bench/peer.py compare --arl "$arl" \
            --model "$big" --backend "$gpu" --dtype bf16 "${size[@]}" | tee "$out/peer.md"
    }
    bench() {
        local dt util smi=
        for dt in f32 bf16; do
            # The GPU's utilization (the share of each 100 ms sample with a kernel running) and
            # memory in use while it runs; samples at 0 % (the load, before any kernel) are left
            # out of the mean: a host-bound loop shows as low utilization while it works.
            util=$(mktemp)
            if [ "$gpu" = cuda ]; then
                nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 100 > "$util" &
                smi=$!
            fi
            "$arl" bench gen --model "$big" $gen --backend "$gpu" --dtype "$dt" | tee -a "$out/bench.jsonl"
            [ -n "$smi" ] && { kill "$smi"; wait "$smi" 2>/dev/null; }
            awk -F', *' -v dt="$dt" 'NF == 2 { n++; if ($1 > 0) { b++; u += $1 } if ($2 > m) m = $2 }
                END { printf "{\"nvidia_smi\":\"bench gen %s\",\"samples\":%d,\"busy_samples\":%d,\"mean_busy_utilization_pct\":%.1f,\"max_memory_used_mib\":%d}\n", dt, n, b, b ? u / b : 0, m }' \
                "$util" | tee -a "$out/bench.jsonl"
            rm -f "$util"
        done
    }
    run_tools() {
        local dir
        dir=$(mktemp -d)
        local size=(--steps 2 --prompts 2 --group-size 4 --eval-n 1 --max-new-tokens 128)
        [ "$gpu" = cpu ] && size=(--steps 1 --prompts 1 --group-size 2 --eval-n 1 --max-new-tokens 8)
        "$arl" run --env tools --loss grpo --backend "$gpu" --dtype bf16 --model "$big" "${size[@]}" \
            --set output.checkpoints=false --out "$dir/run" 2>&1 | tee "$out/run-tools.txt"
        for f in results.json metrics.jsonl; do
            [ -f "$dir/run/$f" ] && { echo "--- $f"; cat "$dir/run/$f"; } >> "$out/run-tools.txt"
        done
        rm -rf "$dir"
    }
    tch_cuda() {
        local tch=dist/tch-cuda/arl
        [ -x "$tch" ] || { echo "no $tch: skipped"; return 0; }
        local backend=tch-cuda
        [ "$gpu" = cpu ] && backend=tch
        if [ "$gpu" = cuda ]; then
            LD_LIBRARY_PATH="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            export LD_LIBRARY_PATH
        fi
        for fx in qwen3-a llama; do
            "$tch" crosscheck --model "tests/fixtures/qwen3/$fx" --backends "cpu,$backend" $small --tolerance 1e-4 \
                >> "$out/tch-cuda.jsonl" || echo "($fx above tolerance)"
        done
        # The update and generation through libtorch, beside the peer's numbers of stage 2.
        "$tch" bench score --model "$big" $score --backend "$backend" --dtype bf16 >> "$out/tch-cuda.jsonl"
        "$tch" bench gen --model "$big" $gen --backend "$backend" --dtype bf16 >> "$out/tch-cuda.jsonl"
        cat "$out/tch-cuda.jsonl"
    }
    tests() {
        [ -x "$BIN/integration" ] && [ "$gpu" = cuda ] || { echo "no GPU or no $BIN/integration: skipped"; return 0; }
        (cd tests && "../$BIN/integration" cuda 2>&1) | tee "$out/tests.txt"
    }
    export arl gpu big small gen score ops out BIN
    export -f launch crosscheck peer bench run_tools tch_cuda tests
    # Caps from the first run on an H200 (results/gpu-check-h200/): stage 1 took 46 s,
    # stage 2 158 s (+≈60 s with a before column), one `bench gen` ≈30 s, `arl run`'s
    # evaluations ≈40 s each at 256 tokens.
    stage "0 launch cost (bench ops) on $gpu" 30 launch
    stage "1 crosscheck cpu,$gpu" 75 crosscheck
    stage "2 peer benchmark on $gpu" 270 peer
    stage "3 CUDA-side tests" 60 tests
    stage "4 bench gen $gpu f32, bf16" 80 bench
    stage "5 arl run --env tools --backend $gpu" 150 run_tools
    stage "6 tch-cuda crosscheck, bench score, bench gen" 90 tch_cuda
    if [ -d target/autotune ]; then
        tar -C target -czf "$out/autotune.tar.gz" autotune && echo "== autotune cache: $(du -sh "$out/autotune.tar.gz" | cut -f1)"
    fi
    echo "== done in ${SECONDS}s"
    ;;
*)
    echo "usage: scripts/gpu-check.sh build | run [OUT_DIR]" >&2; exit 2 ;;
esac
