"""Stopping rules for adaptive collection: after each round, which tasks still need repeats.

Every task gets `first_round` (R) repeats; each later round adds R more (the last one fewer, to stop at
N = `num_repeats`) to the tasks the rule has not settled, or, with a schedule of round sizes (`--rounds
1,1,2,4,8`, the last size repeating), requests that grow while a task stays unsettled. A rule looks at
one task's outcomes (pass means reward >= the pass threshold), never at another task's, so a task's
decision depends on its own draws only.

- `learnable`: settled once the task has both a pass and a fail (decision `mixed`); a task that never
  mixes runs to N (`all_pass` or `all_fail`). No interval: its keep/drop decision is the one a fixed-N run
  makes on the same draws (once mixed, N draws are mixed too; never mixed, it ran all N), whatever the
  schedule; the schedule sets only the rollouts. On Beta(2,3) at N=16 (exact, `adaptive_bench.py
  schedules`): rounds of 4 use 0.363 of fixed N's rollouts, of 2 0.292, one draw at a time 0.271 (the
  floor: no draw after the deciding one), 1,1,1,1,2,2,4 0.286 in at most 8 rounds, 1,1,2,4,8 0.326 in 5.
  A first round of 1 settles nothing (one draw is never mixed): 1,1,2,4,8 uses what 2,2,4,8 does.
- `band:LOW,HIGH[,RISK]`: settled by the first of:
  1. the Wilson 95% score interval of the task's pass rate lies wholly inside [LOW, HIGH] (`inside`) or
     wholly below LOW / above HIGH (`below` / `above`): a claim about the true rate;
  2. deterministic curtailment: fixed N's decision (pass rate at N in the band or not) is the same
     whatever the draws still to come, so the decision is fixed N's on the same draws;
  3. value of information: under a Beta(x, x) prior for each x in PRIORS (Jeffreys 1/2 and uniform 1),
     the task's posterior makes the same class likeliest, and drawing the rest to N would lower the
     chance of misclassifying the true rate by less than the rule's risk (default BAND_RISK = 0.03;
     `band:LOW,HIGH,RISK` sets it, 0 turns this condition off). The draws to come are beta-binomial under
     the posterior; after them the decision is fixed N's. Decided as that likeliest class, which can
     differ from fixed N's decision on the same draws. Two priors, because one alone is overconfident
     somewhere: Jeffreys puts much mass near 0 and 1, so 0 passes in 4 looks surely below 0.3.
  A task unsettled at N is decided by its pass rate, as a fixed-N run decides it.
- `width:W`: settled once that Wilson interval is at most W wide (`narrow`); else it runs to N.

Error rates (measured by benchmarks/adaptive_bench.py, 200,000 tasks with known rates a population; the
figures are in references/statistics.md): the Wilson interval covers about 95% at one look, and looked at
after every round `width`'s final interval missed the true rate at most 0.3 points more often than fixed
N's. `band:0.2,0.8` at N=16, R=4 uses 0.56-0.58 of fixed N's rollouts and misclassifies the true rate at
most 0.93 points more often than fixed N (exact expectation; fewer on Beta(2,3)); its decision differs
from fixed N's on the same draws in 3-7% of tasks. Those figures are on four spread-out populations
(Beta(2,3), Beta(1,1), Beta(0.3,0.3), Beta(0.25,2)); with tasks just outside the band (rates uniform on
[0.80, 0.85]) it is +10.6 points (+1.2 on Beta(20,80)); RISK 0.001 keeps all seven at fixed N's
(0.81-0.84 of the rollouts on the four, 0.91-0.93 near the edges); `width:0.5`
misses 5.9 points more with every rate near 0.5 (`adaptive_bench.py --populations edge`).
Other bands at N=16 stay within +0.5 points when
symmetric (0.1-0.9, 0.3-0.7) and reach +1.43 one-sided (0.4-1), +3.9 at N=8 (0-0.5); risk 0.01 keeps every
measured band within +0.52 points at N=16 and +0.73 at N=8, at 0.74-0.79 of the rollouts for 0.2-0.8 at
N=16. The risk 0.03 was chosen by the simulation: at N=16 risks 0.026 to 0.05 give the same figures for
0.2-0.8, and 0.025 needs 0.65 of the rollouts on two populations. At N=8 with R=2 band uses 0.76-0.78
of fixed N's rollouts; no rule meets 0.6 within +1 point there on Beta(1,1) or Beta(0.3,0.3)
(`adaptive_bench.py bound`).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .estimators import wilson_one

LEARNABLE, BAND, WIDTH = "learnable", "band", "width"
RULE_SYNTAX = "learnable, band:LOW,HIGH[,RISK] (0 <= LOW <= HIGH <= 1, 0 <= RISK < 1) or width:W (0 < W <= 1)"
INTERVAL = "wilson_95"  # the interval band and width use; learnable uses none
BAND_RISK = 0.03  # band's default: settle when drawing to N would lower the chance of misclassifying by less
PRIORS = (0.5, 1.0)  # Beta(x, x) priors band's gain must be small under: Jeffreys and uniform

# a task's stop reason: what the manifest records
SETTLED, REACHED_N, FAILED, PENDING = "settled", "reached_n", "out_of_attempts", "pending"


@dataclass(frozen=True)
class Rule:
    kind: str
    low: float = 0.0
    high: float = 1.0
    width: float = 1.0
    risk: float = BAND_RISK  # band only

    @property
    def spec(self) -> str:
        if self.kind == BAND:
            risk = "" if self.risk == BAND_RISK else f",{self.risk:g}"
            return f"band:{self.low:g},{self.high:g}{risk}"
        if self.kind == WIDTH:
            return f"width:{self.width:g}"
        return LEARNABLE

    @property
    def interval(self) -> str | None:
        """How the rule decides, as the manifest records it (a change refuses --resume)."""
        if self.kind == BAND:
            return f"{INTERVAL}+curtailment+jeffreys_uniform_gain_{self.risk:g}"
        return None if self.kind == LEARNABLE else INTERVAL


def parse_rule(text: str) -> Rule:
    """`learnable`, `band:0.2,0.8` (`band:0.2,0.8,0.01`: risk 0.01) or `width:0.3`; a usage error naming the
    syntax otherwise."""
    name, _, args = text.strip().partition(":")
    try:
        if name == LEARNABLE and not args:
            return Rule(LEARNABLE)
        if name == BAND:
            low, high, *rest = (float(part) for part in args.split(","))
            risk = rest[0] if len(rest) == 1 else BAND_RISK if not rest else -1.0
            if 0.0 <= low <= high <= 1.0 and 0.0 <= risk < 1.0:
                return Rule(BAND, low=low, high=high, risk=risk)
        elif name == WIDTH:
            width = float(args)
            if 0.0 < width <= 1.0:
                return Rule(WIDTH, width=width)
    except ValueError:
        pass
    raise UsageError(f"--adaptive {text!r} is not a rule", hint=f"give one of: {RULE_SYNTAX}")


SCHEDULE_SYNTAX = "round sizes, comma-separated (1,1,2,4,8): the last size repeats until --num-repeats"


@dataclass(frozen=True)
class Schedule:
    """The rounds: every task gets `first_round` (R) repeats, then a task the rule has not settled gets
    rounds of `later` sizes in turn, the last size again and again (none given: rounds of R), never past N.
    `Schedule(2, 16)`: 2, 4, 6, ... 16 repeats; `Schedule(1, 16, (1, 2, 4, 8))`: 1, 2, 4, 8, 16."""

    first_round: int
    num_repeats: int
    later: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.first_round <= self.num_repeats:
            raise UsageError(
                f"--first-round must be between 1 and --num-repeats ({self.num_repeats}),"
                f" not {self.first_round}"
            )
        if any(size < 1 for size in self.later):
            raise UsageError(
                f"--rounds sizes must be positive, not {self.later}", hint=f"give {SCHEDULE_SYNTAX}"
            )
        sizes = (self.first_round, *self.later)
        while len(sizes) > 1 and sizes[-1] == sizes[-2]:  # the shortest form: (4, 4) is (4,)
            sizes = sizes[:-1]
        object.__setattr__(self, "later", sizes[1:])

    @property
    def rounds(self) -> tuple[int, ...]:
        """The round sizes, the last one repeating: (4,) for rounds of 4, (1, 1, 2, 4, 8)."""
        return (self.first_round, *self.later)

    @property
    def spec(self) -> str:
        return ",".join(str(size) for size in self.rounds)

    @functools.cached_property
    def _listed(self) -> tuple[int, ...]:
        """The repeats a task has after each listed round (cumulative, capped at N)."""
        total, sizes = 0, []
        for size in self.rounds:
            total = min(total + size, self.num_repeats)
            sizes.append(total)
        return tuple(sizes)

    def next_size(self, size: int) -> int:
        """The repeats after the round that follows `size` (a size the schedule reaches), at most N."""
        listed = self._listed
        if size < listed[-1]:
            return listed[bisect.bisect_right(listed, size)]
        return min(size + self.rounds[-1], self.num_repeats)

    def round_of(self, rollout_index: int) -> int:
        """The round (1-based) that adds this repeat of a task."""
        listed = self._listed
        if rollout_index < listed[-1]:
            return 1 + bisect.bisect_right(listed, rollout_index)
        return len(listed) + 1 + (rollout_index - listed[-1]) // self.rounds[-1]

    @property
    def max_rounds(self) -> int:
        return self.round_of(self.num_repeats - 1)


def parse_schedule(text: str, num_repeats: int) -> Schedule:
    """`--rounds 1,1,2,4,8` (or `4`): a usage error naming the syntax otherwise."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise UsageError(f"--rounds {text!r} is not a schedule", hint=f"give {SCHEDULE_SYNTAX}")
    return Schedule(sizes[0], num_repeats, tuple(sizes[1:]))


