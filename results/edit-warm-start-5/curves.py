# The numbers of README.md's "training curves" section, from grpo/metrics.jsonl:
#   python3 results/edit-warm-start-5/curves.py
import json
import os
import statistics

rows = [json.loads(line) for line in open(os.path.join(os.path.dirname(__file__), "grpo", "metrics.jsonl"))]
print("steps | mean reward | equal-reward groups | steps without gradient | malformed | entropy")
for lo in range(0, len(rows), 10):
    tens = rows[lo:lo + 10]
    mean = lambda key: sum(r[key] for r in tens) / len(tens)
    print(f"{lo + 1}-{lo + len(tens)} | {mean('reward_mean'):.3f} | {mean('zero_variance_groups'):.2f} | "
          f"{sum(r['zero_variance_groups'] >= 1.0 for r in tens)} | {mean('malformed_call_rate'):.3f} | {mean('entropy'):.3f}")
print("pools at the end:", rows[-1]["pools"])
for key in ["step_seconds", "rollout_seconds", "generate_seconds", "env_seconds", "update_seconds", "scoring_seconds", "checkpoint_seconds"]:
    print(f"median {key}: {statistics.median(r[key] for r in rows):.1f}")
