"""Numbers for people: fixed decimals, p-values never shown as 0.0000, shares, intervals, short values
(significant digits, for a reward or a field of a rollout); n/a if undefined. Every command and page
formats its numbers here.

Also the one bound on the size of a number the statistics accept (`MAX_MAGNITUDE`): beyond it, sums and
squares of a realistic number of values overflow float64 (a mean of 1.7e308 and 1.7e308 is inf), so a
profile or a statistic over such values is refused as a finding instead of printing nonsense."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def short(value: Any, digits: int = 3) -> str:
    """A value of a run as people read it: whole floats without decimals, others to `digits` significant
    digits, booleans as true/false, anything else as its text."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.{digits}g}"
    return str(value)


def pval(value: Any) -> str:
    """p-values: 4 decimals, or scientific notation when tiny (never a bare 0.0000)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.1e}" if 0 < value < 1e-4 else f"{value:.4f}"


def signed(value: Any, digits: int = 2) -> str:
    """A difference, with its sign always shown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:+.{digits}f}"


def pct(share: Any, digits: int = 1) -> str:
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "n/a"
    return f"{share * 100:.{digits}f}%"


MAX_MAGNITUDE = 1e150  # the square of a value is below 1e300: sums of squares of 10^8 values stay finite


def first_oversize(matrix: Any) -> tuple[int, int, float] | None:
    """(row, column, value) of the first entry of a 2-D float array beyond +-MAX_MAGNITUDE (NaN ignored)."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        big = np.abs(matrix) > MAX_MAGNITUDE
    if not big.any():
        return None
    row, column = (int(i) for i in np.argwhere(big)[0])
    return row, column, float(matrix[row, column])


def interval(low: Any, high: Any, digits: int = 3) -> str:
    return f"[{num(low, digits)}, {num(high, digits)}]"
