"""Coverage of benchmark-level intervals in simulation: the designs of references/statistics.md.

    python tests/interval_coverage.py [RUNS]          # prints the tables (default 400 runs per design)
    python tests/interval_coverage.py --write [RUNS]  # and writes them into references/statistics.md
    python tests/interval_coverage.py --repeats [RUNS] [--write]  # only the many-repeats table (1000 runs)

Each run draws T new tasks with true pass rates p_i ~ Beta(a, b), K Bernoulli(p_i) rollouts per task
(each missing at random with probability `missing`: a partial run), computes the per-task estimator (pass
rate, pass@k, pass^k: the unbiased ones ngrp uses; undefined on a task with fewer than k rollouts), and
checks whether each candidate interval holds the population value (the mean over the task distribution,
exact from the Beta moments). The slow tests in test_stats_intervals.py assert the headline's coverage.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from ngrp_lib.stats import estimators, intervals  # noqa: E402
from ngrp_lib.stats.uncertainty import t_interval  # noqa: E402

LEVEL = 0.95
N_BOOT = 1000


@dataclass(frozen=True)
class Design:
    name: str
    estimator: str  # "mean", "pass@k" or "pass^k"
    tasks: int
    k: int
    a: float
    b: float
    repeats: int = 8
    missing: float = 0.0  # each rollout missing at random with this probability

    @property
    def truth(self) -> float:
        """The population value: E over p ~ Beta(a, b) of p, 1 - (1-p)^k or p^k."""
        if self.estimator == "mean":
            return self.a / (self.a + self.b)
        if self.estimator == "pass@k":
            return 1.0 - math.prod((self.b + j) / (self.a + self.b + j) for j in range(self.k))
        return math.prod((self.a + j) / (self.a + self.b + j) for j in range(self.k))

    def per_task(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(per-task values, NaN where undefined; scored rollouts per task)."""
        p = rng.beta(self.a, self.b, self.tasks)
        n = rng.binomial(self.repeats, 1.0 - self.missing, self.tasks) if self.missing else None
        n = np.full(self.tasks, self.repeats) if n is None else n
        c = rng.binomial(n, p)
        if self.estimator == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(n > 0, c / np.maximum(n, 1), np.nan), n
        if self.estimator == "pass@k":
            return estimators.pass_at_k(n, c, self.k), n
        return estimators.pass_hat_k(n, c, self.k), n


DESIGNS = (
    Design("mean, 12 tasks x 8, p ~ Beta(1, 1)", "mean", 12, 1, 1.0, 1.0),
    Design("mean, 100 tasks x 8, p ~ Beta(1, 1)", "mean", 100, 1, 1.0, 1.0),
    Design("mean, 6 tasks x 8, p ~ Beta(1, 1)", "mean", 6, 1, 1.0, 1.0),
    Design("mean, 12 tasks x 8, skewed easy p ~ Beta(4, 0.5)", "mean", 12, 1, 4.0, 0.5),
    Design("pass@8, 12 tasks x 8, p ~ Beta(1.25, 1)", "pass@k", 12, 8, 1.25, 1.0),
    Design("pass@8, 100 tasks x 8, p ~ Beta(1.25, 1)", "pass@k", 100, 8, 1.25, 1.0),
    Design("pass@8, 6 tasks x 8, p ~ Beta(1.25, 1)", "pass@k", 6, 8, 1.25, 1.0),
    Design("pass^8, 100 tasks x 8, p ~ Beta(0.85, 2)", "pass^k", 100, 8, 0.85, 2.0),
    Design("pass^8, 100 tasks x 8, skewed hard p ~ Beta(0.25, 2)", "pass^k", 100, 8, 0.25, 2.0),
    # k between 1 and K (issue 28): fractional per-task values, skewed both ways
    Design("pass^4, 100 tasks x 8, skewed hard p ~ Beta(0.25, 2)", "pass^k", 100, 4, 0.25, 2.0),
    Design("pass^6, 100 tasks x 8, skewed hard p ~ Beta(0.25, 2)", "pass^k", 100, 6, 0.25, 2.0),
    Design("pass@4, 100 tasks x 8, skewed easy p ~ Beta(2, 0.25)", "pass@k", 100, 4, 2.0, 0.25),
    Design("pass^3, 100 tasks x 4, skewed hard p ~ Beta(0.25, 2)", "pass^k", 100, 3, 0.25, 2.0, repeats=4),
    Design("pass^4, 12 tasks x 8, p ~ Beta(2, 3)", "pass^k", 12, 4, 2.0, 3.0),
    Design("pass^2, 12 tasks x 8, skewed hard p ~ Beta(0.25, 2)", "pass^k", 12, 2, 0.25, 2.0),
    Design("pass@2, 12 tasks x 4, skewed easy p ~ Beta(2, 0.25)", "pass@k", 12, 2, 2.0, 0.25, repeats=4),
    # edges: k = K on a population that never (always) succeeds
    Design("pass^8, 100 tasks x 8, p ~ Beta(0.02, 50) (almost all 0)", "pass^k", 100, 8, 0.02, 50.0),
    Design("pass@8, 100 tasks x 8, p ~ Beta(50, 0.02) (almost all 1)", "pass@k", 100, 8, 50.0, 0.02),
    # partial runs: each rollout missing at random with probability 0.25 (tasks with n < k left out)
    Design("mean, 100 tasks x 8, 25% missing, p ~ Beta(1, 1)", "mean", 100, 1, 1.0, 1.0, missing=0.25),
    Design(
        "pass^4, 100 tasks x 8, 25% missing, p ~ Beta(0.25, 2)", "pass^k", 100, 4, 0.25, 2.0, missing=0.25
    ),
    Design(
        "pass@4, 100 tasks x 8, 25% missing, p ~ Beta(2, 0.25)", "pass@k", 100, 4, 2.0, 0.25, missing=0.25
    ),
)


