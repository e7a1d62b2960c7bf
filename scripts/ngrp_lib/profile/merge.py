"""Sharded profiling: profile each shard with `save_state`, then merge the states into the outputs one
pass over all shards' files would give. Exact by construction: the merge rebuilds the same `Dataset`
and runs the same pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ..artifacts.jsonl import LineReader, refuse_existing
from ..artifacts.opening import open_input
from ..errors import InputError, UsageError
from .api import (
    STATE_SUFFIX,
    ProfileOptions,
    ProfileResult,
    check_options,
    no_gc,
    output_paths,
    profile_dataset,
)
from .reader import ReadStats
from .records import Dataset, InputRec, ResultRec, compact_dumps

REWARD_PROFILE_SUFFIX = "_reward_profiling"


def state_path_for(shard: Path) -> Path:
    """Accept a state file, or a shard's `<stem>_reward_profiling.jsonl` next to its state file."""
    name = shard.name
    if name.endswith(STATE_SUFFIX + ".jsonl"):
        return shard
    if name.endswith(REWARD_PROFILE_SUFFIX + ".jsonl"):
        stem = name[: -len(REWARD_PROFILE_SUFFIX + ".jsonl")]
        return shard.with_name(stem + STATE_SUFFIX + ".jsonl")
    raise UsageError(
        f"{shard}: not a profile state (`*{STATE_SUFFIX}.jsonl`) "
        f"or reward profile (`*{REWARD_PROFILE_SUFFIX}.jsonl`)",
        hint="profile each shard with `ngrp profile --save-state`, then merge their outputs",
    )


# Each state line after the header: its kind and the JSON types of its fields (see api.write_state).
_SHAPES = {
    "i": (int, int, (str, type(None)), (str, type(None))),
    "r": (int, int, bool, list, list, str, dict),
    "s": (int, (str, type(None)), int, dict),
}


def _load_state(path: Path, data: Dataset, stats: ReadStats) -> dict[str, Any]:
    header: dict[str, Any] | None = None
    for number, row in _raw_lines(path):
        if header is None:
            if not isinstance(row, dict) or row.get("ngrp_profile_state") != 1:
                raise InputError("not an ngrp profile state file (bad header)", path=path, line=1)
            header = row
            continue
        shape = _SHAPES.get(row[0]) if isinstance(row, list) and row else None
        if shape is None or len(row) != len(shape) + 1 or not all(map(isinstance, row[1:], shape)):
            raise InputError(
                "not a profile state line (edited or from another tool?)",
                path=path,
                line=number,
                hint="profile that shard again with --save-state",
            )
        kind = row[0]
        if kind == "i":
            data.inputs.append(InputRec(row[1], row[2], row[3], row[4]))
        elif kind == "r":
            key = (row[1], row[2])
            if key in data.results:
                stats.duplicate_results.append(key)
                continue
            data.results[key] = ResultRec(row[3], tuple(row[4]), tuple(row[5]), compact_dumps(row[7]), row[6])
        else:
            group, best = (row[1], row[2]), data.samples.get((row[1], row[2]))
            if best is None or row[3] < best[0]:
                data.samples[group] = (row[3], compact_dumps(row[4]))
    if header is None:
        raise InputError("empty profile state file", path=path)
    return header


def _raw_lines(path: Path) -> Iterator[tuple[int, Any]]:
    number = 0
    with open_input(path, buffering=0) as handle:
        for batch in LineReader(handle, path):
            for line in batch:
                number += 1
                try:
                    yield number, orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise InputError(f"invalid JSON: {exc}", path=path, line=number) from exc


def merge_profiles(shards: list[Path | str], rollouts: Path | str, options: ProfileOptions) -> ProfileResult:
    """Merge shard states into the profile of their union; outputs are named from `rollouts`' stem."""
    if not shards:
        raise UsageError(
            "--merge needs at least one shard", hint="list the shards' *_reward_profiling.jsonl files"
        )
    check_options(options)
    paths = output_paths(Path(rollouts), ProfileOptions(**{**options.__dict__, "save_state": False}))
    refuse_existing(list(paths.values()), options.overwrite)
    data, stats = Dataset(), ReadStats()
    input_keys: set = set()
    sources: dict[str, Any] = {}
    for number, shard in enumerate(shards):
        path = state_path_for(Path(shard))
        if not path.exists():
            raise InputError("profile state not found", path=path, hint="profile the shard with --save-state")
        before = len(data.inputs)
        with no_gc():
            header = _load_state(path, data, stats)
        if header["null_reward"] != options.null_reward:
            raise UsageError(
                f"{path} was profiled with --null-reward {header['null_reward']}, not {options.null_reward}",
                hint=f"merge with --null-reward {header['null_reward']}, or re-profile the shard",
            )
        for rec in data.inputs[before:]:
            key = (rec.task, rec.rollout)
            if key in input_keys:
                stats.duplicate_inputs.append(key)
            input_keys.add(key)
        sources[f"shard_{number}"] = {"path": str(path), "sources": header["sources"]}
    for rec in data.inputs:
        rec.result = data.results.get((rec.task, rec.rollout))
    if stats.duplicate_inputs:  # keep the first copy, as a single pass does, so the error path is identical
        seen: set = set()
        unique = []
        for rec in data.inputs:
            if (rec.task, rec.rollout) not in seen:
                seen.add((rec.task, rec.rollout))
                unique.append(rec)
        data.inputs = unique
    options = ProfileOptions(**{**options.__dict__, "save_state": False})
    return profile_dataset(data, stats, options, paths, sources)
