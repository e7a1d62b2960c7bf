"""Which rollouts and tasks to show: one selection for `ngrp inspect`, `ngrp view` and the report's explorer.

A selection has three kinds of test, applied in this order:
- rollout tests on the facts (vectorised): task indices, agent, passed / failed, reward range, truncated;
- task tests on the task table: task indices, agent, band (all-fail, mixed, all-pass);
- row tests that need the text: `grep` (a regex over the response's final text and reasoning, and over
  the prompt too with `grep_prompt`) and `where` (FIELD=VALUE on the task's materialized input row, or on
  the rollout row when there are no inputs).
A task is listed when it passes the task tests and has at least one rollout that passes the others.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import UsageError
from .digest import RolloutDigest
from .facts import TRUNCATED, Facts
from .tasks import TaskTable

_JSON_VERBATIM = re.compile(r"[ !#-\[\]-~]+")  # printable ASCII but " and \\
_REGEX_SPECIAL = frozenset(".^$*+?{}[]\\|()")
BAND_NAMES = {"all-fail": "all_fail", "mixed": "mixed", "all-pass": "all_pass"}
SORTS = ("task", "reward", "tokens")


@dataclass(frozen=True)
class Where:
    path: tuple[str, ...]
    value: str

    @classmethod
    def parse(cls, text: str) -> Where:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--where takes FIELD=VALUE (for example level=hard), not {text!r}")
        return cls(tuple(name.strip().split(".")), value)

    def matches(self, row: dict | None) -> bool:
        value: Any = row
        for part in self.path:
            if not isinstance(value, dict) or part not in value:
                return False
            value = value[part]
        if isinstance(value, str):
            return value == self.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return float(self.value) == value
            except ValueError:
                return False
        return orjson.dumps(value).decode() == self.value

    def __str__(self) -> str:
        return ".".join(self.path) + "=" + self.value


@dataclass(frozen=True)
class Needle:
    """A plain byte string to look for in raw lines (ASCII case folding when `ignore_case`)."""

    text: bytes
    ignore_case: bool

    def found_in(self, raw: bytes) -> bool:
        return self.text in (raw.lower() if self.ignore_case else raw)


@dataclass(frozen=True)
class Selection:
    tasks: frozenset[int] | None = None
    agent: str | None = None
    outcome: str | None = None  # "passed" | "failed": scored rollouts at / below the threshold
    threshold: float = 1.0
    reward_min: float | None = None
    reward_max: float | None = None
    grep: re.Pattern | None = None
    grep_prompt: bool = False
    grep_literal: str | None = None  # grep is this plain text (so a raw line can be ruled out unparsed)
    where: tuple[Where, ...] = ()
    band: str | None = None  # all_fail | mixed | all_pass
    truncated: bool = False

    @property
    def needs_rows(self) -> bool:
        return self.grep is not None or bool(self.where)

    def raw_needle(self) -> Needle | None:
        """Bytes a rollout's raw JSON line must hold for `grep` to match its texts, or None.

        Only for a plain-text grep made of printable ASCII other than `"` and `\\`: JSON writes those
        characters as they are, so text holding the literal puts it in the line too. Case folding is ASCII
        only on both sides (grep is compiled with re.ASCII when it ignores case)."""
        literal = self.grep_literal
        if self.grep is None or literal is None or not _JSON_VERBATIM.fullmatch(literal):
            return None
        ignore_case = bool(self.grep.flags & re.IGNORECASE)
        needle = literal.encode("ascii")
        return Needle(needle.lower() if ignore_case else needle, ignore_case)

    def describe(self) -> list[str]:
        """The selection in words, for headers and the page's filter line."""
        parts = []
        if self.tasks is not None:
            parts.append("task " + ",".join(str(t) for t in sorted(self.tasks)))
        if self.agent is not None:
            parts.append(f"agent {self.agent}")
        if self.outcome:
            parts.append(
                f"{self.outcome} (reward {'>=' if self.outcome == 'passed' else '<'} {self.threshold:g})"
            )
        if self.reward_min is not None or self.reward_max is not None:
            parts.append(f"reward in [{_g(self.reward_min, '-inf')}, {_g(self.reward_max, 'inf')}]")
        if self.band:
            parts.append(f"band {self.band.replace('_', '-')}")
        if self.truncated:
            parts.append("truncated")
        parts += [f"where {w}" for w in self.where]
        if self.grep is not None and self.grep_prompt and self.grep_literal is not None:
            parts.append(f"text {self.grep_literal!r} in prompts and responses")
        elif self.grep is not None:
            parts.append(f"grep /{self.grep.pattern}/" + (" (prompt too)" if self.grep_prompt else ""))
        return parts


def _g(value: float | None, default: str) -> str:
    return default if value is None else f"{value:g}"


@dataclass(frozen=True)
class Filters:
    """The filters as `inspect`'s options and the viewer's query give them, before `make_selection` checks
    them and makes the Selection."""

    tasks: tuple[int, ...] | list[int] = ()
    agent: str | None = None
    passed: bool = False
    failed: bool = False
    threshold: float | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    grep: str | None = None
    grep_prompt: bool = False
    search: str | None = None
    where: tuple[str, ...] | list[str] = ()
    band: str | None = None
    truncated: bool = False


