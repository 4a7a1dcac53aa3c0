#!/usr/bin/env bash
# An env plugin crate outside arl's tree, end to end: `arl new env` writes one into a temporary
# directory, cargo builds it against this checkout (sharing CARGO_TARGET_DIR, so arl's
# dependencies are not built again: apps/arl/Cargo.toml's build-sharing pins), runs its tests,
# and its own binary lists the env and trains a step on it with the tiny preset.
# `arl new env` is the debug `arl` that `cargo test --workspace` built ($ARL_BIN overrides):
# `cargo run -p arl` would resolve features for arl alone and compile its crates once more.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/arl/target}"
ARL=${ARL_BIN:-$CARGO_TARGET_DIR/debug/arl}
[ -x "$ARL" ] || { echo "error: no arl binary at $ARL; run cargo test --workspace first (or set ARL_BIN)" >&2; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$ARL" new env oot-check --out "$dir/oot-check" > /dev/null
# Cargo keys a path dependency's build by its path relative to the workspace that builds it, so
# arl's own path crates (burn-flex and burn-autodiff from third_party/, arl's crates) compile again
# here whatever the features; the ones arl's profiles optimise are built at opt-level 0 for this
# check (the same code; the step below runs the tiny preset): burn-flex at opt-level 2 alone took
# 5 of the check's 6 minutes.
quick=()
for crate in burn-flex burn-autodiff arl-qwen3 arl-gguf; do quick+=(--config "profile.dev.package.$crate.opt-level=0"); done
(cd "$dir/oot-check" && cargo build -q "${quick[@]}" && cargo test -q "${quick[@]}")
bin="$CARGO_TARGET_DIR/debug/oot-check-arl"
"$bin" list | grep -q "^  oot-check " || { echo "oot-check-arl list does not show the env" >&2; exit 1; }
"$bin" run --env oot-check --model tiny --steps 1 --prompts 2 --group-size 2 --eval-n 1 \
    --set output.checkpoints=false --out "$dir/run" > "$dir/run.log" 2>&1 || { cat "$dir/run.log" >&2; exit 1; }
test -f "$dir/run/results.json"
echo "out-of-tree plugin crate: built against this checkout, listed, trained a step"
