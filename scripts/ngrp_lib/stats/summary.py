"""`compute_stats`: every statistic of a reward profile, overall and per group, each with its n.

Read (load_profile, attach_rollouts) -> per-task columns (estimators) -> one cluster bootstrap over all
columns at once (uncertainty) -> JSON-ready dicts. The task (profile row) is the cluster throughout.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import FindingsError, UsageError
from . import estimators, length
from .load import ProfileData, attach_rollouts, load_profile
from .majority import NO_ANSWER, TIE_RULE, majority_at_k
from .uncertainty import bootstrap_means, percentile_interval, t_interval
from .variance import decompose, repeats_for_width

LENGTH_FIELD = "output_tokens"

# The per-k estimators of a stats scope, with their display labels ({k} filled in).
K_METRICS = (
    ("pass_at_k", "pass@{k}"),
    ("pass_hat_k", "pass^{k}"),
    ("majority_at_k", "maj@{k}"),
    ("best_of_k", "E[best of {k}]"),
    ("worst_of_k", "E[worst of {k}]"),
)


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

    def check(self) -> None:
        if self.ks is not None and any(k < 1 for k in self.ks):
            raise UsageError("--k values must be positive integers")
        if self.group_sizes is not None and any(g < 2 for g in self.group_sizes):
            raise UsageError("--group-size must be at least 2 (a group of one is never informative)")
        if self.n_bootstrap < 0:
            raise UsageError("--bootstrap must be >= 0 (0 turns the bootstrap off)")
        if not 0 < self.target_width < math.inf:
            raise UsageError("--target-width must be a positive, finite number")


FEW_TASKS = 10  # below this many clusters, cluster-level intervals are not to be trusted


@dataclass
class StatsResult:
    profile: str
    rollouts: str | None
    settings: dict
    inputs: dict
    overall: dict
    groups: list[dict] = field(default_factory=list)
    per_task: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        # Shallow: the fields already hold plain dicts and lists (asdict would deep-copy 10^5 values).
        return jsonable({f.name: getattr(self, f.name) for f in fields(self)})


def jsonable(value: Any) -> Any:
    """NaN/inf become null; numpy scalars become Python numbers."""
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return jsonable(value.item())
    return value


class _Columns:
    """Per-task value vectors, bootstrapped together so every interval uses the same resamples."""

    def __init__(self) -> None:
        self.names: list[tuple[str, int | None]] = []
        self.vectors: list[Any] = []

    def add(self, name: str, k: int | None, vector: Any) -> None:
        self.names.append((name, k))
        self.vectors.append(vector)

    def summarise(self, settings: StatsSettings) -> dict[tuple[str, int | None], dict]:
        import numpy as np

        if not self.vectors:
            return {}
        matrix = np.column_stack(self.vectors)
        low = high = boot_se = np.full(matrix.shape[1], np.nan)
        if settings.n_bootstrap:
            reps = bootstrap_means(matrix, settings.n_bootstrap, settings.seed)
            low, high = percentile_interval(reps, settings.level)
            boot_se = _replicate_sd(reps)
        out = {}
        for j, key in enumerate(self.names):
            iv = t_interval(matrix[:, j], settings.level)
            out[key] = {
                "value": iv.value,
                "se": iv.se,
                "ci_low": iv.ci_low,
                "ci_high": iv.ci_high,
                "boot_ci_low": low[j],
                "boot_ci_high": high[j],
                "boot_se": boot_se[j],
                "n_tasks": iv.n,
            }
        return out


def _replicate_sd(reps):
    """SD of the bootstrap replicates per column (the bootstrap SE), ignoring undefined replicates."""
    import numpy as np

    out = np.full(reps.shape[1], np.nan)
    for j in range(reps.shape[1]):
        col = reps[:, j][~np.isnan(reps[:, j])]
        if col.size >= 2:
            out[j] = col.std(ddof=1)
    return out


def _rollout_weighted(rewards) -> dict:
    import numpy as np

    mask = ~np.isnan(rewards)
    n_roll, n_tasks = int(mask.sum()), int(mask.any(axis=1).sum())
    if n_roll == 0:
        return {
            "value": math.nan,
            "se_naive_iid": math.nan,
            "se_clustered": math.nan,
            "n_rollouts": 0,
            "n_tasks": 0,
        }
    mu = float(rewards[mask].mean())
    naive = float(rewards[mask].std(ddof=1) / math.sqrt(n_roll)) if n_roll > 1 else math.nan
    resid = np.where(mask, rewards - mu, 0.0).sum(axis=1)[mask.any(axis=1)]
    clustered = (
        math.sqrt(n_tasks / (n_tasks - 1) * float((resid**2).sum())) / n_roll if n_tasks > 1 else math.nan
    )
    return {
        "value": mu,
        "se_naive_iid": naive,
        "se_clustered": clustered,
        "n_rollouts": n_roll,
        "n_tasks": n_tasks,
    }


def _difficulty(n, c) -> dict:
    import numpy as np

    bands = estimators.difficulty_band(n, c)
    scored = int((n > 0).sum())
    out: dict[str, Any] = {"n_tasks": scored}
    for band in ("all_fail", "mixed", "all_pass"):
        count = int((bands == band).sum())
        out[band] = {"n_tasks": count, "share": count / scored if scored else math.nan}
    zero_of = n[(c == 0) & (n > 0)]
    # 0 successes in n: the exact one-sided 95% upper bound 1 - 0.05^(1/n) (about 3/n, the rule of three,
    # for large n, but never above 1: with n = 1 it is 0.95)
    bound = 1.0 - 0.05 ** (1.0 / zero_of)
    out["all_fail_upper_bound_95_median"] = float(np.median(bound)) if zero_of.size else math.nan
    return out


def _ks(settings: StatsSettings, kmax: int) -> list[int]:
    return sorted(set(settings.ks)) if settings.ks else list(range(1, kmax + 1))


def _group_sizes(settings: StatsSettings, kmax: int) -> list[int]:
    if settings.group_sizes:
        return sorted(set(settings.group_sizes))
    return [2**i for i in range(1, 12) if 2**i <= kmax] or [2]


def _curve(summary: dict, name: str, ks: list[int]) -> list[dict]:
    return [{"k": k, **summary[(name, k)]} for k in ks if (name, k) in summary]


def scope_stats(data: ProfileData, settings: StatsSettings, label: str) -> tuple[dict, dict]:
    """Statistics for one set of tasks. Returns (JSON-ready dict, per-task columns for the per-task table)."""

    rewards = data.values["reward"]
    n, _ = estimators.counts(rewards)
    kmax = int(n.max()) if n.size else 0
    ks, sizes = _ks(settings, kmax), _group_sizes(settings, kmax)
    success = estimators.successes(rewards, settings.pass_threshold)
    cols = _Columns()
    task_means = estimators.row_means(rewards)
    cols.add("mean_reward", None, task_means)
    per_task: dict[str, Any] = {"n": n, "mean_reward": task_means}
    if success is not None:
        ns, cs = estimators.counts(success)
        per_task.update(
            successes=cs, pass_rate=estimators.row_means(success), band=estimators.difficulty_band(ns, cs)
        )
        cols.add("pass_rate", None, per_task["pass_rate"])
        for k in ks:
            cols.add("pass_at_k", k, estimators.pass_at_k(ns, cs, k))
            cols.add("pass_hat_k", k, estimators.pass_hat_k(ns, cs, k))
        for g in sizes:
            per_task[f"p_informative_{g}"] = estimators.p_informative(ns, cs, g)
            cols.add("p_informative", g, per_task[f"p_informative_{g}"])
    else:
        for k in ks:
            cols.add("best_of_k", k, estimators.expected_extreme_of_k(rewards, k, best=True))
            cols.add("worst_of_k", k, estimators.expected_extreme_of_k(rewards, k, best=False))
    if "answer" in data.extras:
        import numpy as np

        # Rollouts missing from the rollouts file have no known answer: leave them out, not "no answer".
        # "correct" as pass@k counts it: under --pass-threshold the majority answer scores 1 when it passes
        scores = rewards if success is None else success
        known = np.where(np.isnan(data.extras["truncated"]), np.nan, scores)
        maj = majority_at_k(data.extras["answer"].tolist(), known.tolist(), ks)
        for col, k in enumerate(ks):
            cols.add("majority_at_k", k, maj[:, col])
    summary = cols.summarise(settings)
    variance = decompose(rewards)
    prior = None
    if success is not None:
        a, b, per_task["pass_rate_shrunk"] = estimators.beta_binomial_shrinkage(
            ns, cs, decompose(success).sigma2_between
        )
        prior = {"alpha": a, "beta": b, "method": "method of moments on per-task pass rates"}
    out: dict[str, Any] = {
        "scope": label,
        "n_tasks": int((n > 0).sum()),
        "n_tasks_unscored": int((n == 0).sum()),
        "n_rollouts": int(n.sum()),
        "n_null_rewards": int((data.rollout_index >= 0).sum() - n.sum()),
        "rollouts_per_task": {
            "min": int(n[n > 0].min()) if (n > 0).any() else None,
            "max": kmax,
            "mean": float(n[n > 0].mean()) if (n > 0).any() else math.nan,
        },
        "binary": success is not None,
        "mean_reward": {
            "task_weighted": {
                **summary[("mean_reward", None)],
                "se_population": summary[("mean_reward", None)]["se"],
                "se_conditional": variance.se_conditional,
                "n_tasks_conditional": variance.n_tasks_within,
            },
            "rollout_weighted": _rollout_weighted(rewards),
        },
        "pass_rate": summary.get(("pass_rate", None)),
        "pass_at_k": _curve(summary, "pass_at_k", ks),
        "pass_hat_k": _curve(summary, "pass_hat_k", ks),
        "best_of_k": _curve(summary, "best_of_k", ks),
        "worst_of_k": _curve(summary, "worst_of_k", ks),
        "majority_at_k": _curve(summary, "majority_at_k", ks) if "answer" in data.extras else None,
        "variance": asdict(variance),
        "repeats_needed": repeats_for_width(variance.sigma2_within, settings.target_width, settings.level),
        "difficulty": _difficulty(*estimators.counts(success)) if success is not None else None,
        "shrinkage_prior": prior,
        "grpo_informative": [{"group_size": g, **summary[("p_informative", g)]} for g in sizes]
        if success is not None
        else [],
        "reward_length": _reward_length(data, rewards, success),
    }
    return out, per_task


def _reward_length(data: ProfileData, rewards, success) -> dict | None:
    import numpy as np

    lengths = data.values.get(LENGTH_FIELD)
    if lengths is None or np.isnan(lengths).all():
        return None
    gap = length.length_gap(success, lengths) if success is not None else None
    truncated = data.extras.get("truncated")
    return {
        "length_field": LENGTH_FIELD,
        "pooled_correlation": length.pooled_correlation(rewards, lengths),
        "within_task_correlation": length.within_task_correlation(rewards, lengths),
        "fixed_effects_slope": length.fixed_effects_slope(rewards, lengths),
        "correct_minus_incorrect_length": asdict(gap) if gap is not None else None,
        "truncation": length.truncation(rewards, truncated) if truncated is not None else None,
        "tokens_per_success": length.tokens_per_success(success, lengths) if success is not None else None,
        "reward_by_length_decile": length.reward_by_length_bin(rewards, lengths),
        "mean_length": float(np.nanmean(lengths)),
    }


def _group_labels(data: ProfileData, group_by: str) -> list[str]:
    if group_by == "agent":
        return [str(agent) if agent is not None else "(no agent)" for _, agent in data.keys]
    labels = []
    for sample in data.samples:
        value = sample.get(group_by)
        labels.append("(missing)" if value is None else value if isinstance(value, str) else repr(value))
    return labels


def _per_task_rows(data: ProfileData, cols: dict, labels: list[str] | None, sizes: list[int]) -> list[dict]:
    import numpy as np

    lengths = data.values.get(LENGTH_FIELD)
    mean_len = estimators.row_means(lengths) if lengths is not None else None
    rows = []
    low = high = None
    if "successes" in cols:
        low, high = estimators.wilson_interval(cols["successes"], cols["n"])
    for i, (task, agent) in enumerate(data.keys):
        row: dict[str, Any] = {
            "task": task,
            "agent": agent,
            "n": int(cols["n"][i]),
            "mean_reward": cols["mean_reward"][i],
        }
        if labels is not None:
            row["group"] = labels[i]
        if low is not None:
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


def compute_stats(
    profile: Path | str, rollouts: Path | str | None = None, settings: StatsSettings | None = None
) -> StatsResult:
    """All statistics for a profile (and optional rollouts file), overall and per group."""
    import numpy as np

    settings = settings or StatsSettings()
    settings.check()
    if settings.answer_key and rollouts is None:
        raise UsageError(
            "--answer-key needs --rollouts (answers are not in the profile)",
            hint="pass the rollouts.jsonl the profile was made from",
        )
    data = load_profile(profile, ("reward", LENGTH_FIELD))
    if data.n_tasks == 0:
        raise FindingsError(
            f"{profile} has no rows: nothing to compute",
            hint="was profiling run on an empty or fully masked rollouts file?",
        )
    inputs: dict[str, Any] = {"profile_rows": data.n_tasks, "profile_rollouts": data.n_rows_measured}
    notes: list[str] = []
    if rollouts is not None:
        inputs["rollouts"] = attach_rollouts(data, rollouts, settings.answer_key)
    overall, cols = scope_stats(data, settings, "all")
    if not overall["binary"]:
        notes.append("rewards are not all 0/1: pass metrics need --pass-threshold; showing best/worst-of-k")
    if data.n_tasks < FEW_TASKS:
        notes.append(
            f"only {data.n_tasks} task(s): no benchmark-level interval is reliable below about {FEW_TASKS} "
            "(the bootstrap is too narrow, t too wide); quote the counts and the per-task Wilson intervals "
            "(--json: per_task), and add tasks"
        )
    if len({task for task, _ in data.keys}) < data.n_tasks:
        notes.append(
            "fan-out profile: each (task, agent) row is one cluster; "
            "use --group-by agent for per-agent numbers"
        )
    if rollouts is not None and inputs["rollouts"]["profile_rollouts_not_in_file"]:
        notes.append(
            f"{inputs['rollouts']['profile_rollouts_not_in_file']} profiled rollouts are not in the "
            "rollouts file: left out of majority@k and truncation"
        )
    if overall["majority_at_k"] is not None:
        notes.append(f"majority@k tie rule: {TIE_RULE}; {NO_ANSWER}")
        if all(answer is None for answer in data.extras["answer"].flat):
            notes.append(
                f"no rollout has a value under --answer-key {settings.answer_key!r}: every rollout counts as"
                " 'no answer', so majority@k says nothing (check the key name)"
            )
    labels = _group_labels(data, settings.group_by) if settings.group_by else None
    if labels is not None and settings.group_by != "agent" and set(labels) == {"(missing)"}:
        notes.append(f"no profile row has '{settings.group_by}' in its sample: one group '(missing)'")
    groups = []
    if labels is not None:
        array = np.array(labels, dtype=object)
        for label in sorted(set(labels)):
            groups.append(scope_stats(data.subset(array == label), settings, label)[0])
    sizes = [g["group_size"] for g in overall["grpo_informative"]]
    return StatsResult(
        profile=str(profile),
        rollouts=None if rollouts is None else str(rollouts),
        settings=asdict(settings),
        inputs=inputs,
        overall=overall,
        groups=groups,
        per_task=_per_task_rows(data, cols, labels, sizes),
        notes=notes,
    )


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
    return values