def headline(
    values: np.ndarray, n: np.ndarray, method: str = intervals.KORN_GRAUBARD, skew_df: bool = True
) -> tuple[float, float]:
    """The interval `ngrp stats` reports for a rate: the library function, as compute_stats calls it (the
    cap: the rollouts of the tasks where the value is defined). skew_df False: without the skew-aware df
    (Korn-Graubard as it was before issue 28)."""
    iv = t_interval(values, LEVEL)
    cap = float(n[~np.isnan(values)].sum())
    spread = intervals.carrying(values, iv.value) if skew_df else None
    bounds = intervals.rate_interval(iv.value, iv.se, iv.n, LEVEL, cap, method, spread=spread)
    return (math.nan, math.nan) if bounds is None else (bounds.low, bounds.high)


def _bootstrap(values: np.ndarray, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """Percentile and BCa intervals from one set of task resamples."""
    from scipy.stats import norm

    values = values[~np.isnan(values)]
    n = values.size
    reps = values[rng.integers(0, n, (N_BOOT, n))].mean(axis=1)
    alpha = (1 - LEVEL) / 2
    pct = tuple(np.quantile(reps, [alpha, 1 - alpha]))
    mean = values.mean()
    share = np.clip((reps < mean).mean() + 0.5 * (reps == mean).mean(), 1 / N_BOOT, 1 - 1 / N_BOOT)
    z0 = norm.ppf(share)
    jack = (values.sum() - values) / (n - 1)
    d = jack.mean() - jack
    accel = (d**3).sum() / (6 * ((d**2).sum()) ** 1.5) if (d**2).sum() > 0 else 0.0
    z = norm.ppf([alpha, 1 - alpha])
    adjusted = norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    bca = tuple(np.quantile(reps, np.nan_to_num(adjusted, nan=0.5)))
    return {"bootstrap percentile": pct, "bootstrap BCa": bca}


PLAIN_KG = "korn_graubard, plain df"
METHODS = (
    "t",
    "bootstrap percentile",
    "bootstrap BCa",
    intervals.LOGIT_T,
    intervals.WILSON,
    PLAIN_KG,
    intervals.KORN_GRAUBARD,
)


def intervals_of(
    values: np.ndarray, n: np.ndarray, rng: np.random.Generator
) -> dict[str, tuple[float, float]]:
    iv = t_interval(values, LEVEL)
    out = {"t": (iv.ci_low, iv.ci_high)}
    out.update(_bootstrap(values, rng))
    for method in (intervals.LOGIT_T, intervals.WILSON, intervals.KORN_GRAUBARD):
        out[method] = headline(values, n, method)
    out[PLAIN_KG] = headline(values, n, intervals.KORN_GRAUBARD, skew_df=False)
    return out


def coverage(design: Design, runs: int, seed: int = 0, methods: tuple[str, ...] = METHODS) -> dict[str, dict]:
    """Per method: the share of runs whose interval holds the truth, and the mean width."""
    rng = np.random.default_rng(seed)
    hits = {m: 0 for m in methods}
    widths: dict[str, list[float]] = {m: [] for m in methods}
    truth = design.truth
    for _ in range(runs):
        values, n = design.per_task(rng)
        found = intervals_of(values, n, rng) if methods != ("headline",) else {}
        if "headline" in methods:
            found["headline"] = headline(values, n)
        for m in methods:
            low, high = found[m]
            hits[m] += bool(low <= truth <= high)
            widths[m].append(high - low)
    return {m: {"coverage": hits[m] / runs, "width": float(np.nanmean(widths[m]))} for m in methods}


def compare_rejections(
    runs: int, tasks: int, shift: float, k: int | None, seed: int, repeats: int = 8
) -> float:
    """Share of simulated A/B pairs where compare's paired t test rejects at 0.05: B's true pass rates are
    A's plus `shift` (clipped to [0, 1]); k None compares mean rewards, else pass@k paired by task."""
    from ngrp_lib.stats.distributions import t_two_sided_p

    rng = np.random.default_rng(seed)
    n = np.full(tasks, repeats)
    rejected = 0
    for _ in range(runs):
        p = rng.beta(1, 1, tasks)
        ca, cb = rng.binomial(repeats, p), rng.binomial(repeats, np.clip(p + shift, 0, 1))
        if k is None:
            d = (cb - ca) / repeats
        else:
            d = estimators.pass_at_k(n, cb, k) - estimators.pass_at_k(n, ca, k)
        iv = t_interval(d, LEVEL)
        if iv.se and iv.se > 0:
            rejected += t_two_sided_p(iv.value / iv.se, iv.n - 1) < 0.05
    return rejected / runs


def true_shift(shift: float, a: float = 1.0, b: float = 1.0) -> float:
    """E[min(p + shift, 1)] - E[p] for p ~ Beta(a, b): the true mean difference of a clipped shift
    (numerically; 0.04875 for +0.05 on Beta(1, 1), not 0.05)."""
    from scipy import integrate, stats

    excess, _ = integrate.quad(lambda p: (p + shift - 1.0) * stats.beta.pdf(p, a, b), 1.0 - shift, 1.0)
    return shift - excess


def coverage_lines(runs: int) -> list[str]:
    lines = [f"| design | true value | {' | '.join(METHODS)} |", "|---|---|" + "---|" * len(METHODS)]
    for design in DESIGNS:
        result = coverage(design, runs)
        cells = [f"{result[m]['coverage']:.3f} ({result[m]['width']:.3f})" for m in METHODS]
        lines.append(f"| {design.name} | {design.truth:.4g} | {' | '.join(cells)} |")
        print(lines[-1], file=sys.stderr, flush=True)
    lines.append("")
    lines.append(f"{runs} runs per design, seed 0; each cell: coverage (mean width); target {LEVEL}.")
    return lines


def compare_lines(runs: int = 1000) -> list[str]:
    lines = []
    for tasks, shift in ((50, 0.0), (100, 0.0), (50, 0.05), (100, 0.05), (100, 0.1)):
        mean = compare_rejections(runs, tasks, shift, None, seed=11)
        at4 = compare_rejections(runs, tasks, shift, 4, seed=11)
        lines.append(
            f"- {tasks} tasks x 8, B's pass rates = A's + {shift} clipped at 1 (true mean difference "
            f"{true_shift(shift):.4f}): rejects {mean:.3f} of {runs} (mean), {at4:.3f} (pass@4)"
        )
    return lines


# Many repeats (issue 35): K in {4, 8, 16, 32, 64}, k in {2, K/4, K/2} with 1 < k < K, pass@k and pass^k
# on populations skewed both ways, 8, 30 and 200 tasks. Vectorised over runs: the per-task values of every
# run at once, then the library's headline interval per run.
REPEATS = (4, 8, 16, 32, 64)
REPEAT_TASKS = (8, 30, 200)
POPULATIONS = (("hard, Beta(0.5, 3)", 0.5, 3.0), ("easy, Beta(3, 0.5)", 3.0, 0.5))


def repeat_designs() -> list[Design]:
    out = []
    for repeats in REPEATS:
        for k in sorted({2, repeats // 4, repeats // 2}):
            if not 1 < k < repeats:
                continue
            for estimator in ("pass@k", "pass^k"):
                for label, a, b in POPULATIONS:
                    for tasks in REPEAT_TASKS:
                        name = f"{estimator.replace('k', str(k))}, K = {repeats}, {label}, {tasks} tasks"
                        out.append(Design(name, estimator, tasks, k, a, b, repeats=repeats))
    return out


def per_task_runs(design: Design, runs: int, rng: np.random.Generator) -> np.ndarray:
    """(runs, tasks) per-task values of every run at once (no missing rollouts): C(c, k)/C(K, k) for
    pass^k, 1 - C(K - c, k)/C(K, k) for pass@k (the estimators ngrp uses)."""
    p = rng.beta(design.a, design.b, (runs, design.tasks))
    c = rng.binomial(design.repeats, p)
    n = np.full(c.shape, design.repeats)
    if design.estimator == "pass^k":
        return estimators.pass_hat_k(n, c, design.k)
    return 1.0 - estimators.pass_hat_k(n, n - c, design.k)


def repeat_coverage(design: Design, runs: int, seed: int = 0) -> dict[str, float]:
    """The headline's coverage, mean width and the share of runs with the truth above / below it."""
    rng = np.random.default_rng(seed)
    values = per_task_runs(design, runs, rng)
    n = np.full(design.tasks, design.repeats)
    bounds = np.array([headline(v, n) for v in values])
    truth = design.truth
    above, below = truth > bounds[:, 1], truth < bounds[:, 0]
    return {
        "coverage": float(1.0 - (above | below).mean()),
        "width": float(np.mean(bounds[:, 1] - bounds[:, 0])),
        "above": float(above.mean()),
        "below": float(below.mean()),
    }


REPEATS_HEADER = "| estimand (K repeats, population) | true value |"


def repeat_lines(runs: int) -> list[str]:
    cols = " | ".join(f"{t} tasks" for t in REPEAT_TASKS)
    lines = [f"{REPEATS_HEADER} {cols} |", "|---|---|" + "---|" * len(REPEAT_TASKS)]
    designs = repeat_designs()
    worst = (2.0, "")
    for i in range(0, len(designs), len(REPEAT_TASKS)):
        row = designs[i : i + len(REPEAT_TASKS)]
        cells = []
        for design in row:
            r = repeat_coverage(design, runs)
            worst = min(worst, (r["coverage"], design.name))
            cells.append(f"{r['coverage']:.3f} ({r['width']:.3f})")
        name = row[0].name.rsplit(", ", 1)[0]
        lines.append(f"| {name} | {row[0].truth:.4g} | {' | '.join(cells)} |")
        print(lines[-1], file=sys.stderr, flush=True)
    lines.append("")
    lines.append(
        f"{runs} repeat runs per design, seed 0; each cell: the headline's coverage (mean width); lowest "
        f"{worst[0]:.3f} ({worst[1]}); target {LEVEL}."
    )
    return lines


DOC = Path(__file__).resolve().parents[1] / "references" / "statistics.md"


def replace_lines(text: str, first: str, last: str, lines: list[str]) -> str:
    """Swap the doc's lines from the one starting with `first` to the next one containing `last` (both
    included) for `lines`: the generated table and calibration list, which nobody edits by hand."""
    doc = text.split("\n")
    start = next(i for i, line in enumerate(doc) if line.startswith(first))
    end = next(i for i in range(start, len(doc)) if last in doc[i])
    return "\n".join(doc[:start] + lines + doc[end + 1 :])


def main(argv: list[str]) -> int:
    write = "--write" in argv
    args = [a for a in argv if a not in ("--write", "--repeats")]
    if "--repeats" in argv:
        lines = repeat_lines(int(args[0]) if args else 1000)
        print("\n".join(lines))
        if write:
            text = replace_lines(
                DOC.read_text(encoding="utf-8"), REPEATS_HEADER, "repeat runs per design", lines
            )
            DOC.write_text(text, encoding="utf-8")
            print(f"written into {DOC}")
        return 0
    runs = int(args[0]) if args else 400
    table, calibration = coverage_lines(runs), compare_lines()
    print("\n".join(table + [""] + calibration))
    if write:
        text = replace_lines(
            DOC.read_text(encoding="utf-8"), "| design | true value |", "runs per design", table
        )
        text = replace_lines(
            text, "- 50 tasks x 8, B's", "- 100 tasks x 8, B's pass rates = A's + 0.1", calibration
        )
        DOC.write_text(text, encoding="utf-8")
        print(f"written into {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
