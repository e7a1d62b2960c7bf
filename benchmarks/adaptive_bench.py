#!/usr/bin/env python3
"""Adaptive collection (`collect --adaptive RULE`): rollouts saved and decisions kept, measured.

1. `simulate` (default): tasks with known pass rates drawn from four Beta populations. Each task gets N
   seeded Bernoulli draws; fixed N sees all of them, each rule plays its rounds (R, then R more) on the
   same draws. A task's rounds depend on its N draws only, so every rule is first played through the
   library's own `stats.adaptive.play` on every one of the 2^N sequences of N draws (`decision_table`),
   and each simulated task looks its sequence up (bit i = draw i): the decisions are play's own, and
   200,000 tasks a population take seconds. Printed per population and N: rollouts used as a share of
   fixed N's, decisions that differ from fixed N's on the same draws, misclassification against the truth
   next to fixed N's (band: is the true rate in [LOW, HIGH]; width: does the task's final Wilson interval
   miss its true rate), and the exact expected difference (no sampling noise: every sequence weighted by
   its beta-binomial chance, the truth by the population's posterior given all N draws).
2. `bound` (the bands of --rules, else band:0.2,0.8): the fewest rollouts ANY rule with the same rounds
   can use and stay within fixed N's misclassification + 1 point, even one that knows the population
   (Bayes-optimal stopping by dynamic programming, a Lagrangian lower bound; see `band_bound`).
3. `schedules` (--schedules, learnable, N=16): round schedules beside each other on the same simulated tasks,
   equal rounds of 4, 2 and 1 and requests that grow while a task stays unsettled (1,1,2,4,8: 1, 2, 4, 8
   then 16 repeats). Learnable's decision is fixed N's on the same draws whatever the schedule (the
   decisions != fixed N column checks it); what a schedule changes is the rollouts, printed sampled and
   exact, against the floor no schedule can beat (one draw at a time, exact) and the rounds a task can
   take (latency: a round is one request after another).
4. `real`: the demo's tasks (examples/tasks.jsonl) against the real vLLM CPU server, `--adaptive learnable`
   against fixed N, side by side: rollouts, wall time, decisions (see `real_run`).

    python3 benchmarks/adaptive_bench.py                          # simulation, 200,000 tasks (under a minute)
    python3 benchmarks/adaptive_bench.py schedules                # learnable's schedules, N=16
    python3 benchmarks/adaptive_bench.py --populations edge --rules band:0.2,0.8 width:0.5
    python3 benchmarks/adaptive_bench.py bound --rules band:0.2,0.8 band:0.3,0.7
    NGRP_VLLM_VENV=$(bash .ci/install_vllm.sh) python3 benchmarks/adaptive_bench.py real
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests"), str(REPO / "benchmarks")]

from ngrp_lib.stats.adaptive import (  # noqa: E402
    Rule,
    Schedule,
    decide_at_end,
    parse_rule,
    parse_schedule,
    play,
)
from ngrp_lib.stats.estimators import wilson_one  # noqa: E402

POPULATIONS = {
    "Beta(2,3)": (2.0, 3.0),
    "Beta(1,1)": (1.0, 1.0),
    "Beta(0.3,0.3)": (0.3, 0.3),
    "Beta(0.25,2)": (0.25, 2.0),
}
# Near the band edges (issue 35): tasks just outside band:0.2,0.8 and populations tight around its edges,
# where a rule that stops early misclassifies most; `--populations edge` (or `all`) runs them.
EDGE_POPULATIONS: dict[str, Any] = {
    "uniform[0.80,0.85]": ("uniform", 0.80, 0.85),
    "Beta(20,80)": (20.0, 80.0),
    "Beta(80,20)": (80.0, 20.0),
    "uniform[0.45,0.55]": ("uniform", 0.45, 0.55),  # width: where a Wilson interval is widest
}
DESIGNS = ((16, 4), (8, 2))  # (N, R); later rounds add R
RULES = ("learnable", "band:0.2,0.8", "width:0.3", "width:0.5")
SCHEDULES = ("4", "2", "1", "1,1,2,4,8", "2,2,4,8", "1,1,1,1,2,2,4", "2,2,2,2,4")
CODES = {
    "inside": 0,
    "below": 1,
    "above": 2,
    "mixed": 3,
    "all_pass": 4,
    "all_fail": 5,
    "narrow": 6,
    "wide": 7,
}


@dataclass(frozen=True)
class DecisionTable:
    """One rule and schedule played on every sequence of N draws, indexed by the sequence's bits."""

    size: np.ndarray  # repeats the rule used
    decision: np.ndarray  # its decision (CODES)
    fixed: np.ndarray  # fixed N's decision on all N draws (CODES)
    low: np.ndarray  # the Wilson interval on the repeats used (width's estimate)
    high: np.ndarray

    def look_up(self, draws: np.ndarray) -> np.ndarray:
        """Rows of N booleans -> their table indices (bit i = draw i)."""
        return draws.astype(np.int64) @ (1 << np.arange(draws.shape[1], dtype=np.int64))


