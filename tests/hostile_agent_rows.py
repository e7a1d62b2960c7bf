"""An agent run with a markup payload in every field a page can show (issue 38, class 2): every string of
every row (tool names, argument keys and values, tool outputs, reasoning, messages, prompts, ids, the agent
name, reward component names, the expected answer) becomes a payload that would inject an element, run a
script or break out of an attribute, a `<script>` block or a comment if any page wrote it unescaped.

The same string always gets the same payload (call ids still pair, the agent name still routes), and the
fields that give a row its shape (`type`, `role`, `object`, `status`) are left as they are, and carry payloads
on two items added to each response (an item of an unknown type, a message of an unknown role)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from agent_rows import write_run

STRUCTURAL = {"type", "role", "object", "status"}
MARK = "<svg id=pwn"  # what every payload holds; in a page's source only ever escaped


def payload(n: int) -> str:
    return (
        f"p{n}\"'><svg id=pwn{n} onload=\"document.title='pwned'\"></svg><img id=pwn{n}i src=x "
        f"onerror=\"document.title='pwned'\"></script><script id=pwn{n}s>document.title='pwned'</script>"
        f"--><!--</textarea></title><iframe id=pwn{n}f></iframe>{{{{7*7}}}}]]>"
    )


class Planter:
    def __init__(self) -> None:
        self.payloads: dict[str, str] = {}

    def text(self, value: str) -> str:
        if value not in self.payloads:
            self.payloads[value] = payload(len(self.payloads))
        return self.payloads[value]

    def value(self, value: Any, key: str | None = None, every_key: bool = False) -> Any:
        if isinstance(value, str):
            if key in STRUCTURAL and not every_key:
                return value
            if key in (
                "arguments",
                "output",
            ):  # a JSON string (arguments, a tool output): keys and values too
                try:
                    return orjson.dumps(self.value(orjson.loads(value), every_key=True)).decode()
                except orjson.JSONDecodeError:
                    return self.text(value)
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v, every_key=every_key) for v in value]
        if isinstance(value, dict):
            return {self._key(k, every_key): self.value(v, k, every_key) for k, v in value.items()}
        return value

    def _key(self, key: str, every_key: bool) -> str:
        """Object keys a page shows as text (argument keys, component names, verifier fields) get a
        payload; the keys readers look up by name stay."""
        if not every_key and (key.startswith("_ng_") or key in _ROW_KEYS):
            return key
        return self.text(key)


# keys the readers look up by name: kept, so the row still reads as an agent rollout
_ROW_KEYS = {
    "responses_create_params", "response", "reward", "reward_components", "agent_ref", "name", "input",
    "content", "output", "summary", "text", "arguments", "call_id", "id", "usage", "input_tokens",
    "output_tokens", "total_tokens", "input_tokens_details", "output_tokens_details", "cached_tokens",
    "reasoning_tokens", "error", "incomplete_details", "model", "tools", "tool_choice", "max_output_tokens",
    "temperature", "parallel_tool_calls", "created_at", "expected_answer", "annotations", "parameters",
    "properties", "required", "additionalProperties", "strict", "description", "code", "message",
    "correctness", "format", "query", "page", "type", "role", "object", "status",
}  # fmt: skip


def write_hostile_run(folder: Path, tasks: int = 3, repeats: int = 2) -> tuple[Path, Planter]:
    """A clean agent run rewritten with a payload in every field; the rollouts path and the planter."""
    rollouts = write_run(folder, tasks=tasks, repeats=repeats, turns=3, chars=120)
    planter = Planter()
    for path in (rollouts, rollouts.with_name("rollouts_materialized_inputs.jsonl")):
        rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        planted = []
        for row in rows:
            new = planter.value(row)
            if "reward_components" in row:  # component names: payloads too, echoed as fields as Gym does
                new["reward_components"] = {planter.text(k): v for k, v in row["reward_components"].items()}
                for name in row["reward_components"]:
                    new[planter.text(name)] = new.pop(name)
            new[planter.text("verifier_note")] = planter.text("a verifier field")  # an extra field, named
            if "response" in new:  # the shape fields too, on items a reader does not know
                new["response"]["output"][-1:-1] = [
                    {"type": planter.text("odd_item"), "role": planter.text("odd_role"),
                     "status": planter.text("odd_status"), "id": planter.text("odd_id")},
                    {"type": "message", "role": planter.text("odd_role"), "status": "completed",
                     "content": [{"type": planter.text("odd_part"), "text": planter.text("odd text")}]},
                ]  # fmt: skip
            planted.append(new)
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in planted))
    return rollouts, planter
