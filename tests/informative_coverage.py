"""Coverage of `compare`'s interval for B - A of P(informative at G), in simulation with known truth.

    python tests/informative_coverage.py [RUNS]   # prints one line per design (default 1000 runs each)

Each run draws T tasks with A's true pass rate p ~ Beta(alpha, 1) and B's p ** gamma (so B's rates are
Beta(alpha / gamma, 1): gamma < 1 makes B better on every task, and the pairing is exact), n Bernoulli
rollouts per task in each run, and asks ngrp's paired estimator for the 95% interval (MOVER) of B - A of
the mean P(informative at G). The truth is the population value, exact from the Beta(a, 1) moments (worked out
here, not by ngrp): P(informative at G | p) = 1 - p^G - (1-p)^G, E[p^G] = a / (a + G) and
E[(1-p)^G] = prod_{j=1..G} j / (a + j). tests/test_compare_informative.py runs a few hundred runs of two
designs and asserts the coverage.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from ngrp_lib.stats.paired import paired_informative  # noqa: E402


def p_informative_population(a: float, group: int) -> float:
    """E over p ~ Beta(a, 1) of 1 - p^G - (1-p)^G."""
    return 1.0 - a / (a + group) - math.prod(j / (a + j) for j in range(1, group + 1))


@dataclass(frozen=True)
class Design:
    tasks: int
    repeats: int
    group: int
    alpha: float
    gamma: float  # B's rate is A's rate ** gamma

    @property
    def truth(self) -> float:
        return p_informative_population(self.alpha / self.gamma, self.group) - p_informative_population(
            self.alpha, self.group
        )

    def label(self) -> str:
        return (
            f"{self.tasks} tasks x {self.repeats}, G={self.group}, p_A ~ Beta({self.alpha}, 1), "
            f"p_B = p_A^{self.gamma} (true B - A {self.truth:+.4f})"
        )


DESIGNS = [
    Design(50, 8, 8, 0.5, 1.0),
    Design(50, 8, 8, 0.5, 0.6),
    Design(30, 8, 4, 2.0, 1.5),
    Design(200, 16, 8, 1.0, 0.7),
]


def coverage(design: Design, runs: int, seed: int = 0) -> tuple[float, float]:
    """(share of runs whose interval holds the truth, share that excludes 0)."""
    rng = np.random.default_rng(seed)
    hits = rejects = 0
    for _ in range(runs):
        pa = rng.beta(design.alpha, 1.0, design.tasks)
        pb = pa**design.gamma
        sa = (rng.random((design.tasks, design.repeats)) < pa[:, None]).astype(float)
        sb = (rng.random((design.tasks, design.repeats)) < pb[:, None]).astype(float)
        (entry,) = paired_informative(sa, sb, [design.group])
        hits += entry.ci_low <= design.truth <= entry.ci_high
        rejects += entry.ci_low > 0 or entry.ci_high < 0
    return hits / runs, rejects / runs


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 1000
    band = 1.96 * math.sqrt(0.95 * 0.05 / runs)
    print(f"95% MOVER interval of B - A of P(informative at G), {runs} runs each (0.95 +- {band:.3f}):")
    for design in DESIGNS:
        covered, rejected = coverage(design, runs)
        print(f"- {design.label()}: covers {covered:.3f}, excludes 0 in {rejected:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