def fixed_draws(rule: Rule, schedule: Schedule) -> int:
    """The repeats every task receives whatever its outcomes: the end of the first round at which some
    outcome could settle a task under this rule (N if none can). Before it no task can stop, so these
    repeats are a fixed design, like a fixed-N run's, and benchmark-level numbers may stand on all of them.
    `learnable` cannot settle on one draw, so rounds of 1 give every task 2 such repeats, not 1."""
    size = schedule.first_round
    while size < schedule.num_repeats:
        remaining = schedule.num_repeats - size
        if any(
            decide(rule, [True] * passes + [False] * (size - passes), remaining) for passes in range(size + 1)
        ):
            return size
        size = schedule.next_size(size)
    return schedule.num_repeats


def decide(rule: Rule, outcomes: Sequence[bool], remaining: int = 0) -> str | None:
    """The task's decision when the rule settles it on these outcomes, else None. `remaining`: the repeats
    a fixed-N run would still draw for it (band's forecast of that run's decision; 0: none to forecast)."""
    passes, n = sum(outcomes), len(outcomes)
    if rule.kind == LEARNABLE:
        return "mixed" if 0 < passes < n else None
    bounds = wilson_one(passes, n)
    if bounds is None:
        return None
    low, high = bounds
    # the Wilson interval holds the pass rate; rounding can put a bound a hair past it (0/n: low 1e-17)
    low, high = min(low, passes / n), max(high, passes / n)
    if rule.kind == WIDTH:
        return "narrow" if high - low <= rule.width else None
    if rule.low <= low and high <= rule.high:
        return "inside"
    if high < rule.low:
        return "below"
    if low > rule.high:
        return "above"
    return band_settle(rule, passes, n, remaining, rule.risk) if remaining > 0 else None


