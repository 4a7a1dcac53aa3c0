#!/usr/bin/env bash
# GPU check for the CUDA backend, in two halves (the GPU machine reaches no registry).
#
#   scripts/gpu-check.sh build      # here: build `arl` and the integration tests with
#                                   # --features cuda (CUDARC_CUDA_VERSION=13000, the GPU
#                                   # machine's driver), strip them into dist/gpu/ (carried)
#   scripts/gpu-check.sh run [DIR]  # there: CUDA-side tests, crosscheck cpu,cuda on every
#                                   # fixture and on the qwen3-0.6b shape (random weights),
#                                   # bench gen on cuda in f32 and bf16; JSON lines to DIR
#                                   # (default results/gpu-check/)
#
# Stripped dev builds measured (commit 84375b3): arl 52.0 MB (built without the default `wasm`
# feature, not needed here), integration 69.3 MB (with it): above the device tool's 64 MiB carry,
# so `build` gzips them (12.8 + 18.3 MB; carry `dist/gpu`) and `run` unpacks them. A cold
# `build` took 33 min on 2 shared cores (its own target dir, ~/.cache/arl/target-cuda).
#
# Without a GPU (no nvidia-smi), `run` is a dry run of the same steps with `cpu` standing in
# for `cuda` and smaller sizes, so the script itself is tested here.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=dist/gpu
case "${1:-run}" in
build)
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/arl/target-cuda}"
    export CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}"
    cargo build --locked -p arl-cli --no-default-features --features cuda --bin arl
    test_bin=$(cargo test --locked -p arl-tests --features cuda --no-run --message-format=json 2>/dev/null \
        | sed -n 's/.*"executable":"\([^"]*integration[^"]*\)".*/\1/p' | tail -1)
    mkdir -p "$BIN"
    cp "$CARGO_TARGET_DIR/debug/arl" "$BIN/arl"
    cp "$test_bin" "$BIN/integration"
    strip "$BIN/arl" "$BIN/integration"
    # Stripped they are 52 + 69 MB, over the 64 MiB carry; gzipped 13 + 18 MB. `run` unpacks.
    gzip -f -6 "$BIN/arl" "$BIN/integration"
    ls -la "$BIN"
    ;;
run)
    out="${2:-results/gpu-check}"
    mkdir -p "$out"
    for f in arl integration; do
        if [ -f "$BIN/$f.gz" ] && [ ! -x "$BIN/$f" ]; then gzip -dc "$BIN/$f.gz" > "$BIN/$f" && chmod +x "$BIN/$f"; fi
    done
    arl="$BIN/arl"
    [ -x "$arl" ] || arl="${ARL:-$(command -v arl || true)}"
    [ -x "$arl" ] || { echo "error: no $BIN/arl; run \`scripts/gpu-check.sh build\` first (or set ARL=path)" >&2; exit 1; }
    if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
        gpu=cuda; samples=8; tokens=32; big_samples=4; big_tokens=32; dtypes="f32 bf16"
        nvidia-smi -L | tee "$out/gpu.txt"
    else
        echo "no GPU: dry run with cpu in place of cuda"
        gpu=cpu; samples=2; tokens=4; big_samples=1; big_tokens=2; dtypes="f32 bf16"
    fi
    log() { echo "== $*" >&2; }
    if [ -x "$BIN/integration" ] && [ "$gpu" = cuda ]; then
        log "CUDA-side tests"
        (cd tests && "../$BIN/integration" cuda 2>&1) | tee "$out/tests.txt"
    fi
    : > "$out/crosscheck.jsonl"
    for fx in qwen3-a qwen3-b qwen2 llama; do
        log "crosscheck cpu,$gpu $fx"
        "$arl" crosscheck --model "tests/fixtures/qwen3/$fx" --backends "cpu,$gpu" --samples "$samples" \
            --max-new-tokens "$tokens" --tolerance 1e-3 >> "$out/crosscheck.jsonl" || echo "(above tolerance)"
    done
    log "crosscheck cpu,$gpu qwen3-0.6b (random weights)"
    "$arl" crosscheck --model qwen3-0.6b --backends "cpu,$gpu" --samples "$big_samples" --prompt-len 16 \
        --max-new-tokens "$big_tokens" --tolerance 1e-3 >> "$out/crosscheck.jsonl" || echo "(above tolerance)"
    log "crosscheck cpu,$gpu qwen3-a in bf16"
    "$arl" crosscheck --model tests/fixtures/qwen3/qwen3-a --backends "cpu,$gpu" --dtype bf16 --samples "$samples" \
        --max-new-tokens "$tokens" --tolerance 0.25 >> "$out/crosscheck.jsonl" || echo "(above tolerance)"
    : > "$out/bench.jsonl"
    for dt in $dtypes; do
        log "bench gen $gpu $dt"
        if [ "$gpu" = cuda ]; then size=(--model qwen3-0.6b --batch 8 --prompt-len 64 --new-tokens 64); else size=(--model tiny --batch 2 --prompt-len 8 --new-tokens 4); fi
        "$arl" bench gen "${size[@]}" --backend "$gpu" --dtype "$dt" >> "$out/bench.jsonl" 2>> "$out/bench.err" \
            || echo "{\"bench\":\"gen\",\"backend\":\"$gpu\",\"dtype\":\"$dt\",\"error\":$(tail -1 "$out/bench.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}" >> "$out/bench.jsonl"
    done
    cat "$out/crosscheck.jsonl" "$out/bench.jsonl"
    ;;
*)
    echo "usage: scripts/gpu-check.sh build | run [OUT_DIR]" >&2; exit 2 ;;
esac
