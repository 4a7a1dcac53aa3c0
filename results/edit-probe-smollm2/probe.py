"""Can SmolLM2-135M-Instruct tell an `edit` task's fix from its distractors at all?

A capability probe, outside arl: Hugging Face transformers loads the same GGUF arl trains
(`scripts/setup/smollm2.sh`), and for every template of the task bank (envs/tasks/bank/*.txt, the
original names) asks one multiple-choice question with everything in view (the source, the
public test, the three edits) under each of the 3! = 6 orders of the menu, and reads the next-token
probabilities of `A`, `B` and `C` after the assistant turn opens. No sampling, no tools.

Per template it reports
- letter accuracy: the share of the 6 orders whose most likely letter names the fix (a letter
  habit scores 1/3 here, as under the gym's per-episode menus);
- content accuracy: each edit's probability averaged over the 6 orders (each edit sits at each
  letter twice, so letter bias cancels), and whether the fix has the highest: 1/3 by chance.
Means over templates with a 95 % bootstrap interval; --adapter adds a PEFT LoRA adapter (arl's
adapters load in PEFT: results/lora-peft-parity.txt); --hint, the positive control, ends the
question with the fix's letter, to show that the readout follows what the prompt says.

Usage: python probe.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf --bank envs/tasks/bank [--adapter DIR] [--hint]
"""

import argparse
import itertools
import json
import pathlib
import random

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

SYSTEM = "You fix bugs in small Python functions."


def parse_bank(folder):
    out = []
    for path in sorted(pathlib.Path(folder).glob("*.txt")):
        for block in path.read_text().split("\n=== ")[1:]:
            header, body = block.split("\n", 1)
            words = header.split()
            tid, heldout = words[0], len(words) > 1 and words[1] == "heldout"
            _names, rest = body.split("\n", 1)
            sections = {"distractor": []}
            for section in rest.split("--- "):
                if not section.strip():
                    continue
                kind, content = (section.split("\n", 1) + [""])[:2]
                kind = kind.strip()
                content = content.rstrip() + "\n"
                if kind in ("fix", "distractor"):
                    old, new = content.rstrip("\n").split(" => ", 1)
                    edit = (old, new)
                    if kind == "fix":
                        sections["fix"] = edit
                    else:
                        sections["distractor"].append(edit)
                else:
                    sections[kind] = content
            out.append({"id": tid, "heldout": heldout, **sections})
    return out


def question(t, edits, hint=None, text=False):
    function = t["source"].split("def ", 1)[1].split("(", 1)[0]
    menu = "".join(f"{'ABC'[i]}: replace `{old}` with `{new}`\n" for i, (old, new) in enumerate(edits))
    return (
        f"The function `{function}` has a bug.\n\n```python\n{t['source']}```\n\n"
        f"Its public test:\n\n```python\n{t['public']}```\n\n"
        f"Exactly one of these edits fixes the bug:\n{menu}\n"
        + (
            "Which edit fixes it? Answer with its replacement text only."
            if text
            else "Which edit fixes it? Answer with its letter only." + (f" (Hint: the answer is {hint}.)" if hint else "")
        )
    )


def summarize(rows, keys, **header):
    """The output document: `header`, each key's mean over templates with its bootstrap interval, the rows."""
    summary = dict(header, templates=len(rows))
    for key in keys:
        values = [r[key] for r in rows]
        summary[key] = {"mean": sum(values) / len(values), "ci95": bootstrap(values)}
    return {"summary": summary, "templates": rows}


