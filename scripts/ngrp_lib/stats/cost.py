"""What a profile cost and what it bought: tokens per rollout, per success and per GRPO-informative task.

The token totals and the sampling come from the run's profile summary (`<stem>_profile_summary.json`
beside `<stem>_reward_profiling.jsonl`, written by `ngrp profile`), which sums every rollout row's usage
(input per rollout: a grouped request's prompt once per rollout, as the server prefills it; a summary
written before `tokens.input_unit` counted it once per request, and is read in the unit through its
`one_request_per_rollout.input_tokens`, every row's prompt: `in_unit`). From them:
- tokens per rollout = (input + output tokens) / the rows that report usage (a row without usage is "not
  reported", never 0 tokens: counting it as 0 understated the figure by the share of such rows);
- tokens per success = tokens per rollout x rollout rows / successful rollouts (reward counted as a pass);
- one request per rollout (grouped runs): a request per rollout, the same tokens (the server prefills
  every rollout's prompt either way), from the summary's `tokens.one_request_per_rollout`;
- tokens per informative task at group size G = G x tokens per rollout / P(informative at G): what it
  costs, on average, to draw one group of G rollouts for a task whose group has both a pass and a fail
  (a GRPO group with a non-zero advantage), with P from `stats` on this run. In an adaptive run P stands
  on the first round (`stats.rows`), so the tokens per rollout it is divided into are the first round's
  too (`first_round`, from the rollouts file); later rounds went to other tasks, with other lengths.
  P(informative at G) needs G repeats of a task, so it is undefined at a G above the first round;
- an adaptive run's tokens per kept task = every rollout's tokens (every round) / the tasks its rule kept
  by its decisions on every repeat (`learnable`: settled mixed, the GRPO-informative tasks curriculum
  --learnable-for G keeps; `band`: decided inside): what the triage spent per task it found. It is the
  adaptive run's form of the figure above: on a fixed-N run at G = N, G x tokens per rollout / mean
  P(informative at N) is the run's tokens over its mixed tasks, since P(informative at N) of a task is
  1 when its N repeats mixed and 0 when not.
A run whose rows carry no usage says so ("not reported"); no figure is ever a 0 standing for unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..artifacts import jsonl
from ..artifacts.names import PROFILE_SUMMARY_SUFFIX, REWARD_PROFILE_SUFFIX
from ..artifacts.prefix_cache import prefix_cache_line, prefix_cache_of
from ..artifacts.sampling import sampling_lines
from ..errors import InputError

NOT_REPORTED = "not reported"
FIRST_ROUND = "the first round's rows (as P(informative))"  # informative_tokens_from, on an adaptive run


def summary_beside(profile: Path | str) -> Path | None:
    path = Path(profile)
    suffix = REWARD_PROFILE_SUFFIX + ".jsonl"
    if not path.name.endswith(suffix):
        return None
    found = path.with_name(path.name[: -len(suffix)] + PROFILE_SUMMARY_SUFFIX + ".json")
    return found if found.is_file() else None


def run_cost(
    profile: Path | str,
    successes: int | None,
    informative: Sequence[tuple[int, float | None]],
    first_round: dict | None = None,
    rollouts: Path | str | None = None,
    kept: dict | None = None,
) -> dict:
    """The cost block of `stats --json` (`cost`); `informative`: (group size, P(informative)) pairs;
    `first_round`: an adaptive run's first-round token totals (`first_round_tokens`), which P stands on;
    `rollouts`: whose manifest gives the prefix cache (default: the rollouts the profile is named after);
    `kept`: an adaptive run's kept tasks by its decisions (`AdaptiveRun.kept`), for tokens per kept task."""
    source = summary_beside(profile)
    summary = _read(source)
    tokens = in_unit(summary.get("tokens")) if isinstance(summary, dict) else None
    out: dict[str, Any] = {
        "summary": None if source is None else str(source),
        "tokens": tokens if isinstance(tokens, dict) else None,
        "sampling": summary.get("sampling") if isinstance(summary, dict) else None,
        "tokens_per_rollout": None,
        "rollouts_with_usage": None,
        "tokens_per_success": None,
        "tokens_per_informative_task": [],
        "informative_tokens_from": None,
        "one_request_per_rollout": None,
        "tokens_per_kept_task": None,
        "prefix_cache": prefix_cache_of(rollouts or _rollouts_of(profile)),
    }
    if not isinstance(tokens, dict):
        return out
    single = tokens.get("one_request_per_rollout")
    out["one_request_per_rollout"] = single if isinstance(single, dict) else None
    per_rollout, reporting = _per_rollout(tokens)
    rows = tokens.get("rows")
    out["rollouts_with_usage"] = reporting
    if per_rollout is None or not isinstance(rows, int):
        return out
    out["tokens_per_rollout"] = round(per_rollout, 1)
    out["tokens_per_success"] = round(per_rollout * rows / successes, 1) if successes else None
    if kept is not None:
        n = kept["n_tasks"]
        out["tokens_per_kept_task"] = {
            "tokens": round(per_rollout * rows / n, 1) if n else None,
            "n_tasks": n,
            "decision": kept["decision"],
            "tokens_total": round(per_rollout * rows),
            "basis": "the adaptive run's decisions (every repeat): every rollout's tokens over the tasks "
            f"decided {kept['decision']}",
        }
    per_group_rollout: float | None = per_rollout
    rows_used = "every rollout row"
    if first_round is not None:
        per_group_rollout, _ = _per_rollout(first_round)
        rows_used = FIRST_ROUND
    out["informative_tokens_from"] = rows_used
    out["tokens_per_informative_task"] = [
        {
            "group_size": g,
            "tokens": round(g * per_group_rollout / p, 1) if p and p == p and per_group_rollout else None,
        }
        for g, p in informative
    ]
    return out


