#!/usr/bin/env bash
# The test command's Slurm stage: a real single-node Slurm (scripts/setup/slurm.sh) runs a tiny
# training run through `arl run --launcher slurm` with 3 array workers twice, and both must
# equal the same run done locally, step by step (rewards, losses, gradient norms) and in the
# final weights (sha256):
#   1. one worker is `scancel`led while it holds a round (and the fault hook kills the worker
#      that takes round 5, so a round is retried whatever the timing): rounds_retried ≥ 1;
#   2. the trainer job is `scancel`led after its step-2 checkpoint (a worker holds round 9 for
#      ever, so the trainer is waiting, never racing the cancel) and the run is submitted again
#      with --resume, which reuses the live worker array; `arl cluster stop` ends it.
# No compile: it runs the debug `arl` that `cargo test` built ($ARL_BIN overrides).
# ARL_SKIP_SLURM=1 skips it. Prints the stage's wall time (install included) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${ARL_SKIP_SLURM:-0}" = 1 ] && { echo "slurm stage: skipped (ARL_SKIP_SLURM=1)"; exit 0; }
t0=$(date +%s.%N)
ARL=${ARL_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/arl/target}/debug/arl}
[ -x "$ARL" ] || { echo "error: no arl binary at $ARL; run cargo test --workspace first (or set ARL_BIN)" >&2; exit 1; }
bash scripts/setup/slurm.sh
WORK=$(mktemp -d /tmp/arl-slurm-stage.XXXXXX)
cleanup() {
    local rc=$?
    for run in "$WORK"/slurm-*; do [ -f "$run/slurm/jobs.json" ] && "$ARL" cluster stop "$run" >/dev/null 2>&1 || true; done
    bash scripts/setup/slurm.sh stop "$WORK/slurmd" || true
    if [ "$rc" = 0 ]; then rm -rf "$WORK"; else echo "slurm stage: failed; files kept in $WORK" >&2; fi
}
trap cleanup EXIT
bash scripts/setup/slurm.sh start "$WORK/slurmd"
export SLURM_CONF="$WORK/slurmd/slurm.conf" RAYON_NUM_THREADS=1
unset ARL_FAULT

# Four steps of four tasks × four episodes on the tiny preset, one group a round (4 rounds a
# step); the `length` reward (beside `hash`, which a random model never earns) differs between its
# replies, so every step trains.
RUN=(run --env dataset --set env.options.path=examples/dataset/arithmetic.jsonl --set 'env.options.rewards=[{name="hash",weight=1.0},{name="length",weight=1.0}]'
    --set env.options.length_target=20 --model tiny --steps 4 --prompts 4 --group-size 4 --max-new-tokens 6 --eval-n 0
    --seed 5 --lr 1e-3 --set cluster.round_groups=1 --set trainer.checkpoint_every=1 --set trainer.checkpoint_interval_s=0)
SLURM=(--launcher slurm --rollout-workers 3 --set cluster.lease_timeout_s=5 --set cluster.slurm.require_shared_fs=false
    --set cluster.slurm.trainer_cpus=1 --set cluster.slurm.worker_cpus=1 --set cluster.slurm.time=15)

job() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/slurm/jobs.json" "$2"; }
live() { [ -n "$(squeue -h -o %i -j "$1" 2>/dev/null)" ]; }
wait_until() { # SECONDS WHAT COMMAND...: poll COMMAND every 0.2 s
    local limit=$1 what=$2; shift 2
    local end=$(($(date +%s) + limit))
    until "$@"; do
        [ "$(date +%s)" -lt "$end" ] || { echo "error: slurm stage: no $what after ${limit} s" >&2; squeue >&2 || true; exit 1; }
        sleep 0.2
    done
}
trainer_done() { ! live "$(job "$1" trainer)"; }
claim_of() { grep -qls "\"worker\":$2," "$1"/dist/claims/* 2>/dev/null; }
checkpoint() { [ -f "$1/checkpoints/step-00002/trainer_state.json" ]; }

echo "== slurm stage: the local run"
"$ARL" "${RUN[@]}" --out "$WORK/local" > "$WORK/local.log"

echo "== slurm stage: 3 array workers, task 1 scancelled while it holds a round"
A="$WORK/slurm-cancel"
ARL_FAULT=die-holding-round:5 "$ARL" "${RUN[@]}" "${SLURM[@]}" --out "$A"
workers=$(job "$A" workers)
wait_until 300 "claim by worker 1" claim_of "$A" 1
# Task 1 may have ended already (the fault hook, if round 5 was its): then it is not there to cancel.
scancel "${workers}_1" && echo "scancel ${workers}_1" || echo "task ${workers}_1 had ended already"
wait_until 600 "end of the trainer job" trainer_done "$A"
"$ARL" cluster status "$A"

echo "== slurm stage: the trainer job scancelled after its step-2 checkpoint, then --resume"
B="$WORK/slurm-resume"
ARL_FAULT=hang-holding-round:9 "$ARL" "${RUN[@]}" "${SLURM[@]}" --out "$B"
wait_until 600 "step-2 checkpoint" checkpoint "$B"
first=$(job "$B" trainer)
scancel "$first"
echo "scancel $first"
wait_until 60 "end of the cancelled trainer job" trainer_done "$B"
[ ! -e "$B/checkpoints/step-00003" ] || { echo "error: slurm stage: the trainer passed step 3 before its cancel" >&2; exit 1; }
"$ARL" "${RUN[@]}" "${SLURM[@]}" --out "$B" --resume --follow | tail -n 1
"$ARL" cluster stop "$B"

python3 - "$WORK/local" "$A" "$B" <<'EOF'
import hashlib, json, sys
local, cancel, resume = sys.argv[1:]
KEYS = ["reward_mean", "pass_rate", "loss", "grad_norm", "logprob_gap_mean", "logprob_gap_max", "entropy", "policy_tokens", "tasks"]
def steps(d):
    return [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
def sha(d):
    return hashlib.sha256(open(f"{d}/checkpoints/final/model.safetensors", "rb").read()).hexdigest()
a = steps(local)
assert len(a) == 4 and all(s["grad_norm"] > 0 for s in a), "the local run must train at every step"
for d, restored in [(cancel, 0), (resume, 2)]:
    b = steps(d)
    assert len(b) == 4, f"{d}: {len(b)} steps"
    for x, y in zip(a, b):
        for k in KEYS:
            if x["step"] <= restored and isinstance(x[k], float):
                # Steps before the resume come back from the checkpoint's JSON.
                assert abs(x[k] - y[k]) <= 1e-12 * abs(x[k]), (d, x["step"], k, x[k], y[k])
            else:
                assert x[k] == y[k], (d, x["step"], k, x[k], y[k])
    assert sha(d) == sha(local), f"{d}: final weights differ from the local run's"
retried = sum(s["rounds_retried"] for s in steps(cancel))
lost = sum(s["workers_lost"] for s in steps(cancel))
assert retried >= 1 and lost >= 1, (retried, lost)
print(f"slurm stage: both Slurm runs equal the local run (4 steps, final sha256 {sha(local)[:16]}…); rounds_retried {retried}, workers_lost {lost}")
EOF
grep -q "after step 2" "$B/run.log" || { echo "error: slurm stage: the resumed trainer did not start after step 2" >&2; exit 1; }

echo "== slurm stage: arl cluster fs-check as a Slurm step of two tasks"
mkdir -p "$WORK/fs"
timeout 120 srun -N1 -n2 --time=2 "$ARL" cluster fs-check "$WORK/fs" --timeout-s 60 | tee "$WORK/fs-check.log"
grep -q "2 Slurm tasks on 1 node" "$WORK/fs-check.log" || { echo "error: slurm stage: fs-check's two tasks did not find each other" >&2; exit 1; }
echo "slurm stage: $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)") s"
