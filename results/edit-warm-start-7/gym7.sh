#!/usr/bin/env bash
# Recipe 7 (issue #45), edit gym: GRPO from recipe 3's SFT adapter (recipe 5's start) with the menu's
# order drawn per episode (env.options.menu_order = "episode", new in e9aa6bf). Recipe 5's GRPO adapter
# answered `C` on every held-out task (the SFT adapter `A` on 68 %): with a fixed menu per task a
# letter preference earns reward group by group and GRPO drifted into one letter. With a menu drawn per
# episode the fix sits under different letters within a group, a letter preference earns 1/3 everywhere,
# and only reading the edits raises the reward; a letter-deterministic policy still leaves nearly
# every group with variance, so T = 1.0 (fewer malformed calls than 1.2).
# Every group on a fresh task: 100 instances of each of the 32 training templates (3,200 tasks), the
# uniform sampler's shuffled order, 40 steps x 8 tasks x 8 = 320 tasks, so the training reward is itself
# measured on tasks never drawn before. No evaluation inside the run (eval.n = 0): eval.sh evaluates both
# adapters afterwards on two 128-task splits with the tasks' own menus (as every earlier recipe).
# LoRA lr 1e-4 with 4 warmup steps: a first start at 2e-4 without warmup (grpo-lr2e-4/, steps 1-4) broke the
# call format: malformed calls 5, 18, 48, 44 % and the reward 0.48, 0.27, 0.17, 0.27 while entropy rose 0.035 -> 0.113.
# Resumable: bash /work/runs/gym7.sh
set -euo pipefail
export RAYON_NUM_THREADS=1
ARL=${ARL:-/work/bin/arl-e9aa6bf}
resume=(); [ -d /work/runs/edit-7/grpo/checkpoints ] && resume=(--resume)
exec "$ARL" run --env edit --model /work/runs/edit-5/sft/checkpoints/final --backend cpu --lora --micro 2 \
  --out /work/runs/edit-7/grpo ${resume[@]+"${resume[@]}"} --steps 40 --prompts 8 --group-size 8 --lr 1e-4 --set trainer.warmup_steps=4 \
  --set 'trainer.task_sampler="uniform"' --set trainer.minibatches=1 --set trainer.skip_zero_variance=true \
  --set env.options.train_instances=100 --set env.options.heldout_instances=2 --set env.options.heldout_train_instances=1 \
  --set 'env.options.menu_order="episode"' --set sampling.temperature=1.0 --set eval.n=0 --set trainer.gen_tokens=65536
