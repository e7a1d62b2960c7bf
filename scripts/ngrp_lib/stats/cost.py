"""What a profile cost and what it bought: tokens per rollout, per success and per GRPO-informative task.

The token totals and the sampling come from the run's profile summary (`<stem>_profile_summary.json`
beside `<stem>_reward_profiling.jsonl`, written by `ngrp profile`), which sums every rollout row's usage
(a grouped request's prompt once). From them:
- tokens per rollout = (input + output tokens) / rollout rows;
- tokens per success = (input + output tokens) / successful rollouts (reward counted as a pass);
- one request per rollout (grouped runs): a request per rollout and every row's prompt (a grouped
  request's prompt once per rollout), from the summary's `tokens.one_request_per_rollout`;
- tokens per informative task at group size G = G x tokens per rollout / P(informative at G): what it
  costs, on average, to draw one group of G rollouts for a task whose group has both a pass and a fail
  (a GRPO group with a non-zero advantage), with P from `stats` on this run.
A run whose rows carry no usage says so ("not reported"); no figure is ever a 0 standing for unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..artifacts import jsonl
from ..artifacts.names import PROFILE_SUMMARY_SUFFIX, REWARD_PROFILE_SUFFIX
from ..artifacts.sampling import sampling_lines
from ..errors import InputError

NOT_REPORTED = "not reported"


def summary_beside(profile: Path | str) -> Path | None:
    path = Path(profile)
    suffix = REWARD_PROFILE_SUFFIX + ".jsonl"
    if not path.name.endswith(suffix):
        return None
    found = path.with_name(path.name[: -len(suffix)] + PROFILE_SUMMARY_SUFFIX + ".json")
    return found if found.is_file() else None


def run_cost(
    profile: Path | str, successes: int | None, informative: Sequence[tuple[int, float | None]]
) -> dict:
    """The cost block of `stats --json` (`cost`); `informative`: (group size, P(informative)) pairs."""
    source = summary_beside(profile)
    summary = _read(source)
    tokens = summary.get("tokens") if isinstance(summary, dict) else None
    out: dict[str, Any] = {
        "summary": None if source is None else str(source),
        "tokens": tokens if isinstance(tokens, dict) else None,
        "sampling": summary.get("sampling") if isinstance(summary, dict) else None,
        "tokens_per_rollout": None,
        "tokens_per_success": None,
        "tokens_per_informative_task": [],
        "one_request_per_rollout": None,
    }
    if not isinstance(tokens, dict):
        return out
    single = tokens.get("one_request_per_rollout")
    out["one_request_per_rollout"] = single if isinstance(single, dict) else None
    counts = [tokens.get("input_tokens"), tokens.get("output_tokens")]
    known = [c for c in counts if isinstance(c, int)]
    rows = tokens.get("rows")
    if not known or not isinstance(rows, int) or rows <= 0:
        return out
    total = sum(known)
    per_rollout = total / rows
    out["tokens_per_rollout"] = round(per_rollout, 1)
    out["tokens_per_success"] = round(total / successes, 1) if successes else None
    out["tokens_per_informative_task"] = [
        {"group_size": g, "tokens": round(g * per_rollout / p, 1) if p and p == p else None}
        for g, p in informative
    ]
    return out


def _read(source: Path | None) -> Any:
    if source is None:
        return None
    try:
        return jsonl.read_json(source)
    except (InputError, OSError):
        return None


def cost_lines(cost: dict | None) -> list[str]:
    """The text lines of `stats` (and the report's section): sampling used, then what the run cost."""
    if cost is None:
        return []
    lines = [f"sampling: {line}" for line in sampling_lines(cost.get("sampling"))]
    tokens = cost.get("tokens")
    if not isinstance(tokens, dict):
        where = "no profile summary beside the profile" if cost.get("summary") is None else "an older summary"
        return [*lines, f"cost: {NOT_REPORTED} ({where}: run `ngrp profile` again to get token totals)"]
    if cost.get("tokens_per_rollout") is None:
        return [*lines, f"cost: {NOT_REPORTED} (the rows carry no token usage)"]
    text = f"cost (input + output tokens): {_n(cost['tokens_per_rollout'])} per rollout"
    text += f", {_n(cost['tokens_per_success'])} per success"
    per_task = [
        f"{_n(entry['tokens'])} at G={entry['group_size']}" for entry in cost["tokens_per_informative_task"]
    ]
    if per_task:
        text += "; per GRPO-informative task " + ", ".join(per_task)
    inputs, outputs = tokens.get("input_tokens"), tokens.get("output_tokens")
    text += f" (input {_n(inputs)}, output {_n(outputs)} over {tokens.get('rows')} rollouts)"
    return [*lines, text, *_single_lines(cost.get("one_request_per_rollout"), tokens)]


def _single_lines(single: Any, tokens: dict) -> list[str]:
    """What one request per rollout would have cost, when the run grouped its repeats (else nothing)."""
    if not isinstance(single, dict) or not single.get("extra_requests"):
        return []
    extra = single.get("extra_input_tokens")
    return [
        f"one request per rollout would have sent {_n(single['requests'])} requests (this run: "
        f"{_n(tokens.get('requests'))}) and input {_n(single.get('input_tokens'))} tokens"
        + ("" if extra is None else f" ({_n(extra)} more prefill, less what the prefix cache would serve)")
        + ", the same output"
    ]


def _n(value: Any) -> str:
    """A count or rate; `-` where there is none (no success, no informative group), never a 0."""
    return "-" if value is None else f"{value:,.0f}"
