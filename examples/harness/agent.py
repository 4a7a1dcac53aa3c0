# A minimal agent on the official `openai` SDK, run by arl's `harness` env as its agent program
# (docs/harness.md): it knows nothing of arl. OPENAI_BASE_URL and OPENAI_API_KEY point it at its
# episode's session, ARL_MODEL names the model, ARL_TASK says what to fix; it works in /repo.
import json
import os
import subprocess

from openai import OpenAI

TOOLS = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command in /repo; returns its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Replace a file's whole content.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
]


def run(call):
    args = json.loads(call.function.arguments)
    if call.function.name == "bash":
        done = subprocess.run(["bash", "-c", args["command"]], capture_output=True, text=True, timeout=20)
        return (done.stdout + done.stderr)[-4000:] or "(no output)"
    with open(args["path"], "w") as f:
        f.write(args["content"])
    return "wrote %s" % args["path"]


def main():
    client = OpenAI()  # reads OPENAI_BASE_URL and OPENAI_API_KEY
    messages = [
        {"role": "system", "content": "You fix bugs. Use the tools; answer without a tool call when done."},
        {"role": "user", "content": os.environ["ARL_TASK"]},
    ]
    for _ in range(int(os.environ.get("AGENT_TURNS", "4"))):
        reply = client.chat.completions.create(model=os.environ["ARL_MODEL"], messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for call in message.tool_calls:
            try:
                result = run(call)
            except Exception as e:  # the model's call was bad: tell it, as a harness does
                result = "error: %s" % e
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


main()
