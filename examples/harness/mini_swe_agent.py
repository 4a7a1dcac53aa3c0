# mini-swe-agent (PyPI `mini-swe-agent`, scripts/setup/mini-swe-agent.sh) as arl's agent program
# (docs/harness.md): its DefaultAgent, its `mini.yaml` prompts and its LocalEnvironment run
# unchanged in /repo; only the model is an adapter, its LitellmModel's query over the official
# `openai` SDK instead of litellm (which is not installed), pointed at the episode's session by
# OPENAI_BASE_URL and OPENAI_API_KEY. ARL_MODEL names the model, ARL_TASK is the issue.
import os

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

from pathlib import Path  # noqa: E402

import minisweagent  # noqa: E402
import yaml  # noqa: E402
from minisweagent.agents.default import DefaultAgent  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402
from minisweagent.models.utils.actions_toolcall import (  # noqa: E402
    BASH_TOOL, format_toolcall_observation_messages, parse_toolcall_actions)
from openai import OpenAI  # noqa: E402


class OpenAIModel:
    """mini-swe-agent's Model protocol, as its LitellmModel implements it, over the openai SDK."""

    def __init__(self, config):
        self.config, self.client = config, OpenAI()

    def query(self, messages, **kwargs):
        prepared = [{k: v for k, v in m.items() if k != "extra"} for m in messages]
        response = self.client.chat.completions.create(model=os.environ["ARL_MODEL"], messages=prepared, tools=[BASH_TOOL])
        choice = response.choices[0]
        actions = parse_toolcall_actions(choice.message.tool_calls or [], format_error_template=self.config.get(
            "format_error_template", "{{ error }}"), template_kwargs={"finish_reason": choice.finish_reason})
        message = choice.message.model_dump(exclude_none=True)
        message["extra"] = {"actions": actions, "cost": 0.0}
        return message

    def format_message(self, **kwargs):
        return kwargs

    def format_observation_messages(self, message, outputs, template_vars=None):
        return format_toolcall_observation_messages(
            actions=message.get("extra", {}).get("actions", []), outputs=outputs,
            observation_template=self.config["observation_template"], template_vars=template_vars)

    def get_template_vars(self, **kwargs):
        return dict(self.config)

    def serialize(self):
        return {"info": {"config": {"model": dict(self.config), "model_type": "arl-openai-adapter"}}}


config = yaml.safe_load((Path(minisweagent.__file__).parent / "config" / "mini.yaml").read_text())
agent_config = config["agent"] | {"step_limit": int(os.environ.get("AGENT_TURNS", "8")), "cost_limit": 0}
agent = DefaultAgent(OpenAIModel(config["model"]), LocalEnvironment(**config["environment"], cwd="/repo"), **agent_config)
result = agent.run(os.environ["ARL_TASK"])
print("mini-swe-agent:", result.get("exit_status"))
