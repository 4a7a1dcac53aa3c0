#!/usr/bin/env bash
# The official `openai` Python SDK, the real client the endpoint's tests drive (arl-endpoint):
# openai 3.63.0 and its dependencies, pinned by version, installed for one interpreter into
# $HOME/.cache/arl/assets/openai/site-packages; `python` beside it names that interpreter (its
# compiled wheels, pydantic-core and jiter, are built for it). Idempotent (a stamp names the pins
# and the interpreter); ARL_SKIP_OPENAI=1 skips it.
set -euo pipefail
[ "${ARL_SKIP_OPENAI:-0}" = 1 ] && { echo "openai: skipped (ARL_SKIP_OPENAI=1)"; exit 0; }
DIR="$HOME/.cache/arl/assets/openai"
PINS="openai==3.63.0
annotated-types==0.8.0
anyio==4.16.0
h11==0.16.0
httpcore2==2.17.0
httpx2==2.17.0
idna==3.21
jiter==0.19.0
pydantic==2.14.4
pydantic-core==2.50.5
sniffio==1.3.1
truststore==0.10.5
typing-extensions==4.16.0
typing-inspection==0.4.5"
python=$(command -v python3 || command -v /usr/bin/python3 || true)
[ -n "$python" ] && python=$("$python" -c 'import sys; print(sys.executable)')
STAMP="$PINS
python=$python"
if [ -n "$python" ] && [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$STAMP" ] && [ -f "$DIR/site-packages/openai/__init__.py" ]; then
    echo "openai: $DIR/site-packages ($python)"
    exit 0
fi
if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq python3 python3-pip && python=/usr/bin/python3
        STAMP="$PINS
python=$python"
    else
        echo "error: openai.sh needs python3 with pip; install python3-pip" >&2
        exit 1
    fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$PINS" >"$tmp/requirements.txt"
echo "openai: installing openai 3.63.0 and 13 dependencies (about 6 MB of wheels) from PyPI for $python"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: --no-compile \
    --target "$tmp/site-packages" -r "$tmp/requirements.txt"
PYTHONPATH="$tmp/site-packages" "$python" -I -c "import sys; sys.path.insert(0, '$tmp/site-packages'); import openai; assert openai.__version__ == '3.63.0', openai.__version__"
rm -rf "$DIR"
mkdir -p "$DIR"
mv "$tmp/site-packages" "$DIR/site-packages"
echo "$python" >"$DIR/python"
echo "$STAMP" >"$DIR/stamp"
echo "openai: $DIR/site-packages ($python)"
