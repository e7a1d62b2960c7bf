"""`compute_stats`: every statistic of a reward profile, overall and per group, each with its n.

Read (load_profile, attach_rollouts) -> per-task columns (estimators) -> one cluster bootstrap over all
columns at once (uncertainty) -> JSON-ready dicts. The task (profile row) is the cluster throughout.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..artifacts.reading import MAX_DEPTH
from ..errors import FindingsError, UsageError
from ..jsonvalues import jsonable
from . import estimators, intervals, length, registry
from .adaptive_run import AdaptiveRun, decided_informative, find_adaptive, first_round_view
from .cost import run_cost
from .denominators import FEW_TASKS, Denominators, denominators, few_tasks_note
from .distributions import t_interval_from_sem
from .load import ProfileData, attach_rollouts, load_profile
from .majority import NO_ANSWER, TIE_RULE
from .registry import TaskInputs
from .results import (
    AtGroupSize,
    AtK,
    Difficulty,
    Estimate,
    MeanReward,
    RewardLength,
    RolloutsPerTask,
    RolloutWeightedMean,
    ScopeStats,
    Share,
    ShrinkagePrior,
    TaskWeightedMean,
)
from .uncertainty import (
    Interval,
    bootstrap_interval,
    bootstrap_means,
    check_resampling,
    percentile_interval,
    t_interval,
)
from .variance import decompose, repeats_for_width

LENGTH_FIELD = "output_tokens"
INTERVALS = ("bounded", "t")


@dataclass
class StatsSettings:
    pass_threshold: float | None = None
    answer_key: str | None = None
    ks: list[int] | None = None  # None: every k from 1 to the largest n
    n_bootstrap: int = 2000
    seed: int = 0
    target_width: float = 0.2
    group_sizes: list[int] | None = None  # None: powers of two up to the largest n
    group_by: str | None = None  # "agent" or a dataset field in `sample`
    level: float = 0.95
    interval: str = "bounded"  # headline interval of rates: "bounded" (Korn-Graubard) or "t"

    def check(self) -> None:
        if self.ks is not None and any(k < 1 for k in self.ks):
            raise UsageError("--k values must be positive integers")
        if self.group_sizes is not None and any(g < 2 for g in self.group_sizes):
            raise UsageError("--group-size must be at least 2 (a group of one is never informative)")
        check_resampling(self.n_bootstrap, self.seed)
        if not 0 < self.target_width < math.inf:
            raise UsageError("--target-width must be a positive, finite number")
        if self.interval not in INTERVALS:
            raise UsageError(f"--interval must be one of {', '.join(INTERVALS)}, not {self.interval!r}")


@dataclass
class StatsResult:
    profile: str
    rollouts: str | None
    settings: dict
    inputs: dict
    denominators: Denominators
    overall: ScopeStats
    groups: list[ScopeStats] = field(default_factory=list)
    per_task: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reward_components: dict | None = None  # stats.components, from --rollouts rows that carry them
    adaptive: dict | None = None  # an adaptive run: rounds, decisions, rollouts saved (adaptive_run.py)
    cost: dict | None = None  # `stats.cost.run_cost`: sampling used and tokens per rollout/success/task

    def to_json(self) -> dict[str, Any]:
        return jsonable({f.name: getattr(self, f.name) for f in fields(self)})


Key = tuple[str, Any]  # (estimator name, k or group size or None)


class _Columns:
    """Per-task value vectors, bootstrapped together so every interval uses the same resamples."""

    def __init__(self) -> None:
        self.names: list[Key] = []
        self.vectors: list[Any] = []

    def add(self, name: str, index: Any, vector: Any) -> None:
        self.names.append((name, index))
        self.vectors.append(vector)

    def vector(self, name: str, index: Any = None) -> Any:
        return self.vectors[self.names.index((name, index))]

    def summarise(self, settings: StatsSettings, n: Any, rates: set[str]) -> dict[Key, Estimate]:
        """Every column's estimate; `n` holds the scored rollouts per task, `rates` the estimators whose
        per-task values lie in [0, 1] (bounded headline intervals)."""
        import numpy as np

        if not self.vectors:
            return {}
        matrix = np.column_stack(self.vectors)
        low = high = boot_se = np.full(matrix.shape[1], np.nan)
        if settings.n_bootstrap:
            reps = bootstrap_means(matrix, settings.n_bootstrap, settings.seed)
            low, high = percentile_interval(reps, settings.level)
            boot_se = _replicate_sd(reps)
        rollouts = (~np.isnan(matrix)).T.astype(float) @ np.asarray(n, dtype=float)
        out = {}
        for j, key in enumerate(self.names):
            out[key] = _estimate(matrix[:, j], key[0] in rates, int(rollouts[j]), settings)
            out[key].boot_ci_low, out[key].boot_ci_high, out[key].boot_se = low[j], high[j], boot_se[j]
        return out


def _estimate(values: Any, rate: bool, n_rollouts: int, settings: StatsSettings) -> Estimate:
    iv = t_interval(values, settings.level)
    spread = intervals.carrying(values, iv.value)
    head = intervals.headline(iv, rate=rate, cap=n_rollouts, level=settings.level, method=settings.interval,
                              spread=spread)  # fmt: skip
    nan = math.nan
    return Estimate(
        iv.value, iv.se, head.low, head.high, head.method or None, iv.ci_low, iv.ci_high, nan, nan, nan, iv.n,
        n_rollouts,
    )  # fmt: skip


def _replicate_sd(reps: Any) -> Any:
    """SD of the bootstrap replicates per column (the bootstrap SE), ignoring undefined replicates."""
    import numpy as np

    out = np.full(reps.shape[1], np.nan)
    for j in range(reps.shape[1]):
        col = reps[:, j][~np.isnan(reps[:, j])]
        if col.size >= 2:
            out[j] = col.std(ddof=1)
    return out


def _rollout_weighted(rewards: Any, settings: StatsSettings, unit: bool) -> RolloutWeightedMean:
    """The pooled mean sum(r)/N with its naive iid SE, the task-clustered CR1 SE and its interval."""
    import numpy as np

    mask = ~np.isnan(rewards)
    n_roll, n_tasks = int(mask.sum()), int(mask.any(axis=1).sum())
    if n_roll == 0:
        return RolloutWeightedMean(math.nan, math.nan, math.nan, math.nan, math.nan, None, 0, 0)
    mu = float(rewards[mask].mean())
    naive = float(rewards[mask].std(ddof=1) / math.sqrt(n_roll)) if n_roll > 1 else math.nan
    resid = np.where(mask, rewards - mu, 0.0).sum(axis=1)[mask.any(axis=1)]
    clustered = (
        math.sqrt(n_tasks / (n_tasks - 1) * float((resid**2).sum())) / n_roll if n_tasks > 1 else math.nan
    )
    low, high = (t_interval_from_sem(mu, clustered, n_tasks, settings.level) if n_tasks > 1 else None) or (
        math.nan, math.nan)  # fmt: skip
    spread = intervals.carrying(estimators.row_means(rewards), mu)
    head = intervals.headline(
        Interval(mu, clustered, low, high, n_tasks), rate=unit, cap=n_roll, level=settings.level,
        method=settings.interval, spread=spread,
    )  # fmt: skip
    return RolloutWeightedMean(
        mu, naive, clustered, head.low, head.high, head.method or None, n_roll, n_tasks
    )


def _difficulty(n: Any, c: Any, settings: StatsSettings) -> Difficulty:
    import numpy as np

    bands = estimators.difficulty_band(n, c)
    scored = int((n > 0).sum())
    shares = {}
    for band in ("all_fail", "mixed", "all_pass"):
        count = int((bands == band).sum())
        # the share of tasks in the band: each task is one 0/1 draw, so the tasks are the rollouts here
        e = _estimate((bands[n > 0] == band).astype(float), True, scored, settings)
        shares[band] = Share(count, count / scored if scored else math.nan, e.ci_low, e.ci_high, e.ci_method)
    zero_of = n[(c == 0) & (n > 0)]
    # 0 successes in n: the exact one-sided 95% upper bound 1 - 0.05^(1/n) (about 3/n, the rule of three,
    # for large n, but never above 1: with n = 1 it is 0.95)
    bound = 1.0 - 0.05 ** (1.0 / zero_of)
    median = float(np.median(bound)) if zero_of.size else math.nan
    return Difficulty(scored, shares["all_fail"], shares["mixed"], shares["all_pass"], median)


def _ks(settings: StatsSettings, kmax: int) -> list[int]:
    return sorted(set(settings.ks)) if settings.ks else list(range(1, kmax + 1))


def _group_sizes(settings: StatsSettings, kmax: int) -> list[int]:
    if settings.group_sizes:
        return sorted(set(settings.group_sizes))
    return [2**i for i in range(1, 12) if 2**i <= kmax] or [2]


def task_inputs(data: ProfileData, settings: StatsSettings) -> TaskInputs:
    """The per-task inputs of every estimator: rewards, pass/fail outcomes, answers."""
    import numpy as np

    rewards = data.values["reward"]
    inputs = TaskInputs(rewards, estimators.successes(rewards, settings.pass_threshold))
    if inputs.success is not None:
        inputs.n_success, inputs.c_success = estimators.counts(inputs.success)
    if "answer" in data.extras:
        # Rollouts missing from the rollouts file have no known answer: leave them out, not "no answer".
        # "correct" as pass@k counts it: under --pass-threshold the majority answer scores 1 when it passes
        scores = rewards if inputs.success is None else inputs.success
        inputs.answers = data.extras["answer"]
        inputs.known = np.where(np.isnan(data.extras["truncated"]), np.nan, scores)
    return inputs


def estimate_all(inputs: TaskInputs, ks: list[int], sizes: list[int]) -> _Columns:
    """Every applicable estimator of the registry, per task, at each of its indices."""
    binary, answers = inputs.success is not None, inputs.answers is not None
    cols = _Columns()
    for est in registry.applicable(binary, answers):
        indices: list[Any] = {"k": ks, "group_size": sizes}.get(est.index or "", [None])
        for index, vector in zip(indices, est.per_task(inputs, indices), strict=True):
            cols.add(est.name, index, vector)
    return cols


def _curve(summary: dict[Key, Estimate], name: str, ks: list[int]) -> list[AtK]:
    return [AtK(k, summary[(name, k)]) for k in ks if (name, k) in summary]


def scope_stats(data: ProfileData, settings: StatsSettings, label: str) -> tuple[ScopeStats, dict]:
    """Statistics for one set of tasks. Returns (the scope's record, per-task columns for the table)."""
    import numpy as np

    inputs = task_inputs(data, settings)
    rewards, binary = inputs.rewards, inputs.success is not None
    n, _ = estimators.counts(rewards)
    kmax = int(n.max()) if n.size else 0
    ks, sizes = _ks(settings, kmax), _group_sizes(settings, kmax)
    cols = estimate_all(inputs, ks, sizes)
    defined = rewards[~np.isnan(rewards)]
    unit = bool(((defined >= 0) & (defined <= 1)).all())
    rates = {e.name for e in registry.ESTIMATORS if e.is_rate(binary, unit)}
    summary = cols.summarise(settings, n, rates)
    per_task = _per_task_columns(inputs, cols, n, sizes)
    variance = decompose(rewards)
    prior = None
    if binary:
        a, b, per_task["pass_rate_shrunk"] = estimators.beta_binomial_shrinkage(
            inputs.n_success, inputs.c_success, decompose(inputs.success).sigma2_between
        )
        prior = ShrinkagePrior(a, b, "method of moments on per-task pass rates")
    scope = ScopeStats(
        scope=label,
        n_tasks=int((n > 0).sum()),
        n_tasks_unscored=int((n == 0).sum()),
        n_rollouts=int(n.sum()),
        n_null_rewards=int((data.rollout_index >= 0).sum() - n.sum()),
        rollouts_per_task=RolloutsPerTask(
            int(n[n > 0].min()) if (n > 0).any() else None,
            kmax,
            float(n[n > 0].mean()) if (n > 0).any() else math.nan,
        ),
        binary=binary,
        mean_reward=MeanReward(
            TaskWeightedMean(
                summary[("mean_reward", None)],
                summary[("mean_reward", None)].se,
                variance.se_conditional,
                variance.n_tasks_within,
            ),
            _rollout_weighted(rewards, settings, unit),
        ),
        pass_rate=summary.get(("pass_rate", None)),
        pass_at_k=_curve(summary, "pass_at_k", ks),
        pass_hat_k=_curve(summary, "pass_hat_k", ks),
        best_of_k=_curve(summary, "best_of_k", ks),
        worst_of_k=_curve(summary, "worst_of_k", ks),
        majority_at_k=_curve(summary, "majority_at_k", ks) if inputs.answers is not None else None,
        variance=variance,
        repeats_needed=repeats_for_width(variance.sigma2_within, settings.target_width, settings.level),
        difficulty=_difficulty(inputs.n_success, inputs.c_success, settings) if binary else None,
        shrinkage_prior=prior,
        grpo_informative=[AtGroupSize(g, summary[("p_informative", g)]) for g in sizes] if binary else [],
        reward_length=_reward_length(data, rewards, inputs.success),
    )
    return scope, per_task


def _per_task_columns(inputs: TaskInputs, cols: _Columns, n: Any, sizes: list[int]) -> dict[str, Any]:
    per_task: dict[str, Any] = {"n": n, "mean_reward": cols.vector("mean_reward")}
    if inputs.success is not None:
        ns, cs = inputs.n_success, inputs.c_success
        band = estimators.difficulty_band(ns, cs)
        per_task.update(successes=cs, pass_rate=cols.vector("pass_rate"), band=band)
        for g in sizes:
            per_task[f"p_informative_{g}"] = cols.vector("p_informative", g)
    return per_task


def _reward_length(data: ProfileData, rewards: Any, success: Any) -> RewardLength | None:
    import numpy as np

    lengths = data.values.get(LENGTH_FIELD)
    if lengths is None or np.isnan(lengths).all():
        return None
    truncated = data.extras.get("truncated")
    return RewardLength(
        length_field=LENGTH_FIELD,
        pooled_correlation=length.pooled_correlation(rewards, lengths),
        within_task_correlation=length.within_task_correlation(rewards, lengths),
        fixed_effects_slope=length.fixed_effects_slope(rewards, lengths),
        correct_minus_incorrect_length=length.length_gap(success, lengths) if success is not None else None,
        truncation=length.truncation(rewards, truncated) if truncated is not None else None,
        tokens_per_success=length.tokens_per_success(success, lengths) if success is not None else None,
        reward_by_length_decile=length.reward_by_length_bin(rewards, lengths),
        mean_length=float(np.nanmean(lengths)),
    )


def labelled_estimates(scope: ScopeStats) -> list[tuple[str, Estimate]]:
    """Every task-weighted estimate of a scope with its display label, in display order."""
    out = [("mean reward", scope.mean_reward.task_weighted.estimate)]
    if scope.pass_rate is not None:
        out.append(("pass rate", scope.pass_rate))
    for est in registry.k_estimators():
        out.extend((est.labelled(e.k), e.estimate) for e in scope.curve(est.name))
    grpo = registry.BY_NAME["p_informative"]
    out.extend((grpo.labelled(g.group_size), g.estimate) for g in scope.grpo_informative)
    return out


def few_task_estimates(scope: ScopeStats) -> str:
    """Which estimates stand on fewer than FEW_TASKS tasks (but some), judged on each one's own n:
    'every estimate (3 tasks)' or 'pass@7 (4 tasks), pass^7 (4 tasks)'; empty when none does."""
    every = labelled_estimates(scope)
    few = [(label, e.n_tasks) for label, e in every if 0 < e.n_tasks < FEW_TASKS]
    if not few:
        return ""
    if len(few) == len(every) and len({n for _, n in few}) == 1:
        return f"every estimate ({few[0][1]} tasks)"
    shown = ", ".join(f"{label} ({n} tasks)" for label, n in few[:8])
    return shown + (f" and {len(few) - 8} more" if len(few) > 8 else "")


def _group_labels(data: ProfileData, group_by: str) -> list[str]:
    if group_by == "agent":
        return [str(agent) if agent is not None else "(no agent)" for _, agent in data.keys]
    labels = []
    for sample in data.samples:
        value = sample.get(group_by)
        labels.append("(missing)" if value is None else value if isinstance(value, str) else repr(value))
    return labels


PROMPT_CHARS = 160  # of a task's prompt in the per-task table (enough to recognise it)


def task_prompt(sample: dict) -> str:
    """The task's last user message (as `inspect` shows it), its middle cut past PROMPT_CHARS: which
    task a row is, in words."""
    from ..artifacts.response import parts_text

    params = sample.get("responses_create_params")
    items = params.get("input") if isinstance(params, dict) else None
    text = items if isinstance(items, str) else ""
    for item in reversed(items) if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("role") == "user" and item.get("type", "message") == "message":
            text = parts_text(item.get("content"), ("input_text", "output_text", "text"))
            break
    if len(text) <= PROMPT_CHARS:
        return text
    head = PROMPT_CHARS // 3
    return f"{text[:head]} [... {len(text) - PROMPT_CHARS:,} chars cut ...] {text[head - PROMPT_CHARS :]}"


def _per_task_rows(data: ProfileData, cols: dict, labels: list[str] | None, sizes: list[int]) -> list[dict]:
    import numpy as np

    lengths = data.values.get(LENGTH_FIELD)
    mean_len = estimators.row_means(lengths) if lengths is not None else None
    rows = []
    wilson = estimators.wilson_interval(cols["successes"], cols["n"]) if "successes" in cols else None
    for i, (task, agent) in enumerate(data.keys):
        row: dict[str, Any] = {
            "task": task,
            "agent": agent,
            "n": int(cols["n"][i]),
            "mean_reward": cols["mean_reward"][i],
            "prompt": task_prompt(data.samples[i]),
        }
        if labels is not None:
            row["group"] = labels[i]
        if wilson is not None:
            low, high = wilson
            row.update(
                successes=int(cols["successes"][i]),
                pass_rate=cols["pass_rate"][i],
                wilson_low=low[i],
                wilson_high=high[i],
                pass_rate_shrunk=cols["pass_rate_shrunk"][i],
                band=str(cols["band"][i]),
                p_informative={str(g): cols[f"p_informative_{g}"][i] for g in sizes},
            )
        if mean_len is not None and not np.isnan(mean_len[i]):
            row["mean_length"] = mean_len[i]
        rows.append(row)
    return rows


def _overall_notes(
    data: ProfileData, overall: ScopeStats, settings: StatsSettings, read: dict[str, Any] | None
) -> list[str]:
    """The notes on the whole profile's numbers: shaped rewards, few tasks, fan-out, rollouts missing from
    the rollouts file (`read`: what attach_rollouts found, None without one) and majority@k's rules."""
    notes: list[str] = []
    if not overall.binary:
        notes.append("rewards are not all 0/1: pass metrics need --pass-threshold; showing best/worst-of-k")
    few = few_task_estimates(overall)
    if few:
        notes.append(few_tasks_note(few))
    if len({task for task, _ in data.keys}) < data.n_tasks:
        notes.append(
            "fan-out profile: each (task, agent) row is one cluster; "
            "use --group-by agent for per-agent numbers"
        )
    if read is not None and read["profile_rollouts_not_in_file"]:
        notes.append(
            f"{read['profile_rollouts_not_in_file']} profiled rollouts are not in the "
            "rollouts file: left out of majority@k and truncation"
        )
    if read is not None and read.get("refused_lines"):
        lines = read["refused_lines"]
        shown = ", ".join(map(str, lines[:5])) + (f" and {len(lines) - 5} more" if len(lines) > 5 else "")
        notes.append(
            f"{len(lines)} row(s) of the rollouts file nest more than {MAX_DEPTH} levels deep:"
            f" refused, skipped (line {shown})"
        )
    if overall.majority_at_k is not None:
        notes.append(f"majority@k tie rule: {TIE_RULE}; {NO_ANSWER}")
        if all(answer is None for answer in data.extras["answer"].flat):
            notes.append(
                f"no rollout has a value under --answer-key {settings.answer_key!r}: every rollout counts as"
                " 'no answer', so majority@k says nothing (check the key name)"
            )
    return notes


def _checked(settings: StatsSettings, rollouts: Path | str | None) -> StatsSettings:
    settings.check()
    if settings.answer_key and rollouts is None:
        raise UsageError(
            "--answer-key needs --rollouts (answers are not in the profile)",
            hint="pass the rollouts.jsonl the profile was made from",
        )
    return settings


def _groups(data: ProfileData, settings: StatsSettings, notes: list[str]) -> tuple[list | None, list]:
    """The --group-by labels of the profile rows and each group's statistics (a note when no row has the
    field)."""
    import numpy as np

    labels = _group_labels(data, settings.group_by) if settings.group_by else None
    if labels is None:
        return None, []
    if settings.group_by != "agent" and set(labels) == {"(missing)"}:
        notes.append(f"no profile row has '{settings.group_by}' in its sample: one group '(missing)'")
    array = np.array(labels, dtype=object)
    return labels, [
        scope_stats(data.subset(array == label), settings, label)[0] for label in sorted(set(labels))
    ]


def compute_stats(
    profile: Path | str,
    rollouts: Path | str | None = None,
    settings: StatsSettings | None = None,
    exclude_unhealthy: Path | str | None = None,
) -> StatsResult:
    """All statistics for a profile (and optional rollouts file), overall and per group.

    With `exclude_unhealthy` (a rollout_verdicts.jsonl) its unhealthy rollouts are left out; without it a
    verdicts file next to the run is only counted, in a note."""
    import numpy as np

    from ..artifacts.verdicts import health_input

    settings = _checked(settings or StatsSettings(), rollouts)
    health = health_input(exclude_unhealthy, profile, rollouts)
    keys = None if health.unhealthy is None else health.unhealthy.keys
    data = load_profile(profile, ("reward", LENGTH_FIELD), keys, exclude=health.applied)
    if data.n_tasks == 0:
        raise FindingsError(
            f"{profile} has no rows: nothing to compute",
            hint="was profiling run on an empty or fully masked rollouts file?",
        )
    inputs: dict[str, Any] = {"profile_rows": data.n_tasks, "profile_rollouts": data.n_rows_measured}
    inputs["health"] = health.to_json(data.n_unhealthy)
    counted = denominators(data, beside_summary=True)
    notes: list[str] = counted.lines() + health.notes(data.n_unhealthy, data.n_rows_measured)
    if rollouts is not None:
        inputs["rollouts"] = attach_rollouts(data, rollouts, settings.answer_key)
    run = find_adaptive(profile, rollouts)
    full = data
    if run is not None:  # benchmark-level numbers from the fixed-design first round only
        data = first_round_view(data, run.fixed)
        notes.append(run.note())
    overall, cols = scope_stats(data, settings, "all")
    notes += _overall_notes(data, overall, settings, inputs.get("rollouts"))
    labels, groups = _groups(data, settings, notes)
    sizes = [g.group_size for g in overall.grpo_informative]
    informative = [(g.group_size, g.estimate.value) for g in overall.grpo_informative]  # the rollouts' P
    if run is not None:
        decide_informative(overall, data.keys, run, settings)
        for scope in groups:
            inside = [k for k, label in zip(data.keys, labels or [], strict=True) if label == scope.scope]
            decide_informative(scope, inside, run, settings)
    if run is None:
        per_task, task_cols = _per_task_rows(data, cols, labels, sizes), cols
    else:  # every repeat: the profile's token totals count every repeat too
        per_task, task_cols = adaptive_per_task(full, settings, labels, run)
    add_source_lines(per_task, profile, rollouts)
    successes = int(np.nansum(task_cols["successes"])) if "successes" in task_cols else None
    return StatsResult(
        profile=str(profile),
        rollouts=None if rollouts is None else str(rollouts),
        settings=asdict(settings),
        inputs=inputs,
        denominators=counted,
        overall=overall,
        groups=groups,
        per_task=per_task,
        notes=notes,
        adaptive=None if run is None else run.summary(),
        cost=run_cost(
            profile,
            successes,
            informative,
            _first_round_tokens(profile, rollouts, run),
            rollouts,
            kept=None if run is None else run.kept(),
        ),  # fmt: skip
    )


def decide_informative(scope: ScopeStats, keys: list, run: AdaptiveRun, settings: StatsSettings) -> None:
    """P(GRPO group of N informative) of a `learnable` run from its decisions, where its first round is too
    short to give it (fewer than N repeats): a task settled mixed would have mixed in N draws (1), one
    that ran to N without mixing did not (0), so the indicator is fixed N's own unbiased estimate of the
    task's P(informative at N) on the same draws; a task not decided yet is left out (its n). The same
    bounded interval as every rate (`_estimate`), over the rollouts the decided tasks used."""
    n = run.num_repeats
    at = [i for i, entry in enumerate(scope.grpo_informative) if entry.group_size == n]
    values = decided_informative(run, [task for task, _ in keys]) if at else None
    if values is None or not (decided := values == values).any():
        return
    repeats = {task: int(state.get("repeats") or 0) for task, state in run.decisions().items()}
    used = sum(repeats.get(task, 0) for (task, _), ok in zip(keys, decided, strict=True) if ok)
    estimate = _estimate(values, True, used, settings)
    if settings.n_bootstrap:
        estimate.boot_ci_low, estimate.boot_ci_high = bootstrap_interval(
            values[decided], settings.n_bootstrap, settings.seed, settings.level
        )
    scope.grpo_informative[at[0]] = AtGroupSize(n, estimate, from_decisions=True)


def add_source_lines(rows: list[dict], profile: Path | str, rollouts: Path | str | None) -> None:
    """Each per-task row's `source_lines` (1-based lines of the task file, from the run manifest beside
    the rollouts: `artifacts.task_lines`), None where no manifest records them."""
    from ..artifacts import task_lines

    lines = task_lines.for_rollouts(rollouts) or task_lines.for_profile(profile)
    for row in rows:
        row["source_lines"] = None if lines is None else lines.of(row["task"])


def _first_round_tokens(profile: Path | str, rollouts: Path | str | None, run: AdaptiveRun | None) -> Any:
    """An adaptive run's first-round token totals (what P(informative) stands on), from its rollouts file;
    None for a fixed-N run or when the file is not there."""
    from ..artifacts.names import rollouts_path_of_profile
    from .cost import first_round_tokens

    if run is None:
        return None
    source = Path(rollouts) if rollouts is not None else rollouts_path_of_profile(profile)
    return first_round_tokens(source, run.fixed) if source is not None and source.is_file() else None


def adaptive_per_task(
    full: ProfileData, settings: StatsSettings, labels: list[str] | None, run: AdaptiveRun
) -> tuple[list[dict], dict]:
    """An adaptive run's per-task rows, from every repeat, with the run's decision and stop reason; and
    the per-task columns they came from."""
    scope, cols = scope_stats(full, settings, "all")
    rows = _per_task_rows(full, cols, labels, [g.group_size for g in scope.grpo_informative])
    decisions = run.decisions()
    for row in rows:
        state = decisions.get(row["task"], {})
        row.update(adaptive_decision=state.get("decision"), adaptive_reason=state.get("reason"))
    return rows, cols


def first_round_estimates(profile: Path | str, run: AdaptiveRun, pass_threshold: float | None) -> dict:
    """An adaptive run's benchmark-level headline (mean reward, pass rate) from its first round alone."""
    settings = StatsSettings(pass_threshold=pass_threshold, n_bootstrap=0)
    data = first_round_view(load_profile(profile, ("reward",)), run.fixed)
    scope, _ = scope_stats(data, settings, "first round")
    picked = {"mean_reward": scope.mean_reward.task_weighted.estimate, "pass_rate": scope.pass_rate}
    shown = ("value", "ci_low", "ci_high", "ci_method", "n_tasks", "n_rollouts")
    return {name: None if e is None else {f: getattr(e, f) for f in shown} for name, e in picked.items()}


def benchmark_pass_rate(
    data: ProfileData, run: AdaptiveRun | None, pass_threshold: float | None
) -> dict | None:
    """The mean pass rate over the tasks of `data` (pass@1) with `stats`' 95% interval, and what it stands
    on: an adaptive run's fixed design (the repeats every task got whatever its outcomes), else every
    repeat. None when the rewards are not binary and no threshold makes them so."""
    if run is not None:
        data = first_round_view(data, run.fixed)
    settings = StatsSettings(pass_threshold=pass_threshold, ks=[1], group_sizes=[2], n_bootstrap=0)
    scope, _ = scope_stats(data, settings, "all")
    e = scope.pass_rate
    if e is None:
        return None
    stands_on = (
        f"the fixed design: the first {run.fixed} repeats of every task, which every task got whatever its"
        " outcomes (later rounds went only to unsettled tasks: a mean over every repeat is biased)"
        if run is not None
        else "every repeat of every task (a fixed design)"
    )
    shown = ("value", "ci_low", "ci_high", "ci_method", "n_tasks", "n_rollouts")
    return {**{f: getattr(e, f) for f in shown}, "level": 0.95, "stands_on": stands_on}


def parse_int_list(text: str | None, option: str) -> list[int] | None:
    """'1,2,4,8' -> [1, 2, 4, 8]; None stays None. Raises UsageError naming the option."""
    if text is None:
        return None
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise UsageError(f"{option} takes comma-separated integers such as 1,2,4,8; got {text!r}") from None
    if not values:
        raise UsageError(f"{option} is empty")
    if any(not 1 <= v <= 2**31 for v in values):
        raise UsageError(f"{option} values must be between 1 and 2^31; got {text!r}")
    return values
