"""Stage starts (minutes) and lengths from a scripts/test.sh log whose lines are prefixed with
the seconds since its start. Usage: python3 stages.py LOG"""
import re, sys
lines = open(sys.argv[1]).read().splitlines()
marks = []
for l in lines:
    m = re.match(r"^(\d+|END) (.*)$", l)
    if not m: continue
    t, text = m.groups()
    if t == "END": marks.append((int(text), "END")); continue
    if text.startswith("== ") and not text.startswith("== scripts/setup") and not text.startswith("== skipped"):
        marks.append((int(t), text[3:]))
    if "Finished `test` profile" in text or "Finished `dev` profile" in text:
        marks.append((int(t), "  (" + text.strip() + ")"))
for (t, name), nxt in zip(marks, marks[1:] + [(None, None)]):
    dur = f"{(nxt[0]-t)/60:5.1f} min" if nxt[0] is not None and not name.startswith("  (") else ""
    print(f"{t/60:6.1f}  {dur:>9}  {name}")
