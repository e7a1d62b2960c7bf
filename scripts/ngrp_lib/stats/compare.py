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
from . import methods, paired, rowdiff
from .adaptive_run import AdaptiveRun, adaptive_note, decided_informative, first_rounds
from .denominators import FEW_TASKS, Denominators, denominators, few_tasks_note
from .distributions import benjamini_hochberg, fisher_exact_two_sided, mcnemar_exact, t_two_sided_p
from .estimators import counts, row_means, successes
from .load import ProfileData, load_profile
from .paired import Correlation, PairedAtK
from .uncertainty import Interval, bootstrap_interval, check_resampling, t_interval

EXACT_PERMUTATION_MAX_TASKS = 20
MONTE_CARLO_PERMUTATIONS = 20000


@dataclass
class TaskDiff:
    task: int
    agent: str | None  # the pairing key's agent (`pair_keys`): set only when a run fans a task out
    mean_a: float | None
    n_a: int
    mean_b: float | None
    n_b: int
    diff: float | None
    successes_a: int | None = None
    successes_b: int | None = None
    p_value: float | None = None
    q_value: float | None = None
    source_lines: list[int] | None = None  # the task's lines in its task file (run manifest), else None


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
    denominators: dict[str, Denominators]  # "a" and "b": expected, completed, missing rollouts...
    mean_a: float
    mean_b: float
    mean_diff: float
    se_diff: float
    t_stat: float
    p_value_t: float
    ci_low: float
    ci_high: float
    ci_method: str  # the paired t interval
    boot_ci_low: float
    boot_ci_high: float
    boot_ci_method: str  # the paired (task) bootstrap percentile interval
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
    # B - A of P(informative at G), the share of GRPO groups with a non-zero advantage (k holds G)
    grpo_informative: list[PairedAtK] = field(default_factory=list)
    group_sizes_asked: list[int] = field(default_factory=list)  # --group-size: the answer line says them too
    per_task: list[TaskDiff] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reward_components: dict | None = None  # stats.components.paired_components, from both runs' rows
    # how the paired task rows differ apart from identity (rowdiff.RowDifferences.to_json)
    row_differences: dict[str, Any] = field(default_factory=dict)
    # each run's rollouts (given, or beside its profile), for the commands that show a task's rollouts
    rollouts_a: str | None = None
    rollouts_b: str | None = None
    pass_threshold: float | None = None  # --pass-threshold (None: the metric's values are 0 or 1)

    @property
    def answer(self) -> dict[str, Any]:
        """Does B beat A? Claimed only when the paired 95% t interval excludes 0; otherwise no difference is
        detectable at this n (never "the same"), with the minimum detectable effect."""
        lo, hi = self.ci_low, self.ci_high
        if self.identical:
            claim = "identical_outcomes"
            text = "no claim: the two runs hold the same rewards per key (the same rollouts or seed)"
        elif not (math.isfinite(lo) and math.isfinite(hi)):
            claim, text = "undefined", f"no interval at n={self.n_tasks} tasks: no claim either way"
        elif lo > 0 or hi < 0:
            claim = "b_better" if lo > 0 else "a_better"
            who = "B beats A" if lo > 0 else "A beats B"
            text = f"{who}: B - A = {self.mean_diff:.4g}, 95% CI [{lo:.4g}, {hi:.4g}], n={self.n_tasks} tasks"
        else:
            claim = "not_detectable"
            mde = (
                f"; smallest difference detectable: {self.mde_80:.3g}"
                if self.mde_80 is not None and math.isfinite(self.mde_80)
                else ""
            )
            text = (
                f"no difference detectable at n={self.n_tasks} tasks: B - A = {self.mean_diff:.4g}, 95% CI "
                f"[{lo:.4g}, {hi:.4g}] includes 0{mde} (not evidence that they are the same)"
            )
        asked = [e for e in self.grpo_informative if e.k in self.group_sizes_asked]
        if asked and not self.identical:  # --group-size asked this question too: answer it here
            text = f"mean {self.metric}: {text}; " + "; ".join(_grpo_answer(e) for e in asked)
        return {"claim": claim, "text": text}

    adaptive: dict[str, Any] = field(default_factory=dict)  # "A"/"B": that side's adaptive run, if it is one

    def to_json(self) -> dict[str, Any]:
        # NaN and infinities are undefined: null in JSON (the n next to them says why).
        return {**jsonable(self), "answer": self.answer}


