#!/usr/bin/env bash
# One GRPO training step (forward, backward, AdamW) with and without LoRA, on the SmolLM2-135M
# and Qwen3-0.6B shapes: `arl bench score` (a clipped policy-gradient loss on the last half of
# each row; --lora: rank-16 adapters on every linear layer of the frozen base), one process per
# configuration so that each `peak_rss_mb` is its own. JSON lines to OUT.
#
#   scripts/bench-lora.sh [OUT] [BATCH] [SEQ_LEN] [STEPS]
#
# SmolLM2-135M is the real checkpoint (`~/.cache/arl/models/smollm2-135m`, made from the
# `smollm2-135m` preset's GGUF, or $SMOLLM2); Qwen3-0.6B is the `qwen3-0.6b` preset (its exact
# shape, random weights: speed and memory do not depend on the values). MODELS="A B" picks
# others (default: both); ARL=PATH another binary (default: the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
ARL="${ARL:-${CARGO_TARGET_DIR:-target}/release/arl}"
OUT="${1:-results/bench-lora-cpu.jsonl}"
BATCH="${2:-2}"
SEQ="${3:-256}"
STEPS="${4:-3}"
SMOLLM2="${SMOLLM2:-$HOME/.cache/arl/models/smollm2-135m}"
MODELS="${MODELS:-$SMOLLM2 qwen3-0.6b}"
: > "$OUT"
for model in $MODELS; do
    for lora in "" "--lora"; do
        echo "== bench score --model $model $lora" >&2
        # shellcheck disable=SC2086
        "$ARL" bench score --model "$model" --batch "$BATCH" --seq-len "$SEQ" --steps "$STEPS" $lora | tee -a "$OUT"
    done
done
