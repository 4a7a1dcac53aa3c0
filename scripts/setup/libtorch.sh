#!/usr/bin/env bash
# libtorch 2.9.0 for the `tch` backend (burn-tch 0.21 → tch 0.22 → torch-sys expects exactly
# 2.9.0): pip `torch==2.9.0` from PyPI in a venv under $HOME/.cache/arl/venv-torch. Builds
# with `--features tch` find it through LIBTORCH_USE_PYTORCH=1 and that venv's python on PATH
# (scripts/with-libtorch.sh sets that up); the binary gets an rpath to torch/lib, so nothing is exported at
# run time. Idempotent; skipped when ARL_SKIP_LIBTORCH=1.
#
# PyPI's Linux torch 2.9.0 wheel is the CUDA 12.8 build: libtorch.so needs libtorch_cuda.so,
# which needs the nvidia-* wheels (cudnn, cublas, …), so even CPU-only use needs the full
# install (≈6.6 GB; `--no-deps` leaves libtorch.so unloadable). The CPU-only wheel lives on
# download.pytorch.org, which our machines cannot reach.
set -euo pipefail
[ "${ARL_SKIP_LIBTORCH:-0}" = 1 ] && { echo "libtorch: skipped (ARL_SKIP_LIBTORCH=1)"; exit 0; }
VENV="${ARL_TORCH_VENV:-$HOME/.cache/arl/venv-torch}"
want=2.9.0
if [ -x "$VENV/bin/python" ] && have=$("$VENV/bin/python" -W ignore -c 'import torch; print(torch.__version__)' 2>/dev/null) \
    && [ "${have%%+*}" = "$want" ]; then
    echo "libtorch: torch $have in $VENV"
    exit 0
fi
python=""
for candidate in python3.13 python3.12 python3.11 python3.10 python3; do
    # (pyenv shims exist for versions that are not active, and Debian's python3 may lack
    # ensurepip: run it to be sure it can make a venv)
    if "$candidate" -c 'import venv, ensurepip' >/dev/null 2>&1; then python=$candidate; break; fi
done
if [ -z "$python" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq python3-venv && python=/usr/bin/python3
fi
[ -n "$python" ] || { echo "error: no python3 that can make a venv for $VENV; install python3-venv (3.10–3.13)" >&2; exit 1; }
echo "libtorch: installing torch==$want into $VENV (≈6.6 GB with its CUDA wheels; once)"
"$python" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==$want"
"$VENV/bin/python" -W ignore -c 'import torch; print("libtorch: torch", torch.__version__, "at", torch.__path__[0])'
