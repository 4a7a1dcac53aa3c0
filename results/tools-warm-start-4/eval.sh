#!/usr/bin/env bash
# Recipe 4's evaluations (issue #45): an adapter on both held-out splits of the run's tasks, 4
# episodes per task at the run's temperature (1.0) and seed, then the paired difference against
# the SFT adapter's evaluation of the same tasks (`arl results compare`):
#   templates: 2 instances of each of the 16 held-out bug templates (heldout_instances = 2), 32 tasks
#   instances: 1 new instance of each of the 32 training templates (heldout_train_instances = 1), 32 tasks
# the splits and sizes of recipe 3's base-model evaluation (../tools-warm-start-3/base*.json).
# Resumable: an evaluation already written is kept.
#   bash eval.sh sft                 # recipe 3's SFT adapter, committed in ../tools-warm-start-3/sft/adapter
#   bash eval.sh grpo [ADAPTER_DIR]  # default: the run's final checkpoint
# ARL: the arl binary [arl]; OUT: where the JSON goes [this folder's eval/]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-2}
ARL=${ARL:-arl} out=${OUT:-$here/eval}
mkdir -p "$out"
case ${1:?sft or grpo} in
  sft) adapter=$here/../tools-warm-start-3/sft/adapter ;;
  grpo) adapter=${2:-/work/runs/tools-4/grpo/checkpoints/final} ;;
  *) echo "usage: bash eval.sh sft | grpo [ADAPTER_DIR]" >&2; exit 2 ;;
esac
tag=$1
for split in heldout heldout-instances; do
    name=templates; [ "$split" = heldout ] || name=instances
    f="$out/$tag-$name.json"
    if [ ! -f "$f" ]; then
        "$ARL" eval --env tools --model smollm2-135m --adapter "$adapter" --split "$split" --eval-n 4 --gen-batch 36 \
            --set env.options.train_instances=16 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=1 \
            > "$f.partial"
        mv "$f.partial" "$f"
    fi
    if [ "$tag" != sft ] && [ -f "$out/sft-$name.json" ]; then
        echo "== $name: $tag − sft"
        "$ARL" results compare "$out/sft-$name.json" "$f" | tee "$out/compare-$tag-$name.txt"
    fi
done
