"""Paired comparison of two reward profiles on the same tasks (B - A).

Tasks are matched by (task index, agent). Each task contributes one difference d_i = mean_B,i - mean_A,i,
so shared task difficulty cancels. Reported: the paired t interval, a paired (task) bootstrap interval,
a sign-flip permutation p-value, McNemar when each run has one binary rollout per task, per-task flips
by Fisher's exact test with Benjamini-Hochberg, and the minimum detectable effect at 80% power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.names import task_label
from ..errors import FindingsError, UsageError
from ..jsonvalues import finite, jsonable
from . import paired
from .adaptive_run import adaptive_note, first_rounds
from .distributions import benjamini_hochberg, fisher_exact_two_sided, mcnemar_exact, t_two_sided_p
from .estimators import counts, row_means, successes
from .load import ProfileData, load_profile
from .paired import Correlation, PairedAtK
from .uncertainty import bootstrap_interval, check_resampling, t_interval

EXACT_PERMUTATION_MAX_TASKS = 20
MONTE_CARLO_PERMUTATIONS = 20000


@dataclass
class TaskDiff:
    task: int
    agent: str | None
    mean_a: float | None
    n_a: int
    mean_b: float | None
    n_b: int
    diff: float | None
    successes_a: int | None = None
    successes_b: int | None = None
    p_value: float | None = None
    q_value: float | None = None


@dataclass
class McNemar:
    a_only_success: int
    b_only_success: int
    n: int
    p_value: float
    method: str = "exact binomial on discordant pairs"


@dataclass
class Flip:
    """A task whose pass count changed beyond chance (Fisher's exact test, BH q < alpha)."""

    task: int
    agent: str | None
    direction: str  # better_in_b or worse_in_b: on pass counts (the mean reward can move the other way)
    a: str  # "successes/n" in A
    b: str
    p_value: float
    q_value: float


@dataclass
class CompareResult:
    path_a: str
    path_b: str
    metric: str
    n_tasks: int  # tasks in both runs with a defined metric in each (the paired n)
    n_dropped: int  # tasks in only one run, dropped by --intersect
    n_only_a: int
    n_only_b: int
    n_undefined: int  # matched tasks where a run has no defined value (all null), excluded
    mean_a: float
    mean_b: float
    mean_diff: float
    se_diff: float
    t_stat: float
    p_value_t: float
    ci_low: float
    ci_high: float
    boot_ci_low: float
    boot_ci_high: float
    n_bootstrap: int
    seed: int
    p_value_permutation: float
    permutation_method: str
    n_permutations: int
    mde_80: float  # z-based, at 80% power
    mde_80_t: float  # t-based (n_tasks - 1 df)
    mde_basis: str  # "paired differences", "within-task variance" (degenerate comparison) or "none"
    effect: float | None  # --effect
    tasks_needed: int | None  # paired tasks a t test needs to detect `effect` at 80% power
    correlation: Correlation  # of A's and B's per-task means
    identical: str | None  # "same_rewards_per_key" / "zero_differences": a degenerate comparison
    binary: bool
    mcnemar: McNemar | None
    alpha: float
    n_flips: int  # tasks whose BH-adjusted Fisher q-value is below alpha
    flips: list[Flip] = field(default_factory=list)
    pass_at_k: list[PairedAtK] = field(default_factory=list)  # paired by task, binary metrics only
    pass_hat_k: list[PairedAtK] = field(default_factory=list)
    per_task: list[TaskDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    adaptive: dict[str, Any] = field(default_factory=dict)  # "A"/"B": that side's adaptive run, if it is one

    def to_json(self) -> dict[str, Any]:
        # NaN and infinities are undefined: null in JSON (the n next to them says why).
        return jsonable(self)


def _index(data: ProfileData) -> dict:
    return {key: i for i, key in enumerate(data.keys)}


def _match(a: ProfileData, b: ProfileData, intersect: bool) -> tuple[list, int, int]:
    ia, ib = _index(a), _index(b)
    only_a = sorted(set(ia) - set(ib), key=str)
    only_b = sorted(set(ib) - set(ia), key=str)
    if (only_a or only_b) and not intersect:
        sample = ", ".join(task_label(t, g) for t, g in (only_a + only_b)[:5])
        raise FindingsError(
            f"the runs cover different tasks: {len(only_a)} only in A ({a.path}), {len(only_b)} only in B "
            f"({b.path}); for example {sample}",
            hint="compare runs on the same task set, or pass --intersect to compare the shared tasks only",
        )
    shared = sorted(set(ia) & set(ib), key=lambda k: (k[0], str(k[1])))
    return [(key, ia[key], ib[key]) for key in shared], len(only_a), len(only_b)


def sign_flip_p_value(diffs, seed: int) -> tuple[float, str, int]:
    """Two-sided sign-flip permutation p-value for mean(d) = 0. Exact for small n, seeded Monte Carlo else."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    n = d.size
    if n == 0:
        return math.nan, "none", 0
    observed = abs(d.sum()) * (1 - 1e-12) - 1e-12  # tolerance for float ties
    if n <= EXACT_PERMUTATION_MAX_TASKS:
        total = 1 << n
        extreme = 0
        bits = np.arange(n)
        for start in range(0, total, 1 << 16):
            codes = np.arange(start, min(total, start + (1 << 16)))
            signs = 1 - 2 * ((codes[:, None] >> bits) & 1)
            extreme += int((np.abs(signs @ d) >= observed).sum())
        return extreme / total, "exact", total
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, MONTE_CARLO_PERMUTATIONS, 2000):
        size = min(2000, MONTE_CARLO_PERMUTATIONS - start)
        signs = rng.choice((-1.0, 1.0), size=(size, n))
        extreme += int((np.abs(signs @ d) >= observed).sum())
    return (1 + extreme) / (1 + MONTE_CARLO_PERMUTATIONS), "monte_carlo", MONTE_CARLO_PERMUTATIONS


def _mcnemar(na, ca, nb, cb) -> McNemar | None:
    import numpy as np

    if not (np.all(na == 1) and np.all(nb == 1)):
        return None
    only_a = int(((ca == 1) & (cb == 0)).sum())
    only_b = int(((ca == 0) & (cb == 1)).sum())
    return McNemar(only_a, only_b, int(na.size), mcnemar_exact(only_a, only_b))


@dataclass(frozen=True)
class FlipTest:
    """The per-task test of B against A on pass counts: Fisher's exact test, q-values by Benjamini-Hochberg
    over every task tested together; a task flipped when q < alpha."""

    p_value: float
    q_value: float | None
    flipped: bool
    direction: str  # better_in_b | worse_in_b | same (pass rates equal)


def flip_tests(
    successes_a: list[int], n_a: list[int], successes_b: list[int], n_b: list[int], alpha: float
) -> list[FlipTest]:
    """One FlipTest per task from its pass counts in A and B (every n > 0). Used by `compare` and by the
    viewer's compare mode, so both call the same tasks flipped."""
    p_values = [
        fisher_exact_two_sided(cb, nb - cb, ca, na - ca)
        for ca, na, cb, nb in zip(successes_a, n_a, successes_b, n_b, strict=True)
    ]
    out = []
    for ca, na, cb, nb, p, q in zip(
        successes_a, n_a, successes_b, n_b, p_values, benjamini_hochberg(p_values), strict=True
    ):
        rate_a, rate_b = ca / na, cb / nb
        # the test is on pass counts, so is the direction (the mean reward can move the other way)
        direction = "better_in_b" if rate_b > rate_a else "worse_in_b" if rate_b < rate_a else "same"
        out.append(FlipTest(p, q, q is not None and q < alpha, direction))
    return out


def _no_flip_note(rows: list[TaskDiff], counts: list[tuple[int, int]], alpha: float) -> list[str]:
    """Why no task flipped although pass counts changed. With few repeats a task's Fisher p has a floor:
    the most extreme table (every repeat passing in one run, none in the other); a BH q is never below
    the smallest p, so when that floor is alpha or more no task can flip at all."""
    changed = [(a, b) for a, b in counts if a != b]
    sized = [r for r in rows if r.n_a and r.n_b]
    if not changed or not sized:
        return []
    up = sum(b > a for a, b in changed)
    floor = min(fisher_exact_two_sided(r.n_b, 0, 0, r.n_a) for r in sized)
    text = (
        f"{len(changed)} task(s) changed pass counts (B higher in {up}, lower in {len(changed) - up}) "
        f"but none flipped at q < {alpha}: "
    )
    if floor >= alpha:
        text += f"with these repeats no task can (the smallest Fisher p a task can reach is {floor:.3g})"
    else:
        text += f"each is within chance for its task (with these repeats a task's p is at least {floor:.3g})"
    return [
        text
        + "; the run-level tests above judge the runs as a whole, and more repeats per task sharpen flips"
    ]


def _flips(rows: list[TaskDiff], counts: list[tuple[int, int]], alpha: float) -> list[Flip]:
    """Fisher's exact test per task on (successes A, successes B), then Benjamini-Hochberg (flip_tests)."""
    for row, (ca, cb) in zip(rows, counts, strict=True):
        row.successes_a, row.successes_b = ca, cb
    a_counts, b_counts = [ca for ca, _ in counts], [cb for _, cb in counts]
    tests = flip_tests(a_counts, [r.n_a for r in rows], b_counts, [r.n_b for r in rows], alpha)
    flips = []
    for row, (ca, cb), test in zip(rows, counts, tests, strict=True):
        row.p_value, row.q_value = test.p_value, test.q_value
        if test.flipped:
            a, b = f"{ca}/{row.n_a}", f"{cb}/{row.n_b}"
            flips.append(Flip(row.task, row.agent, test.direction, a, b, test.p_value, test.q_value or 0.0))
    return sorted(flips, key=lambda f: f.q_value)


def compare_profiles(
    a: Path,
    b: Path,
    *,
    intersect: bool = False,
    metric: str = "reward",
    seed: int = 0,
    n_bootstrap: int = 2000,
    pass_threshold: float | None = None,
    alpha: float = 0.05,
    effect: float | None = 0.05,
) -> CompareResult:
    """Compare profile B against profile A on the same (task, agent) keys; differences are B - A."""
    import numpy as np

    check_resampling(n_bootstrap, seed)
    if not 0 < alpha < 1:  # also refuses nan
        raise UsageError(f"--alpha must be between 0 and 1, not {alpha}")
    if effect is not None and not 0 < effect < math.inf:
        raise UsageError(f"--effect must be a positive number, not {effect}")
    da, db = load_profile(a, (metric,)), load_profile(b, (metric,))
    da, db, adaptive = first_rounds({"A": (a, da), "B": (b, db)})
    pairs, only_a, only_b = _match(da, db, intersect)
    ia = np.array([p[1] for p in pairs], dtype=int)
    ib = np.array([p[2] for p in pairs], dtype=int)
    va, vb = da.values[metric][ia], db.values[metric][ib]
    na, _ = counts(va)
    nb, _ = counts(vb)
    ma, mb = row_means(va), row_means(vb)
    diffs = mb - ma
    defined = ~np.isnan(diffs)
    rows = [
        TaskDiff(key[0], key[1], finite(ma[i]), int(na[i]), finite(mb[i]), int(nb[i]), finite(diffs[i]))
        for i, (key, _, _) in enumerate(pairs)
    ]
    if not defined.any():
        what = "share no task" if not pairs else f"share no task that has '{metric}' in both profiles"
        raise FindingsError(
            f"{a} and {b} {what}: nothing to compare",
            hint="compare runs of the same tasks (--metric names a key of the profile rows, e.g. reward)",
        )
    d = diffs[defined]
    interval = t_interval(d)
    boot = bootstrap_interval(d, n_bootstrap, seed) if n_bootstrap else (math.nan, math.nan)
    p_perm, method, n_perm = sign_flip_p_value(d, seed)
    sa = successes(va[defined], pass_threshold) if len(pairs) else None
    sb = successes(vb[defined], pass_threshold) if len(pairs) else None
    binary = sa is not None and sb is not None
    notes: list[str] = [text for text in (adaptive_note(adaptive),) if text]
    differing = [key for key, i, j in pairs if task_data(da.samples[i]) != task_data(db.samples[j])]
    if differing:
        task, agent = differing[0]
        notes.append(
            f"{len(differing)} paired task(s) hold different task data in the two profiles' samples (first: "
            f"{task_label(task, agent)}): tasks are paired by _ng_task_index, so check that both runs "
            "used the same task rows in the same order (a prompt change should touch the prompt only)"
        )
    mcnemar, flips, at_k, hat_k = None, [], [], []
    used = [r for r, ok in zip(rows, defined, strict=False) if ok]
    if binary and used:
        nsa, csa = counts(sa)
        nsb, csb = counts(sb)
        mcnemar = _mcnemar(nsa, csa, nsb, csb)
        pairs = [(int(x), int(y)) for x, y in zip(csa, csb, strict=True)]
        flips = _flips(used, pairs, alpha)
        if not flips:
            notes.extend(_no_flip_note(used, pairs, alpha))
        ks = paired.compare_ks(nsa, nsb)
        at_k, hat_k = paired.paired_at_k(sa, sb, ks, hat=False), paired.paired_at_k(sa, sb, ks, hat=True)
    elif not binary:
        notes.append(f"'{metric}' is not binary: McNemar and per-task flips need --pass-threshold")
    identical = paired.identical_kind(
        da.rollout_index[ia][defined], va[defined], db.rollout_index[ib][defined], vb[defined], d
    )
    if identical:
        what = identical.replace("_", " ")
        notes.insert(0, f"{paired.IDENTICAL} ({what}): the MDE is from the within-task variance")
    basis, se = "paired differences", interval.se
    if identical or not interval.se:
        basis, se = "within-task variance", paired.within_se(va[defined], vb[defined])
    power = paired.power(se, se * math.sqrt(d.size), d.size, alpha, basis, effect)
    t_stat = interval.value / interval.se if interval.se and interval.se > 0 else math.nan
    return CompareResult(
        path_a=str(a),
        path_b=str(b),
        metric=metric,
        n_tasks=int(defined.sum()),
        n_dropped=only_a + only_b,
        n_only_a=only_a,
        n_only_b=only_b,
        n_undefined=int((~defined).sum()),
        mean_a=_mean(ma[defined]),
        mean_b=_mean(mb[defined]),
        mean_diff=interval.value,
        se_diff=interval.se,
        t_stat=t_stat,
        p_value_t=t_two_sided_p(t_stat, interval.n - 1),
        ci_low=interval.ci_low,
        ci_high=interval.ci_high,
        boot_ci_low=boot[0],
        boot_ci_high=boot[1],
        n_bootstrap=n_bootstrap,
        seed=seed,
        p_value_permutation=p_perm,
        permutation_method=method,
        n_permutations=n_perm,
        # with no spread between tasks the MDE comes from the within-task variance; with none at all: null
        mde_80=power.mde_80,
        mde_80_t=power.mde_80_t,
        mde_basis=power.basis,
        effect=effect,
        tasks_needed=power.tasks_needed,
        correlation=paired.correlation(ma[defined], mb[defined]),
        identical=identical,
        binary=binary,
        mcnemar=mcnemar,
        alpha=alpha,
        n_flips=len(flips),
        flips=flips,
        per_task=rows,
        pass_at_k=at_k,
        pass_hat_k=hat_k,
        notes=notes,
        adaptive=adaptive,
    )


def task_data(sample: dict) -> dict:
    """What identifies a task in a profile row's `sample` (or a materialized input row): everything but the
    prompt and routing stamps."""
    skip = ("responses_create_params", "agent_ref")
    return {k: v for k, v in sample.items() if k not in skip and not k.startswith("_")}


def _mean(values) -> float:
    return float(values.mean()) if values.size else math.nan
