"""Deterministic shards for Slurm job arrays: shard `i` of `N` owns the tasks with `task_index % N == i`.

Shards are 0-based (`--shard 0/4` .. `--shard 3/4`), so they line up with `--array=0-3`. Selection is by
`_ng_task_index`, never by line position, so all repeats of a task land in the same shard (one prefix
cache, one complete profile row) and a shard's rows are the same whatever order the file is in.
`--shard auto` reads Slurm's `SLURM_ARRAY_TASK_ID` and `SLURM_ARRAY_TASK_COUNT` (offset by
`SLURM_ARRAY_TASK_MIN` and divided by `SLURM_ARRAY_TASK_STEP`, so `--array=1-8` and `--array=0-14:2` work
as well as `--array=0-7`). It refuses what the variables cannot number: an array that starts past 1
(`--array=3-5`) or a one-task array past 0 (`--array=3`), which is how a rerun of some tasks looks, and
an id list with gaps (`--array=3,5`); such a rerun names its shards (`--shard 3/8`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Shard:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, task_index: int) -> bool:
        return select_shard(task_index, self.index, self.count)


def select_shard(task_index: int, i: int, n: int) -> bool:
    """True when task `task_index` belongs to shard `i` of `n` (0-based)."""
    return task_index % n == i


def parse_shard(spec: str, environ: Mapping[str, str] | None = None) -> Shard:
    """Parse `i/N` (0 <= i < N) or `auto` (from the Slurm array environment)."""
    if spec.strip().lower() == "auto":
        return shard_from_slurm(os.environ if environ is None else environ)
    match = _SPEC.match(spec)
    if not match:
        raise UsageError(
            f"bad --shard {spec!r}", hint="write i/N with 0 <= i < N (0-based), e.g. 0/4, or auto"
        )
    return _checked(int(match.group(1)), int(match.group(2)), spec)


def shard_from_slurm(environ: Mapping[str, str]) -> Shard:
    task_id, count = environ.get("SLURM_ARRAY_TASK_ID"), environ.get("SLURM_ARRAY_TASK_COUNT")
    if task_id is None or count is None:
        raise UsageError(
            "--shard auto needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT",
            hint="run inside `sbatch --array=0-(N-1)`, or pass --shard i/N explicitly",
        )
    names = ("SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP")
    try:
        ident, total = int(task_id), int(count)
        low, high, step = (int(environ[n]) if environ.get(n) else None for n in names)
    except ValueError:
        shown = {n: environ.get(n) for n in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", *names)}
        raise UsageError(f"non-integer Slurm array variables: {shown}") from None
    low, step = low or 0, step or 1
    _check_numbering(low, high, step, total)
    if (ident - low) % step:
        raise UsageError(f"SLURM_ARRAY_TASK_ID={ident} is not on the array's step {step} from {low}")
    return _checked((ident - low) // step, total, f"SLURM_ARRAY_TASK_ID={task_id}")


_RERUN_HINT = (
    "to rerun some tasks of an array, name each shard: --shard i/N (for example"
    ' `sbatch --array=3 --export=ALL,SHARD=3/8` with `--shard "${SHARD:-auto}"` in the script)'
)


def _check_numbering(low: int, high: int | None, step: int, total: int) -> None:
    """Refuse arrays whose ids cannot be shards 0..N-1: a rerun of some tasks looks like these."""
    if low > 1 or (total == 1 and low != 0):
        raise UsageError(
            f"--shard auto: the array starts at task id {low} ({total} task(s)), so its ids are not"
            " shards 0..N-1; is this a rerun of some tasks?",
            hint=_RERUN_HINT,
        )
    if high is not None and (step < 1 or (high - low) % step or (high - low) // step + 1 != total):
        raise UsageError(
            f"--shard auto: the array's ids {low}..{high} (step {step}) have gaps: {total} task(s)",
            hint=_RERUN_HINT,
        )


def _checked(index: int, count: int, spec: str) -> Shard:
    if count < 1 or not 0 <= index < count:
        raise UsageError(
            f"shard {spec!r} is out of range: need 0 <= i < N and N >= 1",
            hint="shards are 0-based: the last of 4 shards is 3/4; with a Slurm array use --array=0-(N-1)",
        )
    return Shard(index, count)


def shard_output_path(path: Path | str, shard: Shard) -> Path:
    """`out/rollouts.jsonl` + 2/8 -> `out/rollouts-shard-2-of-8.jsonl` (zero-padded to N's width)."""
    path = Path(path)
    width = len(str(shard.count - 1))
    return path.with_name(f"{path.stem}-shard-{shard.index:0{width}d}-of-{shard.count}{path.suffix}")
