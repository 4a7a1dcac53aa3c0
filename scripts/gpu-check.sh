#!/usr/bin/env bash
# GPU check for the CUDA backends, in two halves (the GPU machine reaches no registry).
#
#   scripts/gpu-check.sh build      # here: release builds of `arl` for each feature set in
#                                   # ARL_GPU_FEATURES (default "cuda fusion": burn-cuda with
#                                   # autotune, and with burn's kernel fusion too), each in a
#                                   # target dir of its own, and of the integration tests with
#                                   # the first (CUDARC_CUDA_VERSION=13000, the GPU machine's
#                                   # driver), stripped and packed into one archive,
#                                   # dist/gpu/bin.tar.xz, beside the assets a run needs (Qwen3
#                                   # tokenizer, pytest), dist/gpu/assets.tar.gz: carry those two
#                                   # and dist/tch-cuda/arl.xz (scripts/tch-cuda-binary.sh build,
#                                   # libtorch's CUDA). ARL_GPU_BEFORE=PATH packs an earlier
#                                   # build's arl too, one more column of stage 2's table.
#   scripts/gpu-check.sh run [DIR]  # there: the stages below, each under its share of a time
#                                   # budget (ARL_GPU_BUDGET_S, default 510 s), highest value first;
#                                   # what each printed goes to DIR (default results/gpu-check/)
#
# The builds compared: `cuda` (dist/gpu/arl), `fusion` (dist/gpu/arl-fusion; not the default
# until its crosscheck holds on a GPU), `tch-cuda` (dist/tch-cuda/arl), `before` (ARL_GPU_BEFORE),
# each where it was carried. The stages (each one's output file in DIR; JSON lines carry "build"):
#   0. the cost of one launch: `arl bench ops` in f32 and bf16 per build (µs per trivial add and
#      per decode-sized matmul; decides whether fewer launches or faster kernels matter more) bench.jsonl
#   1. crosscheck cpu,GPU per build: two fixtures (f32 within 1e-4: f32, not tf32), the
#      Qwen3-0.6B shape (random weights, 1e-3), a fixture in bf16 — the gate of `fusion` crosscheck.jsonl
#   2. the peer benchmark (#17): every build against HF generate (8 rows) / PyTorch eager
#      on cuda in one table, the Qwen3-0.6B shape in bf16 (scripts/bench/peer.py, the
#      machine's own torch)                                                            peer.md
#   3. the mission's command for two steps: `arl run --env tools --loss grpo --backend cuda`
#      on the Qwen3-0.6B shape (random weights, so reward 0: it shows the path runs; its
#      metrics split each step into rollout, tool calls and grading, update)             run-tools.txt
#   4. `arl bench gen` at 64 rows in bf16 per build, nvidia-smi's utilization while it runs bench.jsonl
#   5. the CUDA-side integration tests                                                  tests.txt
# and log.txt: everything in order, with each stage's seconds; and autotune.tar.gz, burn's
# autotune results (`target/autotune`, written by the builds' kernel tuning): `build` packs
# DIR's last one (ARL_GPU_AUTOTUNE, default results/gpu-check/autotune.tar.gz) beside the
# binaries and `run` unpacks it first, so a later check starts tuned. At most 8 files (the
# device tool brings back 8).
#
# Without a GPU (no nvidia-smi), `run` is a dry run of the same stages with `cpu` standing in
# for `cuda` (`tch` for `tch-cuda`) and tiny sizes, so the script itself is tested here (stage 2
# needs a Python with torch and transformers in ARL_PEER_VENV, else it is skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=dist/gpu
case "${1:-run}" in
build)
    target="${CARGO_TARGET_DIR:-$HOME/.cache/arl/target-cuda}"
    export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"
    # Each feature set in a target dir of its own (`fusion` turns on features of burn's crates
    # that `cuda` has off, so one dir would rebuild them each time); the first also builds the
    # integration tests (they link arl with its default `wasm`: its dependencies compile once).
    # Cold, on 2 cores: ≈20 min per feature set (session 19).
    read -ra sets <<< "${ARL_GPU_FEATURES:-cuda fusion}"
    [ "${#sets[@]}" -gt 0 ] || { echo "error: ARL_GPU_FEATURES is empty; name the feature sets, e.g. \"cuda fusion\"" >&2; exit 2; }
    rm -rf "$BIN" && mkdir -p "$BIN/bin"
    for f in "${sets[@]}"; do
        dir=$target name=arl
        [ "$f" = "${sets[0]}" ] || { dir="$target-$f" name="arl-$f"; }
        if [ "$f" = "${sets[0]}" ]; then
            test_bin=$(CARGO_TARGET_DIR=$dir cargo test --release --locked -p arl-tests --features "$f" --no-run --message-format=json \
                | sed -n 's/.*"executable":"\([^"]*integration[^"]*\)".*/\1/p' | tail -1)
            cp "$test_bin" "$BIN/bin/integration"
        fi
        CARGO_TARGET_DIR=$dir cargo build --release --locked -p arl --features "$f" --bin arl
        cp "$dir/release/arl" "$BIN/bin/$name"
    done
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
    # What the device tool carries: these and the tch-cuda binary, 64 MiB in all.
    carried=$(cat "$BIN"/* $([ ! -f dist/tch-cuda/arl.xz ] || echo dist/tch-cuda/arl.xz) | wc -c)
    echo "to carry: $((carried / 1048576)) MiB (dist/gpu + dist/tch-cuda/arl.xz; the limit is 64)"
    [ "$carried" -le $((64 * 1048576)) ] || echo "warning: over the device tool's 64 MiB: drop a feature set from ARL_GPU_FEATURES or leave the tch-cuda binary out" >&2
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
    # The builds carried, as LABEL=BINARY; the first is the main one (stages 3 and 5 run it).
    BUILDS=""
    for b in "cuda=$BIN/arl" "fusion=$BIN/arl-fusion" "tch-cuda=dist/tch-cuda/arl" "before=$BIN/arl-before"; do
        [ ! -x "${b#*=}" ] || BUILDS="$BUILDS $b"
    done
    if [ ! -x "$BIN/arl" ]; then
        arl="${ARL:-$(command -v arl || true)}"
        [ -x "$arl" ] || { echo "error: no $BIN/arl; run \`scripts/gpu-check.sh build\` first (or set ARL=path)" >&2; exit 1; }
        BUILDS="cuda=$arl$BUILDS"
    fi
    BUILDS=${BUILDS# }
    arl=${BUILDS%% *} && arl=${arl#*=}
    exec > >(tee -a "$out/log.txt") 2>&1
    budget="${ARL_GPU_BUDGET_S:-510}"
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        gpu=cuda; big=qwen3-0.6b; small="--samples 8 --max-new-tokens 32"
        # `bench gen` at 64 rows (stage 2 has 8 rows, scripts/bench/peer.py's default).
        gen64="--batch 64 --prompt-len 64 --new-tokens 64"
        ops="--adds 10000 --matmuls 1000"
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
        # The tch-cuda binary links this machine's torch 2.11 (scripts/tch-cuda-binary.sh).
        case " $BUILDS" in *" tch-cuda="*)
            TORCH_LIB="$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')/lib" ;;
        esac
    else
        echo "no GPU: dry run with cpu in place of cuda (tch in place of tch-cuda)"
        gpu=cpu; big=tiny; small="--samples 2 --max-new-tokens 4"
        gen64="--batch 4 --prompt-len 8 --new-tokens 4"
        ops="--adds 100 --matmuls 2"
    fi
    echo "builds: $BUILDS"
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
    # A build's backend: libtorch's CUDA for the tch-cuda binary, else burn-cuda (cpu and tch in a dry run).
    backend() { case $1 in tch-cuda) if [ "$gpu" = cuda ]; then echo tch-cuda; else echo tch; fi ;; *) echo "$gpu" ;; esac; }
    # `each FN`: `FN LABEL BINARY BACKEND` for every build, the tch-cuda binary with the torch it links.
    each() {
        local b label
        for b in $BUILDS; do
            label=${b%%=*}
            if [ "$label" = tch-cuda ] && [ -n "${TORCH_LIB:-}" ]; then
                (export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; "$@" "$label" "${b#*=}" "$(backend "$label")")
            else
                "$@" "$label" "${b#*=}" "$(backend "$label")"
            fi
        done
    }
    # Each JSON line read gains "build": LABEL first.
    tagged() { sed -u "s/^{/{\"build\":\"$1\",/"; }
    launch_one() {
        local dt
        for dt in f32 bf16; do
            "$2" bench ops --backend "$3" --dtype "$dt" $ops | tagged "$1" | tee -a "$out/bench.jsonl"
        done
    }
    crosscheck_one() {
        local fx
        for fx in qwen3-a llama; do
            "$2" crosscheck --model "tests/fixtures/qwen3/$fx" --backends "cpu,$3" $small --tolerance 1e-4 \
                | tagged "$1" >> "$out/crosscheck.jsonl" || echo "($1: $fx above tolerance)"
        done
        "$2" crosscheck --model "$big" --backends "cpu,$3" --samples 2 --prompt-len 16 --max-new-tokens 16 \
            --tolerance 1e-3 | tagged "$1" >> "$out/crosscheck.jsonl" || echo "($1: $big above tolerance)"
        "$2" crosscheck --model tests/fixtures/qwen3/qwen3-a --backends "cpu,$3" --dtype bf16 $small \
            --tolerance 0.25 | tagged "$1" >> "$out/crosscheck.jsonl" || echo "($1: qwen3-a bf16 above tolerance)"
    }
    launch() { each launch_one; }
    crosscheck() { each crosscheck_one; cat "$out/crosscheck.jsonl"; }
    peer() {
        local py b cols=()
        if [ "$gpu" = cuda ]; then py=python3; else py="${ARL_PEER_VENV:+$ARL_PEER_VENV/bin/python}"; fi
        [ -n "$py" ] && "$py" -c 'import torch, transformers' 2>/dev/null || { echo "no torch/transformers: skipped"; return 0; }
        local size=(--runs 1 --steps 2)
        [ "$gpu" = cpu ] && size+=(--batch 2 --prompt-len 8 --new-tokens 4 --score-batch 1 --seq-len 16 --steps 1)
        # Every build but the main one is a column of its own, in the same rounds.
        for b in ${BUILDS#* }; do
            [ "$b" != "${BUILDS%% *}" ] || continue
            cols+=(--column "arl ${b%%=*}|${b#*=}|--backend $(backend "${b%%=*}")")
        done
        [ -z "${TORCH_LIB:-}" ] || export LD_LIBRARY_PATH="$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        ARL_PEER_VENV=$("$py" -c 'import sys; print(sys.prefix)') "$py" scripts/bench/peer.py compare --arl "$arl" \
            --model "$big" --backend "$gpu" --dtype bf16 "${size[@]}" ${cols[@]+"${cols[@]}"} | tee "$out/peer.md"
    }
    bench_one() {
        # The GPU's utilization (the share of each 100 ms sample with a kernel running) and
        # memory in use while it runs; samples at 0 % (the load, before any kernel) are left
        # out of the mean: a host-bound loop shows as low utilization while it works.
        local util smi=
        util=$(mktemp)
        if [ "$gpu" = cuda ]; then
            nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 100 > "$util" &
            smi=$!
        fi
        "$2" bench gen --model "$big" $gen64 --backend "$3" --dtype bf16 | tagged "$1" | tee -a "$out/bench.jsonl"
        [ -n "$smi" ] && { kill "$smi"; wait "$smi" 2>/dev/null; }
        awk -F', *' -v b="$1" 'NF == 2 { n++; if ($1 > 0) { k++; u += $1 } if ($2 > m) m = $2 }
            END { printf "{\"build\":\"%s\",\"nvidia_smi\":\"bench gen bf16, 64 rows\",\"samples\":%d,\"busy_samples\":%d,\"mean_busy_utilization_pct\":%.1f,\"max_memory_used_mib\":%d}\n", b, n, k, k ? u / k : 0, m }' \
            "$util" | tee -a "$out/bench.jsonl"
        rm -f "$util"
    }
    bench() { each bench_one; }
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
    tests() {
        [ -x "$BIN/integration" ] && [ "$gpu" = cuda ] || { echo "no GPU or no $BIN/integration: skipped"; return 0; }
        (cd tests && "../$BIN/integration" cuda 2>&1) | tee "$out/tests.txt"
    }
    export arl gpu big small gen64 ops out BIN BUILDS TORCH_LIB
    export -f backend each tagged launch_one crosscheck_one launch crosscheck peer bench_one bench run_tools tests
    # Caps from the first run on an H200 (results/gpu-check-h200/), for one build: crosscheck
    # 46 s, the peer benchmark 158 s (+≈60 s a column), one `bench gen` ≈30 s, `arl run`'s
    # evaluations ≈40 s each at 256 tokens.
    stage "0 launch cost (bench ops), every build" 45 launch
    stage "1 crosscheck cpu against every build" 150 crosscheck
    stage "2 peer benchmark, every build against HF / PyTorch on $gpu" 300 peer
    stage "3 arl run --env tools --backend $gpu" 150 run_tools
    stage "4 bench gen, 64 rows, bf16, every build" 90 bench
    stage "5 CUDA-side tests" 60 tests
    if [ -d target/autotune ]; then
        tar -C target -czf "$out/autotune.tar.gz" autotune && echo "== autotune cache: $(du -sh "$out/autotune.tar.gz" | cut -f1)"
    fi
    echo "== done in ${SECONDS}s"
    ;;
*)
    echo "usage: scripts/gpu-check.sh build | run [OUT_DIR]" >&2; exit 2 ;;
esac
