#!/usr/bin/env bash
# Recipe 4 (issue #45), edit gym: recipe 3's oracle, base evaluations and SFT adapter (copied from
# /work/runs/edit-3), then GRPO sampling at T = 1.5 (more varied groups: recipe 3's SFT policy had
# 0.02–0.13 nats/token and 33–83 % equal-reward groups) with the evaluations at T = 1.0, groups of 8.
# trainer.gen_tokens=65536 (half the default KV budget): its first start was OOM-killed beside edit-3 and builds (24 GB).
# Resumable: bash /work/runs/gym4.sh
set -euo pipefail
export ARL=/work/bin/arl-232c3f1 RAYON_NUM_THREADS=1
cd /work/main
exec scripts/warm-start.sh edit /work/runs/edit-4 --steps 40 --prompts 6 --group-size 8 --lr 2e-4 \
  --set 'trainer.task_sampler="difficulty"' --set trainer.minibatches=1 --set trainer.skip_zero_variance=true \
  --set env.options.train_instances=16 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=1 \
  --set sampling.temperature=1.5 --set eval.temperature=1.0 --set trainer.gen_tokens=65536
