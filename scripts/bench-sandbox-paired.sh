#!/usr/bin/env bash
# Paired `arl bench sandbox`: two arl binaries (e.g. built from two commits) run alternately,
# the order flipped every pair, so load from other work on the machine falls on both alike.
# Prints one JSON line per run, then per metric the medians and the median of the paired
# ratios after/before.
# Usage: scripts/bench-sandbox-paired.sh BEFORE_BIN AFTER_BIN PAIRS SANDBOX JOBS
set -euo pipefail
before=$1 after=$2 pairs=$3 sandbox=$4 jobs=$5
out=$(mktemp)
for i in $(seq "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
    for which in $order; do
        if [ "$which" = before ]; then bin=$before; else bin=$after; fi
        row=$("$bin" bench sandbox --sandbox "$sandbox" --jobs "$jobs" --json)
        printf '{"pair":%d,"binary":"%s","load1":%s,"row":%s}\n' "$i" "$which" "$(cut -d' ' -f1 /proc/loadavg)" "$row" | tee -a "$out"
    done
done
python3 - "$out" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for key in ["trivial_jobs_per_s", "grade_jobs_per_s", "shell_calls_per_s"]:
    b = {r["pair"]: r["row"][key] for r in rows if r["binary"] == "before" and key in r["row"]}
    a = {r["pair"]: r["row"][key] for r in rows if r["binary"] == "after" and key in r["row"]}
    if not b or not a:
        continue
    ratios = [a[p] / b[p] for p in sorted(b) if p in a]
    print(f"{key}: before median {st.median(b.values()):.1f}, after median {st.median(a.values()):.1f}, "
          f"after/before paired median {st.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)")
loads = [r["load1"] for r in rows]
print(f"1-minute load average during the runs: {min(loads):.2f}-{max(loads):.2f}")
PY
rm -f "$out"
