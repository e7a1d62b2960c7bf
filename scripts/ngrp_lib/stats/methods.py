"""The interval methods: the one table every output reads an interval's method name from (the JSON
`ci_method` values, the text tags, the report's labels, the legend under `ngrp stats`).

Adding a method is one entry here; schemas/*.json list the same names (a test keeps them in step).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    name: str  # in JSON (ci_method, boot_ci_method)
    tag: str  # in text, beside the interval
    label: str  # for people (report, legend)
    what: str  # one line: how it is made


KORN_GRAUBARD = "korn_graubard"
UPPER_BOUND = "one_sided_upper"  # the value is 0
LOWER_BOUND = "one_sided_lower"  # the value is 1
T = "t"
BOOTSTRAP = "bootstrap_percentile"
WILSON_TASK = "wilson"
WILSON = "wilson_effective_n"
LOGIT_T = "logit_t"
MOVER = "mover"  # a paired difference of bounded means (stats.differences)
CONSTANT_DIFFERENCE = "constant_difference"  # every paired difference the same (stats.differences)

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method(KORN_GRAUBARD, "KG", "Korn-Graubard", "Clopper-Pearson on the effective n, bounded to [0, 1]"),
        Method(UPPER_BOUND, "upper", "one-sided upper bound", "at a value of 0: [0, 1 - 0.05^(1/T)]"),
        Method(LOWER_BOUND, "lower", "one-sided lower bound", "at a value of 1: [0.05^(1/T), 1]"),
        Method(T, "t", "t", "mean +- t_{n-1} SE over tasks"),
        Method(BOOTSTRAP, "boot", "bootstrap", "percentile interval, whole tasks resampled"),
        Method(WILSON_TASK, "Wilson", "Wilson score", "one task's pass rate from its own rollouts"),
        Method(WILSON, "Wilson-n", "Wilson on the effective n", "a candidate, not a headline"),
        Method(LOGIT_T, "logit-t", "t on the logit scale", "a candidate, not a headline"),
        Method(
            MOVER,
            "MOVER",
            "MOVER",
            "a paired difference of bounded means, from each mean's bounded interval and their correlation",
        ),
        Method(
            CONSTANT_DIFFERENCE,
            "const",
            "constant difference",
            "every paired difference c: [c q - (1 - q), c q + (1 - q)], q = 0.05^(1/T)",
        ),
    )
}

# the methods a headline interval (ci_method of stats) can have
HEADLINE = (KORN_GRAUBARD, UPPER_BOUND, LOWER_BOUND, T)
# the methods a paired difference of bounded means can have (stats.differences)
DIFFERENCES = (MOVER, CONSTANT_DIFFERENCE, T)


def tag(name: str | None) -> str:
    """The text tag of a method ("" for none: an undefined interval)."""
    return METHODS[name].tag if name else ""


def label(name: str | None) -> str:
    return METHODS[name].label if name else ""


def legend(names: tuple[str, ...]) -> str:
    """'KG = Korn-Graubard; ...; t' for the methods named (a tag that is its label stands alone)."""
    return "; ".join(
        METHODS[n].tag if METHODS[n].tag == METHODS[n].label else f"{METHODS[n].tag} = {METHODS[n].label}"
        for n in names
    )
