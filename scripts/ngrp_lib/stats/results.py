"""The records `compute_stats` returns: one dataclass per nested value, written to JSON by `jsonable`
in field order (so the JSON shape is the dataclasses' shape, checked by schemas/stats_result)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..jsonvalues import INLINE
from .length import LengthBin, PooledCorrelation, Slope, TokensPerSuccess, Truncation, WithinCorrelation
from .uncertainty import Interval
from .variance import RepeatsNeeded, VarianceDecomposition


@dataclass
class Estimate:
    """A task-weighted estimate: the mean of per-task values over the `n_tasks` tasks where the per-task
    value is defined (`n_rollouts` rollouts). `ci_low`/`ci_high` is the headline interval (`ci_method`:
    Korn-Graubard for a rate in [0, 1], a one-sided bound when the value is 0 or 1, t otherwise or with
    --interval t); the t interval and the task-bootstrap percentile interval are kept beside it."""

    value: float
    se: float
    ci_low: float
    ci_high: float
    ci_method: str | None
    t_ci_low: float
    t_ci_high: float
    boot_ci_low: float
    boot_ci_high: float
    boot_se: float
    n_tasks: int
    n_rollouts: int


@dataclass
class AtK:
    """An estimate at one k (pass@k, pass^k, maj@k, best/worst of k)."""

    k: int
    estimate: Estimate = field(metadata=INLINE)


@dataclass
class AtGroupSize:
    """P(a GRPO group of `group_size` rollouts is informative), averaged over tasks."""

    group_size: int
    estimate: Estimate = field(metadata=INLINE)
    # an adaptive learnable run at G = N: from its decisions (settled mixed 1, ran to N unmixed 0), which
    # are fixed N's on the same draws; else from each task's rollouts (an adaptive run's first round)
    from_decisions: bool = False


@dataclass
class TaskWeightedMean:
    estimate: Estimate = field(metadata=INLINE)
    se_population: float = float("nan")  # sd of task means / sqrt(T): new tasks from the same source
    se_conditional: float = float("nan")  # rerun noise on these same tasks
    n_tasks_conditional: int = 0


@dataclass
class RolloutWeightedMean:
    """sum(r) / N with the naive iid SE and the task-clustered CR1 SE (G/(G-1) factor), and an interval on
    the clustered SE with G-1 df (Korn-Graubard when rewards lie in [0, 1])."""

    value: float
    se_naive_iid: float
    se_clustered: float
    ci_low: float
    ci_high: float
    ci_method: str | None
    n_rollouts: int
    n_tasks: int


@dataclass
class MeanReward:
    task_weighted: TaskWeightedMean
    rollout_weighted: RolloutWeightedMean


@dataclass
class RolloutsPerTask:
    min: int | None
    max: int
    mean: float


@dataclass
class Share:
    """Tasks in one difficulty band: their count, share of the scored tasks, and its interval."""

    n_tasks: int
    share: float
    ci_low: float = float("nan")
    ci_high: float = float("nan")
    ci_method: str | None = None


@dataclass
class Difficulty:
    n_tasks: int
    all_fail: Share
    mixed: Share
    all_pass: Share
    all_fail_upper_bound_95_median: float


@dataclass
class ShrinkagePrior:
    alpha: float
    beta: float
    method: str


@dataclass
class RewardLength:
    length_field: str
    pooled_correlation: PooledCorrelation
    within_task_correlation: WithinCorrelation
    fixed_effects_slope: Slope
    correct_minus_incorrect_length: Interval | None
    truncation: Truncation | None
    tokens_per_success: TokensPerSuccess | None
    reward_by_length_decile: list[LengthBin]
    mean_length: float


@dataclass
class ScopeStats:
    """Every statistic of one set of tasks (all of them, or one --group-by group)."""

    scope: str
    n_tasks: int
    n_tasks_unscored: int
    n_rollouts: int
    n_null_rewards: int
    rollouts_per_task: RolloutsPerTask
    binary: bool
    mean_reward: MeanReward
    pass_rate: Estimate | None
    pass_at_k: list[AtK]
    pass_hat_k: list[AtK]
    best_of_k: list[AtK]
    worst_of_k: list[AtK]
    majority_at_k: list[AtK] | None
    variance: VarianceDecomposition
    repeats_needed: RepeatsNeeded
    difficulty: Difficulty | None
    shrinkage_prior: ShrinkagePrior | None
    grpo_informative: list[AtGroupSize]
    reward_length: RewardLength | None

    def curve(self, name: str) -> list[AtK]:
        """The estimates at each k of the estimator `name` (empty when it does not apply)."""
        value: Any = getattr(self, name)
        return value or []
