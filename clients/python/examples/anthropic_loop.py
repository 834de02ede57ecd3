"""An agent loop for Anthropic's computer-use tool, carried out by POST /v1/machines/{id}/tools/anthropic.

The model call stays with your own client: `call_model(messages, tool)` sends the conversation (and the
tool definition) to the model and answers the assistant's content blocks as dicts. With the `anthropic`
package that is `anthropic_call_model` below; any other client (or a scripted one in tests) works the same.

    COMPUTER_API_KEY=sk_... ANTHROPIC_API_KEY=... python3 examples/anthropic_loop.py "Open a terminal"
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any, Final

from computer import Computer, Lease, Machine

TOOL: Final = "computer_20250124"
Block = dict[str, Any]
CallModel = Callable[[list[Block], Block], list[Block]]


def tool_definition(lease: Lease) -> Block:
    """The tool as the model is told about it, sized as the endpoint scales (a first screenshot says)."""
    shot = lease.anthropic({"tool": TOOL, "input": {"action": "screenshot"}})
    return {"type": TOOL, "name": "computer", "display_width_px": shot["display_width_px"], "display_height_px": shot["display_height_px"]}


def run(machine: Machine, task: str, call_model: CallModel, *, max_turns: int = 30) -> list[Block]:
    """Runs the loop until the model answers without a tool call (or `max_turns`); answers the conversation."""
    lease = machine.control()  # an agent session holding the input lease, renewed in the background
    try:
        tool = tool_definition(lease)
        messages: list[Block] = [{"role": "user", "content": task}]
        for _ in range(max_turns):
            content = call_model(messages, tool)
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b.get("type") == "tool_use"]
            if not uses:
                break
            results: list[Block] = []
            for use in uses:
                r = lease.anthropic({"tool": TOOL, "display_width_px": tool["display_width_px"], "display_height_px": tool["display_height_px"], "input": use["input"]})
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": r["content"], "is_error": r["is_error"]})
            messages.append({"role": "user", "content": results})
        return messages
    finally:
        lease.release()


def anthropic_call_model(model: str = "claude-sonnet-4-5") -> CallModel:
    """`call_model` on the `anthropic` package (pip install anthropic; reads ANTHROPIC_API_KEY)."""
    client: Any = importlib.import_module("anthropic").Anthropic()

    def call(messages: list[Block], tool: Block) -> list[Block]:
        r = client.beta.messages.create(model=model, max_tokens=4096, tools=[tool], messages=messages, betas=["computer-use-2025-01-24"])
        return [b.model_dump() for b in r.content]

    return call


if __name__ == "__main__":
    with Computer.from_env() as cx:
        m = cx.create_machine({"name": "anthropic-agent"})
        try:
            for message in run(m, " ".join(sys.argv[1:]) or "Take a screenshot and describe the desktop.", anthropic_call_model()):
                print(message["role"], message["content"] if isinstance(message["content"], str) else [b.get("type") for b in message["content"]])
        finally:
            m.delete()