def make_selection(filters: Filters) -> Selection:
    """A Selection from option values, refusing contradictions (exit 2)."""
    from ..profile.extras import DEFAULT_PASS_THRESHOLD

    if filters.passed and filters.failed:
        raise UsageError("--passed and --failed exclude each other")
    threshold = DEFAULT_PASS_THRESHOLD if filters.threshold is None else filters.threshold
    for name, value in (
        ("--pass-threshold", threshold),
        ("--reward-min", filters.reward_min),
        ("--reward-max", filters.reward_max),
    ):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name} must be a finite number, not {value}")
    if (
        filters.reward_min is not None
        and filters.reward_max is not None
        and filters.reward_min > filters.reward_max
    ):
        raise UsageError(f"--reward-min {filters.reward_min:g} is above --reward-max {filters.reward_max:g}")
    if filters.band is not None and filters.band not in BAND_NAMES:
        raise UsageError(f"--band is one of {', '.join(BAND_NAMES)}, not {filters.band!r}")
    pattern, literal = None, None
    if filters.grep and filters.search:
        raise UsageError("a regular expression (--grep) and a text search exclude each other")
    if filters.grep:
        try:
            pattern = re.compile(filters.grep)
        except re.error as exc:
            raise UsageError(f"--grep {filters.grep!r} is not a regular expression: {exc}") from exc
        literal = filters.grep if not _REGEX_SPECIAL & set(filters.grep) else None
    elif filters.search:  # plain text, any (ASCII) case
        pattern, literal = re.compile(re.escape(filters.search), re.IGNORECASE | re.ASCII), filters.search
    for task in filters.tasks:
        if task < 0:
            raise UsageError(f"--task must be a task index (>= 0), not {task}")
    return Selection(
        tasks=frozenset(filters.tasks) if filters.tasks else None,
        agent=filters.agent,
        outcome="passed" if filters.passed else "failed" if filters.failed else None,
        threshold=threshold,
        reward_min=filters.reward_min,
        reward_max=filters.reward_max,
        grep=pattern,
        grep_prompt=filters.grep_prompt,
        grep_literal=literal,
        where=tuple(Where.parse(w) for w in filters.where),
        band=BAND_NAMES.get(filters.band) if filters.band else None,
        truncated=filters.truncated,
    )


def _agent_codes(agents: list[str | None], name: str) -> list[int]:
    return [i for i, a in enumerate(agents) if a == name]


def rollout_mask(sel: Selection, facts: Facts) -> Any:
    """Rollouts that pass the rollout tests."""
    import numpy as np

    mask = np.ones(len(facts), dtype=bool)
    if sel.tasks is not None:
        mask &= np.isin(facts.task, np.fromiter(sel.tasks, dtype=np.int64))
    if sel.agent is not None:
        mask &= np.isin(facts.agent, _agent_codes(facts.agents, sel.agent))
    reward = facts.reward
    with np.errstate(invalid="ignore"):
        if sel.outcome is not None:
            from .facts import MASKED

            scored = ~np.isnan(reward) & ((facts.flags & MASKED) == 0)
            at = reward >= sel.threshold
            mask &= scored & (at if sel.outcome == "passed" else ~at)
        if sel.reward_min is not None:
            mask &= reward >= sel.reward_min
        if sel.reward_max is not None:
            mask &= reward <= sel.reward_max
    if sel.truncated:
        mask &= (facts.flags & TRUNCATED) != 0
    return mask


def task_mask(sel: Selection, table: TaskTable) -> Any:
    """Tasks that pass the task tests."""
    import numpy as np

    mask = np.ones(len(table), dtype=bool)
    if sel.tasks is not None:
        mask &= np.isin(table.task, np.fromiter(sel.tasks, dtype=np.int64))
    if sel.agent is not None:
        mask &= np.isin(table.agent, _agent_codes(table.agents, sel.agent))
    if sel.band is not None:
        mask &= table.band == sel.band
    return mask


def row_ok(sel: Selection, digest: RolloutDigest, where_row: dict | None) -> bool:
    """The row tests: `where` on the task's input row (else the rollout row), `grep` on the texts."""
    if sel.where and not all(w.matches(where_row) for w in sel.where):
        return False
    if sel.grep is None:
        return True
    texts = (digest.final_text, digest.reasoning) + ((digest.prompt,) if sel.grep_prompt else ())
    return any(sel.grep.search(text) for text in texts)


def sort_order(kind: str, facts: Facts) -> Any:
    """Positions of `facts` in display order: by task (then agent, rollout); by reward, lowest first; by
    output tokens, most first. Ties and undefined values (last) go by task."""
    import numpy as np

    if kind not in SORTS:
        raise UsageError(f"--sort is one of {', '.join(SORTS)}, not {kind!r}")
    keys = [facts.rollout, facts.agent, facts.task]
    if kind == "reward":
        keys += [np.nan_to_num(facts.reward, nan=np.inf)]
    elif kind == "tokens":
        keys += [np.nan_to_num(-facts.tokens, nan=np.inf)]
    return np.lexsort(keys)


def pick_examples(facts: Facts, n: int, threshold: float) -> Any:
    """Positions of up to `n` rollouts per (task, agent) to show as examples: the first passing and the first
    failing one (lowest rollout index) where both exist, then the next ones in rollout order."""
    import numpy as np

    from .facts import MASKED

    order = np.lexsort((facts.rollout, facts.agent, facts.task))
    picked: list[int] = []
    scored = ~np.isnan(facts.reward) & ((facts.flags & MASKED) == 0)
    with np.errstate(invalid="ignore"):
        passing = scored & (facts.reward >= threshold)
    failing = scored & ~passing
    t, a = facts.task[order], facts.agent[order]
    bounds = np.flatnonzero(np.r_[True, (t[1:] != t[:-1]) | (a[1:] != a[:-1]), True])
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        group = order[start:end]
        first = [int(group[m][0]) for m in (passing[group], failing[group]) if m.any()]
        chosen = first[:n] + [int(i) for i in group if int(i) not in first][: max(0, n - len(first))]
        picked += sorted(chosen, key=lambda i: facts.rollout[i])
    return np.array(picked, dtype=np.int64)