def band_class(rule: Rule, passes: int, n: int) -> str:
    """Fixed N's band decision on `passes` of `n` scored draws: its pass rate below, in or above the band."""
    rate = passes / n
    return "below" if rate < rule.low else "above" if rate > rule.high else "inside"


@functools.lru_cache(maxsize=1 << 16)  # replay plays every round again: a task's states recur, and are few
def band_settle(rule: Rule, passes: int, n: int, remaining: int, risk: float) -> str | None:
    """Band's decision after `passes` of `n` draws when fixed N would draw `remaining` more, or None:
    - fixed N's own decision when the draws to come cannot change it (deterministic curtailment: all
      passes and all fails to come give the same one);
    - else, under each prior of PRIORS, the class the task's posterior makes likeliest, when the priors
      agree on it and under each one drawing the rest to N would lower the chance of misclassifying the
      true rate by less than `risk` (`misclassification_gain`)."""
    total = n + remaining
    first, last = band_class(rule, passes, total), band_class(rule, passes + remaining, total)
    if first == last:
        return first
    if risk <= 0.0:
        return None
    answers = {misclassification_gain(rule, passes, n, remaining, prior) for prior in PRIORS}
    classes = {likeliest for likeliest, _ in answers}
    if len(classes) == 1 and all(gain < risk for _, gain in answers):
        return classes.pop()
    return None


def misclassification_gain(
    rule: Rule, passes: int, n: int, remaining: int, prior: float
) -> tuple[str, float]:
    """Under the posterior Beta(passes + prior, fails + prior): the likeliest class now, and by how much
    drawing `remaining` more lowers the chance of misclassifying the true rate. Now that chance is 1 - the
    likeliest class's mass; after, the draws to come are beta-binomial under the same posterior, fixed N
    decides on all of them, and the chance is the mass outside its decision, averaged over those draws."""
    total = n + remaining
    now = band_posterior(rule, passes, n, prior)
    likeliest = max(now, key=now.__getitem__)
    later = 0.0
    for more, chance in enumerate(beta_binomial_pmf(remaining, passes + prior, n - passes + prior)):
        decided = band_class(rule, passes + more, total)
        later += chance * (1.0 - band_posterior(rule, passes + more, total, prior)[decided])
    return likeliest, (1.0 - now[likeliest]) - later


