#!/usr/bin/env bash
# Rollout workers' throughput on one machine (issue #52): the same run in one process
# (`--launcher local`) and with `--launcher procs --rollout-workers 1, 2, 3`, on the same seed and
# flags, into OUT/local, OUT/procs-1 … ; then one line per run: steps, the mean rollout and
# update seconds per step, training-loop seconds (the sum of `step_seconds`) and steps per hour
# against the local run, and whether its rewards equal the local run's (they must: a round is a
# function of its spec).
#
#   scripts/bench/procs.sh [OUT] [STEPS] [-- extra arl run flags]
#
# ENV (default sum), MODEL (default smollm2-135m), ROUND_GROUPS (default 1: one round per group,
# so several workers have work in one step), ARL=PATH another binary (default: the release
# build). Measure on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
ARL="${ARL:-${CARGO_TARGET_DIR:-target}/release/arl}"
OUT="${1:-results/procs-bench}"
STEPS="${2:-4}"
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
mkdir -p "$OUT"
common=(run --env "${ENV:-sum}" --model "${MODEL:-smollm2-135m}" --steps "$STEPS" --eval-n 0 --set output.checkpoints=false
        --set "cluster.round_groups=${ROUND_GROUPS:-1}" --overwrite "$@")
echo "== local" >&2
"$ARL" "${common[@]}" --out "$OUT/local" > "$OUT/local.log"
for n in 1 2 3; do
    echo "== procs, $n worker(s)" >&2
    "$ARL" "${common[@]}" --launcher procs --rollout-workers "$n" --out "$OUT/procs-$n" > "$OUT/procs-$n.log"
done
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def steps(run):
    last = {}
    for line in open(os.path.join(out, run, "metrics.jsonl")):
        m = json.loads(line)
        last[m["step"]] = m
    return [last[k] for k in sorted(last)]
local = steps("local")
base = sum(m["step_seconds"] for m in local)
print("| run | steps | rollout s/step | update s/step | loop s | steps/h | × local | rewards = local |")
print("|---|---|---|---|---|---|---|---|")
for run in ["local", "procs-1", "procs-2", "procs-3"]:
    s = steps(run)
    loop = sum(m["step_seconds"] for m in s)
    same = [m["reward_mean"] for m in s] == [m["reward_mean"] for m in local]
    print(f"| {run} | {len(s)} | {sum(m['rollout_seconds'] for m in s) / len(s):.1f} | {sum(m['update_seconds'] for m in s) / len(s):.1f} | "
          f"{loop:.1f} | {3600 * len(s) / loop:.0f} | {base / loop:.2f} | {'yes' if same else 'NO'} |")
PY
