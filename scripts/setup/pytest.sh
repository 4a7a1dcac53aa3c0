#!/usr/bin/env bash
# Real pytest for the `tools` gym's Bash: pytest 9.0.1 and its pure-Python dependencies (wheels
# from PyPI, pinned by version and sha256), unpacked read-only into
# $HOME/.cache/arl/assets/pytest/site-packages. The rlimit sandbox binds that directory into
# every job's root and the Bash runner puts it on sys.path. Idempotent (a stamp names the pins);
# ARL_SKIP_PYTEST=1 skips it.
set -euo pipefail
[ "${ARL_SKIP_PYTEST:-0}" = 1 ] && { echo "pytest: skipped (ARL_SKIP_PYTEST=1)"; exit 0; }
DIR="$HOME/.cache/arl/assets/pytest"
PINS="pytest==9.0.1 --hash=sha256:67be0030d194df2dfa7b556f2e56fb3c3315bd5c8822c6951162b92b32ce7dad
iniconfig==2.3.1 --hash=sha256:9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7
packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
pluggy==1.7.0 --hash=sha256:7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec
pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9"
if [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$PINS" ] && [ -f "$DIR/site-packages/pytest/__init__.py" ]; then
    echo "pytest: $DIR/site-packages"
    exit 0
fi
. "$(dirname "$0")/../lib/pip.sh"
pip_python pytest.sh
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
echo "pytest: downloading pytest 9.0.1, iniconfig, packaging, pluggy, pygments (1.8 MB of wheels) from PyPI"
download_pinned "$PINS" "$tmp/wheels"
unpack_wheels "$tmp/wheels" "$tmp/site-packages"
"$python" -I -S -B -c "import sys; sys.path.insert(0, '$tmp/site-packages'); import pytest; assert pytest.__version__ == '9.0.1', pytest.__version__"
# Bytecode for the sandbox's interpreter (jobs run with -B, which reads but never writes it).
sandbox_python=/usr/bin/python3
[ -x "$sandbox_python" ] || sandbox_python=$python
"$sandbox_python" -m compileall -q -j 1 "$tmp/site-packages" >/dev/null
# The wasm sandbox's bytecode of the old install (it makes a new one on first use).
rm -rf "$DIR"/wasm-pyc-*
install_read_only "$tmp/site-packages" "$DIR" "$PINS"
echo "pytest: $DIR/site-packages"
