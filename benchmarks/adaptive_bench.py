#!/usr/bin/env python3
"""Adaptive collection (`collect --adaptive RULE`): rollouts saved and decisions kept, measured.

1. `simulate` (default): tasks with known pass rates drawn from four Beta populations. Each task gets N
   seeded Bernoulli draws; fixed N sees all of them, each rule plays its rounds (R, then R more) on the
   same draws through the library's own `stats.adaptive.play`. Printed per population and N: rollouts used
   as a share of fixed N's, decisions that differ from fixed N's on the same draws, and misclassification
   against the truth next to fixed N's (band: is the true rate in [LOW, HIGH]; width: does the task's final
   Wilson interval miss its true rate).
2. `real`: the demo's tasks (examples/tasks.jsonl) against the real vLLM CPU server, `--adaptive learnable`
   against fixed N, side by side: rollouts, wall time, decisions (see `real_run`).

    python3 benchmarks/adaptive_bench.py                      # simulation, 50,000 tasks a population
    python3 benchmarks/adaptive_bench.py --tasks 200000 --json
    NGRP_VLLM_VENV=$(bash .ci/install_vllm.sh) python3 benchmarks/adaptive_bench.py real
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests"), str(REPO / "benchmarks")]

from ngrp_lib.stats.adaptive import Rule, Schedule, decide_at_end, parse_rule, play  # noqa: E402
from ngrp_lib.stats.estimators import wilson_one  # noqa: E402

POPULATIONS = {
    "Beta(2,3)": (2.0, 3.0),
    "Beta(1,1)": (1.0, 1.0),
    "Beta(0.3,0.3)": (0.3, 0.3),
    "Beta(0.25,2)": (0.25, 2.0),
}
DESIGNS = ((16, 4), (8, 2))  # (N, R); later rounds add R
RULES = ("learnable", "band:0.2,0.8", "width:0.3")


def truth_wrong(rule: Rule, p: float, decision: str, outcomes: list[bool]) -> bool | None:
    """Is this decision wrong about the true pass rate p? None for learnable: its decision is about the
    draws (did the group mix), and its benchmark is fixed N's decision on the same draws."""
    if rule.kind == "band":
        return (decision == "inside") != (rule.low <= p <= rule.high)
    if rule.kind == "width":
        bounds = wilson_one(sum(outcomes), len(outcomes))
        return bounds is None or not bounds[0] <= p <= bounds[1]
    return None


def simulate(
    population: tuple[float, float], n: int, r: int, rules: list[Rule], tasks: int, seed: int
) -> dict:
    rng = random.Random(seed)
    schedule = Schedule(first_round=r, num_repeats=n)
    figures = {rule.spec: {"used": 0, "differ": 0, "wrong": 0, "fixed_wrong": 0} for rule in rules}
    for _ in range(tasks):
        p = rng.betavariate(*population)
        draws = [rng.random() < p for _ in range(n)]
        for rule in rules:
            state = play(rule, schedule, draws)
            fixed = decide_at_end(rule, draws)
            seen = draws[: state.size]
            cell = figures[rule.spec]
            cell["used"] += state.size
            cell["differ"] += _decision_class(rule, state.decision) != _decision_class(rule, fixed)
            cell["wrong"] += bool(truth_wrong(rule, p, state.decision or "", seen))
            cell["fixed_wrong"] += bool(truth_wrong(rule, p, fixed, draws))
    return {
        spec: {
            "rollout_share": cell["used"] / (tasks * n),
            "differ_from_fixed": None if rules_kind(spec) == "width" else cell["differ"] / tasks,
            "wrong_vs_truth": None if rules_kind(spec) == "learnable" else cell["wrong"] / tasks,
            "fixed_wrong_vs_truth": None if rules_kind(spec) == "learnable" else cell["fixed_wrong"] / tasks,
        }
        for spec, cell in figures.items()
    }


def rules_kind(spec: str) -> str:
    return spec.partition(":")[0]


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _decision_class(rule: Rule, decision: str | None) -> str:
    """What the decision keeps or drops (width makes none: it gives an estimate, compared with the truth)."""
    return "estimate" if rule.kind == "width" else str(decision)


def print_simulation(results: dict[str, Any]) -> None:
    print(f"simulation: {results['tasks']:,} tasks a population, seed {results['seed']}")
    print(
        "| population | N, R | rule | rollouts / fixed N | decisions != fixed N | wrong vs truth"
        " | fixed N wrong |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in results["rows"]:
        print(
            f"| {row['population']} | {row['n']}, {row['r']} | {row['rule']} | {row['rollout_share']:.3f} |"
            f" {_share(row['differ_from_fixed'])} | {_share(row['wrong_vs_truth'])} |"
            f" {_share(row['fixed_wrong_vs_truth'])} |"
        )


def run_simulation(args: argparse.Namespace) -> dict:
    rules = [parse_rule(spec) for spec in args.rules]
    rows = []
    for seed, (name, population) in enumerate(POPULATIONS.items()):
        for n, r in DESIGNS:
            for spec, cell in simulate(population, n, r, rules, args.tasks, args.seed + seed).items():
                rows.append({"population": name, "n": n, "r": r, "rule": spec, **cell})
    return {"tasks": args.tasks, "seed": args.seed, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("part", nargs="?", choices=("simulate", "real"), default="simulate")
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--rules", nargs="+", default=list(RULES))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--base-url", help="real: an already running server (else a tiny one is started)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--repeats", type=int, default=16)
    parser.add_argument("--first-round", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="real: fixed/adaptive pairs, interleaved")
    parser.add_argument(
        "--seed-per-repeat", action="store_true", help="real: seeded, one request per rollout"
    )
    parser.add_argument("--model-dir", help="real: a vLLM-loadable model (default: SmolLM2 as the demo)")
    parser.add_argument("--task-file", type=Path, default=REPO / "examples" / "tasks.jsonl", help="real")
    parser.add_argument("--generated", type=int, help="real: this many seeded arithmetic tasks instead")
    parser.add_argument("--concurrency", type=int, default=32, help="real: collect's --concurrency")
    parser.add_argument("--warmup", action="store_true", help="real: one untimed fixed run first")
    parser.add_argument(
        "--barrier-checkout", help="real: also run adaptive with this ngrp checkout (rounds as barriers)"
    )
    args = parser.parse_args()
    if args.part == "real":
        from adaptive_real import real_run  # benchmarks/adaptive_real.py: the vLLM part

        results = real_run(args)
    else:
        results = run_simulation(args)
    if args.json:
        print(json.dumps(results))
    elif args.part == "simulate":
        print_simulation(results)
    else:
        from adaptive_real import print_real

        print_real(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
