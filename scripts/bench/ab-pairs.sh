#!/usr/bin/env bash
# A/B of two `arl` binaries, pairs alternating in order: BASE_ARL (main's hot-path sources)
# and NEW_ARL (issue #51), same build configuration. One JSON line per run to $OUT.
#   BASE_ARL=... NEW_ARL=... OUT=ab.jsonl scripts/bench/ab-pairs.sh
#   python3 scripts/bench/ab-summary.py ab.jsonl
set -u
out=${OUT:-ab.jsonl}
: > $out
uptime > ${OUT:-ab.jsonl}.uptime
run() { for order in "base new" "new base" "base new" "new base" "base new"; do for which in $order; do
  bin=$BASE_ARL; [ "$which" = new ] && bin=$NEW_ARL
  line=$("$bin" bench $1 2>/dev/null); echo "{\"which\":\"$which\",\"args\":\"$1\",\"out\":$line}" >> $out; done; done; }
run "gen --model tiny-vocab512 --batch 8 --prompt-len 64 --new-tokens 64"
run "score --model tiny-vocab512 --batch 4 --seq-len 256 --steps 3"
run "score --model small --batch 2 --seq-len 128 --steps 2"
run "gen --model tiny --batch 8 --prompt-len 64 --new-tokens 32"
uptime >> ${OUT:-ab.jsonl}.uptime; echo done >> ${OUT:-ab.jsonl}.uptime
