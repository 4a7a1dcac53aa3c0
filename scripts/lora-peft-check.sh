#!/usr/bin/env bash
# LoRA parity with PyPI `peft`, both ways, on the tiny checkpoints of tests/fixtures/qwen3;
# writes results/lora-peft-parity.txt (or OUT).
#
#   PEFT → arl: the adapters PEFT made (tests/fixtures/lora, scripts/fixtures/make_lora_fixtures.py)
#               loaded by arl give PEFT's recorded logits (the integration test, its numbers).
#   arl → PEFT: an adapter arl trained and saved (examples/lora_save.rs, 5 steps), and a PEFT
#               adapter with a rank_pattern on one layer loaded and re-saved by arl, loaded by
#               PEFT's PeftModel.from_pretrained: its logits against arl's.
#
# Needs ~/.cache/arl/venv-hf with torch, transformers and peft (`pip install peft`).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results/lora-peft-parity.txt}"
PY="${PY:-$HOME/.cache/arl/venv-hf/bin/python}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
    echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
    "$PY" -c 'import torch, transformers, peft; print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")'
    echo
    echo "== PEFT -> arl: cargo test -p arl-tests --test integration lora::peft_made_adapters_give_peft_logits"
    cargo test -q -p arl-tests --test integration lora::peft_made_adapters_give_peft_logits -- --nocapture 2>&1 \
        | grep -E "vs PEFT|test result"
    echo
    echo "== arl -> PEFT: a LoRA adapter arl trained (rank 4, every linear layer) on qwen3-a"
    cargo run -q -p arl-qwen3 --example lora_save -- tests/fixtures/qwen3/qwen3-a "$tmp/trained"
    "$PY" scripts/fixtures/make_lora_fixtures.py --check-arl-save tests/fixtures/qwen3/qwen3-a "$tmp/trained" 2>&1 | grep PEFT
    echo
    echo "== arl -> PEFT: PEFT's llama-layer1 adapter (layer 1 only, rank_pattern) loaded and re-saved by arl"
    cargo run -q -p arl-qwen3 --example lora_save -- tests/fixtures/qwen3/llama "$tmp/resaved" tests/fixtures/lora/llama-layer1
    "$PY" scripts/fixtures/make_lora_fixtures.py --check-arl-save tests/fixtures/qwen3/llama "$tmp/resaved" 2>&1 | grep PEFT
} | tee "$OUT"
