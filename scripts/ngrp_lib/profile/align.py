"""Key alignment with Gym's rules and messages: extra and duplicate keys always fail, missing keys fail
unless partial profiling was asked for. Runs on all rows before masking, as `gym eval profile` does."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_

from ..errors import FindingsError
from .reader import ReadStats
from .records import Dataset, Key

PARTIAL_HINT = "pass --allow-partial (Gym: ++allow_partial_rollouts=True) to profile the completed rollouts"


@dataclass(frozen=True)
class Alignment:
    missing: list[Key]  # sorted
    extra: list[Key]  # sorted


def check_alignment(data: Dataset, stats: ReadStats, allow_partial: bool) -> Alignment:
    if stats.duplicate_inputs:
        key = stats.duplicate_inputs[0]
        raise FindingsError(
            f"Duplicate materialized input row for rollout key {key}{_where(stats, 'inputs', key)}",
            hint="each (_ng_task_index, _ng_rollout_index) may appear once in the materialized inputs",
        )
    if stats.duplicate_results:
        key = min(stats.duplicate_results)
        raise FindingsError(
            f"Duplicate result row for rollout key {key} "
            f"({len(stats.duplicate_results)} duplicate rollout rows){_where(stats, 'rollouts', key)}",
            hint="deduplicate the rollouts first (for example with `ngrp merge`), keeping one row per key",
        )
    matched = len(data.inputs) - sum(map(is_, map(attrgetter("result"), data.inputs), repeat(None)))
    extra = []
    if matched < len(data.results):
        extra = sorted(data.results.keys() - {(rec.task, rec.rollout) for rec in data.inputs})
    if extra:
        raise FindingsError(
            "Rollout results contain rows with no matching materialized input rows. "
            f"Found {len(extra)} extra rollout rows. Extra rollout keys: {extra[:10]}",
            hint="these rollouts came from other inputs; profile them with their own materialized file",
        )
    missing = []
    if matched < len(data.inputs):
        missing = sorted((rec.task, rec.rollout) for rec in data.inputs if rec.result is None)
    if missing and not allow_partial:
        raise FindingsError(
            "Materialized input rows and rollout results do not have matching rollout keys. "
            f"Missing rollout results for {len(missing)} materialized input rows. "
            f"Missing rollout keys: {missing[:10]}.",
            hint=PARTIAL_HINT,
        )
    return Alignment(missing, extra)


def _where(stats: ReadStats, role: str, key: Key) -> str:
    """Gym's message names only the key; say where the repeat is (in a single pass, the files are known)."""
    where = stats.repeated_at.get((role, key))
    return f"; repeated at {where}" if where else ""
