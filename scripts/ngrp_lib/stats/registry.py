"""The estimator table: every benchmark-level estimator with its JSON name, display label, per-task
function and applicability. `summary.scope_stats` computes what applies, the text renderer and the
report list what it holds; adding an estimator is one entry here (plus its field in `ScopeStats`).

Each function maps the scope's per-task inputs and a list of indices (k values, GRPO group sizes, or
`[None]` for a single number) to one per-task vector per index; NaN marks a task where it is undefined.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import estimators
from .majority import majority_at_k


@dataclass
class TaskInputs:
    """What the per-task functions read: rewards (tasks x rollouts, NaN = undefined) and, for pass/fail
    outcomes, the success matrix and its counts; `answers`/`known` only with --answer-key."""

    rewards: Any
    success: Any | None = None
    n_success: Any | None = None  # scored rollouts per task (of the success matrix)
    c_success: Any | None = None  # successes per task
    answers: Any | None = None  # object matrix of answers (None = no answer)
    known: Any | None = None  # scores for majority@k, NaN where the rollout's answer is unknown


PerTask = Callable[[TaskInputs, Sequence[Any]], list[Any]]


@dataclass(frozen=True)
class Estimator:
    name: str  # the key in ScopeStats and in `stats --json`
    label: str  # for people; "{k}" is replaced by the index
    per_task: PerTask
    binary: bool | None  # True: needs pass/fail outcomes; False: continuous rewards only; None: any
    needs_answers: bool = False  # needs --answer-key (and --rollouts)
    index: str | None = None  # "k" (one estimate per k), "group_size", or None (one estimate)
    # What the per-task values are: "rate" (always in [0, 1]), "reward" (on the reward's scale), or
    # "score" (pass/fail when there are pass/fail outcomes, else the reward). Rates get bounded intervals.
    scale: str = "rate"

    def applies(self, binary: bool, answers: bool) -> bool:
        return (self.binary is None or self.binary == binary) and (answers or not self.needs_answers)

    def is_rate(self, binary: bool, unit_rewards: bool) -> bool:
        """Whether every per-task value lies in [0, 1] (unit_rewards: every reward of the scope does)."""
        if self.scale == "score":
            return binary or unit_rewards
        return self.scale == "rate" or unit_rewards

    def labelled(self, index: Any) -> str:
        return self.label.format(k=index)


def _mean_reward(t: TaskInputs, _: Sequence[Any]) -> list[Any]:
    return [estimators.row_means(t.rewards)]


def _pass_rate(t: TaskInputs, _: Sequence[Any]) -> list[Any]:
    return [estimators.row_means(t.success)]


def _pass_at_k(t: TaskInputs, ks: Sequence[Any]) -> list[Any]:
    return [estimators.pass_at_k(t.n_success, t.c_success, k) for k in ks]


def _pass_hat_k(t: TaskInputs, ks: Sequence[Any]) -> list[Any]:
    return [estimators.pass_hat_k(t.n_success, t.c_success, k) for k in ks]


def _best_of_k(t: TaskInputs, ks: Sequence[Any]) -> list[Any]:
    return [estimators.expected_extreme_of_k(t.rewards, k, best=True) for k in ks]


def _worst_of_k(t: TaskInputs, ks: Sequence[Any]) -> list[Any]:
    return [estimators.expected_extreme_of_k(t.rewards, k, best=False) for k in ks]


def _majority_at_k(t: TaskInputs, ks: Sequence[Any]) -> list[Any]:
    assert t.answers is not None and t.known is not None
    matrix = majority_at_k(t.answers.tolist(), t.known.tolist(), list(ks))
    return [matrix[:, j] for j in range(len(ks))]


def _p_informative(t: TaskInputs, sizes: Sequence[Any]) -> list[Any]:
    return [estimators.p_informative(t.n_success, t.c_success, g) for g in sizes]


ESTIMATORS: tuple[Estimator, ...] = (
    Estimator("mean_reward", "mean reward (task-weighted)", _mean_reward, None, scale="reward"),
    Estimator("pass_rate", "pass rate", _pass_rate, True),
    Estimator("pass_at_k", "pass@{k}", _pass_at_k, True, index="k"),
    Estimator("pass_hat_k", "pass^{k}", _pass_hat_k, True, index="k"),
    Estimator("majority_at_k", "maj@{k}", _majority_at_k, None, needs_answers=True, index="k", scale="score"),
    Estimator("best_of_k", "E[best of {k}]", _best_of_k, False, index="k", scale="reward"),
    Estimator("worst_of_k", "E[worst of {k}]", _worst_of_k, False, index="k", scale="reward"),
    Estimator("p_informative", "P(GRPO group of {k} informative)", _p_informative, True, index="group_size"),
)

BY_NAME = {e.name: e for e in ESTIMATORS}


def k_estimators() -> tuple[Estimator, ...]:
    """The estimators with one value per k (the curves), in display order."""
    return tuple(e for e in ESTIMATORS if e.index == "k")


def applicable(binary: bool, answers: bool) -> tuple[Estimator, ...]:
    return tuple(e for e in ESTIMATORS if e.applies(binary, answers))
