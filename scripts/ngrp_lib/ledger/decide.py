"""Suggest keep or discard: keep only when the improvement's 95% interval excludes zero."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..artifacts.opening import same_file
from ..errors import FindingsError, UsageError
from ..stats.paired import IDENTICAL
from .campaign import Campaign
from .metric import Reading
from .paired import compare
from .table import LedgerRow


@dataclass(frozen=True)
class Suggestion:
    status: str  # keep or discard
    reason: str
    compared_to: str  # "" or a short "#<index> <method> ..." summary for the ledger


def scored(rows: list[LedgerRow]) -> list[LedgerRow]:
    """Rows that count as results: kept, with a metric."""
    return [r for r in rows if r.status == "keep" and r.number("metric_value") is not None]


def best_row(rows: list[LedgerRow], direction: str) -> LedgerRow | None:
    candidates = scored(rows)
    if not candidates:
        return None
    sign = 1.0 if direction == "max" else -1.0
    # Best value; ties go to the earlier run.
    return max(candidates, key=lambda r: (sign * (r.number("metric_value") or 0.0), -r.index))


def baseline_row(rows: list[LedgerRow]) -> LedgerRow | None:
    candidates = scored(rows)
    return min(candidates, key=lambda r: r.index) if candidates else None


def reference_row(rows: list[LedgerRow], direction: str, compare_to: str) -> LedgerRow | None:
    if compare_to == "best":
        return best_row(rows, direction)
    if compare_to == "baseline":
        return baseline_row(rows)
    wanted = int(compare_to)
    for row in rows:
        if row.index == wanted:
            if row.status == "crash":
                raise UsageError(f"--compare-to {wanted}: that run crashed and has no metric")
            return row
    raise UsageError(f"--compare-to {wanted}: no such index in the ledger")


def _improves(low: float, high: float, direction: str) -> bool:
    return low > 0 if direction == "max" else high < 0


def suggest(
    campaign: Campaign,
    rows: list[LedgerRow],
    reading: Reading,
    *,
    profile: Path | None,
    compare_to: str = "best",
    compare_metric: str | None = None,
    elapsed_min: float | None = None,
) -> Suggestion:
    timeout = campaign.per_run_timeout_min
    if timeout is not None and elapsed_min is not None and elapsed_min > timeout:
        return Suggestion("discard", f"overran the per-run timeout ({elapsed_min:g} > {timeout:g} min)", "")
    ref = reference_row(rows, campaign.direction, compare_to)
    if ref is None:
        return Suggestion("keep", "first scored run: it is the baseline", "")
    ref_profile = Path(ref.fields["profile_path"]) if ref.fields["profile_path"] else None
    if profile is not None and ref_profile is not None and same_file(ref_profile, profile):
        return Suggestion(
            "discard",
            f"this run's profile is the file #{ref.index} recorded ({profile}): it was overwritten, so there "
            "is nothing to pair with; write each run's profile to a path of its own",
            f"#{ref.index} same profile file",
        )
    if profile is not None and ref_profile is not None and ref_profile.exists():
        metric = compare_metric or campaign.compare_metric
        return _paired(campaign.compare_direction, ref, ref_profile, profile, metric)
    result = _unpaired(campaign.direction, ref, reading)
    if profile is not None and ref_profile is not None:  # the reference's profile was moved or deleted
        return Suggestion(
            result.status,
            f"{result.reason}; #{ref.index}'s profile {ref_profile} is gone",
            result.compared_to,
        )
    return result


def _paired(direction: str, ref: LedgerRow, ref_profile: Path, profile: Path, metric: str) -> Suggestion:
    try:
        result = compare(ref_profile, profile, metric)
    except FindingsError as exc:  # no task in common: there is nothing to pair
        reason = f"paired {metric} vs #{ref.index}: {exc.message}"
        return Suggestion("discard", reason, f"#{ref.index} no pairs")
    summary = f"#{ref.index} {result.method} n={result.n_tasks} diff={result.mean_diff:+.6g}"
    if result.n_dropped:
        summary += f" dropped={result.n_dropped}"
    if result.identical:  # the same rollouts twice (or the same seed): no evidence either way
        what = result.identical.replace("_", " ")
        return Suggestion("discard", f"paired {metric} vs #{ref.index}: {IDENTICAL} ({what})", summary)
    if result.ci_low is None or result.ci_high is None:
        return Suggestion("discard", f"paired {metric} diff has no interval (n={result.n_tasks})", summary)
    summary += f" ci=[{result.ci_low:.6g},{result.ci_high:.6g}]"
    better = _improves(result.ci_low, result.ci_high, direction)
    verdict = "excludes 0: an improvement" if better else "does not show an improvement"
    return Suggestion("keep" if better else "discard", f"paired {metric} vs #{ref.index}: {verdict}", summary)


def _unpaired(direction: str, ref: LedgerRow, reading: Reading) -> Suggestion:
    ref_low, ref_high = ref.number("ci_low"), ref.number("ci_high")
    if None in (reading.ci_low, reading.ci_high, ref_low, ref_high):
        return Suggestion(
            "discard",
            f"no interval to judge the change against #{ref.index} (give --profile for both runs, or a CI)",
            f"#{ref.index} no interval",
        )
    # Without pairing, only intervals that do not overlap count as a difference (conservative).
    better = reading.ci_low > ref_high if direction == "max" else reading.ci_high < ref_low  # type: ignore[operator]
    summary = f"#{ref.index} unpaired-intervals [{ref_low:.6g},{ref_high:.6g}]"
    verdict = "intervals separate: an improvement" if better else "intervals overlap or regress"
    return Suggestion("keep" if better else "discard", f"unpaired vs #{ref.index}: {verdict}", summary)
