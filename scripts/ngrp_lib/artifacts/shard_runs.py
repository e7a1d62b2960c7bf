"""Which run each shard file belongs to, by its name (never by its folder), for `merge`'s bookkeeping.

Two naming schemes say that a file is one part of a larger run:
- `ngrp collect --shard i/N`: `<base>-shard-<i>-of-<N>.jsonl`. The run is (`base`, `N`); its members are
  0..N-1, so a member never written is known by name.
- NeMo Gym / NeMo-Skills chunks (`gym eval run ... +disable_aggregation=true` per chunk, then
  `gym eval aggregate +input_glob='rollouts-rs*-chunk*.jsonl'`): `<base>-rs<seed>-chunk<id>.jsonl`, also
  `<base>-rs<seed>_chunk_<id>.jsonl` and either without `-rs<seed>`. The run is (`base`, `seed`): seeds
  are separate samples of the same tasks. Chunk ids run from 0, so a gap is a missing chunk; how many
  chunks there were is not in the names.
Any other file is a run of its own. Folders do not matter: one folder per Slurm array task is a common
layout. When NeMo-Skills-style `<file>.done` markers are present for some members of a run, a member
without one is unfinished. Shards whose run manifests (`<stem>_run_manifest.json`, written by
`ngrp collect`) disagree on what shapes the results (input, model, verifier...) are two runs, not one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts import jsonl
from ..artifacts.names import manifest_path_for
from ..errors import FindingsError, InputError
from ..jsonvalues import shown

DONE_SUFFIX = ".done"
_SHARD = re.compile(r"-shard-(?P<index>\d+)-of-(?P<count>\d+)$")
_CHUNK = re.compile(r"(?:-rs(?P<seed>\d+))?(?P<sep>[-_]chunk_?)(?P<index>\d+)$")
# Manifest identity fields that differ between the shards of one run by design.
_PER_SHARD = ("shard", "materialized_sha256")


@dataclass(frozen=True, slots=True)
class RunKey:
    """One run's identity as the names give it (folder left out)."""

    base: str
    scheme: str  # "shard", "chunk" or "" (a file that is a whole run)
    count: int | None = None  # N of -shard-i-of-N
    seed: int | None = None  # rs<seed> of a chunk
    sep: str = ""  # how the chunk id is written: "-chunk" or "_chunk_"

    def member_name(self, index: int, width: int) -> str:
        if self.scheme == "shard":
            return f"{self.base}-shard-{index:0{width}d}-of-{self.count}"
        seed = "" if self.seed is None else f"-rs{self.seed}"
        return f"{self.base}{seed}{self.sep}{index:0{width}d}"

    def label(self) -> str:
        """How messages name the run: `rollouts-shard-*-of-3`, `rollouts-rs0-chunk*`."""
        if self.scheme == "shard":
            return f"{self.base}-shard-*-of-{self.count}"
        if self.scheme == "chunk":
            return f"{self.base}{'' if self.seed is None else f'-rs{self.seed}'}{self.sep}*"
        return self.base


@dataclass
class ShardedRun:
    """One run split into member files (shards or chunks), as its names and manifests group them."""

    key: RunKey
    members: dict[int, list[Path]] = field(default_factory=dict)  # index -> files (copies too)
    width: int = 1  # zero padding seen in the names

    def files(self) -> list[Path]:
        return [p for index in sorted(self.members) for p in self.members[index]]

    def missing(self) -> list[str]:
        """Members not among the files, as paths when the present ones share one folder, else names."""
        if self.key.scheme == "shard":
            expected = range(self.key.count or 0)
        elif self.key.scheme == "chunk":
            expected = range(max(self.members) + 1)  # a gap; the last chunks cannot be seen
        else:
            return []
        folders = {p.parent for p in self.files()}
        folder = folders.pop() if len(folders) == 1 else None
        names = [self.key.member_name(i, self.width) for i in expected if i not in self.members]
        return [str(folder / n) if folder is not None else n for n in names]

    def unfinished(self) -> list[str]:
        """With `.done` markers next to some members, the members that have none."""
        files = self.files()
        done = [done_marker(p).exists() for p in files]
        if not any(done):
            return []
        return [str(p) for p, ok in zip(files, done, strict=True) if not ok]


def done_marker(path: Path) -> Path:
    """NeMo-Skills writes `<output>.done` once a chunk's job finished."""
    return path.with_name(path.name + DONE_SUFFIX)


def parse_name(path: Path) -> tuple[RunKey, int | None, int]:
    """(run, member index or None, zero padding) from a file name."""
    stem = path.stem
    match = _SHARD.search(stem)
    if match and int(match["count"]) > 0:
        key = RunKey(stem[: match.start()], "shard", count=int(match["count"]))
        return key, int(match["index"]), len(match["index"])
    match = _CHUNK.search(stem)
    if match and match.start() > 0:
        seed = None if match["seed"] is None else int(match["seed"])
        key = RunKey(stem[: match.start()], "chunk", seed=seed, sep=match["sep"])
        return key, int(match["index"]), len(match["index"])
    return RunKey(str(path), ""), None, 1


def group_runs(paths: Iterable[Path]) -> dict[RunKey, ShardedRun]:
    runs: dict[RunKey, ShardedRun] = {}
    for path in paths:
        key, index, width = parse_name(path)
        run = runs.setdefault(key, ShardedRun(key))
        run.members.setdefault(0 if index is None else index, []).append(path)
        run.width = max(run.width, width) if index is not None else run.width
    return runs


def check_manifests(runs: Iterable[ShardedRun]) -> None:
    """Refuse shards of one name whose manifests say they were collected differently."""
    for run in runs:
        if run.key.scheme != "shard":
            continue
        seen: dict[str, tuple[Path, object]] = {}
        for path in run.files():
            manifest = manifest_path_for(path)
            if not manifest.is_file():
                continue
            identity = _identity(manifest)
            for name, value in identity.items():
                first = seen.setdefault(name, (manifest, value))
                if first[1] != value:
                    was, now = shown(first[1], quote=True), shown(value, quote=True)
                    raise FindingsError(
                        f"the shards of {run.key.label()} come from different runs: {name} is"
                        f" {was} in {first[0]} and {now} in {manifest}",
                        hint="merge the shards of one collection only (same input, model and verifier)",
                    )


def _identity(manifest: Path) -> dict[str, object]:
    data = jsonl.read_json(manifest)
    identity = data.get("identity") if isinstance(data, dict) else None
    if not isinstance(identity, dict):
        raise InputError("run manifest has no 'identity' object", path=manifest)
    # With --input each shard's materialized file holds its own rows (another digest); the input is shared.
    per_shard = _PER_SHARD if identity.get("input_sha256") else ("shard",)
    return {k: v for k, v in identity.items() if k not in per_shard}
