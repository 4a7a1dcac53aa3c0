#!/usr/bin/env bash
# One gym's pipeline (issue #45 recipe 3), resumable: bash /work/runs/gym.sh GYM
set -euo pipefail
gym=$1
export ARL=/work/bin/arl-960517d RAYON_NUM_THREADS=1
export TASK_OPTIONS="train_instances=8"
export EVAL_OPTIONS_SET="heldout_instances=2 heldout_train_instances=1"
extra=()
case $gym in
  # 128 evaluation rows of ~3k tokens at once held 19 GB of KV cache (killed, 6 Dec): 36 at a time.
  tools) export SFT_STEPS=48; extra=(--set trainer.gen_batch=36) ;;
  edit) export SFT_STEPS=32 ;;
esac
cd /work/main
exec scripts/warm-start.sh "$gym" "/work/runs/$gym-3" --steps 40 --prompts 6 --group-size 6 --lr 2e-4 \
  --set 'trainer.task_sampler="difficulty"' --set trainer.minibatches=1 --set trainer.skip_zero_variance=true \
  --set env.options.train_instances=16 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=1 ${extra[@]+"${extra[@]}"}
