"""Stopping rules for adaptive collection: after each round, which tasks still need repeats.

Every task gets `first_round` (R) repeats; each later round adds R more (the last one fewer, to stop at
N = `num_repeats`) to the tasks the rule has not settled. A rule looks at one task's outcomes (pass means
reward >= the pass threshold), never at another task's, so a task's decision depends on its own draws only.

- `learnable`: settled once the task has both a pass and a fail (decision `mixed`); a task that never
  mixes runs to N (`all_pass` or `all_fail`). No interval: its keep/drop decision is the one a fixed-N run
  makes on the same draws (once mixed, N draws are mixed too; never mixed, it ran all N).
- `band:LOW,HIGH`: settled once the Wilson 95% score interval of the task's pass rate lies wholly inside
  [LOW, HIGH] (`inside`) or wholly below LOW / above HIGH (`below` / `above`). A task unsettled at N is
  decided by its pass rate, as a fixed-N run decides it.
- `width:W`: settled once that Wilson interval is at most W wide (`narrow`); else it runs to N.

Error rates: the Wilson interval covers about 95% at one look, but a task is looked at after every round,
so the chance that some look excludes its true rate is higher than 5%. benchmarks/adaptive_bench.py
measures the resulting misclassification against known rates (references/statistics.md has the figures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import UsageError
from .estimators import wilson_one

LEARNABLE, BAND, WIDTH = "learnable", "band", "width"
RULE_SYNTAX = "learnable, band:LOW,HIGH (0 <= LOW <= HIGH <= 1) or width:W (0 < W <= 1)"
INTERVAL = "wilson_95"  # the interval band and width use; learnable uses none

# a task's stop reason: what the manifest records
SETTLED, REACHED_N, FAILED, PENDING = "settled", "reached_n", "out_of_attempts", "pending"


@dataclass(frozen=True)
class Rule:
    kind: str
    low: float = 0.0
    high: float = 1.0
    width: float = 1.0

    @property
    def spec(self) -> str:
        if self.kind == BAND:
            return f"band:{self.low:g},{self.high:g}"
        if self.kind == WIDTH:
            return f"width:{self.width:g}"
        return LEARNABLE

    @property
    def interval(self) -> str | None:
        return None if self.kind == LEARNABLE else INTERVAL


def parse_rule(text: str) -> Rule:
    """`learnable`, `band:0.2,0.8` or `width:0.3`; a usage error naming the syntax otherwise."""
    name, _, args = text.strip().partition(":")
    try:
        if name == LEARNABLE and not args:
            return Rule(LEARNABLE)
        if name == BAND:
            low, high = (float(part) for part in args.split(","))
            if 0.0 <= low <= high <= 1.0:
                return Rule(BAND, low=low, high=high)
        elif name == WIDTH:
            width = float(args)
            if 0.0 < width <= 1.0:
                return Rule(WIDTH, width=width)
    except ValueError:
        pass
    raise UsageError(f"--adaptive {text!r} is not a rule", hint=f"give one of: {RULE_SYNTAX}")


@dataclass(frozen=True)
class Schedule:
    """R repeats for every task, then rounds of R more for unsettled tasks, never past N."""

    first_round: int
    num_repeats: int

    def __post_init__(self) -> None:
        if not 1 <= self.first_round <= self.num_repeats:
            raise UsageError(
                f"--first-round must be between 1 and --num-repeats ({self.num_repeats}),"
                f" not {self.first_round}"
            )

    def next_size(self, size: int) -> int:
        return min(size + self.first_round, self.num_repeats)

    def round_of(self, rollout_index: int) -> int:
        """The round (1-based) that adds this repeat of a task."""
        extra = rollout_index - self.first_round
        return 1 if extra < 0 else 2 + extra // self.first_round

    @property
    def max_rounds(self) -> int:
        return self.round_of(self.num_repeats - 1)


def decide(rule: Rule, outcomes: Sequence[bool]) -> str | None:
    """The task's decision when the rule settles it on these outcomes, else None."""
    passes, n = sum(outcomes), len(outcomes)
    if rule.kind == LEARNABLE:
        return "mixed" if 0 < passes < n else None
    bounds = wilson_one(passes, n)
    if bounds is None:
        return None
    low, high = bounds
    if rule.kind == WIDTH:
        return "narrow" if high - low <= rule.width else None
    if rule.low <= low and high <= rule.high:
        return "inside"
    if high < rule.low:
        return "below"
    if low > rule.high:
        return "above"
    return None


def decide_at_end(rule: Rule, outcomes: Sequence[bool]) -> str:
    """The decision of a task the rule did not settle: what a fixed-N run decides on these outcomes."""
    passes, n = sum(outcomes), len(outcomes)
    if n == 0:
        return "unscored"
    if rule.kind == LEARNABLE:
        return "mixed" if 0 < passes < n else ("all_pass" if passes == n else "all_fail")
    if rule.kind == WIDTH:
        return decide(rule, outcomes) or "wide"
    rate = passes / n
    return "below" if rate < rule.low else "above" if rate > rule.high else "inside"


@dataclass(frozen=True)
class TaskState:
    size: int  # repeats assigned so far (rollout indices 0 .. size-1)
    reason: str  # SETTLED, REACHED_N, FAILED or PENDING
    decision: str | None  # None while pending

    @property
    def rounds(self) -> int:
        return 0 if self.size == 0 else 1 + math.ceil(max(0, self.size - self.first) / self.first)

    first: int = 1


def replay(
    rule: Rule,
    schedule: Schedule,
    outcomes: Mapping[int, bool | None],
    exhausted: frozenset[int] | set[int] = frozenset(),
) -> TaskState:
    """Play one task's rounds on what is known: `outcomes` maps each completed rollout index to pass/fail
    (None: no usable reward); `exhausted` holds indices that ran out of attempts. The same files give the
    same state, so a killed run resumed decides as a run never killed does."""
    size = schedule.first_round
    while True:
        state = _state_at(rule, schedule, size, outcomes, exhausted)
        if state is not None:
            return state
        size = schedule.next_size(size)


def _state_at(
    rule: Rule,
    schedule: Schedule,
    size: int,
    outcomes: Mapping[int, bool | None],
    exhausted: set[int] | frozenset[int],
) -> TaskState | None:
    """The task's state with `size` repeats assigned, or None when it goes on to the next round."""
    first = schedule.first_round
    if any(i in exhausted for i in range(size)):
        return TaskState(size, FAILED, None, first)
    if any(i not in outcomes for i in range(size)):
        return TaskState(size, PENDING, None, first)
    seen = [outcome for i in range(size) if (outcome := outcomes[i]) is not None]
    decision = decide(rule, seen)
    if decision is not None:
        return TaskState(size, SETTLED, decision, first)
    if size >= schedule.num_repeats:
        return TaskState(size, REACHED_N, decide_at_end(rule, seen), first)
    return None


def play(rule: Rule, schedule: Schedule, draws: Sequence[bool]) -> TaskState:
    """Run the rounds on a full sequence of N draws (simulation and tests): what the run would do."""
    return replay(rule, schedule, dict(enumerate(draws[: schedule.num_repeats])))
