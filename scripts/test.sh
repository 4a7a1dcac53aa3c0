#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs them.
# Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

# A cargo target directory outside the clone, so CI and fresh clones reuse builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/arl/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Tests that cannot check what they check on this machine (no Chromium, not root, no memory
# cgroup, …) say so here (arl_core::testing::skip); the list is printed at the end, pass or fail.
export ARL_TEST_SKIPS="${ARL_TEST_SKIPS:-$(mktemp)}"
: > "$ARL_TEST_SKIPS"
skips() {
    local n
    n=$(sort -u "$ARL_TEST_SKIPS" | grep -c . || true)
    echo "== skipped: $n test(s) could not check what they check here"
    sort -u "$ARL_TEST_SKIPS" | sed 's/^/   /'
}
trap skips EXIT

# Test assets fetched from package registries into a cache (each script is idempotent).
for setup in scripts/setup/*.sh; do
    [ -e "$setup" ] || continue
    echo "== $setup"
    bash "$setup"
done

# Formatting is part of the contract (rustfmt.toml; under a second).
echo "== cargo fmt --check"
cargo fmt --all --check

# The vendored crates equal their crates.io releases plus third_party/patches (0.7 s cold; the
# first run fetches 0.5 MB from static.crates.io).
echo "== third_party/patches.sh check"
third_party/patches.sh check

# Clippy's lints as errors on every workspace target, inside the test build itself:
# clippy-driver is rustc plus the lints, and cargo runs it on workspace members only, so nothing
# compiles twice (`cargo clippy --workspace --all-targets -- -D warnings` would check every
# dependency again). CLIPPY_ARGS is how cargo-clippy hands clippy-driver its flags.
command -v clippy-driver > /dev/null || rustup component add clippy
echo "== cargo test (clippy -D warnings on the workspace)"
RUSTC_WORKSPACE_WRAPPER="$(command -v clippy-driver)" CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" \
    cargo test --workspace --locked "$@"

# A real single-node Slurm (installed by scripts/setup/slurm.sh): a tiny run through
# `--launcher slurm` with a worker and then the trainer job cancelled, equal to the local run.
# Reuses the debug `arl` cargo test built (no compile). ARL_SKIP_SLURM=1 skips it.
if [ "${ARL_SKIP_SLURM:-0}" != 1 ]; then
    echo "== slurm stage"
    scripts/slurm-stage.sh
fi

# A plugin crate outside the tree (`arl new env`), built against this checkout and trained a step.
if [ "${ARL_SKIP_OUT_OF_TREE:-0}" != 1 ]; then
    echo "== out-of-tree plugin crate"
    scripts/out-of-tree-check.sh
fi

# The libtorch backend on the CPU: the integration test modules with `feature = "tch"` code
# (cpu vs tch crosscheck on every fixture checkpoint, …), built with libtorch linked (libtorch
# from scripts/setup/libtorch.sh; ARL_SKIP_LIBTORCH=1 skips both). `--workspace` resolves
# dependency features as the test build above did (with `-p` they differ and wasmtime and burn
# compile again; apps/arl/Cargo.toml's build-sharing pins cover what libtorch's own build adds),
# so only burn's facade, burn-dispatch, torch and arl's own crates compile here.
if [ "${ARL_SKIP_LIBTORCH:-0}" != 1 ]; then
    mapfile -t tch_modules < <(grep -l 'feature = "tch"' tests/integration/*.rs | sed 's|.*/||; s|\.rs$|::|')
    echo "== cargo test --features tch (${tch_modules[*]})"
    scripts/with-libtorch.sh cargo test --locked --workspace --features arl-tests/tch --test integration "$@" \
        -- "${tch_modules[@]}"
fi

# The CUDA backend compiles without a GPU or toolkit: `cargo check` (types, borrows, every
# cfg(feature = "cuda") line of arl and of its GPU tests; no code generation: the cuda feature
# changes burn's and serde's features, so a build would compile nearly every dependency again;
# scripts/gpu-check.sh builds and runs it on a GPU). CUDARC_CUDA_VERSION matches the GPU
# machine's driver. ARL_SKIP_CUDA_BUILD=1 skips.
# The `fusion` feature (burn's kernel fusion and autotuning on top) is not compiled here: it
# recompiles cubecl and burn-cubecl with other features, 18 min more on 2 cores (measured 4 Dec);
# `scripts/gpu-check.sh build` compiles it beside `cuda`.
if [ "${ARL_SKIP_CUDA_BUILD:-0}" != 1 ]; then
    echo "== cargo check --features cuda (compile only)"
    CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}" \
        cargo check --locked -p arl -p arl-tests --features arl-tests/cuda --bins --tests
fi