def band_posterior(rule: Rule, passes: int, n: int, prior: float) -> dict[str, float]:
    """The posterior Beta(passes + prior, n - passes + prior) mass below, above and inside the band."""
    a, b = passes + prior, n - passes + prior
    below = regularized_beta(rule.low, a, b)
    above = 1.0 - regularized_beta(rule.high, a, b)
    return {"below": below, "above": above, "inside": max(0.0, 1.0 - below - above)}


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the Beta(a, b) distribution function at x, by its continued fraction (Lentz's method),
    evaluated on the side where it converges fast."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return fraction


def beta_binomial_pmf(m: int, a: float, b: float) -> list[float]:
    """P(j passes in m draws), j = 0..m, under a Beta(a, b) rate: C(m, j) B(j + a, m - j + b) / B(a, b),
    worked in logs: C(m, j) past m = 1030 is an integer too large for a float (N goes to 100,000)."""
    log_front = (
        math.lgamma(m + 1) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) - math.lgamma(m + a + b)
    )
    return [
        math.exp(
            log_front
            - math.lgamma(j + 1)
            - math.lgamma(m - j + 1)
            + math.lgamma(j + a)
            + math.lgamma(m - j + b)
        )
        for j in range(m + 1)
    ]


def decide_at_end(rule: Rule, outcomes: Sequence[bool]) -> str:
    """The decision of a task the rule did not settle: what a fixed-N run decides on these outcomes."""
    passes, n = sum(outcomes), len(outcomes)
    if n == 0:
        return "unscored"
    if rule.kind == LEARNABLE:
        return "mixed" if 0 < passes < n else ("all_pass" if passes == n else "all_fail")
    if rule.kind == WIDTH:
        return decide(rule, outcomes) or "wide"
    return band_class(rule, passes, n)


def outcome_of(reward: Any, threshold: float) -> bool | None:
    """A rollout's outcome for the rules: pass when its reward is at least `threshold` (a bool counts as
    1.0 or 0.0); None when it has no finite number (missing, null, NaN, text), which a rule skips. The one
    rule for the collector's rounds and for `check`'s replay of a finished run."""
    if isinstance(reward, bool):
        reward = float(reward)
    if not isinstance(reward, (int, float)) or not math.isfinite(reward):
        return None
    return reward >= threshold


@dataclass(frozen=True)
class TaskState:
    size: int  # repeats assigned so far (rollout indices 0 .. size-1)
    reason: str  # SETTLED, REACHED_N, FAILED or PENDING
    decision: str | None  # None while pending
    rounds: int = 1  # rounds begun: the schedule's round that added repeat size - 1


def replay(
    rule: Rule,
    schedule: Schedule,
    outcomes: Mapping[int, bool | None],
    exhausted: frozenset[int] | set[int] = frozenset(),
) -> TaskState:
    """Play one task's rounds on what is known: `outcomes` maps each completed rollout index to pass/fail
    (None: no usable reward); `exhausted` holds indices that ran out of attempts. The same files give the
    same state, so a killed run resumed decides as a run never killed does."""
    seen: list[bool] = []  # the scored outcomes of the rounds played so far
    done, size = 0, schedule.first_round
    while True:
        rounds, added = schedule.round_of(size - 1), range(done, size)
        if any(i in exhausted for i in added):
            return TaskState(size, FAILED, None, rounds)
        if any(i not in outcomes for i in added):
            return TaskState(size, PENDING, None, rounds)
        seen += [outcome for i in added if (outcome := outcomes[i]) is not None]
        decision = decide(rule, seen, remaining=schedule.num_repeats - size)
        if decision is not None:
            return TaskState(size, SETTLED, decision, rounds)
        if size >= schedule.num_repeats:
            return TaskState(size, REACHED_N, decide_at_end(rule, seen), rounds)
        done, size = size, schedule.next_size(size)


def play(rule: Rule, schedule: Schedule, draws: Sequence[bool]) -> TaskState:
    """Run the rounds on a full sequence of N draws (simulation and tests): what the run would do."""
    return replay(rule, schedule, dict(enumerate(draws[: schedule.num_repeats])))
