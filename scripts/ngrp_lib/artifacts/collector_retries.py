"""The retries an ngrp collector sent, from the run manifest beside a rollouts file (`manifest_beside`):
every invocation's `runs[].retries` (cause -> requests sent again) summed, for `check` and `health` to
show. A run without an ngrp manifest (Gym's own collector), or one whose manifest is unreadable, gives {}."""

from __future__ import annotations

from typing import Any


def retries_of(manifest: Any) -> dict[str, int]:
    """Cause -> retries over every recorded invocation; entries of another shape are skipped."""
    runs = manifest.get("runs") if isinstance(manifest, dict) else None
    total: dict[str, int] = {}
    for run in runs if isinstance(runs, list) else []:
        retries = run.get("retries") if isinstance(run, dict) else None
        for cause, n in (retries if isinstance(retries, dict) else {}).items():
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                total[str(cause)] = total.get(str(cause), 0) + n
    return dict(sorted(total.items()))


def retries_line(retries: dict[str, int]) -> str | None:
    """`retries: 128 requests the collector sent again (timeout 128): ...`; None when there were none."""
    if not retries:
        return None
    causes = ", ".join(f"{cause} {n}" for cause, n in retries.items())
    line = f"retries: {sum(retries.values())} requests the collector sent again ({causes})"
    if "timeout" in retries:
        line += (
            "; timeouts cost --timeout seconds each: raise --timeout (per sequence), or lower --concurrency"
            " if the server is overloaded"
        )
    return line
