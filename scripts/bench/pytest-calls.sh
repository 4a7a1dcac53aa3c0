#!/usr/bin/env bash
# Time `pytest -q` under the sandboxes: one `arl env replay` episode of three `pytest -q` calls
# (and one with no calls, the process's own cost) per binary and sandbox, alternated over ROUNDS.
# Usage: scripts/bench/pytest-calls.sh NEW_ARL OLD_ARL [ROUNDS]; results/bench-sandbox-cpu.md.
set -euo pipefail
NEW=$1 OLD=$2 ROUNDS=${3:-3}
calls=$(mktemp); echo '[{"name":"Bash","arguments":{"command":"pytest -q"}},{"name":"Bash","arguments":{"command":"pytest -q"}},{"name":"Bash","arguments":{"command":"pytest -q"}},"done"]' > "$calls"
empty=$(mktemp); echo '["done"]' > "$empty"
trap 'rm -f "$calls" "$empty"' EXIT
t() { /usr/bin/time -f "%e %U" "$@" 2>&1 >/dev/null | tail -1; }
printf "%-6s %-8s %-7s %8s %8s\n" round binary sandbox wall_s user_s
for r in $(seq 1 "$ROUNDS"); do
  for b in old new; do bin=$OLD; [ $b = new ] && bin=$NEW
    for sb in wasm rlimit; do
      [ $b = old ] && [ $sb = rlimit ] && continue
      read w u < <(t "$bin" env replay --task compare-count_positive-0 --plain-names --sandbox $sb --calls "$calls")
      read w0 u0 < <(t "$bin" env replay --task compare-count_positive-0 --plain-names --sandbox $sb --calls "$empty")
      printf "%-6s %-8s %-7s %8s %8s   (episode without calls: %s s)\n" $r $b $sb $w $u $w0
    done
  done
done
