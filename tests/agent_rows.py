"""Agent rollouts in the shape NeMo Gym 0.7.0's simple agent writes them, built here (no model needed).

The shape follows Gym's own code and committed rows (responses_api_agents/simple_agent/app.py and
resources_servers/example_tool_call_multireward/data/example_rollouts.jsonl): `response.output` holds, per
model turn, a `reasoning` item (`summary` list), `function_call` items (`arguments` a JSON string,
`call_id`, `id` fc_..., `status` completed) each followed by its `function_call_output` (`call_id`,
`output` a string, `id` and `status` null), and the last turn an assistant `message` with one output_text
part. A multi-reward server adds `reward_components` beside `reward` and echoes each component as a field.
Invalid arguments get Gym's own tool output (`{"error": "Invalid tool call arguments: ..."}`).

Defects (one per rollout, by name) plant what the agent health checks look for:
bad_args, tool_error, loop, no_answer (stopped after a tool call's output: Gym's simple agent at its
max_steps, which the row does not say), cut (the same, with Gymnasium's `truncated: true`: the row says
the environment's limit cut it), submit (the agent answers through `submit_answer` and stops on its
output, as finance_agent_v2 and aviary do), overflow (the server said the context window is full),
missing_component (a component left out of reward_components), script (a `<script>` in turn 1's tool
name, argument key and tool output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

TOOL = {
    "name": "search_docs",
    "type": "function",
    "strict": True,
    "description": "Search the documentation.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "page": {"type": "integer"}},
        "required": ["query"],
        "additionalProperties": False,
    },
}
COMPONENTS = ("correctness", "format")
SCRIPT = "<script>window.__pwned = 1; document.title = 'pwned'</script>"


def _params(task: int) -> dict[str, Any]:
    return {
        "input": [
            {"role": "developer", "type": "message", "content": "Use search_docs, then answer in one line."},
            {"role": "user", "type": "message", "content": f"Which page documents feature {task}?"},
        ],
        "max_output_tokens": 256,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [TOOL],
        "parallel_tool_calls": True,
    }


def _reasoning(key: str, turn: int, text: str) -> dict[str, Any]:
    return {
        "id": f"rs_{key}_{turn}",
        "summary": [{"type": "summary_text", "text": text}],
        "type": "reasoning",
        "encrypted_content": None,
    }


def _call(key: str, turn: int, arguments: str, name: str = "search_docs") -> dict[str, Any]:
    return {
        "arguments": arguments,
        "call_id": f"chatcmpl-tool-{key}-{turn}",
        "name": name,
        "type": "function_call",
        "id": f"fc_{key}_{turn}",
        "status": "completed",
    }


def _output(key: str, turn: int, output: str) -> dict[str, Any]:
    call_id = f"chatcmpl-tool-{key}-{turn}"
    return {"call_id": call_id, "output": output, "type": "function_call_output", "id": None, "status": None}


def _message(key: str, text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{key}",
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": None}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


def tool_output(task: int, turn: int, chars: int) -> str:
    body = {"page": turn, "hits": [f"feature {task} is described on page {task + turn}"]}
    text = orjson.dumps(body).decode()
    if chars > len(text):
        body["excerpt"] = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[: chars - len(text) - 13]
        text = orjson.dumps(body).decode()
    return text


def _turns(task: int, rollout: int, turns: int, chars: int, defect: str | None) -> list[dict[str, Any]]:
    key = f"{task}_{rollout}"
    items: list[dict[str, Any]] = []
    for turn in range(1, turns):
        items.append(_reasoning(key, turn, f"look at page {turn}"))
        page = 1 if defect == "loop" else turn
        args = orjson.dumps({"query": f"feature {task}", "page": page}).decode()
        output = tool_output(task, turn, chars)
        if defect == "bad_args" and turn == 1:
            args = '{"query": "feature ' + str(task) + '", page: 1'
            output = orjson.dumps({"error": "Invalid tool call arguments: JSONDecodeError('x')"}).decode()
        elif defect == "tool_error" and turn == min(3, turns - 1):
            output = orjson.dumps({"detail": "page out of range"}).decode()
        name = "search_docs"
        if defect == "script" and turn == 1:  # run text in a tool name, an argument key and an output
            name, args = "search" + SCRIPT, orjson.dumps({SCRIPT: "x"}).decode()
            output = "found: " + SCRIPT
        items.append(_call(key, turn, args, name))
        items.append(_output(key, turn, output))
    if defect == "submit":
        args = orjson.dumps({"answer": f"page {task + 1}"}).decode()
        items += [_reasoning(key, turns, "submit it"), _call(key, turns, args, "submit_answer")]
        items.append(_output(key, turns, "True"))
    elif defect not in ("no_answer", "cut"):
        items.append(_reasoning(key, turns, "answer now"))
        items.append(_message(key, f"Feature {task} is on page {task + 1}."))
    return items


def agent_row(
    task: int,
    rollout: int,
    *,
    turns: int = 4,
    chars: int = 200,
    defect: str | None = None,
    components: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One rollout row: `turns` model turns (all but the last call the tool once), tool outputs of about
    `chars` characters."""
    key = f"{task}_{rollout}"
    output = _turns(task, rollout, max(turns, 1), chars, defect)
    if components is None:
        correct = (task + rollout) % 3 != 0
        components = {"correctness": 1.0 if correct else 0.0, "format": 1.0 if rollout % 2 == 0 else 0.0}
    components = dict(components)
    if defect == "missing_component":
        components.pop("format", None)
    response: dict[str, Any] = {
        "id": f"resp_{key}",
        "created_at": 1785485486.0,
        "error": None,
        "incomplete_details": None,
        "model": "policy",
        "object": "response",
        "output": output,
        "parallel_tool_calls": True,
        "status": "completed",
        "tool_choice": "auto",
        "tools": [TOOL],
        "usage": {
            "input_tokens": 300 * turns,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 40 * turns,
            "output_tokens_details": {"reasoning_tokens": 10 * turns},
            "total_tokens": 340 * turns,
        },
    }
    if defect == "overflow":
        response["status"] = "failed"
        response["error"] = {
            "code": "context_length_exceeded",
            "message": "This model's maximum context length is 2048 tokens. You requested 2100 tokens.",
        }
    flags = {"terminated": False, "truncated": True} if defect == "cut" else {}  # Gymnasium's
    return {
        **flags,
        "responses_create_params": _params(task),
        "response": response,
        "reward": sum(components.values()),
        "reward_components": components,
        **components,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": "docs_simple_agent"},
    }


def materialized(task: int, rollout: int) -> dict[str, Any]:
    return {
        "responses_create_params": _params(task),
        "expected_answer": str(task + 1),
        "agent_ref": {"name": "docs_simple_agent"},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


def write_run(
    folder: Path,
    *,
    tasks: int = 3,
    repeats: int = 4,
    turns: int = 4,
    chars: int = 200,
    defects: dict[tuple[int, int], str] | None = None,
    stem: str = "rollouts",
) -> Path:
    """rollouts.jsonl and its materialized inputs in `folder`; `defects` maps (task, rollout) to a defect."""
    folder.mkdir(parents=True, exist_ok=True)
    defects = defects or {}
    rows = [
        agent_row(t, r, turns=turns, chars=chars, defect=defects.get((t, r)))
        for t in range(tasks)
        for r in range(repeats)
    ]
    path = folder / f"{stem}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    inputs = folder / f"{stem}_materialized_inputs.jsonl"
    inputs.write_bytes(
        b"".join(orjson.dumps(materialized(t, r)) + b"\n" for t in range(tasks) for r in range(repeats))
    )
    return path
