"""Merge rollout shards (and their failures sidecars and materialized inputs) into one run.

Rules, per (`_ng_task_index`, `_ng_rollout_index`) key:
- the same key with the same content (equal after canonical JSON: sorted keys, orjson) is kept once;
- the same key with different content is a conflict: refused, naming both file:line, nothing written;
- every row needs both identity keys as non-negative integers;
- a rollout whose key is not among the merged materialized inputs (when inputs are merged) is refused,
  as NeMo Gym's profiler refuses it.
- shards are counted per run, by name (`shard_runs`): a shard of the run that is not among the files, or
  one without the `.done` marker its siblings have, is refused unless allowed;
- a key found in two seeds (`-rs0-`, `-rs1-` chunks of NeMo Gym / NeMo-Skills) is refused: seeds are
  separate samples of the same tasks, and one run holds one row per key.
Failures sidecar rows are attempts (a key may have several): only byte-identical (canonical) rows are
dropped. Streams: memory holds one key, a 16-byte digest and an origin per row, never the rows.
All outputs are written through temp files and moved into place only when everything succeeded.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import orjson

from ..artifacts import jsonl
from ..artifacts.kinds import FAILURES, MATERIALIZED, ROLLOUTS, refuse_wrong_kind
from ..artifacts.names import (
    FAILURES_SUFFIX,
    MATERIALIZED_SUFFIX,
    REWARD_PROFILE_SUFFIX,
    ROLLOUT_KEY,
    TASK_KEY,
    RolloutKey,
    failures_beside,
    failures_path_for,
    index_problem,
    is_index,
    materialized_path_for,
)
from ..artifacts.opening import real_path, require_regular
from ..artifacts.shard_runs import DONE_SUFFIX, RunKey, check_manifests, group_runs
from ..errors import FindingsError, InputError, UsageError

MAX_LISTED = 10


@dataclass
class PartCounts:
    """What one kind of file (rollouts, failures or inputs) contributed."""

    files: list[str] = field(default_factory=list)
    read: int = 0
    written: int = 0
    duplicates_dropped: int = 0


@dataclass
class MergeResult:
    output: str
    failures_output: str | None
    inputs_output: str | None
    rollouts: PartCounts
    failures: PartCounts
    inputs: PartCounts
    torn_tails: list[str]
    sidecars_skipped: list[str] = field(default_factory=list)
    missing_shards: list[str] = field(default_factory=list)  # with allow_missing_shards only
    unfinished_shards: list[str] = field(default_factory=list)  # no .done marker (allow_missing_shards)

    def to_json(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass(slots=True)
class _Seen:
    digest: bytes
    path: str
    line: int


def canonical_digest(row: dict) -> bytes:
    """A digest of the row's canonical JSON (sorted keys), so key order and spacing do not matter."""
    return hashlib.blake2b(orjson.dumps(row, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def merge_shards(
    shards: list[Path | str],
    output: Path | str,
    *,
    inputs: list[Path | str] | None = None,
    overwrite: bool = False,
    allow_torn: bool = False,
    allow_missing_shards: bool = False,
) -> MergeResult:
    """Merge shard rollouts files into `output`, with sidecars next to it under Gym's names."""
    shard_paths, skipped = _rollouts_only([Path(p) for p in shards])
    runs = group_runs(shard_paths)
    check_manifests(runs.values())
    missing = [name for run in runs.values() for name in run.missing()]
    unfinished = [name for run in runs.values() for name in run.unfinished()]
    if (missing or unfinished) and not allow_missing_shards:
        raise FindingsError(_incomplete(missing, unfinished), hint=_INCOMPLETE_HINT)
    output = Path(output)
    input_paths = _resolve_inputs(shard_paths, inputs)
    failure_paths = [f for f in map(failures_beside, shard_paths) if f is not None]
    targets = _targets(output, bool(input_paths), bool(failure_paths))
    _check_paths(shard_paths + input_paths + failure_paths, targets)  # existing outputs: atomic_outputs
    _check_kinds(shard_paths, input_paths, failure_paths)
    torn: list[str] = []
    result = MergeResult(
        str(output), None, None, PartCounts(), PartCounts(), PartCounts(), torn, skipped, missing, unfinished
    )
    run_of = {str(p): run.key for run in runs.values() for p in run.files()}
    run_of.update({str(materialized_path_for(Path(p))): key for p, key in list(run_of.items())})
    with jsonl.atomic_outputs(targets, overwrite=overwrite) as out:  # all files or none
        known: dict[RolloutKey, _Seen] | None = None
        if input_paths:
            known = _merge_keyed(input_paths, out["inputs"], result.inputs, torn, allow_torn, run_of)
            result.inputs_output = str(targets["inputs"])
        _merge_keyed(shard_paths, out["rollouts"], result.rollouts, torn, allow_torn, run_of, known=known)
        if failure_paths:
            _merge_attempts(failure_paths, out["failures"], result.failures, torn, allow_torn)
            result.failures_output = str(targets["failures"])
    return result


def _check_kinds(shards: list[Path], inputs: list[Path], failures: list[Path]) -> None:
    """What the names let through but the rows give away: a shard that holds materialized inputs or a
    profile, inputs that hold rollouts (from their first rows, see `artifacts.kinds`)."""
    for path in shards:
        refuse_wrong_kind(path, ROLLOUTS, option="SHARDS", swap="--inputs" if inputs else None)
    for path in inputs:
        refuse_wrong_kind(path, MATERIALIZED, option="--inputs", swap="SHARDS")
    for path in failures:
        refuse_wrong_kind(path, FAILURES)


def _incomplete(missing: list[str], unfinished: list[str]) -> str:
    parts = []
    if missing:
        parts.append(
            f"{len(missing)} shard(s) of the run are not among the files: {', '.join(missing[:MAX_LISTED])}"
        )
    if unfinished:
        parts.append(
            f"{len(unfinished)} shard(s) have no {DONE_SUFFIX} marker while other shards of their run do"
            f" (still running, or killed): {', '.join(unfinished[:MAX_LISTED])}"
        )
    return "; ".join(parts)


_INCOMPLETE_HINT = (
    "wait for (or rerun) those array tasks or chunks, or merge what is there with --allow-missing-shards"
)


# Files a shell glob like `rollouts-shard-*.jsonl` also matches: sidecars of a shard and profile outputs.
_SIDECARS = {FAILURES_SUFFIX: "failures sidecar", MATERIALIZED_SUFFIX: "materialized inputs sidecar"}
_NOT_SHARDS = (REWARD_PROFILE_SUFFIX, "_profile_state")


def _rollouts_only(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The rollouts shards among `paths`. A failures or materialized-inputs sidecar whose shard is listed
    too is skipped (it is merged with that shard); one without its shard, or a profile output, is refused,
    since its rows would otherwise be merged as rollouts."""
    listed = {real_path(p) for p in paths}
    shards, skipped = [], []
    for path in paths:
        stem = path.stem
        if stem.endswith(_NOT_SHARDS):
            raise UsageError(f"{path} is a profile output, not a rollouts shard", hint=_SHARDS_HINT)
        suffix = next((s for s in _SIDECARS if stem.endswith(s)), None)
        if suffix is None:
            shards.append(path)
            continue
        owner = path.with_name(stem[: -len(suffix)] + path.suffix)
        if real_path(owner) not in listed:
            raise UsageError(f"{path} is a {_SIDECARS[suffix]}, not a rollouts shard", hint=_SHARDS_HINT)
        skipped.append(str(path))
    return shards, skipped


_SHARDS_HINT = (
    "list the rollouts shards only (for example rollouts-shard-*-of-8.jsonl); each shard's "
    "_failures.jsonl and _materialized_inputs.jsonl are merged with it"
)


def _resolve_inputs(shards: list[Path], inputs: list[Path | str] | None) -> list[Path]:
    if inputs is not None:
        return [Path(p) for p in inputs]
    return [materialized_path_for(p) for p in shards if materialized_path_for(p).exists()]


def _targets(output: Path, with_inputs: bool, with_failures: bool) -> dict[str, Path]:
    targets = {"rollouts": output}
    if with_inputs:
        targets["inputs"] = materialized_path_for(output)
    if with_failures:
        targets["failures"] = failures_path_for(output)
    return targets


def _check_paths(sources: list[Path], targets: dict[str, Path]) -> None:
    if not sources:
        raise UsageError("no shard files given", hint="ngrp merge SHARD... --output OUT")
    for path in sources:
        if not os.path.lexists(path):
            raise InputError(
                "no such file", path=path, hint="check the shard paths (a glob that matched nothing?)"
            )
        require_regular(path)  # a FIFO, a device, a folder or a symlink loop: refused before any output
    resolved = {real_path(p) for p in sources}
    for target in targets.values():
        if real_path(target) in resolved:
            raise UsageError(f"{target} is both an input and an output", hint="write the merge to a new path")


def _rows(path: Path, torn: list[str], allow_torn: bool):
    """Rows of one file; blank lines skipped; a torn last line refused unless allowed (then listed)."""
    for record in jsonl.iter_records(path):
        if isinstance(record, jsonl.Row):
            yield record
        elif record.kind == jsonl.BLANK:
            continue
        elif record.kind == jsonl.TORN and allow_torn:
            torn.append(f"{path}:{record.line}")
        else:
            hint = None
            if record.kind == jsonl.TORN:
                hint = (
                    "the shard's writer was interrupted: resume that shard (ngrp collect --resume),"
                    " or pass --allow-torn to drop the cut-off line"
                )
            raise InputError(record.message, path=path, line=record.line, hint=hint)


def _key(row: jsonl.Row, path: Path) -> RolloutKey:
    for name in (TASK_KEY, ROLLOUT_KEY):
        value = row.data.get(name)
        if not is_index(value):
            raise InputError(f"{name} {index_problem(value)}", path=path, line=row.line, pointer=f"/{name}")
    return row.data[TASK_KEY], row.data[ROLLOUT_KEY]


def _merge_keyed(
    paths: list[Path],
    handle: IO[bytes],
    counts: PartCounts,
    torn: list[str],
    allow_torn: bool,
    run_of: dict[str, RunKey],
    *,
    known: dict[RolloutKey, _Seen] | None = None,
) -> dict[RolloutKey, _Seen]:
    seen: dict[RolloutKey, _Seen] = {}
    extra: list[str] = []
    for path in paths:
        counts.files.append(str(path))
        for row in _rows(path, torn, allow_torn):
            counts.read += 1
            key = _key(row, path)
            digest = canonical_digest(row.data)
            first = seen.get(key)
            if first is not None:
                _same_or_conflict(first, digest, key, path, row.line, run_of)
                counts.duplicates_dropped += 1
                continue
            if known is not None and key not in known:
                extra.append(f"{key} at {path}:{row.line}")
            seen[key] = _Seen(digest, str(path), row.line)
            handle.write(row.raw + b"\n")
            counts.written += 1
    if extra:
        raise FindingsError(
            f"{len(extra)} rollout row(s) have no matching materialized input row: "
            + ", ".join(extra[:MAX_LISTED]),
            hint="pass the materialized inputs of every shard with --inputs (or merge the right shards)",
        )
    return seen


def _same_or_conflict(
    first: _Seen, digest: bytes, key: RolloutKey, path: Path, line: int, run_of: dict[str, RunKey]
) -> None:
    ours, theirs = run_of.get(str(path)), run_of.get(first.path)
    where = f"{first.path}:{first.line} and {path}:{line}"
    if ours is not None and theirs is not None and _other_seed(ours, theirs):
        raise FindingsError(
            f"key (task {key[0]}, rollout {key[1]}) is in two seeds, {theirs.label()} and {ours.label()}"
            f" ({where}): seeds are separate samples of the same tasks",
            hint=f"merge one seed at a time (ngrp merge {ours.label()}.jsonl ...), or collect the seeds as"
            " repeats (--num-repeats N --seed-per-repeat) so that every rollout has its own key",
        )
    if first.digest == digest:
        return
    hint = (
        "two shards ran the same key with different results; shard with --shard i/N so shards are"
        " disjoint, or drop one of the files"
    )
    if ours is not None and ours == theirs and ours.scheme == "chunk":
        hint = (
            "the chunks numbered their tasks from 0 each: give the task rows a global _ng_task_index"
            " before splitting them into chunks (Gym keeps an existing one)"
        )
    raise FindingsError(
        f"conflicting rows for key (task {key[0]}, rollout {key[1]}): {where} differ", hint=hint
    )


def _other_seed(a: RunKey, b: RunKey) -> bool:
    return a.scheme == b.scheme == "chunk" and a.base == b.base and a.seed != b.seed


def _merge_attempts(
    paths: list[Path], handle: IO[bytes], counts: PartCounts, torn: list[str], allow_torn: bool
) -> None:
    seen: set[bytes] = set()
    for path in paths:
        counts.files.append(str(path))
        for row in _rows(path, torn, allow_torn):
            counts.read += 1
            _key(row, path)
            digest = canonical_digest(row.data)
            if digest in seen:
                counts.duplicates_dropped += 1
                continue
            seen.add(digest)
            handle.write(row.raw + b"\n")
            counts.written += 1
