#!/usr/bin/env bash
# Recipe 5 (issue #45), edit gym: recipe 3's oracle, base evaluations and SFT adapter (copied from
# /work/runs/edit-4, which copied them from edit-3), then GRPO sampling at T = 1.2 with the evaluations at T = 1.0,
# groups of 8. Recipe 4 sampled at T = 1.5: 49–61 % of tool calls malformed, reward 0.04–0.13 (steps 1–3).
# T chosen by /work/runs/tsweep: the SFT model on heldout_instances, 8 samples per task: T = 1.2 → pass 0.30,
# 14 % of calls malformed, 3 of 32 tasks with all 8 samples equal.
# trainer.gen_tokens=65536 (half the default KV budget): its first start was OOM-killed beside edit-3 and builds (24 GB).
# Resumable: bash /work/runs/gym5.sh
set -euo pipefail
export ARL=/work/bin/arl-232c3f1 RAYON_NUM_THREADS=1
cd /work/runs
exec bash /work/runs/warm-start.sh edit /work/runs/edit-5 --steps 40 --prompts 6 --group-size 8 --lr 2e-4 \
  --set 'trainer.task_sampler="difficulty"' --set trainer.minibatches=1 --set trainer.skip_zero_variance=true \
  --set env.options.train_instances=16 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=1 \
  --set sampling.temperature=1.2 --set eval.temperature=1.0 --set trainer.gen_tokens=65536
