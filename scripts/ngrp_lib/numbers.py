"""Numbers for people: fixed decimals, p-values never shown as 0.0000, shares, intervals; n/a if undefined."""

from __future__ import annotations

import math
from typing import Any


def num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pval(value: Any) -> str:
    """p-values: 4 decimals, or scientific notation when tiny (never a bare 0.0000)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.1e}" if 0 < value < 1e-4 else f"{value:.4f}"


def pct(share: Any) -> str:
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "n/a"
    return f"{share * 100:.1f}%"


def interval(low: Any, high: Any, digits: int = 3) -> str:
    return f"[{num(low, digits)}, {num(high, digits)}]"
