#!/usr/bin/env bash
# TensorBoard's own event-file reader for the test of `output.tensorboard` (tests/integration/
# tensorboard.rs): tensorboard 2.21.0 and the four packages its EventAccumulator imports
# (protobuf, numpy, absl-py, packaging), wheels from PyPI pinned by version, unpacked into
# $HOME/.cache/arl/assets/tensorboard/site-packages for the python3 that downloaded them
# (named in `python` beside it: numpy's wheel is built for one Python). No server, no grpc.
# Idempotent (a stamp names the pins and the interpreter); ARL_SKIP_TENSORBOARD=1 skips it.
set -euo pipefail
[ "${ARL_SKIP_TENSORBOARD:-0}" = 1 ] && { echo "tensorboard: skipped (ARL_SKIP_TENSORBOARD=1)"; exit 0; }
DIR="$HOME/.cache/arl/assets/tensorboard"
PINS="tensorboard==2.21.0
protobuf==7.36.2
numpy==2.4.6
absl-py==2.5.1
packaging==26.4"
python=$(command -v python3 || echo /usr/bin/python3)
STAMP="$PINS
$python $("$python" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || true)"
if [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$STAMP" ] && [ -f "$DIR/site-packages/tensorboard/__init__.py" ]; then
    echo "tensorboard: $DIR/site-packages"
    exit 0
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && apt-get install -y -qq python3-pip
        python=/usr/bin/python3
    else
        echo "error: tensorboard.sh needs pip to download the wheels; install python3-pip" >&2
        exit 1
    fi
    STAMP="$PINS
$python $("$python" -c 'import sys; print(sys.version_info[:2])')"
fi
. "$(dirname "$0")/../lib/pip.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$PINS" >"$tmp/requirements.txt"
echo "tensorboard: downloading tensorboard 2.21.0, protobuf, numpy, absl-py, packaging (23 MB of wheels) from PyPI"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    -r "$tmp/requirements.txt" -d "$tmp/wheels"
unpack_wheels "$tmp/wheels" "$tmp/site-packages"
"$python" -I -S -B -c "import sys; sys.path.insert(0, '$tmp/site-packages'); from tensorboard.backend.event_processing.event_accumulator import EventAccumulator"
rm -rf "$DIR/site-packages"
mkdir -p "$DIR"
mv "$tmp/site-packages" "$DIR/site-packages"
echo "$python" >"$DIR/python"
echo "$STAMP" >"$DIR/stamp"
echo "tensorboard: $DIR/site-packages"
