"""Coverage of intervals for a paired difference of bounded means, in simulation with known truth.

    python tests/difference_coverage.py [RUNS]          # prints the table (default 1000 runs per design)
    python tests/difference_coverage.py --write [RUNS]  # and writes it into references/statistics.md

Two settings, each with T = 5, 30 and 200 tasks drawn afresh per run:
- components (`stats`): per task true rates of two reward components, K rollouts each holding both
  values (X, Y); the estimand is the population mean of X - Y; the interval is over the rows, clustered by
  task. Designs: independent mid-range 0/1 components, correlated ones (Y = X with a 10% loss), both near
  an edge (the replay's correctness 1 vs format 0), rare discordance (Y = X but for 1-2% of rows),
  opposite (Y = 1 - X), fractional values, and identical components.
- runs (`compare`): per task a true pass rate in A and in B, K = 8 rollouts in each run; per-task values
  (pass rate, pass^8, P(informative at 8)) and the paired B - A of their task-weighted means.

Methods: t (what `stats` and `compare` used: the CR1 clustered t for components, the paired t over
tasks for runs), ngrp (the library's rule, `stats.differences`: MOVER from the two means' bounded
intervals for 0/1 components and per-task rates, t for fractional components, and the
constant-difference bound when every difference is the same), and, as considered and rejected,
Korn-Graubard on the shifted difference (d + 1) / 2 (the rate interval on [0, 1], mapped back). Each
cell: coverage, the share of runs with a zero-width interval (when any), the mean width. Truths are worked
out here (Beta moments, or scipy's quadrature), not by ngrp. In the runs' pass-rate rows the ngrp column
is compare's pass@1 and the t column its mean difference, which keeps t (its coverage holds from 30 tasks
on) with the constant-difference bound when every task's difference is the same.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from ngrp_lib.stats import estimators, intervals  # noqa: E402
from ngrp_lib.stats.differences import clustered_difference, paired_task_difference  # noqa: E402
from ngrp_lib.stats.distributions import t_ppf  # noqa: E402

LEVEL = 0.95
TASKS = (5, 30, 200)
METHODS = ("t", "ngrp", "KG on (d+1)/2")


def beta_moment(a: float, b: float, s: float) -> float:
    """E[p^s] for p ~ Beta(a, b)."""
    return math.exp(math.lgamma(a + s) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(a + b + s))


@dataclass(frozen=True)
class Components:
    """Two components on the same rows: `draw(rng, T, K)` -> (task of each row, X, Y); `truth` E[X - Y]."""

    name: str
    draw: Callable
    truth: float
    repeats: int


def _bern(rng, p, k):
    return (rng.random((p.size, k)) < p[:, None]).astype(float)


def _independent(ax, bx, ay, by):
    def draw(rng, t, k):
        return _bern(rng, rng.beta(ax, bx, t), k), _bern(rng, rng.beta(ay, by, t), k)

    return draw


def _correlated(rng, t, k):  # Y = X, lost with probability 0.1 (format fails on 10% of correct replies)
    x = _bern(rng, rng.beta(2, 2, t), k)
    return x, x * (rng.random(x.shape) < 0.9)


def _rare(rng, t, k):  # Y = X but 2% of passes lost and 1% of fails gained
    x = _bern(rng, rng.beta(2, 2, t), k)
    u = rng.random(x.shape)
    return x, np.where(x == 1, (u >= 0.02).astype(float), (u < 0.01).astype(float))


def _opposite(rng, t, k):  # Y = 1 - X
    x = _bern(rng, rng.beta(3, 2, t), k)
    return x, 1.0 - x


def _fractional(rng, t, k):  # X in [0, 1] around a task mean m ~ Beta(2, 2); Y = X U, U ~ Uniform(0.5, 1)
    m = rng.beta(2, 2, t)[:, None]
    x = rng.beta(4 * m + 1, 4 * (1 - m) + 1, (t, k))
    return x, x * rng.uniform(0.5, 1.0, (t, k))


def _identical(rng, t, k):
    x = _bern(rng, rng.beta(2, 2, t), k)
    return x, x.copy()


def component_designs() -> list[Components]:
    out = []
    for k in (1, 4):
        out += [
            Components(f"independent, Beta(4,2) - Beta(2,2), K={k}", _independent(4, 2, 2, 2), 1 / 6, k),
            Components(f"correlated, Y = X lost 10%, K={k}", _correlated, 0.05, k),
            Components(f"edge, Beta(30,1) - Beta(1,30), K={k}", _independent(30, 1, 1, 30), 29 / 31, k),
            Components(f"rare discordance (2% / 1%), K={k}", _rare, 0.005, k),
            Components(f"opposite, Y = 1 - X, X ~ Beta(3,2), K={k}", _opposite, 0.2, k),
            Components(f"fractional, Y = X U, K={k}", _fractional, 0.125, k),
            Components(f"identical, Y = X, K={k}", _identical, 0.0, k),
        ]
    return out


def _clustered_t(tasks, d) -> tuple[float, float]:
    n, mean = d.size, float(d.mean())
    g = int(tasks.max()) + 1
    sums = np.bincount(tasks, weights=d - mean, minlength=g)
    se = math.sqrt(g / (g - 1) * float((sums**2).sum())) / n
    half = t_ppf(0.5 + LEVEL / 2, g - 1) * se
    return mean - half, mean + half


def _shifted_kg(u_task_means, mean_u, se_u, n_tasks, cap) -> tuple[float, float]:
    bounds = intervals.rate_interval(
        mean_u, se_u, n_tasks, LEVEL, cap, spread=intervals.carrying(u_task_means, mean_u)
    )
    return (math.nan, math.nan) if bounds is None else (2 * bounds.low - 1, 2 * bounds.high - 1)


def component_intervals(x: np.ndarray, y: np.ndarray) -> dict[str, tuple[float, float]]:
    t, k = x.shape
    tasks = np.repeat(np.arange(t), k)
    d = (x - y).ravel()
    out = {"t": _clustered_t(tasks, d)}
    found = clustered_difference(tasks.tolist(), x.ravel().tolist(), y.ravel().tolist(), LEVEL)
    out["ngrp"] = (math.nan, math.nan) if found is None else (found.low, found.high)
    u = (d + 1) / 2
    mean_u = float(u.mean())
    sums = np.bincount(tasks, weights=u - mean_u, minlength=t)
    se_u = math.sqrt(t / (t - 1) * float((sums**2).sum())) / u.size
    out["KG on (d+1)/2"] = _shifted_kg(u.reshape(t, k).mean(axis=1), mean_u, se_u, t, float(u.size))
    return out


@dataclass(frozen=True)
class Runs:
    """Run A and run B on the same tasks: true pass rates (p, f(p)), K rollouts each; per-task values by
    `values(n, c)`; `truth` the population mean of B - A of those values."""

    name: str
    a: float
    b: float
    shift: Callable
    values: Callable
    truth: float
    repeats: int = 8


def _rate(n, c):
    return c / n


def _pass_hat_8(n, c):
    return estimators.pass_hat_k(n, c, 8)


def _informative_8(n, c):
    return estimators.p_informative(n, c, 8)


def _quad(f, a: float, b: float) -> float:
    """E[f(p)] for p ~ Beta(a, b), numerically (scipy)."""
    from scipy import integrate, stats

    return integrate.quad(lambda p: f(p) * stats.beta.pdf(p, a, b), 0, 1, limit=200)[0]


def run_designs() -> list[Runs]:
    same = lambda p: p  # noqa: E731
    return [
        Runs("pass rate, Beta(1,1), B = A", 1, 1, same, _rate, 0.0),
        Runs(
            "pass rate, Beta(1,1), B = A + 0.1 clipped", 1, 1, lambda p: np.minimum(p + 0.1, 1.0), _rate,
            _quad(lambda p: min(p + 0.1, 1.0) - p, 1, 1),
        ),
        Runs(
            "pass rate, hard Beta(0.3,3), B = A^0.7", 0.3, 3, lambda p: p**0.7, _rate,
            beta_moment(0.3, 3, 0.7) - beta_moment(0.3, 3, 1),
        ),
        Runs(
            "pass rate, easy Beta(8,0.5), B = A^2", 8, 0.5, lambda p: p**2, _rate,
            beta_moment(8, 0.5, 2) - beta_moment(8, 0.5, 1),
        ),
        Runs("pass^8, hard Beta(0.5,2), B = A", 0.5, 2, same, _pass_hat_8, 0.0),
        Runs(
            "pass^8, hard Beta(0.5,2), B = A^0.7", 0.5, 2, lambda p: p**0.7, _pass_hat_8,
            beta_moment(0.5, 2, 5.6) - beta_moment(0.5, 2, 8),
        ),
        Runs("P(informative at 8), Beta(1,1), B = A", 1, 1, same, _informative_8, 0.0),
        Runs(
            "P(informative at 8), Beta(2,1), B = A^3", 2, 1, lambda p: p**3, _informative_8,
            _quad(lambda p: (1 - p**24 - (1 - p**3) ** 8) - (1 - p**8 - (1 - p) ** 8), 2, 1),
        ),
    ]  # fmt: skip


def run_intervals(va: np.ndarray, vb: np.ndarray, repeats: int) -> dict[str, tuple[float, float]]:
    from ngrp_lib.stats.uncertainty import t_interval

    d = vb - va
    iv = t_interval(d, LEVEL)
    out = {"t": (iv.ci_low, iv.ci_high)}
    rollouts = np.full(va.size, repeats)
    found = paired_task_difference(va, vb, rollouts, rollouts, LEVEL)
    out["ngrp"] = (math.nan, math.nan) if found is None else (found.low, found.high)
    u = (d + 1) / 2
    mean_u = float(u.mean())
    se_u = float(u.std(ddof=1) / math.sqrt(u.size))
    out["KG on (d+1)/2"] = _shifted_kg(u, mean_u, se_u, u.size, 2.0 * repeats * u.size)
    return out


def tally(draws) -> dict[str, dict[str, float]]:
    """Per method: coverage, share of zero-width intervals, mean width over the runs `draws` yields as
    (intervals, truth)."""
    hits = {m: 0 for m in METHODS}
    zero = {m: 0 for m in METHODS}
    widths: dict[str, list[float]] = {m: [] for m in METHODS}
    runs = 0
    for found, truth in draws:
        runs += 1
        for m in METHODS:
            low, high = found[m]
            hits[m] += bool(low <= truth <= high)
            zero[m] += bool(high - low <= 1e-12)
            widths[m].append(high - low)
    return {
        m: {"coverage": hits[m] / runs, "zero": zero[m] / runs, "width": float(np.nanmean(widths[m]))}
        for m in METHODS
    }


def component_runs(design: Components, tasks: int, runs: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        x, y = design.draw(rng, tasks, design.repeats)
        yield component_intervals(x, y), design.truth


def compare_runs(design: Runs, tasks: int, runs: int, seed: int):
    rng = np.random.default_rng(seed)
    n = np.full(tasks, design.repeats)
    for _ in range(runs):
        p = rng.beta(design.a, design.b, tasks)
        ca, cb = rng.binomial(design.repeats, p), rng.binomial(design.repeats, design.shift(p))
        yield run_intervals(design.values(n, ca), design.values(n, cb), design.repeats), design.truth


HEADER = "| design | true value | T |"


def _cell(r: dict[str, float]) -> str:
    zero = "" if not r["zero"] else " (<1% zero)" if r["zero"] < 0.01 else f" ({r['zero']:.0%} zero)"
    return f"{r['coverage']:.3f}{zero} w {r['width']:.3f}"


def table_lines(runs: int) -> list[str]:
    lines = [f"{HEADER} {' | '.join(METHODS)} |", "|---|---|---|" + "---|" * len(METHODS)]
    worst = {m: (2.0, "") for m in METHODS}
    rows = [("components: " + d.name, d.truth, component_runs, d) for d in component_designs()]
    rows += [("runs, K=8: " + d.name, d.truth, compare_runs, d) for d in run_designs()]
    for name, truth, generate, design in rows:
        for tasks in TASKS:
            result = tally(generate(design, tasks, runs, seed=tasks))
            for m in METHODS:
                worst[m] = min(worst[m], (result[m]["coverage"], f"{name}, T={tasks}"))
            cells = [_cell(result[m]) for m in METHODS]
            lines.append(f"| {name} | {truth:.4g} | {tasks} | {' | '.join(cells)} |")
            print(lines[-1], file=sys.stderr, flush=True)
    lines.append("")
    lowest = "; ".join(f"{m} {c:.3f} ({where})" for m, (c, where) in worst.items())
    lines.append(
        f"{runs} runs per design and T, seed T; each cell: coverage (the share of zero-width intervals "
        f"when any) and mean width; target {LEVEL}. Lowest: {lowest}."
    )
    return lines


DOC = Path(__file__).resolve().parents[1] / "references" / "statistics.md"


def main(argv: list[str]) -> int:
    from interval_coverage import replace_lines

    write = "--write" in argv
    args = [a for a in argv if a != "--write"]
    lines = table_lines(int(args[0]) if args else 1000)
    print("\n".join(lines))
    if write:
        text = replace_lines(DOC.read_text(encoding="utf-8"), HEADER, "runs per design and T", lines)
        DOC.write_text(text, encoding="utf-8")
        print(f"written into {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