def _grpo_answer(e: PairedAtK) -> str:
    """The --group-size question in the answer line: did B raise the share of GRPO-informative groups?
    Claimed, as for the mean, only when the paired 95% interval excludes 0."""
    lo, hi = e.ci_low, e.ci_high
    head = f"GRPO-informative share at G={e.k}"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{head}: no interval at n={e.n_tasks} tasks, no claim either way"
    numbers = f"B - A = {e.mean_diff:.4g}, 95% CI [{lo:.4g}, {hi:.4g}], n={e.n_tasks} tasks"
    if lo > 0 or hi < 0:
        return f"{head}: {'B raises it' if lo > 0 else 'B lowers it'}: {numbers}"
    return f"{head}: no difference detectable: {numbers} includes 0"


def pair_keys(tasks: list[int], agents: list[str | None]) -> list[tuple[int, str | None]]:
    """The keys two runs are paired by, one per (task, agent) group of a run's rollouts: as its reward
    profile names its rows (`profile.group_rows`, Gym's layout), (task, agent) when the run fans a task out
    to several agents, else (task, None). `compare` pairs the profiles' keys; the viewer's compare mode
    derives the same keys from the rollouts with this, so both pair the same tasks and report the same
    `agent` (a run whose rows all name one agent, as a directly collected run names its model, pairs by
    task with a run of another model)."""
    seen: dict[int, str | None] = {}
    fans_out = False
    for task, agent in zip(tasks, agents, strict=True):
        if seen.setdefault(task, agent) != agent:
            fans_out = True
            break
    return [(t, a if fans_out else None) for t, a in zip(tasks, agents, strict=True)]


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


@dataclass
class _Pairs:
    """The paired tasks' per-rollout values in A and B, one row per pair in pair order."""

    keys: list
    va: Any
    vb: Any
    rollouts_a: Any  # rollout indices (for the identical-outcomes check)
    rollouts_b: Any

    @classmethod
    def of(cls, da: ProfileData, db: ProfileData, pairs: list, metric: str) -> _Pairs:
        import numpy as np

        ia = np.array([p[1] for p in pairs], dtype=int)
        ib = np.array([p[2] for p in pairs], dtype=int)
        va, vb = da.values[metric][ia], db.values[metric][ib]
        return cls([p[0] for p in pairs], va, vb, da.rollout_index[ia], db.rollout_index[ib])

    def rows(self) -> tuple[list[TaskDiff], Any]:
        """One TaskDiff per pair, and the per-task differences (NaN where a run has no value)."""
        (na, _), (nb, _) = counts(self.va), counts(self.vb)
        ma, mb = row_means(self.va), row_means(self.vb)
        diffs = mb - ma
        rows = [
            TaskDiff(key[0], key[1], finite(ma[i]), int(na[i]), finite(mb[i]), int(nb[i]), finite(diffs[i]))
            for i, key in enumerate(self.keys)
        ]
        return rows, diffs


def _check_options(n_bootstrap: int, seed: int, alpha: float, effect: float | None) -> None:
    check_resampling(n_bootstrap, seed)
    if not 0 < alpha < 1:  # also refuses nan
        raise UsageError(f"--alpha must be between 0 and 1, not {alpha}")
    if effect is not None and not 0 < effect < math.inf:
        raise UsageError(f"--effect must be a positive number, not {effect}")


def _difference(d: Any, n_bootstrap: int, seed: int, unit: bool) -> tuple[dict[str, Any], Any]:
    """The mean paired difference, its t and bootstrap intervals and tests (CompareResult's fields). The
    paired t holds its coverage from about 30 tasks on (references/statistics.md); when every task's
    difference is the same it has no width, so then, for values in [0, 1] (`unit`), the exact
    constant-difference bound (`differences.constant_difference`)."""
    from .differences import constant_difference

    interval = t_interval(d)
    ci_method = methods.T
    if unit and d.size and float(d.max() - d.min()) <= 1e-12:
        low, high = constant_difference(float(d[0]), int(d.size), 0.95)
        interval = Interval(interval.value, interval.se, low, high, interval.n)
        ci_method = methods.CONSTANT_DIFFERENCE
    boot = bootstrap_interval(d, n_bootstrap, seed) if n_bootstrap else (math.nan, math.nan)
    p_perm, method, n_perm = sign_flip_p_value(d, seed)
    t_stat = interval.value / interval.se if interval.se and interval.se > 0 else math.nan
    fields = dict(
        mean_diff=interval.value, se_diff=interval.se, t_stat=t_stat,
        p_value_t=t_two_sided_p(t_stat, interval.n - 1), ci_low=interval.ci_low, ci_high=interval.ci_high,
        ci_method=ci_method, boot_ci_low=boot[0], boot_ci_high=boot[1], boot_ci_method=methods.BOOTSTRAP,
        n_bootstrap=n_bootstrap, seed=seed, p_value_permutation=p_perm, permutation_method=method,
        n_permutations=n_perm,
    )  # fmt: skip
    return fields, interval


