#!/usr/bin/env bash
# Steps per hour, lockstep vs async off-policy (`trainer.max_steps_off_policy = 1`), on the
# same seed and flags: two `arl run`s into OUT/lockstep and OUT/async-k1 (their metrics.jsonl
# are the two learning curves), then one line per run: steps, training-loop seconds (the sum
# of `step_seconds`), steps per hour, and for the async run the mean trainer wait, the mean
# rollout-thread wait, the stale groups dropped and the staleness histogram.
#
#   scripts/bench/async.sh [OUT] [STEPS] [-- extra arl run flags]
#
# ENV (default tools), MODEL (default tiny: random weights, a pipeline check, not a
# measurement), ARL=PATH another binary (default: the release build). Both runs use
# loss.decoupled=true, so they differ only in the schedule. Measure on a quiet machine: the
# two runs share the CPU with nothing else.
set -euo pipefail
cd "$(dirname "$0")/../.."
ARL="${ARL:-${CARGO_TARGET_DIR:-target}/release/arl}"
OUT="${1:-results/async-bench}"
STEPS="${2:-4}"
shift $(( $# > 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
ENV="${ENV:-tools}"
MODEL="${MODEL:-tiny}"
mkdir -p "$OUT"
common=(run --env "$ENV" --model "$MODEL" --steps "$STEPS" --eval-n 0 --set loss.decoupled=true --set output.checkpoints=false --overwrite "$@")
echo "== lockstep" >&2
"$ARL" "${common[@]}" --out "$OUT/lockstep" > "$OUT/lockstep.log"
echo "== async, max_steps_off_policy = 1" >&2
"$ARL" "${common[@]}" --set trainer.max_steps_off_policy=1 --out "$OUT/async-k1" > "$OUT/async-k1.log"
python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
for name in ["lockstep", "async-k1"]:
    steps = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    secs = sum(s["step_seconds"] for s in steps)
    line = {"run": name, "steps": len(steps), "loop_seconds": round(secs, 3), "steps_per_hour": round(3600 * len(steps) / secs, 1)}
    a = [s["off_policy"] for s in steps if "off_policy" in s]
    if a:
        hist = {}
        for x in a:
            for k, v in x["staleness"].items():
                hist[k] = hist.get(k, 0) + v["groups"]
        line.update({
            "train_wait_s_mean": round(sum(x["train_wait_s"] for x in a) / len(a), 3),
            "rollout_wait_s_mean": round(sum(x["rollout_wait_s"] for x in a) / len(a), 3),
            "dropped_stale_groups": sum(x["dropped_stale_groups"] for x in a),
            "staleness_groups": hist,
        })
    print(json.dumps(line))
EOF
