"""One request per task group: the pending repeats of a task that send the same request go as one chat
request with `n` choices: one request, one prompt to template and tokenize, for all of them.

Which rows share a request (`Grouper`): consecutive pending rows of one task whose rows are equal except
for their identity keys (`_ng_rollout_index`, `_ng_rollout_id`), at most `GROUP_CAP` of them. The
materialized file keeps a task's repeats together ("aabbcc"), so this needs no buffering; a resume or a
retry groups only the repeats still missing, as a smaller group.

A row is sent alone (one request per rollout), and the reason is said once, when:
- its request carries a `seed` (top level or in `metadata.extra_body`): vLLM's CPU engine dies on `seed`
  with `n > 1` ("CPU Generator does not use offset"), so a seeded request never has `n > 1`;
- it samples greedily (temperature below 1e-5): vLLM refuses `n > 1` then (HTTP 400, "n must be 1
  when using greedy sampling");
- the rows of its task differ (per-repeat seeds, other params) or are not next to each other
  (`--interleave`);
- the whole run cannot group (`whole_run_fallback`): `--one-request-per-rollout`, the Responses API
  (it has no `n`: vLLM's /v1/responses answers one output whatever `n` says), or Gym `/run` mode (one
  `/run` per row).

The rows of a grouped request carry `SHARED_PREFILL` = {"request": <id>, "rows": n}; each row's usage
holds the request's `prompt_tokens` (the prompt that rollout saw, as an ungrouped row would) and its own
choice's completion tokens, counted from the choice's token ids (vLLM's `return_token_ids`). Token totals
count the prompt once per row (`usage.INPUT_UNIT`): vLLM prefills it for each of the n sequences, so
grouping saves requests, templating and tokenization, not prefill (despite the key's older name).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..artifacts.names import RCP, ROLLOUT_KEY, TASK_KEY
from .convert import ConversionError, extra_body

GROUP_CAP = 16  # choices per request at most: a task with more pending repeats sends several requests
IDENTITY_ONLY = (ROLLOUT_KEY, "_ng_rollout_id")  # what may differ between rows of one request

SEEDED = "rows with a seed (seed with n > 1 crashes vLLM's CPU engine)"
DIFFER = "tasks whose rows differ (other params per repeat)"
APART = "tasks whose repeats are not next to each other (--interleave)"
GREEDY = "greedy rows (temperature 0: vLLM refuses n > 1 with greedy sampling)"
GREEDY_BELOW = 1e-5  # vLLM's own threshold for greedy sampling (_SAMPLING_EPS)

Item = tuple[dict, int]  # a pending row and its attempt index


def whole_run_fallback(*, enabled: bool, api: str, gym: bool) -> str | None:
    """Why this run sends one request per rollout for every row; None when it groups."""
    if gym:
        return "Gym /run mode sends one /run per row"
    if not enabled:
        return "--one-request-per-rollout"
    if api != "chat":
        return "the Responses API has no n (one output per request)"
    return None


def _sent(params: Any, name: str) -> Any:
    """The value of `name` the chat request will carry (metadata.extra_body wins, as `chat_request` does)."""
    if not isinstance(params, dict):
        return None
    try:
        extras = extra_body(params)
    except ConversionError:
        extras = {}  # the request fails on its own, alone
    return extras.get(name, params.get(name))


def has_seed(params: Any) -> bool:
    return _sent(params, "seed") is not None


def is_greedy(params: Any) -> bool:
    """Temperature (about) 0: vLLM answers n > 1 with 400 "n must be 1 when using greedy sampling"."""
    temperature = _sent(params, "temperature")
    number = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
    return number and temperature < GREEDY_BELOW


def alone_reason(params: Any) -> str | None:
    """Why a row's request must go alone whatever its task's other rows are; None when it may share."""
    if has_seed(params):
        return SEEDED
    if is_greedy(params):
        return GREEDY
    return None


def signature(row: dict) -> bytes:
    """The row without its per-repeat identity: rows with equal signatures send the same request."""
    return orjson.dumps({k: v for k, v in row.items() if k not in IDENTITY_ONLY}, option=orjson.OPT_SORT_KEYS)


@dataclass
class Grouper:
    """Cuts a stream of pending rows into request groups and remembers why rows went alone."""

    log: Callable[[str], None] | None = None  # told each reason once, the first time it applies
    cap: int = GROUP_CAP
    fallbacks: dict[str, int] = field(default_factory=dict)  # reason -> rows sent alone for it
    _seen_tasks: set = field(default_factory=set)
    _last_task: Any = None

    def groups(self, items: Iterator[Item]) -> Iterator[list[Item]]:
        group: list[Item] = []
        group_sig: bytes | None = None
        for item in items:
            row = item[0]
            sig = signature(row)
            if group and sig == group_sig and len(group) < self.cap:
                group.append(item)
                continue
            if group:
                yield self._close(group, next_row=row, next_sig=sig, group_sig=group_sig)
            group, group_sig = [item], sig
            if alone_reason(row.get(RCP)) is not None:
                yield self._close(group, next_row=None, next_sig=None, group_sig=None)
                group, group_sig = [], None
        if group:
            yield self._close(group, next_row=None, next_sig=None, group_sig=group_sig)

    def batch(self, items: list[Item]) -> list[list[Item]]:
        """The groups of rows added in one piece (a task's next round): its rows are next to each other by
        construction, so a lone one is never said to be apart (the reasons counted are this run's)."""
        fresh = Grouper(log=self.log, cap=self.cap, fallbacks=self.fallbacks)
        return list(fresh.groups(iter(items)))

    def _close(
        self, group: list[Item], *, next_row: dict | None, next_sig: bytes | None, group_sig: bytes | None
    ) -> list[Item]:
        """Note why a lone row could not share a request, then hand the group on."""
        task = group[0][0].get(TASK_KEY)
        if len(group) == 1:
            reason = alone_reason(group[0][0].get(RCP))
            if (
                reason is None
                and next_row is not None
                and next_row.get(TASK_KEY) == task
                and next_sig != group_sig
            ):
                reason = DIFFER
            if reason is None and task in self._seen_tasks and task != self._last_task:
                reason = APART
            if reason is not None:
                if reason not in self.fallbacks and self.log is not None:
                    self.log(f"one request per rollout for {reason}")
                self.fallbacks[reason] = self.fallbacks.get(reason, 0) + 1
        self._seen_tasks.add(task)
        self._last_task = task
        return group


def split_choices(answer: dict, n: int) -> list[dict]:
    """One single-choice chat completion per choice of an `n`-choice answer, in choice-index order,
    each with its own usage: the request's prompt tokens, the choice's own completion tokens (from its
    token ids; absent when the server returned none, so the row names the count as missing)."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or len(choices) != n:
        got = len(choices) if isinstance(choices, list) else "no"
        raise ConversionError(f"asked for {n} choices, the server answered {got}")
    if not all(isinstance(c, dict) for c in choices):
        raise ConversionError("a choice is not an object: a broken reply")
    ordered = sorted(choices, key=lambda c: c.get("index") if isinstance(c.get("index"), int) else 0)
    raw_usage = answer.get("usage")
    usage: dict = raw_usage if isinstance(raw_usage, dict) else {}
    out = []
    for i, choice in enumerate(ordered):
        ids = choice.get("token_ids")
        own = {
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": len(ids) if isinstance(ids, list) else None,
        }
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            own["prompt_tokens_details"] = details
        out.append({**answer, "id": f"{answer.get('id', '')}-{i}", "choices": [choice], "usage": own})
    return out
