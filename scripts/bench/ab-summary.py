#!/usr/bin/env python3
"""Medians (and ranges) of base vs new per benchmark from scripts/bench/ab-pairs.sh output."""
import json,statistics as st,sys
from collections import defaultdict
rows=[json.loads(l) for l in open(sys.argv[1])]
d=defaultdict(lambda: defaultdict(list))
for r in rows:
    o=r['out']
    if o['bench']=='gen':
        d[r['args']][r['which']].append({'decode_tok_s':o['decode_tokens_per_s'],'prefill_tok_s':o['prefill_tokens_per_s'],'new_tok_s':o['new_tokens_per_s']})
    else:
        d[r['args']][r['which']].append({'step_s':o['step_s'],'optimizer_s':o['optimizer_s'],'tok_s':o['tokens_per_s']})
for a,v in d.items():
    print(f"`arl bench {a}` ({len(v['base'])} pairs)")
    for k in v['base'][0]:
        b=[t[k] for t in v['base']]; n=[t[k] for t in v['new']]
        print(f"  {k}: base median {st.median(b):.4g} [{min(b):.4g}–{max(b):.4g}], new median {st.median(n):.4g} [{min(n):.4g}–{max(n):.4g}], new/base {st.median(n)/st.median(b):.3f}")
