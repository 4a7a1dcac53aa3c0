#!/usr/bin/env bash
# A headless Chromium for `arl report --png` and the report's browser test
# (tests/integration/report.rs: the page loads without console errors and is not blank).
# Debian's `chromium` (≈100 MB download, ≈1 min). Optional: without root or apt the test is
# skipped with a note; ARL_SKIP_CHROMIUM=1 skips the install. Idempotent.
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null; then
        echo "chromium: $(command -v "$name")"
        exit 0
    fi
done
if [ "${ARL_SKIP_CHROMIUM:-0}" = 1 ]; then
    echo "chromium: skipped (ARL_SKIP_CHROMIUM=1); the report's browser test will be skipped"
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
        { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
    echo "chromium: $(command -v chromium)"
else
    echo "chromium: not installed (needs root and apt-get: apt-get install chromium); the report's browser test will be skipped"
fi
