#!/usr/bin/env python3
"""An arl environment in Python, no dependencies: `arl run --env process
--set 'env.options.command="python3 examples/process-env/sum_env.py"'`.

Protocol version 1 (PROTOCOL.md): arl writes one JSON request per line to stdin, this process
answers each with one JSON line on stdout carrying the request's `id`. Print nothing else on
stdout (log to stderr). Tasks: "What is a + b?"; the model may call the `add` tool; the final
answer earns 1 when its first integer is the sum.
"""
import json
import random
import re
import sys

TOOLS = [{
    "name": "add",
    "description": "Add two integers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}]
SYSTEM = "You are a calculator. You may call the add tool. Reply with the number only."


class SumEnv:
    def __init__(self):
        self.episodes = {}  # episode id -> the answer
        self.tasks = {}

    def hello(self, req):
        opts = req.get("options") or {}
        rng = random.Random(req.get("seed", 0))
        pairs = [(a, b) for a in range(opts.get("max_operand", 9) + 1) for b in range(opts.get("max_operand", 9) + 1)]
        rng.shuffle(pairs)
        n_held = opts.get("heldout_tasks", 16)
        self.tasks = {"heldout": pairs[:n_held], "train": pairs[n_held:]}
        return {"protocol": 1, "tools": TOOLS, "max_new_tokens": 48}

    def list_tasks(self, req):
        return {"tasks": [{"id": f"sum-{a}-{b}", "data": {"a": a, "b": b}} for a, b in self.tasks[req["split"]]]}

    def reset(self, req):
        data = req["task"]["data"]
        self.episodes[req["episode"]] = data["a"] + data["b"]
        return {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {data['a']} + {data['b']}?"}]}

    def step(self, req):
        episode = req["episode"]
        if not req["calls"]:
            answer = self.episodes.pop(episode)
            m = re.search(r"-?\d+", req["text"])
            return {"done": True, "reward": 1.0 if m and int(m.group()) == answer else 0.0}
        results = []
        for call in req["calls"]:
            if "malformed" in call:
                results.append({"status": "malformed", "text": f"could not parse the call: {call['reason']}"})
            elif call["name"] != "add":
                results.append({"status": "failed", "text": f"no tool {call['name']!r}; the tool is add"})
            else:
                args = call["arguments"]
                try:
                    results.append({"status": "ok", "text": str(int(args["a"]) + int(args["b"]))})
                except (KeyError, TypeError, ValueError) as e:
                    results.append({"status": "failed", "text": f"add needs integers a and b: {e}"})
        return {"done": False, "results": results}

    def finish(self, req):
        self.episodes.pop(req["episode"], None)
        return {"done": True, "reward": 0.0}


def main():
    env = SumEnv()
    methods = {"hello": env.hello, "tasks": env.list_tasks, "reset": env.reset, "step": env.step, "finish": env.finish}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            answer = methods[req["method"]](req)
        except Exception as e:  # an error answer, not a crash: arl counts the episode as lost
            answer = {"error": f"{type(e).__name__}: {e}"}
        answer["id"] = req["id"]
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
