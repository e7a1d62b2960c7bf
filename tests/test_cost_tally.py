"""`CostTally` (the token totals `profile` and `collect` keep row by row) against a reference that reads each
row by the documented rules and sums the run afterwards: random rows with every shape the reader meets
(Responses and chat names, counts that are absent, null, negative, bools or floats, cached above the prompt,
`_ngrp_usage_missing`, grouped requests, no usage at all)."""

from __future__ import annotations

import random
from typing import Any

from ngrp_lib.artifacts.names import SHARED_PREFILL, USAGE_MISSING
from ngrp_lib.artifacts.usage import CostTally

_ODD = [None, -1, True, False, 2.0, "7", [3]]


def _count(rng: random.Random) -> Any:
    return rng.choice([rng.randint(0, 500), rng.randint(0, 500), rng.choice(_ODD)])


def _row(rng: random.Random) -> dict[str, Any]:
    names = rng.choice([("input_tokens", "output_tokens", "input_tokens_details"),
                        ("prompt_tokens", "completion_tokens", "prompt_tokens_details")])  # fmt: skip
    usage: dict[str, Any] = {}
    for name in names[:2]:
        if rng.random() < 0.85:
            usage[name] = _count(rng)
    if rng.random() < 0.7:
        details = {"cached_tokens": _count(rng)} if rng.random() < 0.9 else "none"
        usage[names[2]] = details
    if rng.random() < 0.1:  # both spellings: the Responses names win
        usage["prompt_tokens"] = _count(rng)
    response: Any = {"usage": usage} if rng.random() < 0.9 else rng.choice([{}, {"usage": None}, None, "x"])
    row: dict[str, Any] = {"_ng_task_index": rng.randint(0, 5), "response": response}
    if rng.random() < 0.2:
        row[USAGE_MISSING] = rng.choice([[], ["prompt_tokens"], ["completion_tokens"], ["prompt_tokens",
                                         "completion_tokens"], "prompt_tokens"])  # fmt: skip
    if rng.random() < 0.3:
        row[SHARED_PREFILL] = {"request": f"req-{rng.randint(0, 3)}", "rows": 2}
    elif rng.random() < 0.05:
        row[SHARED_PREFILL] = "not an object"
    return row


def _read(row: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(prompt, cached, output) of one row, by the rules written in artifacts/response.py's docstrings."""
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None, None
    prompt, output = usage.get("input_tokens"), usage.get("output_tokens")
    prompt = usage.get("prompt_tokens") if prompt is None else prompt
    output = usage.get("completion_tokens") if output is None else output
    missing = row.get(USAGE_MISSING)
    if isinstance(missing, list):
        prompt = None if "prompt_tokens" in missing else prompt
        output = None if "completion_tokens" in missing else output
    prompt = prompt if type(prompt) is int and prompt >= 0 else None
    output = output if type(output) is int and output >= 0 else None
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if not (type(cached) is int and cached >= 0 and (prompt is None or cached <= prompt)):
        cached = None
    return prompt, cached, output


def _total(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def test_the_tally_is_the_sum_of_each_rows_counts():
    rng = random.Random(37)
    for _ in range(300):
        rows = [_row(rng) for _ in range(rng.randint(0, 12))]
        reported = [rng.random() < 0.8 for _ in rows]
        tally = CostTally()
        for row, flag in zip(rows, reported, strict=True):
            tally.add(row, cached_reported=flag)
        read = [_read(row) for row in rows]
        seen = {row[SHARED_PREFILL]["request"] for row in rows if isinstance(row.get(SHARED_PREFILL), dict)}
        prompts = [p for p, _, _ in read]
        assert tally.rows == len(rows)
        # per rollout (INPUT_UNIT): every row's prompt and cached count, grouped or not
        assert tally.input_tokens == _total(prompts)
        assert tally.cached_tokens == _total([r[1] for r, f in zip(read, reported, strict=True) if f])
        assert tally.output_tokens == _total([o for _, _, o in read])
        assert tally.max_prompt_tokens == max([p for p in prompts if p is not None], default=None)
        assert tally.rows_without_usage == sum(p is None and o is None for p, _, o in read)
        assert tally.rows_alone == sum(not isinstance(row.get(SHARED_PREFILL), dict) for row in rows)
        assert tally.requests == tally.rows_alone + len(seen)
        assert tally.tasks == {row["_ng_task_index"] for row in rows}