def decision_table(rule: Rule, schedule: Schedule) -> DecisionTable:
    n = schedule.num_repeats
    if n > 20:
        raise SystemExit(f"decision_table: 2^{n} sequences is too many; N <= 20")
    columns: dict[str, list] = {"size": [], "decision": [], "fixed": [], "low": [], "high": []}
    for index in range(1 << n):
        draws = [(index >> i) & 1 == 1 for i in range(n)]
        state = play(rule, schedule, draws)
        low, high = wilson_one(sum(draws[: state.size]), state.size) or (0.0, 1.0)
        columns["size"].append(state.size)
        columns["decision"].append(CODES[state.decision or "wide"])
        columns["fixed"].append(CODES[decide_at_end(rule, draws)])
        columns["low"].append(low)
        columns["high"].append(high)
    return DecisionTable(**{key: np.array(values) for key, values in columns.items()})


def truth_wrong(
    rule: Rule, table: DecisionTable, p: np.ndarray, index: np.ndarray, fixed: bool
) -> np.ndarray:
    """Per task: is the decision (fixed N's when `fixed`) wrong about the true pass rate p? Band: the
    decision `inside` against p in [LOW, HIGH]; width: the final Wilson interval misses p (fixed N's: the
    interval on all N draws). Learnable has none: its benchmark is fixed N's decision on the same draws."""
    if rule.kind == "band":
        decided = (table.fixed if fixed else table.decision)[index] == CODES["inside"]
        return decided != ((rule.low <= p) & (p <= rule.high))
    if rule.kind == "width":
        n = len(table.size).bit_length() - 1
        passes = np.array([bin(i).count("1") for i in range(len(table.size))])[index]
        low, high = _wilson_arrays(passes, n) if fixed else (table.low[index], table.high[index])
        return (p < low) | (p > high)
    return np.zeros(len(p), dtype=bool)


