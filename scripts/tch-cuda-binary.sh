#!/usr/bin/env bash
# The `tch-cuda` route for a GPU machine whose only libtorch is its own torch 2.11 (the device
# lent by the device tool: CUDA 13.0 driver, torch 2.11, no registry). libtorch 2.9 for CUDA is
# gigabytes and cannot be carried, so this builds a SECOND arl binary here against pip
# `torch==2.11.0` (tch 0.22's torch-sys expects 2.9.0; LIBTORCH_BYPASS_VERSION_CHECK=1 lets it
# compile its C++ shim against 2.11's headers) that links at run time to whichever
# libtorch 2.11 the machine has.
#
#   scripts/tch-cuda-binary.sh build   # here: venv with torch 2.11 (≈7 GB with its CUDA wheels),
#                                      # dist/tch-cuda/arl (a release build, stripped), and a CPU
#                                      # smoke test against pip torch 2.11 (crosscheck cpu,tch on a fixture)
#   scripts/tch-cuda-binary.sh run     # on the GPU machine: finds torch/lib of its python and
#                                      # runs crosscheck cpu,tch-cuda on the fixtures
#
# The binary's rpath points at this machine's venv; on another machine the run step sets
# LD_LIBRARY_PATH to that machine's torch/lib instead.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${ARL_TORCH211_VENV:-$HOME/.cache/arl/venv-torch-2.11}"
OUT=dist/tch-cuda
case "${1:-}" in
build)
    if ! "$VENV/bin/python" -W ignore -c 'import torch; assert torch.__version__.startswith("2.11.0")' 2>/dev/null; then
        echo "tch-cuda: installing torch==2.11.0 into $VENV (once)"
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==2.11.0"
    fi
    # A target dir of its own: torch-sys built against 2.11 must not replace the 2.9 build.
    export CARGO_TARGET_DIR="${ARL_TCH211_TARGET:-$HOME/.cache/arl/target-torch-2.11}"
    export PATH="$VENV/bin:$PATH" LIBTORCH_USE_PYTORCH=1 LIBTORCH_BYPASS_VERSION_CHECK=1
    unset VIRTUAL_ENV LIBTORCH
    # Release: a dev build runs the CPU path 2.1–2.4× slower (measured, the cause not settled:
    # results/tools-warm-start-4/README.md); the H200 check's 2.40× HF generate was a dev build.
    cargo build --release --locked -p arl --features tch
    mkdir -p "$OUT"
    cp "$CARGO_TARGET_DIR/release/arl" "$OUT/arl"
    strip "$OUT/arl"
    # For the device tool's 64 MiB carry beside dist/gpu: carry dist/tch-cuda/arl.xz
    # (scripts/gpu-check.sh run unpacks it).
    xz -T0 -6 -k -f "$OUT/arl"
    ls -la "$OUT"
    echo "== smoke test on the CPU against pip torch 2.11"
    "$OUT/arl" crosscheck --model tests/fixtures/qwen3/qwen3-a --backends cpu,tch --samples 2 --max-new-tokens 8 --tolerance 1e-4
    ;;
run)
    python="${PYTHON:-python3}"
    lib=$("$python" -W ignore -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
    ver=$("$python" -W ignore -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())')
    echo "torch here: $ver ($lib)"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    for fx in qwen3-a qwen3-b qwen2 llama; do
        "$OUT/arl" crosscheck --model "tests/fixtures/qwen3/$fx" --backends cpu,tch-cuda --samples 4 --max-new-tokens 12 --tolerance 1e-3 \
            || echo "(crosscheck $fx failed or above tolerance)"
    done
    ;;
*)
    echo "usage: scripts/tch-cuda-binary.sh build | run" >&2; exit 2 ;;
esac
