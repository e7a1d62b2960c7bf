"""Matplotlib figures rendered to inline SVG strings (Agg backend, imported lazily, fonts as paths)."""

from __future__ import annotations

import io
import re
from typing import Any

from ..errors import MissingDependencyError, install_command

WIDTH, HEIGHT = 6.4, 3.4
BLUE, ORANGE, GREY = "#1f77b4", "#ff7f0e", "#7f7f7f"


def pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MissingDependencyError(
            "matplotlib", install_command("report", "matplotlib"), "ngrp report (plots)"
        ) from None
    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "ngrp", "font.size": 9})
    import matplotlib.pyplot as plt

    return plt


def to_svg(fig: Any) -> str:
    plt = pyplot()
    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    # Inline SVG needs neither the XML declaration nor the DOCTYPE (which names an external DTD).
    # The RDF metadata block only names vocabularies by URL; drop it too.
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    return re.sub(r"<\?xml[^>]*>\s*|<!DOCTYPE[^>]*>\s*", "", text)


def _figure() -> tuple[Any, Any]:
    fig, ax = pyplot().subplots(figsize=(WIDTH, HEIGHT))
    ax.grid(alpha=0.3)
    return fig, ax


def curve_plot(curves: dict[str, list[dict]], ylabel: str) -> str:
    """Metric@k against k, one line per curve, shaded with each point's headline interval (ci_low/ci_high:
    the interval the tables quote, Korn-Graubard for rates)."""
    fig, ax = _figure()
    for (label, curve), color in zip(curves.items(), (BLUE, ORANGE, "#2ca02c", "#d62728"), strict=False):
        if not curve:
            continue
        ks = [e["k"] for e in curve]
        ax.plot(ks, [_nan(e["value"]) for e in curve], marker="o", ms=3, color=color, label=label)
        low = [_nan(e["ci_low"]) for e in curve]
        high = [_nan(e["ci_high"]) for e in curve]
        ax.fill_between(ks, low, high, color=color, alpha=0.18, linewidth=0)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k (log scale)")
    ax.set_ylabel(ylabel)
    if _unit(curves):
        ax.set_ylim(-0.02, 1.02)
    if any(curves.values()):  # no curve at all (every reward null): a legend would only warn on stderr
        ax.legend(loc="best")
    return to_svg(fig)


def _unit(curves: dict[str, list[dict]]) -> bool:
    values = [e["value"] for c in curves.values() for e in c if e["value"] is not None]
    return bool(values) and min(values) >= 0 and max(values) <= 1


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


MAX_DISTINCT_BARS = 33  # up to 32 repeats per task: one bar per pass rate c/n that occurs


def histogram(values: list[float], xlabel: str, bins: int = 20) -> str:
    """Tasks per value. Pass rates of n repeats take only the values c/n: with few distinct values, one
    bar per value that occurs (fixed bins would leave gaps and merge neighbours); else `bins` bins."""
    fig, ax = _figure()
    clean = [v for v in values if v is not None]
    counts: dict[float, int] = {}
    for v in clean:
        counts[round(v, 9)] = counts.get(round(v, 9), 0) + 1
    if 0 < len(counts) <= MAX_DISTINCT_BARS:
        xs = sorted(counts)
        gap = min((b - a for a, b in zip(xs, xs[1:], strict=False)), default=1.0)
        ax.bar(xs, [counts[x] for x in xs], width=0.8 * min(gap, 1 / 8), color=BLUE, edgecolor="white")
        ax.set_xlim(min(xs + [0.0]) - 0.05, max(xs + [1.0]) + 0.05)
    else:
        lo, hi = min(clean + [0.0]), max(clean + [1.0])
        ax.hist(clean, bins=bins, range=(lo, hi), color=BLUE, edgecolor="white")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("tasks")
    return to_svg(fig)


def bars(labels: list[str], counts: list[int], ylabel: str, colors: list[str] | None = None) -> str:
    fig, ax = _figure()
    ax.bar(labels, counts, color=colors or BLUE)
    for x, c in enumerate(counts):
        ax.annotate(str(c), (x, c), ha="center", va="bottom")
    ax.set_ylabel(ylabel)
    return to_svg(fig)


def length_bins(bins: list[dict], length_field: str) -> str:
    fig, ax = _figure()
    mids = [(b["length_low"] + b["length_high"]) / 2 for b in bins]
    ax.plot(mids, [b["mean_reward"] for b in bins], marker="o", color=BLUE)
    for x, b in zip(mids, bins, strict=True):
        ax.annotate(
            f"n={b['n_rollouts']}",
            (x, b["mean_reward"]),
            fontsize=7,
            color=GREY,
            textcoords="offset points",
            xytext=(0, 5),
            ha="center",
        )
    ax.set_xlabel(f"{length_field} (pooled deciles; confounded by difficulty)")
    means = [b["mean_reward"] for b in bins if b["mean_reward"] is not None]
    if means and min(means) >= 0 and max(means) <= 1:
        ax.set_ylim(-0.02, 1.02)  # the whole reward scale: a zoomed axis makes noise look like a trend
        ax.set_ylabel("mean reward")
    else:
        ax.set_ylabel("mean reward (axis fitted to the data)")
    return to_svg(fig)


def paired_scatter(a: list[float], b: list[float], label_a: str, label_b: str) -> str:
    fig, ax = pyplot().subplots(figsize=(4.6, 4.6))
    ax.grid(alpha=0.3)
    ax.scatter(a, b, s=12, alpha=0.6, color=BLUE)
    lo, hi = min(a + b + [0.0]), max(a + b + [1.0])
    ax.plot([lo, hi], [lo, hi], color=GREY, linestyle="--", linewidth=1)
    ax.set_xlabel(f"{label_a}: per-task mean")
    ax.set_ylabel(f"{label_b}: per-task mean")
    return to_svg(fig)
