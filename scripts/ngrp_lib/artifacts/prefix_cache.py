"""The prefix-cache hit rate of a run and why it is what it is, from the run manifest beside its rollouts:
each recorded invocation's `runs[].cost.prefix_cache_hit_rate` and `prefix_cache_note` (what `collect`
printed at the end of that invocation, about that invocation's prompts). For `check` and `stats` to show
after the run, each figure with the invocation it is of: a resumed run's killed invocation recorded
none, and its resume's note is about the prompts the resume sent. A run without an ngrp manifest (Gym's
own collector), or none of whose invocations recorded a cost, gives []."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .manifest import manifest_beside


def prefix_cache_of(rollouts: Path | str) -> list[dict[str, Any]]:
    """`prefix_cache_in` of the manifest beside `rollouts`."""
    return prefix_cache_in(manifest_beside(rollouts))


def prefix_cache_in(manifest: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per invocation of the run, in order, once any of them recorded a cost (else []): {"invocation": its
    place in `runs` (1-based), "status", "recorded": whether it recorded a figure (a killed or running one
    did not), "hit_rate": a share or None, "note": str or None}. A note speaks of its own invocation
    ("every prompt this invocation sent"), never of the whole run."""
    found = manifest.get("runs") if manifest is not None else None
    out = []
    for place, run in enumerate(found if isinstance(found, list) else [], 1):
        entry: dict[str, Any] = run if isinstance(run, dict) else {}
        found_cost, status = entry.get("cost"), entry.get("status")
        cost: dict[str, Any] = found_cost if isinstance(found_cost, dict) else {}
        recorded = "prefix_cache_hit_rate" in cost  # not when running, killed, or older
        rate, note = cost.get("prefix_cache_hit_rate"), cost.get("prefix_cache_note")
        number = isinstance(rate, (int, float)) and not isinstance(rate, bool)
        out.append({
            "invocation": place,
            "status": status if isinstance(status, str) else None,
            "recorded": recorded,
            "hit_rate": rate if number else None,
            "note": note if isinstance(note, str) else None,
        })  # fmt: skip
    return out if any(e["recorded"] for e in out) else []


def prefix_cache_line(entries: list[dict[str, Any]]) -> str | None:
    """`prefix cache: hit rate 0.0% (why)` for a run of one invocation; for several, each one's rate (one
    that recorded none, a killed one, says so) and each note with the invocations it is about. None when
    none was recorded."""
    if not entries:
        return None
    if len(entries) == 1:
        (entry,) = entries
        return f"prefix cache: hit rate {_rate(entry)}" + (f" ({entry['note']})" if entry["note"] else "")
    by_note: dict[str, list[str]] = {}
    for place, entry in enumerate(entries, 1):
        if entry["note"]:
            by_note.setdefault(entry["note"], []).append(str(entry.get("invocation", place)))
    rates = ", ".join(f"{e.get('invocation', place)} {_rate(e)}" for place, e in enumerate(entries, 1))
    notes = "".join(f"; invocation {', '.join(ids)}: {note}" for note, ids in by_note.items())
    return f"prefix cache: hit rate by invocation ({len(entries)}): {rates}{notes}"


def _rate(entry: dict[str, Any]) -> str:
    if entry.get("recorded") is False:
        return f"none ({entry.get('status') or 'no cost recorded'})"
    return "not reported" if entry["hit_rate"] is None else f"{entry['hit_rate']:.1%}"