def _wilson_arrays(passes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    bounds = [wilson_one(k, n) or (0.0, 1.0) for k in range(n + 1)]
    lows, highs = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    return lows[passes], highs[passes]


def simulate(
    population: tuple[float, float],
    tables: dict[str, tuple[Rule, DecisionTable]],
    n: int,
    tasks: int,
    seed: int,
) -> dict:
    rng = np.random.default_rng(seed)
    p = _draw(rng, population, tasks)
    draws = rng.random((tasks, n)) < p[:, None]
    out = {}
    for spec, (rule, table) in tables.items():
        index = table.look_up(draws)
        differ = table.decision[index] != table.fixed[index]
        out[spec] = {
            "rollout_share": float(table.size[index].mean() / n),
            "differ_from_fixed": None if rule.kind == "width" else float(differ.mean()),
            "wrong_vs_truth": None
            if rule.kind == "learnable"
            else float(truth_wrong(rule, table, p, index, False).mean()),
            "fixed_wrong_vs_truth": None
            if rule.kind == "learnable"
            else float(truth_wrong(rule, table, p, index, True).mean()),
            **exact(rule, table, population, n),
        }
    return out


def exact(
    rule: Rule, table: DecisionTable, population: tuple[float, float], n: int
) -> dict[str, float | None]:
    """Expected share and misclassification over the population without sampling noise: each sequence
    weighted by its chance B(a + k, b + N - k) / B(a, b), the truth by the posterior given all N draws."""
    from scipy.special import betaln
    from scipy.stats import beta

    if population[0] == "uniform":
        return _exact_on_grid(rule, table, population, n)
    a, b = population
    passes = np.array([bin(i).count("1") for i in range(1 << n)])
    weight = np.exp(betaln(a + passes, b + n - passes) - betaln(a, b))
    post = beta(a + passes, b + n - passes)
    share = float(weight @ table.size / n)
    if rule.kind == "band":
        inside = post.cdf(rule.high) - post.cdf(rule.low)

        def miss(codes: np.ndarray) -> float:
            return float(weight @ np.where(codes == CODES["inside"], 1 - inside, inside))

        return {
            "exact_share": share,
            "exact_wrong": miss(table.decision),
            "exact_fixed_wrong": miss(table.fixed),
        }
    if rule.kind == "width":
        low_n, high_n = _wilson_arrays(passes, n)
        covered = post.cdf(table.high) - post.cdf(table.low)
        covered_n = post.cdf(high_n) - post.cdf(low_n)
        return {
            "exact_share": share,
            "exact_wrong": float(weight @ (1 - covered)),
            "exact_fixed_wrong": float(weight @ (1 - covered_n)),
        }
    return {"exact_share": share, "exact_wrong": None, "exact_fixed_wrong": None}


def stop_error(a: float, b: float, low: float, high: float) -> float:
    """The least chance of a wrong band decision on a Beta(a, b) posterior, wrong as `truth_wrong` counts
    it: `inside` against the true rate being in [LOW, HIGH] (below and above are both outside)."""
    from scipy.stats import beta

    inside = float(beta.cdf(high, a, b) - beta.cdf(low, a, b))
    return min(inside, 1.0 - inside)


def band_bound(population: tuple[float, float], n: int, r: int, low: float, high: float) -> dict[str, float]:
    """The fewest rollouts (share of fixed N's) any stopping rule with these rounds can use while its band
    misclassification stays within fixed N's + 1 point. Even a rule that knows the population's Beta prior
    cannot do better: for a price lam a rollout, dynamic programming gives the least expected
    misclassification + lam * rollouts, V(lam), over all rules (stop deciding inside or outside,
    whichever the posterior makes likelier: the misclassification `truth_wrong` counts; or draw the next
    round); every rule with misclassification <= T then uses at least
    (V(lam) - T) / (lam N) of fixed N's rollouts, for every lam; the best lam is printed."""
    from scipy.stats import beta, betabinom

    a, b = population
    ks = np.arange(n + 1)
    pmf_n = betabinom.pmf(ks, n, a, b)
    post_inside = beta.cdf(high, a + ks, b + n - ks) - beta.cdf(low, a + ks, b + n - ks)
    rate = ks / n
    fixed_inside = (low <= rate) & (rate <= high)
    target = float(pmf_n @ np.where(fixed_inside, 1 - post_inside, post_inside)) + 0.01

    def value(lam: float) -> float:
        costs = [stop_error(a + k, b + n - k, low, high) + lam * n for k in range(n + 1)]
        size = n
        while size > r:
            previous = r * ((size - 1) // r)  # the schedule's sizes: R, 2R, ... and N
            step = size - previous
            costs = [
                min(
                    stop_error(a + k, b + previous - k, low, high) + lam * previous,
                    float(
                        betabinom.pmf(np.arange(step + 1), step, a + k, b + previous - k)
                        @ costs[k : k + step + 1]
                    ),
                )
                for k in range(previous + 1)
            ]
            size = previous
        return float(betabinom.pmf(np.arange(r + 1), r, a, b) @ costs)

    best = max(((value(lam) - target) / (lam * n), lam) for lam in np.geomspace(1e-5, 0.05, 400))
    return {"fixed_wrong": target - 0.01, "least_share": best[0], "lam": best[1]}


def run_bound(args: argparse.Namespace) -> dict:
    """Per band of --rules (band:0.2,0.8 when they hold none), population and design."""
    bands = [rule for rule in map(parse_rule, args.rules) if rule.kind == "band"] or [
        parse_rule("band:0.2,0.8")
    ]
    rows = []
    for band in bands:
        for name, population in POPULATIONS.items():
            for n, r in DESIGNS:
                cell = band_bound(population, n, r, band.low, band.high)
                rows.append(
                    {"band": f"{band.low:g},{band.high:g}", "population": name, "n": n, "r": r, **cell}
                )
    return {"rows": rows}


def print_bound(results: dict[str, Any]) -> None:
    print("The least share of fixed N's rollouts any band rule needs to stay within fixed N + 1 point")
    print("| band | population | N, R | fixed N wrong (exact) | least rollouts / fixed N |")
    print("|---|---|---|---|---|")
    for row in results["rows"]:
        print(
            f"| {row['band']} | {row['population']} | {row['n']}, {row['r']} | {row['fixed_wrong']:.4f} |"
            f" {row['least_share']:.3f} |"
        )


def _draw(rng: np.random.Generator, population: Any, size: int) -> np.ndarray:
    if population[0] == "uniform":
        return rng.uniform(population[1], population[2], size)
    return rng.beta(*population, size=size)


def _exact_on_grid(rule: Rule, table: DecisionTable, population: Any, n: int) -> dict[str, float | None]:
    """`exact` for a uniform population on [lo, hi] (no Beta prior): the integrals over p on a midpoint
    grid of 400 points (ample: a 0.05-wide population), the truth by the posterior given all N draws."""
    _, lo, hi = population
    grid = lo + (hi - lo) * (np.arange(400) + 0.5) / 400
    passes = np.array([bin(i).count("1") for i in range(1 << n)])
    like = grid[None, :] ** passes[:, None] * (1 - grid[None, :]) ** (n - passes[:, None])  # seq x grid
    weight = like.mean(axis=1)  # P(this sequence), the density 1/(hi - lo) times the cell width
    post = like / like.sum(axis=1, keepdims=True)
    share = float(weight @ table.size / n)
    if rule.kind == "band":
        inside = post @ ((rule.low <= grid) & (grid <= rule.high))

        def miss(codes: np.ndarray) -> float:
            return float(weight @ np.where(codes == CODES["inside"], 1 - inside, inside))

        return {
            "exact_share": share,
            "exact_wrong": miss(table.decision),
            "exact_fixed_wrong": miss(table.fixed),
        }
    if rule.kind == "width":
        low_n, high_n = _wilson_arrays(passes, n)

        def covered(low: np.ndarray, high: np.ndarray) -> np.ndarray:
            return (post * ((low[:, None] <= grid) & (grid <= high[:, None]))).sum(axis=1)

        return {
            "exact_share": share,
            "exact_wrong": float(weight @ (1 - covered(table.low, table.high))),
            "exact_fixed_wrong": float(weight @ (1 - covered(low_n, high_n))),
        }
    return {"exact_share": share, "exact_wrong": None, "exact_fixed_wrong": None}


def worst_lines(results: dict[str, Any]) -> list[str]:
    """Per band or width rule: its largest exact gap to fixed N (wrong - fixed wrong) over the populations
    run, with where it was: the figure a claim about the rule must carry with its conditions."""
    out = []
    for spec in dict.fromkeys(row["rule"] for row in results["rows"]):
        gaps = [
            (100 * (row["exact_wrong"] - row["exact_fixed_wrong"]), row["population"], row["n"], row["r"])
            for row in results["rows"]
            if row["rule"] == spec and row["exact_wrong"] is not None
        ]
        if gaps:
            gap, population, n, r = max(gaps)
            out.append(
                f"worst for {spec}: {gap:+.2f} pp more often wrong than fixed N ({population}, N={n}, R={r})"
            )
    return out


def rules_kind(spec: str) -> str:
    return spec.partition(":")[0]


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def print_simulation(results: dict[str, Any]) -> None:
    print(f"simulation: {results['tasks']:,} tasks a population, seed {results['seed']}")
    print(
        "| population | N, R | rule | rollouts / fixed N | decisions != fixed N | wrong vs truth"
        " | fixed N wrong | exact: rollouts, wrong - fixed wrong |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in results["rows"]:
        gap = row["exact_wrong"] is not None and 100 * (row["exact_wrong"] - row["exact_fixed_wrong"])
        print(
            f"| {row['population']} | {row['n']}, {row['r']} | {row['rule']} | {row['rollout_share']:.3f} |"
            f" {_share(row['differ_from_fixed'])} | {_share(row['wrong_vs_truth'])} |"
            f" {_share(row['fixed_wrong_vs_truth'])} | {row['exact_share']:.3f},"
            f" {'—' if gap is False else f'{gap:+.2f} pp'} |"
        )
    for line in worst_lines(results):
        print(line)


def populations(args: argparse.Namespace) -> dict[str, Any]:
    chosen = getattr(args, "populations", "beta")
    return {
        "beta": POPULATIONS,
        "edge": EDGE_POPULATIONS,
        "all": {**POPULATIONS, **EDGE_POPULATIONS},
    }[chosen]


def run_simulation(args: argparse.Namespace) -> dict:
    rules = [parse_rule(spec) for spec in args.rules]
    rows = []
    for n, r in DESIGNS:
        schedule = Schedule(first_round=r, num_repeats=n)
        tables = {rule.spec: (rule, decision_table(rule, schedule)) for rule in rules}
        for seed, (name, population) in enumerate(populations(args).items()):
            for spec, cell in simulate(population, tables, n, args.tasks, args.seed + seed).items():
                rows.append({"population": name, "n": n, "r": r, "rule": spec, **cell})
    order = {name: i for i, name in enumerate(populations(args))}
    rows.sort(key=lambda row: (order[row["population"]], -row["n"]))
    return {"tasks": args.tasks, "seed": args.seed, "rows": rows}


def run_schedules(args: argparse.Namespace) -> dict:
    """Learnable under each schedule of --schedules at N = --repeats, on every population: the same
    simulated tasks (one seed a population) for every schedule."""
    rule, n = parse_rule("learnable"), args.repeats
    schedules = [parse_schedule(spec, n) for spec in args.schedules or SCHEDULES]
    floor_table = decision_table(rule, Schedule(1, n))
    rows = []
    for seed, (name, population) in enumerate(POPULATIONS.items()):
        floor = exact(rule, floor_table, population, n)["exact_share"]
        tables = {s.spec: (rule, decision_table(rule, s)) for s in schedules}
        cells = simulate(population, tables, n, args.tasks, args.seed + seed)
        for schedule in schedules:
            cell = cells[schedule.spec]
            rows.append(
                {
                    "population": name,
                    "n": n,
                    "schedule": schedule.spec,
                    "max_rounds": schedule.max_rounds,
                    "rollout_share": cell["rollout_share"],
                    "exact_share": cell["exact_share"],
                    "differ_from_fixed": cell["differ_from_fixed"],
                    "floor_share": floor,
                }
            )
    return {"tasks": args.tasks, "seed": args.seed, "rows": rows}


def print_schedules(results: dict[str, Any]) -> None:
    print(f"learnable's schedules: {results['tasks']:,} tasks a population, seed {results['seed']}")
    print(
        "| population | N | rounds | most rounds | rollouts / fixed N | exact | decisions != fixed N"
        " | floor (one draw at a time, exact) | exact / floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in results["rows"]:
        print(
            f"| {row['population']} | {row['n']} | {row['schedule']} | {row['max_rounds']} |"
            f" {row['rollout_share']:.3f} | {row['exact_share']:.3f} | {row['differ_from_fixed']:.4f} |"
            f" {row['floor_share']:.3f} | {row['exact_share'] / row['floor_share']:.2f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parts = ("simulate", "schedules", "bound", "real")
    parser.add_argument("part", nargs="?", choices=parts, default="simulate")
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--rules", nargs="+", default=list(RULES))
    parser.add_argument(
        "--schedules",
        nargs="+",
        help="schedules and real: round sizes, as collect's --rounds (schedules: default "
        + " ".join(SCHEDULES)
        + "; real: default --first-round)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--populations",
        choices=("beta", "edge", "all"),
        default="beta",
        help="simulate: the four Beta populations, the ones near the band edges (issue 35), or both",
    )
    parser.add_argument("--base-url", help="real: an already running server (else a tiny one is started)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--repeats", type=int, default=16, help="schedules and real: N")
    parser.add_argument("--first-round", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="real: fixed/adaptive pairs, interleaved")
    parser.add_argument(
        "--seed-per-repeat", action="store_true", help="real: seeded, one request per rollout"
    )
    parser.add_argument("--model-dir", help="real: a vLLM-loadable model (default: SmolLM2 as the demo)")
    parser.add_argument("--task-file", type=Path, default=REPO / "examples" / "tasks.jsonl", help="real")
    parser.add_argument("--generated", type=int, help="real: this many seeded arithmetic tasks instead")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="real: S, the sequences (or requests, --equal) in flight"
    )
    parser.add_argument(
        "--equal",
        choices=("sequences", "requests", "both"),
        default="both",
        help="real: hold sequences in flight equal, requests in flight equal, or measure both",
    )
    parser.add_argument("--warmup", action="store_true", help="real: one untimed fixed run first")
    parser.add_argument(
        "--barrier-checkout", help="real: also run adaptive with this ngrp checkout (rounds as barriers)"
    )
    args = parser.parse_args()
    if args.part == "real":
        from adaptive_real import print_real, real_run  # benchmarks/adaptive_real.py: the vLLM part

        run, show = real_run, print_real
    else:
        run, show = {
            "bound": (run_bound, print_bound),
            "schedules": (run_schedules, print_schedules),
            "simulate": (run_simulation, print_simulation),
        }[args.part]
    results = run(args)
    if args.json:
        print(json.dumps(results))
    else:
        show(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
