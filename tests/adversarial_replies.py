"""Replies built to make a health check slow (issue 38, class 1), shared by the linear-time test and
`benchmarks/health_adversarial_bench.py`: each shape is a function of the reply's length in characters."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson
from health_data import clean_run


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda n: unit * (n // len(unit))


SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed_boxes": _repeat("\\boxed{"),
    "nested_boxes": lambda n: "\\boxed{" * (n // 16) + "7}" * (n // 16),
    "box_then_open_braces": lambda n: "= \\boxed{1}" + "{" * (n - 11),
    "box_then_brace_pairs": _repeat("= \\boxed{1}{}{}{}"),
    "boxes_of_braces": _repeat("\\boxed{{}{{}}"),
    "nested_fractions": lambda n: "\\boxed{" + "\\frac{" * (n // 12) + "1}{2}" * (n // 12),
    "huge_exponents": _repeat("= 1e9999 "),
    "negative_exponents": _repeat("= 1e-9999 "),
    "two_digit_exponents": _repeat("= 1e99 "),
    "stated_decimals": _repeat("is 6.9999 "),
    "long_number": lambda n: "= " + "9" * (n - 2),
    "stated_minus_signs": _repeat("= -"),
}
# A reply of the same length that no check finds anything odd in: the linear baseline.
BASELINE = "benign_prose"
SHAPES[BASELINE] = _repeat("We add the two numbers, carry the one, and check the sum once more. ")


def write_run(folder: Path, reply: str, expected: str = "7") -> tuple[Path, Path]:
    """A one-task run whose first rollout is scored 0 with `reply` as its answer and its reasoning
    (so every check that reads either reads it)."""
    run = clean_run(1)
    rows = [orjson.loads(line) for line in run.lines]
    row = rows[0]
    output = row["response"]["output"]
    output[0]["summary"][0]["text"] = reply
    output[-1]["content"][0]["text"] = reply
    row.update(reward=0.0, is_correct=False, extracted_answer="3", expected_answer=expected)
    run.lines = [orjson.dumps(r) + b"\n" for r in rows]
    inputs, rollouts, _ = run.write(folder)
    return inputs, rollouts


def time_health(folder: Path, reply: str, expected: str = "7") -> float:
    """CPU seconds `run_health` (judge only) takes on a run holding `reply`."""
    from ngrp_lib.audit.health import run_health

    inputs, rollouts = write_run(folder, reply, expected)
    start = time.process_time()
    run_health(inputs, rollouts, write=False)
    return time.process_time() - start