def in_unit(tokens: Any) -> Any:
    """A summary's `tokens` with input per rollout (`usage.INPUT_UNIT`). An older summary counted a
    grouped request's prompt once: its input becomes `one_request_per_rollout.input_tokens` (every row's
    prompt), its cached count (per request) null, unless it grouped nothing (the same in both units);
    its `one_request_per_rollout` loses `extra_input_tokens` (no prefill is saved)."""
    from ..artifacts.usage import INPUT_UNIT, older_input

    if not isinstance(tokens, dict) or not older_input(tokens):
        return tokens
    out = {**tokens, "input_unit": INPUT_UNIT}
    single = tokens.get("one_request_per_rollout")
    if isinstance(single, dict):
        extra = single.get("extra_input_tokens")
        out["one_request_per_rollout"] = {k: v for k, v in single.items() if k != "extra_input_tokens"}
        if extra != 0 and isinstance(single.get("input_tokens"), int):
            out.update(input_tokens=single["input_tokens"], cached_tokens=None)
    return out


def _rollouts_of(profile: Path | str) -> Path:
    """`r_reward_profiling.jsonl` -> `r.jsonl` (the rollouts it was made from, by collect's names)."""
    path = Path(profile)
    suffix = REWARD_PROFILE_SUFFIX + ".jsonl"
    stem = path.name[: -len(suffix)] if path.name.endswith(suffix) else path.stem
    return path.with_name(stem + ".jsonl")


def _per_rollout(tokens: dict) -> tuple[float | None, int | None]:
    """(input + output tokens per row that reports usage, how many rows do); None where not reported."""
    known = [c for c in (tokens.get("input_tokens"), tokens.get("output_tokens")) if type(c) is int]
    rows, without = tokens.get("rows"), tokens.get("rows_without_usage", 0)
    if type(rows) is not int or type(without) is not int or not 0 <= without <= rows:
        return None, None
    reporting = rows - without
    if not known or reporting <= 0:
        return None, reporting
    return sum(known) / reporting, reporting


