"""The prefix-cache hit rate of a run and why it is what it is, from the run manifest beside its rollouts:
each recorded invocation's `runs[].cost.prefix_cache_hit_rate` and `prefix_cache_note` (what `collect`
printed at the end of that invocation). For `check` and `stats` to show after the run; a run without an
ngrp manifest (Gym's own collector), or none of whose invocations recorded a cost, gives []."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .manifest import manifest_beside


def prefix_cache_of(rollouts: Path | str) -> list[dict[str, Any]]:
    """`prefix_cache_in` of the manifest beside `rollouts`."""
    return prefix_cache_in(manifest_beside(rollouts))


def prefix_cache_in(manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per invocation that recorded a cost, in order: {"hit_rate": a share or None, "note": str or None}."""
    runs = manifest.get("runs") if manifest is not None else None
    out = []
    for run in runs if isinstance(runs, list) else []:
        cost = run.get("cost") if isinstance(run, dict) else None
        if not isinstance(cost, dict) or "prefix_cache_hit_rate" not in cost:
            continue  # running, killed (no server figure for it) or older
        rate, note = cost.get("prefix_cache_hit_rate"), cost.get("prefix_cache_note")
        number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        out.append({"hit_rate": rate if number else None, "note": note if isinstance(note, str) else None})
    return out


def prefix_cache_line(entries: list[dict[str, Any]]) -> str | None:
    """`prefix cache: hit rate 0.0% (why)`, one rate per invocation; None when none was recorded."""
    if not entries:
        return None
    rates = ", ".join("not reported" if e["hit_rate"] is None else f"{e['hit_rate']:.1%}" for e in entries)
    notes = list(dict.fromkeys(e["note"] for e in entries if e["note"]))
    label = "hit rate" if len(entries) == 1 else f"hit rate by invocation ({len(entries)})"
    return f"prefix cache: {label} {rates}" + (f" ({'; '.join(notes)})" if notes else "")
