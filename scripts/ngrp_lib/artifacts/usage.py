"""Token totals of rollout rows: input / cached / output tokens, read from each row's `response.usage`.

Input tokens are counted per rollout (`INPUT_UNIT`): each row's own prompt, a grouped request's (n
choices, `SHARED_PREFILL`) once for each of its rows. That is what the server computes and counts: vLLM
fans a request with n choices out into n sequences and prefills (and counts in
`vllm:prompt_tokens_total`) the prompt for each, its prefix cache serving repeats of a prompt alike
whether they come as n choices or as requests of their own (measured on vLLM 0.32 CPU: a 430-token
prompt, n=8: prompt tokens +3,440, prefix-cache hits 2,688, the same as 8 separate requests). It is also
what Gym's per-rollout rows record. Summaries written before `input_unit` counted a grouped request's
prompt once ("per request": `older_input`). A count no row reported stays None ("not reported"), never 0;
`rows_without_usage` says how many rows gave no count at all. `collect` sums what it writes, `profile`
what it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .names import SHARED_PREFILL, USAGE_MISSING
from .response import input_cached_output_tokens

# how `input_tokens` (and `cached_tokens`) are counted in every token total ngrp writes: each rollout's
# prompt, a grouped request's once per rollout (per sequence, as the server prefills and counts it); a
# block without the key is older and counted a grouped request's prompt once
INPUT_UNIT = "per_rollout"
# what grouping a task's repeats into one request with n choices saves, and what it does not
GROUPING_SAVES = (
    "a grouped request is one HTTP request, one chat template and one tokenization for its n rollouts;"
    " the server prefills every rollout's prompt either way, its prefix cache serving repeats of a prompt"
    " alike, grouped or not"
)


def usage_counts(row: dict) -> tuple[int | None, int | None, int | None]:
    """(input, cached, output) tokens of a rollout row's response, None where not reported (a count the
    row names under `_ngrp_usage_missing` was stored as 0 for Gym's profiler: not a count)."""
    return input_cached_output_tokens(row.get("response"), row.get(USAGE_MISSING))


@dataclass
class CostTally:
    """Running token totals over the rows of a run (or of a rollouts file)."""

    rows: int = 0
    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    rows_without_usage: int = 0
    # rows read back from a file: a chat conversion stores cached_tokens 0 where the server said nothing,
    # so a total of 0 cannot be told from "not reported", and is reported as None
    zero_cached_unknown: bool = False
    _requests: set = field(default_factory=set)  # the grouped requests behind the rows
    max_prompt_tokens: int | None = None  # the longest prompt reported (a cache block must fit in it)
    tasks: set = field(default_factory=set)  # tasks with a row counted
    rows_alone: int = 0  # rows that came from a request of their own (no shared prefill)

    def add(self, row: dict, *, cached_reported: bool = True) -> None:
        """One rollout row; `cached_reported` False when the row's cached count (0) is a conversion's
        filler, not the server's."""
        self.rows += 1
        # usage_counts(row), without the extra call
        prompt, cached, output = input_cached_output_tokens(row.get("response"), row.get(USAGE_MISSING))
        shared = row.get(SHARED_PREFILL)
        if isinstance(shared, dict):
            self._requests.add(shared.get("request"))
        else:
            self.rows_alone += 1
        self.tasks.add(row.get("_ng_task_index"))
        # per rollout: a grouped request's prompt once per row. Each sum stays None until a row reports its
        # count; written out, not through helpers, as `profile` adds every rollout it reads here
        if prompt is not None:
            total = self.input_tokens
            self.input_tokens = prompt if total is None else total + prompt
            top = self.max_prompt_tokens
            if top is None or prompt > top:
                self.max_prompt_tokens = prompt
        elif output is None:
            self.rows_without_usage += 1
        if cached is not None and cached_reported:
            total = self.cached_tokens
            self.cached_tokens = cached if total is None else total + cached
        if output is not None:
            total = self.output_tokens
            self.output_tokens = output if total is None else total + output

    @property
    def requests(self) -> int:
        """Requests behind the rows: one per grouped request id, one per row of its own."""
        return len(self._requests) + self.rows_alone

    def one_request_per_rollout(self) -> dict[str, Any]:
        """These rows sent one request each: more requests (each templated, tokenized and scheduled on
        its own), the same input and output tokens (the server prefills every rollout's prompt either
        way; its prefix cache decides how much of it is recomputed, alike for both)."""
        return {
            "requests": self.rows,
            "extra_requests": self.rows - self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "input_unit": INPUT_UNIT,
            "input_tokens": self.input_tokens,
            "cached_tokens": None
            if self.zero_cached_unknown and not self.cached_tokens
            else self.cached_tokens,
            "output_tokens": self.output_tokens,
            "rows_without_usage": self.rows_without_usage,
        }


def per_second(value: int | None, seconds: float) -> float | None:
    return None if value is None or seconds <= 0 else round(value / seconds, 1)


def tokens_text(value: int | None) -> str:
    return "not reported" if value is None else f"{value:,}"


def older_input(block: dict[str, Any]) -> bool:
    """Whether a token block predates `input_unit`: its input counted a grouped request's prompt once (per
    request), so it is not in the unit of the others (`INPUT_UNIT`)."""
    return block.get("input_unit") != INPUT_UNIT
