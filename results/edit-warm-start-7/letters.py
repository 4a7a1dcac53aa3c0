#!/usr/bin/env python3
"""Which menu letter the `edit` gym's transcripts apply, and under which letter the fixes sit.

    python3 letters.py EVAL.json ...     # `arl eval --env edit` outputs, or a run's results.json
    python3 letters.py --dump DIR ...    # folders written by `arl tasks --env edit --dump DIR`

An evaluation keeps one transcript per task; its letter is the first `apply_edit`'s `op` (`-`:
none applied, `other`: not a menu letter). For a run's results.json every evaluation in it is
counted (`before`, `after`, and the held-out-instances pair). A dump's tasks each name their
fix's letter (`data.fix` in task.json).
"""
import collections
import glob
import json
import os
import re
import sys

CALL = re.compile(r'"name": "apply_edit", "arguments": \{"op": "([^"]*)"')


def evaluations(path):
    d = json.load(open(path))
    if "transcripts" in d:
        yield path, d
        return
    for when in ("before", "after"):
        if isinstance(d.get(when), dict):
            yield f"{path} {when}", d[when]
    for when in ("before", "after"):
        e = (d.get("heldout_instances") or {}).get(when)
        if isinstance(e, dict):
            yield f"{path} heldout_instances {when}", e


def letters(name, e):
    chosen, right = collections.Counter(), collections.Counter()
    for t in e["transcripts"]:
        m = CALL.search(t["text"])
        letter = "-" if not m else (m.group(1) if m.group(1) in ("A", "B", "C", "D", "E") else "other")
        chosen[letter] += 1
        right[letter] += t["reward"] == 1.0
    row = ", ".join(f"{k} {chosen[k]} ({right[k]} rewarded)" for k in sorted(chosen))
    s = e["summary"]
    print(f"{name}: {sum(chosen.values())} transcripts apply {row}; pass@1 {s['pass_at_1']:.3f} ({s['correct']} of {s['episodes']} episodes)")


def fixes(folder):
    c = collections.Counter(json.load(open(f))["data"]["fix"] for f in glob.glob(os.path.join(folder, "*", "task.json")))
    print(f"{folder}: {sum(c.values())} tasks, fix under " + ", ".join(f"{k} {c[k]}" for k in sorted(c)))


args = sys.argv[1:]
if args[:1] == ["--dump"]:
    for folder in args[1:]:
        fixes(folder)
else:
    for path in args:
        for name, e in evaluations(path):
            letters(name, e)
