#!/usr/bin/env bash
# Prints a run configuration for `arl run --env harness` (docs/harness.md) with one of the example
# agent programs: `openai` (examples/harness/agent.py, the openai SDK) or `mini` (mini-swe-agent,
# examples/harness/mini_swe_agent.py). It binds the Python packages of scripts/setup/openai.sh
# (and mini-swe-agent.sh) into the sandbox's jobs and puts them on the program's PYTHONPATH, with
# the shared libraries their compiled wheels link that the interpreter does not (found by ldd).
#   examples/harness/config.sh mini > harness.toml && arl run --config harness.toml --model smollm2-135m
set -euo pipefail
which=${1:-openai}
here=$(cd "$(dirname "$0")" && pwd)
assets="$HOME/.cache/arl/assets"
sites=("$assets/openai/site-packages")
case "$which" in
    openai) program="$here/agent.py" ;;
    mini) program="$here/mini_swe_agent.py"; sites+=("$assets/mini-swe-agent/site-packages") ;;
    *) echo "error: unknown agent \`$which\`; valid: openai, mini" >&2; exit 2 ;;
esac
for site in "${sites[@]}"; do
    [ -d "$site" ] || { echo "error: no $site; run scripts/setup/$(basename "$(dirname "$site")").sh" >&2; exit 1; }
done
libs=$(find "${sites[@]}" -name '*.so' -exec ldd {} \; 2>/dev/null | grep -o '=> /[^ ]*' | cut -c4- | xargs -r -n1 readlink -f | sort -u)
quote() { printf '"%s"' "$1"; }
list() { local first=1; for x in "$@"; do [ $first = 1 ] || printf ', '; quote "$x"; first=0; done; }
cat <<TOML
# arl run --config this --model MODEL   (examples/harness/config.sh $which; docs/harness.md)
[env]
name = "harness"
max_turns = 8

[env.options]
command = "AGENT_TURNS=8 python3 /job/$(basename "$program")"
files = [$(quote "$program")]
python_path = [$(list "${sites[@]}")]
timeout_s = 120

[sandbox]
name = "rlimit"
timeout_s = 150
cpu_s = 150
binds = [$(list "${sites[@]}" $libs)]

[sampling]
max_new_tokens = 256
TOML