def bootstrap(values, n=10000, seed=0):
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(n))
    return [means[int(0.025 * n)], means[int(0.975 * n) - 1]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--bank", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--hint", action="store_true", help="positive control: the question names the fix's letter")
    ap.add_argument("--code", action="store_true", help="score the three edited functions as the answer instead of letters")
    ap.add_argument("--text", action="store_true", help="the menu question, answered with an edit's replacement text, not its letter")
    args = ap.parse_args()
    gguf = pathlib.Path(args.gguf)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.float32)
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.adapter)
    model.eval()
    letters = [tok.encode(x, add_special_tokens=False) for x in "ABC"]
    assert all(len(ids) == 1 for ids in letters), letters
    letters = [ids[0] for ids in letters]

    if args.code:
        return score_code(tok, model, parse_bank(args.bank), gguf, args)
    if args.text:
        return score_text(tok, model, parse_bank(args.bank), gguf, args)
    rows = []
    for t in parse_bank(args.bank):
        edits = [t["fix"]] + t["distractor"][:2]
        mass = [0.0, 0.0, 0.0]  # per edit (0 = the fix), summed over orders
        letter_hits, picked = 0, []
        for order in itertools.permutations(range(3)):
            shown = [edits[i] for i in order]
            chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question(t, shown, "ABC"[order.index(0)] if args.hint else None)}]
            ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt")
            if not isinstance(ids, torch.Tensor):
                ids = ids["input_ids"]
            with torch.no_grad():
                logits = model(ids).logits[0, -1]
            p = torch.softmax(logits[letters].double(), dim=0).tolist()
            best = max(range(3), key=lambda k: p[k])
            picked.append("ABC"[best])
            letter_hits += order[best] == 0
            for k in range(3):
                mass[order[k]] += p[k] / 6
        rows.append(
            {
                "id": t["id"],
                "heldout": t["heldout"],
                "letter_accuracy": letter_hits / 6,
                "content_correct": int(max(range(3), key=lambda k: mass[k]) == 0),
                "p_fix": mass[0],
                "picked": "".join(picked),
            }
        )
    doc = summarize(rows, ("letter_accuracy", "content_correct", "p_fix"), model=gguf.name, adapter=args.adapter, hint=args.hint)
    picks = "".join(r["picked"] for r in rows)
    doc["summary"]["letter_share"] = {x: picks.count(x) / len(picks) for x in "ABC"}
    print(json.dumps(doc, indent=1))


def answer_logp(tok, model, prefix, answer):
    """Sum and mean log-probability of `answer`'s tokens after the chat `prefix`."""
    n_prefix = len(tok(prefix, add_special_tokens=False)["input_ids"])
    ids = tok(prefix + answer, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].double(), dim=-1)
    target = ids[0, 1:]
    token_logp = logp[torch.arange(len(target)), target][n_prefix - 1 :]
    return token_logp.sum().item(), token_logp.mean().item()


def score_text(tok, model, bank, gguf, args):
    """The menu question under all 6 orders, answered with each edit's replacement text: the
    share of orders in which the fix's text is the most likely answer (1/3 by chance)."""
    rows = []
    for t in bank:
        edits = [t["fix"]] + t["distractor"][:2]
        hits = []
        for order in itertools.permutations(range(3)):
            shown = [edits[i] for i in order]
            chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question(t, shown, text=True)}]
            prefix = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
            scores = [answer_logp(tok, model, prefix, f"`{new}`")[0] for _, new in edits]
            hits.append(int(max(range(3), key=lambda k: scores[k]) == 0))
        rows.append({"id": t["id"], "heldout": t["heldout"], "fix_top": sum(hits) / len(hits)})
    print(json.dumps(summarize(rows, ("fix_top",), model=gguf.name, adapter=args.adapter, mode="text"), indent=1))


def score_code(tok, model, bank, gguf, args):
    """No menu, no letters: the buggy function and its public test, then each candidate (the
    source with the fix or with a distractor applied) as the assistant's answer; the candidate
    with the highest log-likelihood is the model's pick (also per token, as lengths differ).
    Also whether the fixed function is more likely than the buggy one given back unchanged."""
    rows = []
    for t in bank:
        ask = (
            f"This function has a bug:\n\n```python\n{t['source']}```\n\n"
            f"Its public test:\n\n```python\n{t['public']}```\n\nWrite the fixed function."
        )
        chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]
        prefix = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        scores = []
        for old, new in [t["fix"]] + t["distractor"][:2]:
            assert t["source"].count(old) == 1, (t["id"], old)
            scores.append(answer_logp(tok, model, prefix, f"```python\n{t['source'].replace(old, new)}```"))
        unchanged = answer_logp(tok, model, prefix, f"```python\n{t['source']}```")
        rows.append(
            {
                "id": t["id"],
                "heldout": t["heldout"],
                "fix_top_sum": int(max(range(3), key=lambda k: scores[k][0]) == 0),
                "fix_top_mean": int(max(range(3), key=lambda k: scores[k][1]) == 0),
                "fix_above_unchanged": int(scores[0][0] > unchanged[0]),
                "logp_sum": [round(x[0], 3) for x in scores],
            }
        )
    keys = ("fix_top_sum", "fix_top_mean", "fix_above_unchanged")
    print(json.dumps(summarize(rows, keys, model=gguf.name, adapter=args.adapter, mode="code"), indent=1))


if __name__ == "__main__":
    main()
