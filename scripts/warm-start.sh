#!/usr/bin/env bash
# The mission's gyms from a cold model (issue #20): oracle transcripts → SFT warm start →
# GRPO, with the base model evaluated on the same held-out tasks. Every stage writes its own
# folder under OUT and is skipped when done, resumed when a run in it was cut off, so the
# whole script is resumable: run it again after a crash.
#
#   scripts/warm-start.sh ENV OUT [arl run flags…]
#   BACKEND=tch scripts/warm-start.sh edit runs/edit-warm --steps 20 --prompts 8 --group-size 4
#
# Environment (defaults in brackets): ARL [arl on PATH], MODEL [smollm2-135m],
# BACKEND [cpu], NOISE ["--wrong-edit-rate 0.25 --skip-read-rate 0.1 --skip-test-rate 0.1"],
# EVAL_OPTIONS_SET [none: `[env.options]` of the base model's evaluation, space-separated KEY=VALUE,
# e.g. "heldout_instances=2 heldout_train_instances=1": pass the GRPO stage the same through its flags],
# TASK_OPTIONS [none: the env's `[env.options]` for the transcripts, space-separated KEY=VALUE,
# e.g. "train_instances=8": more instances of each bug template, with other names; the GRPO
# stage's own come through its flags, `--set env.options.train_instances=16`],
# REPEATS [1], SFT_STEPS [24], SFT_BATCH [4], SFT_LR [5e-4] (the measured edit recipe, results/edit-warm-start), EVAL_N [4], LORA [1: both stages
# train one LoRA adapter on the frozen base, GRPO continuing SFT's; 0: full weights],
# MICRO [2: rows per micro-batch in both stages, as measured; trainer.micro_tokens (2048 padded
# tokens) also bounds them: a whole batch of ~1k-token episodes at once needs over 20 GB on the CPU].
# Extra arguments go to `arl run` (the GRPO stage): --steps, --prompts, --group-size, --lr ….
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/warm-start.sh ENV OUT [arl run flags…]" >&2; exit 2; }
env=$1 out=$2; shift 2
arl=${ARL:-arl} model=${MODEL:-smollm2-135m} backend=${BACKEND:-cpu}
noise=${NOISE:---wrong-edit-rate 0.25 --skip-read-rate 0.1 --skip-test-rate 0.1}
lora=""; [ "${LORA:-1}" = 1 ] && lora=--lora
task_options=(); for o in ${TASK_OPTIONS:-}; do task_options+=(--env-option "$o"); done
# The held-out splits' sizes for the base model's evaluation (GRPO's come through its flags).
EVAL_OPTIONS=(); for o in ${EVAL_OPTIONS_SET:-}; do EVAL_OPTIONS+=(--set "env.options.$o"); done
mkdir -p "$out"

# A stage's folder: done (results.json), cut off after a checkpoint (resume), cut off before its
# first checkpoint (nothing to resume from: it starts over in the same folder), or new.
stage() {
    if [ -f "$1/results.json" ]; then echo skip
    elif compgen -G "$1/checkpoints/step-*" > /dev/null || [ -d "$1/checkpoints/final" ]; then echo --resume
    elif [ -f "$1/run.json" ]; then echo --overwrite
    else echo new; fi
}

echo "== 1/4 oracle transcripts of the train tasks → $out/oracle.jsonl"
[ -f "$out/oracle.jsonl" ] || "$arl" tasks --env "$env" --transcripts "$out/oracle.jsonl" --repeats "${REPEATS:-1}" ${task_options[@]+"${task_options[@]}"} $noise

echo "== 2/4 the base model on both held-out splits → $out/base.json (held-out templates), $out/base-instances.json (held-out instances)"
for split in heldout heldout-instances; do
    f="$out/base.json"; [ "$split" = heldout ] || f="$out/base-instances.json"
    [ -f "$f" ] || { "$arl" eval --env "$env" --model "$model" --backend "$backend" --eval-n "${EVAL_N:-4}" --split "$split" \
        ${EVAL_OPTIONS[@]+"${EVAL_OPTIONS[@]}"} > "$f.partial" && mv "$f.partial" "$f"; }
done

echo "== 3/4 SFT on the transcripts → $out/sft"
s=$(stage "$out/sft")
if [ "$s" != skip ]; then
    [ "$s" = new ] && s=""
    "$arl" sft --data "$out/oracle.jsonl" --model "$model" --backend "$backend" --steps "${SFT_STEPS:-24}" \
        --batch-size "${SFT_BATCH:-4}" --lr "${SFT_LR:-5e-4}" --micro "${MICRO:-2}" --out "$out/sft" $lora $s
fi

echo "== 4/4 GRPO from the SFT checkpoint → $out/grpo (its before is the SFT model, its after GRPO's)"
s=$(stage "$out/grpo")
if [ "$s" != skip ]; then
    [ "$s" = new ] && s=""
    "$arl" run --env "$env" --model "$out/sft/checkpoints/final" --backend "$backend" --eval-n "${EVAL_N:-4}" --micro "${MICRO:-2}" --out "$out/grpo" $lora $s "$@"
fi
echo "done: $out/base.json, $out/sft/results.json, $out/grpo/results.json"