def first_round_tokens(rollouts: Path | str, first_round: int) -> dict:
    """Token totals over an adaptive run's counted first-round rows (`stats.rows`: no masked row)."""
    from ..artifacts.usage import CostTally
    from .rows import COUNTED, RowRule

    rule, tally = RowRule(first_round), CostTally()
    for row in jsonl.iter_rows(Path(rollouts)):
        if rule.status(row.data) == COUNTED:
            tally.add(row.data)
    return {"rows": tally.rows, **tally.to_json()}


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
    cache = prefix_cache_line(cost.get("prefix_cache") or [])
    return [*_cost_lines(cost, lines), *([cache] if cache else [])]


def _cost_lines(cost: dict, lines: list[str]) -> list[str]:
    tokens = cost.get("tokens")
    if not isinstance(tokens, dict):
        where = "no profile summary beside the profile" if cost.get("summary") is None else "an older summary"
        return [*lines, f"cost: {NOT_REPORTED} ({where}: run `ngrp profile` again to get token totals)"]
    if cost.get("tokens_per_rollout") is None:
        return [*lines, f"cost: {NOT_REPORTED} (the rows carry no token usage)"]
    text = f"cost (input + output tokens): {_n(cost['tokens_per_rollout'])} per rollout"
    text += f", {_n(cost['tokens_per_success'])} per success"
    entries = cost["tokens_per_informative_task"]
    kept = cost.get("tokens_per_kept_task")
    if kept is not None:  # an adaptive run: its decisions give the figure its first round cannot
        text += "; " + _kept_text(kept)
    if cost.get("informative_tokens_from") == FIRST_ROUND:  # P(informative at G) needs G first-round repeats
        known = [f"{_n(e['tokens'])} at G={e['group_size']}" for e in entries if e["tokens"] is not None]
        unknown = [str(e["group_size"]) for e in entries if e["tokens"] is None]
        if known:
            text += "; per GRPO-informative task from the first round's P(informative) " + ", ".join(known)
        if unknown and kept is None:
            text += f"; per GRPO-informative task n/a at G={', '.join(unknown)} (fewer first-round repeats)"
    elif entries:
        text += "; per GRPO-informative task " + ", ".join(
            f"{_n(e['tokens'])} at G={e['group_size']}" for e in entries
        )
    inputs, outputs = tokens.get("input_tokens"), tokens.get("output_tokens")
    reporting, rows = cost.get("rollouts_with_usage"), tokens.get("rows")
    over = (
        f"{rows} rollouts"
        if reporting in (None, rows)
        else f"the {reporting} of {rows} rollouts reporting usage"
    )
    text += f" (input {_n(inputs)}, each rollout's prompt; output {_n(outputs)}; over {over})"
    return [*lines, text, *_single_lines(cost.get("one_request_per_rollout"), tokens)]


KEPT_WORDS = {
    "mixed": "GRPO-informative task (settled mixed)",
    "inside": "task kept (decided inside the band)",
}


def _kept_text(kept: dict) -> str:
    """`per GRPO-informative task (settled mixed) by the adaptive run's decisions 288 (6,618 tokens over 23
    tasks)`: every round's tokens over the tasks the rule kept."""
    what = KEPT_WORDS.get(kept["decision"], f"task decided {kept['decision']}")
    return (
        f"per {what} by the adaptive run's decisions {_n(kept['tokens'])} ({_n(kept['tokens_total'])} "
        f"tokens, every round, over {kept['n_tasks']} tasks)"
    )


def _single_lines(single: Any, tokens: dict) -> list[str]:
    """What one request per rollout would have sent, when the run grouped its repeats (else nothing): more
    requests, the same tokens."""
    from ..artifacts.usage import GROUPING_SAVES

    if not isinstance(single, dict) or not single.get("extra_requests"):
        return []
    return [
        f"one request per rollout would have sent {_n(single['requests'])} requests (this run: "
        f"{_n(tokens.get('requests'))}) and the same tokens: {GROUPING_SAVES}"
    ]


def _n(value: Any) -> str:
    """A count or rate; `-` where there is none (no success, no informative group), never a 0."""
    return "-" if value is None else f"{value:,.0f}"
