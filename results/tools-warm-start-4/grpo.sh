#!/usr/bin/env bash
# `tools` gym, recipe 4 (issue #45): GRPO from recipe 3's committed SFT adapter, no evaluation
# inside the run (the adapters are evaluated by eval.sh), resumable: bash grpo.sh [--resume]
#   ARL: the arl binary [arl]; OUT: the run folder [/work/runs/tools-4/grpo]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-2}
exec "${ARL:-arl}" run --env tools --model smollm2-135m --adapter "$here/../tools-warm-start-3/sft/adapter" --lora \
  --backend cpu --eval-n 0 --micro 2 --out "${OUT:-/work/runs/tools-4/grpo}" \
  --steps 40 --prompts 6 --group-size 6 --lr 1e-4 --set trainer.warmup_steps=4 \
  --set 'trainer.task_sampler="difficulty"' --set trainer.minibatches=1 --set trainer.skip_zero_variance=true \
  --set env.options.train_instances=16 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=1 \
  --set trainer.gen_batch=36 "$@"
