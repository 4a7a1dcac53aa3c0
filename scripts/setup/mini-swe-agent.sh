#!/usr/bin/env bash
# mini-swe-agent for the `harness` env's tests (examples/harness/mini_swe_agent.py): mini-swe-agent
# 2.4.6 and the dependencies its agent, prompts and local environment import (wheels from PyPI,
# pinned by version and sha256; the x86_64 CPython 3.11 wheels of pyyaml and markupsafe), unpacked
# into $HOME/.cache/arl/assets/mini-swe-agent/site-packages. Not installed: litellm, textual, typer
# and datasets, which only its CLI and model classes import (the example brings a model adapter on
# the `openai` SDK of scripts/setup/openai.sh). Idempotent (a stamp names the pins);
# ARL_SKIP_MINI_SWE_AGENT=1 skips it.
set -euo pipefail
[ "${ARL_SKIP_MINI_SWE_AGENT:-0}" = 1 ] && { echo "mini-swe-agent: skipped (ARL_SKIP_MINI_SWE_AGENT=1)"; exit 0; }
DIR="$HOME/.cache/arl/assets/mini-swe-agent"
PINS="mini-swe-agent==2.4.6 --hash=sha256:a35463c553ac825c7773b03cfa69cd44958e3af20155dcc5711fdf9e4c67cd54
jinja2==3.1.6 --hash=sha256:85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67
markdown-it-py==4.3.0 --hash=sha256:7aa1511a46c39138de78d9eba92ce47e63124d8003fc98b3a351909e04239efa
markupsafe==3.0.4 --hash=sha256:6da83a088f8ef93b2d483a8232a4dbf4d69d3d8496b568a03c56becac43e1808
mdurl==0.1.2 --hash=sha256:84008a41e51615a49fc9966191ff91509e3c40b939176e643fd50a5c2196b8f8
platformdirs==4.14.9 --hash=sha256:d0d3a23e7ff282cfa94b77f5a22b81030dcb68ba0430f90c74f4bd8d090782ea
pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
python-dotenv==1.2.4 --hash=sha256:42269a8a5b3fd54ffa6f3d84b18abed50064717576b4ecf03dc4a55d8aa04fdc
pyyaml==6.0.4 --hash=sha256:622aa875fa6533f25fedcffe23079357d65a690d462200afed5d8e9d0e01ebee
rich==15.0.0 --hash=sha256:33bd4ef74232fb73fe9279a257718407f169c09b78a87ad3d296f548e27de0bb
tenacity==9.2.1 --hash=sha256:9e56f17539296baab7beabb08b92f6ee3d7be92d8be72d763360677c2ad6580e"
if [ -f "$DIR/stamp" ] && [ "$(cat "$DIR/stamp")" = "$PINS" ] && [ -f "$DIR/site-packages/minisweagent/__init__.py" ]; then
    echo "mini-swe-agent: $DIR/site-packages"
    exit 0
fi
. "$(dirname "$0")/../lib/pip.sh"
pip_python mini-swe-agent.sh
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
echo "mini-swe-agent: downloading mini-swe-agent 2.4.6 and 10 dependencies (2.9 MB of wheels) from PyPI"
download_pinned "$PINS" "$tmp/wheels" --python-version 3.11 --platform manylinux2014_x86_64
unpack_wheels "$tmp/wheels" "$tmp/site-packages"
"$python" -I -S -B -c "import sys; sys.path.insert(0, '$tmp/site-packages'); import yaml, jinja2, rich, tenacity, platformdirs, dotenv"
grep -q '__version__ = "2.4.6"' "$tmp/site-packages/minisweagent/__init__.py"
install_read_only "$tmp/site-packages" "$DIR" "$PINS"
echo "mini-swe-agent: $DIR/site-packages"