def _binary(
    p: _Pairs,
    defined: Any,
    used: list[TaskDiff],
    options: CompareOptions,
    runs: dict[str, AdaptiveRun],
) -> dict:
    """McNemar, per-task flips and paired pass@k / pass^k when both runs' values are pass/fail; B - A of
    P(informative at G), where an adaptive learnable side gives it at G = N from its decisions."""
    threshold, alpha, metric = options.pass_threshold, options.alpha, options.metric
    sa, sb = successes(p.va[defined], threshold), successes(p.vb[defined], threshold)
    out: dict[str, Any] = dict(binary=sa is not None and sb is not None, mcnemar=None, flips=[], notes=[])
    if sa is None or sb is None:
        out["notes"] = [f"'{metric}' is not binary: McNemar and per-task flips need --pass-threshold"]
        return out
    (nsa, csa), (nsb, csb) = counts(sa), counts(sb)
    pass_counts = [(int(x), int(y)) for x, y in zip(csa, csb, strict=True)]
    flips = _flips(used, pass_counts, alpha)
    ks = paired.compare_ks(nsa, nsb)
    out.update(mcnemar=_mcnemar(nsa, csa, nsb, csb), flips=flips)
    out["notes"] = [] if flips else _no_flip_note(used, pass_counts, alpha)
    out["pass_at_k"] = paired.paired_at_k(sa, sb, ks, hat=False)
    out["pass_hat_k"] = paired.paired_at_k(sa, sb, ks, hat=True)
    sizes = list(options.group_sizes) or [k for k in ks[-1:] if k >= 2]  # default: the repeats both hold
    tasks = [key[0] for key, ok in zip(p.keys, defined, strict=True) if ok]
    decided = {}
    for side, run in runs.items():
        values = decided_informative(run, tasks)
        if values is not None:
            decided[side] = (run.num_repeats, values)
    out["grpo_informative"] = paired.paired_informative(sa, sb, sizes, decided)
    missing = [g for g in sizes if g not in {e.k for e in out["grpo_informative"]}]
    if missing:
        out["notes"].append(
            f"P(informative at G) not compared for G={', '.join(map(str, missing))}: no paired task has "
            "that many scored rollouts in both runs"
        )
    return out


def _power(p: _Pairs, defined: Any, d: Any, interval: Any, alpha: float, effect: float | None) -> dict:
    """The MDE and tasks needed (from the paired differences, or the within-task variance when the
    comparison is degenerate) and the identical-outcomes check (CompareResult's fields)."""
    va, vb = p.va[defined], p.vb[defined]
    identical = paired.identical_kind(p.rollouts_a[defined], va, p.rollouts_b[defined], vb, d)
    basis, se = "paired differences", interval.se
    if identical or not interval.se:
        basis, se = "within-task variance", paired.within_se(va, vb)
    power = paired.power(se, se * math.sqrt(d.size), d.size, alpha, basis, effect)
    return dict(
        mde_80=power.mde_80, mde_80_t=power.mde_80_t, mde_basis=power.basis, effect=effect,
        tasks_needed=power.tasks_needed, identical=identical,
    )  # fmt: skip


@dataclass(frozen=True)
class CompareOptions:
    """How two profiles are compared: on their shared keys only (`intersect`), which metric, the
    resampling (seed, bootstrap resamples; 0: none), what counts as a pass (None: rewards must be 0 or 1),
    the tests' alpha and the effect whose power is reported (None: none)."""

    intersect: bool = False
    metric: str = "reward"
    seed: int = 0
    n_bootstrap: int = 2000
    pass_threshold: float | None = None
    alpha: float = 0.05
    effect: float | None = 0.05
    group_sizes: tuple[int, ...] = ()  # GRPO group sizes for P(informative); () = the repeats both hold


