#!/usr/bin/env bash
# Recipe 5's SFT and GRPO adapters on a 4× larger held-out-instances split (128 tasks: 4 new
# instances of each of the 32 training templates), 4 episodes per task at T = 1.0, same seed:
# the paired difference GRPO − SFT on 128 tasks instead of 32 (issue #45: more held-out
# instances where the intervals are too wide to decide anything).
set -euo pipefail
ARL=${ARL:-/work/bin/arl-232c3f1}  # the release build of 232c3f1 (the run's)
cd /work/runs/edit-5/eval-large
for stage in sft grpo; do
    [ -f "$stage.json" ] && continue
    "$ARL" eval --env edit --model "/work/runs/edit-5/$stage/checkpoints/final" --split heldout-instances --eval-n 4 \
        --set env.options.train_instances=16 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=4 \
        --set sampling.temperature=1.0 --set trainer.gen_tokens=65536 > "$stage.json.partial"
    mv "$stage.json.partial" "$stage.json"
done
