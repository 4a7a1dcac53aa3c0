#!/usr/bin/env bash
# Run a command (usually cargo with `--features tch`) with the build-time environment the
# libtorch backend needs: torch-sys finds libtorch 2.9.0 through the python of the venv that
# scripts/setup/libtorch.sh made (LIBTORCH_USE_PYTORCH=1). Run-time paths need nothing: the
# binaries carry an rpath to torch/lib (apps/arl/build.rs).
# Usage: scripts/with-libtorch.sh cargo test --workspace --features arl-tests/tch --test integration
set -euo pipefail
VENV="${ARL_TORCH_VENV:-$HOME/.cache/arl/venv-torch}"
bash "$(dirname "$0")/setup/libtorch.sh" >/dev/null
export PATH="$VENV/bin:$PATH" LIBTORCH_USE_PYTORCH=1
unset VIRTUAL_ENV LIBTORCH
exec "$@"