def compare_profiles(
    a: Path,
    b: Path,
    options: CompareOptions = CompareOptions(),
    rollouts: tuple[Path | None, Path | None] = (None, None),
) -> CompareResult:
    """Compare profile B against profile A on the same (task, agent) keys; differences are B - A.
    `rollouts`: A's and B's rollouts files (None: the one beside each profile, when it is there)."""
    import numpy as np

    _check_options(options.n_bootstrap, options.seed, options.alpha, options.effect)
    if any(g < 2 for g in options.group_sizes):
        raise UsageError("--group-size must be at least 2 (a group of one is never informative)")
    da, db = load_profile(a, (options.metric,)), load_profile(b, (options.metric,))
    da, db, adaptive, runs = first_rounds({"A": (a, da), "B": (b, db)})
    pairs, only_a, only_b = _match(da, db, options.intersect)
    p = _Pairs.of(da, db, pairs, options.metric)
    rows, diffs = p.rows()
    defined = ~np.isnan(diffs)
    if not defined.any():
        what = "share no task" if not pairs else f"share no task that has '{options.metric}' in both profiles"
        raise FindingsError(
            f"{a} and {b} {what}: nothing to compare",
            hint="compare runs of the same tasks (--metric names a key of the profile rows, e.g. reward)",
        )
    d = diffs[defined]
    unit = all(bool(((v[~np.isnan(v)] >= 0) & (v[~np.isnan(v)] <= 1)).all()) for v in (p.va, p.vb))
    difference, interval = _difference(d, options.n_bootstrap, options.seed, unit)
    used = [r for r, ok in zip(rows, defined, strict=True) if ok]
    binary = _binary(p, defined, used, options, runs)
    power = _power(p, defined, d, interval, options.alpha, options.effect)
    counted = {
        "a": denominators(da, options.metric, beside_summary=True),
        "b": denominators(db, options.metric, beside_summary=True),
    }
    differences = rowdiff.between(da.samples, db.samples, [(i, j) for _, i, j in pairs])
    notes = _notes(
        counted, int(defined.sum()), power["identical"], _differing_note(differences, pairs), binary
    )
    notes[:0] = [text for text in (adaptive_note(adaptive),) if text]
    means_a, means_b = row_means(p.va)[defined], row_means(p.vb)[defined]
    found = _rollouts_and_lines(a, b, rollouts, rows)
    return CompareResult(
        path_a=str(a), path_b=str(b), metric=options.metric, n_tasks=int(defined.sum()),
        n_dropped=only_a + only_b,
        n_only_a=only_a, n_only_b=only_b, n_undefined=int((~defined).sum()), denominators=counted,
        mean_a=_mean(means_a), mean_b=_mean(means_b), **difference, **power,
        correlation=paired.correlation(means_a, means_b), binary=binary["binary"], mcnemar=binary["mcnemar"],
        alpha=options.alpha, n_flips=len(binary["flips"]), flips=binary["flips"], per_task=rows,
        pass_at_k=binary.get("pass_at_k", []), pass_hat_k=binary.get("pass_hat_k", []), notes=notes,
        grpo_informative=binary.get("grpo_informative", []), group_sizes_asked=list(options.group_sizes),
        row_differences=differences.to_json(),
        adaptive=adaptive, pass_threshold=options.pass_threshold,
        rollouts_a=found[0], rollouts_b=found[1],
    )  # fmt: skip


def _rollouts_and_lines(
    a: Path, b: Path, given: tuple[Path | None, Path | None], rows: list[TaskDiff]
) -> tuple[str | None, str | None]:
    """Each run's rollouts file (given, else beside its profile when there), and every row's source lines
    from B's run manifest, else A's (as `stats` finds them: `artifacts.task_lines`)."""
    from ..artifacts import task_lines
    from ..artifacts.names import rollouts_path_of_profile

    found = []
    for profile, path in zip((a, b), given, strict=True):
        beside = rollouts_path_of_profile(profile)
        found.append(
            path if path is not None else beside if beside is not None and beside.is_file() else None
        )
    lines = None
    for path in (found[1], found[0]):
        lines = lines or (task_lines.for_rollouts(path) if path is not None else None)
    lines = lines or task_lines.for_profile(b) or task_lines.for_profile(a)
    for row in rows:
        row.source_lines = None if lines is None else lines.of(row.task)
    a_path, b_path = (None if path is None else str(path) for path in found)
    return a_path, b_path


def _notes(
    counted: dict, n_tasks: int, identical: str | None, differing: list[str], binary: dict
) -> list[str]:
    """The comparison's notes: identical outcomes, each profile's denominators, few tasks, differing task
    data, then the pass/fail tests' own."""
    notes = []
    if identical:
        what = identical.replace("_", " ")
        notes.append(f"{paired.IDENTICAL} ({what}): the MDE is from the within-task variance")
    for name, block in counted.items():
        notes.extend(block.lines(f"profile {name.upper()}"))
    if n_tasks < FEW_TASKS:
        notes.append(few_tasks_note(f"the comparison ({n_tasks} paired tasks)", "compare"))
    return notes + differing + binary["notes"]


def _differing_note(differences: rowdiff.RowDifferences, pairs: list) -> list[str]:
    """The pairs whose dataset fields differ (rowdiff's check, the one behind `row_differences`)."""
    if not differences.data_differs:
        return []
    differing = differences.data_differs
    task, agent = pairs[differing[0]][0]
    return [
        f"{len(differing)} paired task(s) hold different task data in the two profiles' samples (first: "
        f"{task_label(task, agent)}): tasks are paired by _ng_task_index, so check that both runs "
        "used the same task rows in the same order (a prompt change should touch the prompt only)"
    ]


def _mean(values) -> float:
    return float(values.mean()) if values.size else math.nan
