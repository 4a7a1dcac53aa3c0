#!/usr/bin/env bash
# Recipe 7's evaluations (issue #45): the SFT adapter (recipe 3's) and recipe 7's GRPO adapter on two
# 128-task splits, 4 episodes per task at T = 1.0, the same seed:
#   instances: 4 new instances of each of the 32 training templates (heldout_train_instances = 4)
#   templates: 8 instances of each of the 16 held-out templates (heldout_instances = 8)
# under two menu protocols:
#   episode: the menu's order drawn per episode (menu_order = "episode"), the same draws for both
#            adapters; a letter preference scores 1/3 in expectation, so only reading the edits counts.
#   task:    each task's own order, as every earlier recipe was evaluated; here a policy that always
#            answers one letter scores that letter's share of fixes (instances: A 41, B 51, C 36 of 128).
# train_instances = 100 as in the run (the held-out instances are the same 128 tasks as with 16:
# `arl tasks --dump` under both). Then `arl results compare` pairs each GRPO evaluation with SFT's.
# Resumable: an evaluation already written is kept.
# Usage: bash eval.sh sft | grpo [CHECKPOINT]   (default checkpoint: final)
set -euo pipefail
export RAYON_NUM_THREADS=1
ARL=${ARL:-/work/bin/arl-e9aa6bf}
cd /work/runs/edit-7
mkdir -p eval
# The SFT adapter under task order on held-out instances is recipe 5's eval-large/sft.json (the same 128 tasks).
[ -f eval/sft-instances-task.json ] || cp /work/runs/edit-5/eval-large/sft.json eval/sft-instances-task.json
ev() { # MODEL SPLIT ORDER OUT
    [ -f "$4" ] && return 0
    "$ARL" eval --env edit --model "$1" --split "$2" --eval-n 4 \
        --set env.options.train_instances=100 --set env.options.heldout_instances=8 --set env.options.heldout_train_instances=4 \
        --set "env.options.menu_order=\"$3\"" --set sampling.temperature=1.0 --set trainer.gen_tokens=65536 > "$4.partial"
    mv "$4.partial" "$4"
}
case ${1:?sft or grpo} in
  sft) model=/work/runs/edit-5/sft/checkpoints/final; tag=sft ;;
  grpo) ck=${2:-final}; model=/work/runs/edit-7/grpo/checkpoints/$ck; tag=grpo; [ "$ck" = final ] || tag=grpo-$ck ;;
esac
for order in episode task; do
    ev "$model" heldout-instances "$order" "eval/$tag-instances-$order.json"
    ev "$model" heldout "$order" "eval/$tag-templates-$order.json"
    [ "$tag" = sft ] && continue
    for split in instances templates; do
        "$ARL" results compare "eval/sft-$split-$order.json" "eval/$tag-$split-$order.json" > "eval/compare-$tag-$split-$order.txt" 2>&1 || true
        echo "== $split, menu order $order"; cat "eval/compare-$tag-$split-$order.txt"
    done
done
