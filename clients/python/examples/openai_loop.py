"""An agent loop for OpenAI's computer-use tool (Responses API), carried out by
POST /v1/machines/{id}/tools/openai.

The model call stays with your own client: `call_model(items, tool)` sends the new input items (and the tool
definition) and answers the response's output items as dicts, keeping `previous_response_id` itself. With the
`openai` package that is `openai_call_model` below; any other client (or a scripted one in tests) works too.

    COMPUTER_API_KEY=sk_... OPENAI_API_KEY=... python3 examples/openai_loop.py "Open a terminal"
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from computer import Computer, Machine

Item = dict[str, Any]
CallModel = Callable[[list[Item], Item], list[Item]]


def run(machine: Machine, task: str, call_model: CallModel, *, max_turns: int = 30) -> list[Item]:
    """Runs the loop until the model answers without a computer_call (or `max_turns`); answers every item."""
    lease = machine.control()
    try:
        display = machine.client.machines_display_get(machine.id)
        tool: Item = {"type": "computer_use_preview", "display_width": display["width"], "display_height": display["height"], "environment": "linux"}
        items: list[Item] = [{"role": "user", "content": task}]
        transcript = list(items)
        for _ in range(max_turns):
            output = call_model(items, tool)
            transcript += output
            calls = [o for o in output if o.get("type") == "computer_call"]
            if not calls:
                break
            items = []
            for call in calls:
                # Safety checks the model raised are the user's to acknowledge; this sample acknowledges none.
                r = lease.openai({"call_id": call["call_id"], "action": call["action"]})
                items.append(dict(r))
            transcript += items
        return transcript
    finally:
        lease.release()


def openai_call_model(model: str = "computer-use-preview") -> CallModel:
    """`call_model` on the `openai` package (pip install openai; reads OPENAI_API_KEY)."""
    client: Any = importlib.import_module("openai").OpenAI()
    previous: list[str] = []

    def call(items: list[Item], tool: Item) -> list[Item]:
        r = client.responses.create(model=model, tools=[tool], input=items, truncation="auto", **({"previous_response_id": previous[-1]} if previous else {}))
        previous.append(r.id)
        return [o.model_dump() for o in r.output]

    return call


if __name__ == "__main__":
    with Computer.from_env() as cx:
        m = cx.create_machine({"name": "openai-agent"})
        try:
            for item in run(m, " ".join(sys.argv[1:]) or "Take a screenshot.", openai_call_model()):
                print(item.get("type") or item.get("role"))
        finally:
            m.delete()
