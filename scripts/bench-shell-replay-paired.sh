#!/usr/bin/env bash
# Paired shell throughput of two arl binaries (e.g. built from two commits) that need not have
# `arl bench sandbox`'s shell metric: each times `arl env replay` of the tools gym with 1 and
# with N+1 Bash `pytest -q` calls; N / (the difference) is calls/s with the start-up (sandbox
# probe, env build) taken out. The binaries alternate, the order flipped every pair.
# Usage: scripts/bench-shell-replay-paired.sh BEFORE_BIN AFTER_BIN PAIRS N [TASK]
set -euo pipefail
before=$1 after=$2 pairs=$3 n=$4 task=${5:-minmax-largest-0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" "$n" <<'PY'
import json, sys
call = {"name": "Bash", "arguments": {"command": "pytest -q"}}
json.dump([call], open(f"{sys.argv[1]}/one.json", "w"))
json.dump([call] * (int(sys.argv[2]) + 1), open(f"{sys.argv[1]}/many.json", "w"))
PY
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N); python3 -c "print($t1 - $t0)"; }
for i in $(seq "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
    for which in $order; do
        if [ "$which" = before ]; then bin=$before; else bin=$after; fi
        one=$(secs "$bin" env replay --task "$task" --calls "$dir/one.json" --max-turns $((n + 5)))
        many=$(secs "$bin" env replay --task "$task" --calls "$dir/many.json" --max-turns $((n + 5)))
        rate=$(python3 -c "print($n / ($many - $one))")
        printf '{"pair":%d,"binary":"%s","load1":%s,"one_s":%s,"many_s":%s,"shell_calls_per_s":%s}\n' \
            "$i" "$which" "$(cut -d' ' -f1 /proc/loadavg)" "$one" "$many" "$rate" | tee -a "$dir/rows"
    done
done
python3 - "$dir/rows" <<'PY'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
b = {r["pair"]: r["shell_calls_per_s"] for r in rows if r["binary"] == "before"}
a = {r["pair"]: r["shell_calls_per_s"] for r in rows if r["binary"] == "after"}
ratios = [a[p] / b[p] for p in sorted(b) if p in a]
print(f"shell_calls_per_s: before median {st.median(b.values()):.2f}, after median {st.median(a.values()):.2f}, "
      f"after/before paired median {st.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)")
loads = [r["load1"] for r in rows]
print(f"1-minute load average during the runs: {min(loads):.2f}-{max(loads):.2f}")
PY
