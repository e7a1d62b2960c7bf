"""`ngrp check ... OTHER_FILES`: does each other file of a run describe the run its materialized inputs do?

A folder collected elsewhere can hold files of two runs: materialized inputs for 4 repeats per task next to
a profile of 16. Each file validates alone; only side by side do they disagree. Every file here is read
for what it says about the run (its tasks, repeats per task, rollout keys, rollout count) and each claim
is held against the inputs. A disagreement names both files and both numbers.

A file may say less than the inputs and still belong to the run (a partial run judged by `health`, masked
rollouts a profile leaves out): that is a warning. Saying more (a task, key or repeat the inputs do not
have), or a different whole-run count, is an error: the files are not of one run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import kinds
from ..artifacts.jsonl import iter_rows, read_json
from ..artifacts.kinds import sniff
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, agent_name, rollout_key
from ..errors import InputError
from .check_result import ERROR, NOTE, WARNING, Finding

CODE = "files_disagree"


@dataclass
class RunShape:
    """What a file says about its run; None where it does not say."""

    path: Path
    what: str  # "reward profile", "quality summary", ...
    per_task: dict[int, int] | None = None  # task -> rollouts expected or judged
    keys: set[tuple[int, int]] | None = None
    total: int | None = None  # rollouts the whole run expects
    repeat_indices: dict[str | None, set[int]] | None = None  # agent -> rollout indices
    partial_ok: bool = True  # fewer than the inputs is a warning (a partial run), not an error
    judged: int | None = None  # rollout rows the file was made from (held against the rollouts file)
    notes: list[str] = field(default_factory=list)


def inputs_shape(path: Path) -> RunShape:
    shape = RunShape(path, "materialized inputs", per_task=Counter(), keys=set(), repeat_indices={})
    assert shape.per_task is not None and shape.keys is not None and shape.repeat_indices is not None
    for row in iter_rows(path):
        key = rollout_key(row.data)
        if key is None:
            continue
        shape.keys.add(key)
        shape.per_task[key[0]] += 1
        shape.repeat_indices.setdefault(agent_name(row.data), set()).add(key[1])
    shape.total = len(shape.keys)
    return shape


def shape_of(path: Path) -> RunShape:
    """Read `path` for what it says about the run. Recognised by its content, as `ngrp validate` does (a
    renamed `*_2rows.jsonl` profile is still a profile); by Gym's and ngrp's names only when the content
    does not tell."""
    kind = kind_from_content(path) or _kind_from_name(path.name)
    if kind is None:
        raise InputError(
            "not a file check can hold against the inputs (neither its content nor its name says which)",
            path=path,
            hint="give a *_reward_profiling.jsonl, *_profile_summary.json, *_repeat_level_metrics.json, "
            "quality_summary.json or rollout_verdicts.jsonl",
        )
    if kind == AGENT_METRICS:
        return RunShape(
            path, "agent metrics", notes=[f"{path}: agent metrics hold no task or rollout counts"]
        )
    return _READERS[kind](path)


PROFILE, QUALITY, VERDICTS, REPEATS, PROFILE_SUMMARY, AGENT_METRICS = (
    "profile", "quality", "verdicts", "repeats", "profile_summary", "agent_metrics"
)  # fmt: skip
_NAMES = (
    ("_reward_profiling.jsonl", PROFILE),
    ("quality_summary.json", QUALITY),
    ("rollout_verdicts.jsonl", VERDICTS),
    ("_repeat_level_metrics.json", REPEATS),
    ("_profile_summary.json", PROFILE_SUMMARY),
    ("_agent_metrics.json", AGENT_METRICS),
)


def _kind_from_name(name: str) -> str | None:
    return next((kind for suffix, kind in _NAMES if name.endswith(suffix)), None)


def kind_from_content(path: Path) -> str | None:
    """The kind of run file `path` holds, from what is in it; None when it cannot tell. A JSONL file by its
    first rows (`kinds.sniff`, validate's rule); a JSON file by its shape: an object with `run` and `tasks`
    is a quality summary, one with `tool` and `counts` a profile summary; a list of objects each with a
    `_ng_rollout_index` is repeat-level metrics, one of objects with Gym's `mean/...` keys and none agent
    metrics."""
    try:
        with path.open("rb") as f:
            head = f.read(64).lstrip()
    except OSError:
        return None  # the reader says why
    if head.startswith(b"{"):
        found = sniff(path)  # rows of a JSONL file (one row is a JSON object too)
        if found is not None:
            return {kinds.PROFILE: PROFILE, kinds.VERDICTS: VERDICTS}.get(found)
    elif not head.startswith(b"["):
        return None
    try:
        data = read_json(path)
    except InputError:
        return None
    if isinstance(data, dict):
        if "run" in data and "tasks" in data:
            return QUALITY
        if "tool" in data and "counts" in data:
            return PROFILE_SUMMARY
        return None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    if not entries or len(entries) != len(data):
        return None
    if all(ROLLOUT_KEY in e for e in entries):
        return REPEATS
    if all(not (set(e) & {ROLLOUT_KEY, TASK_KEY}) and any(k.startswith("mean/") for k in e) for e in entries):
        return AGENT_METRICS
    return None


def _profile(path: Path) -> RunShape:
    shape = RunShape(path, "reward profile", per_task=Counter(), keys=set())
    assert shape.per_task is not None and shape.keys is not None
    for row in iter_rows(path):
        task, expected = row.data.get(TASK_KEY), row.data.get("expected_num_rollouts")
        if type(task) is int and type(expected) is int:
            shape.per_task[task] += expected  # fan-out: one row per (task, agent)
        infos = row.data.get("rollout_infos")
        for info in infos if isinstance(infos, list) else []:
            key = rollout_key(info) if isinstance(info, dict) else None
            if key is not None:
                shape.keys.add(key)
    return shape


def _quality_summary(path: Path) -> RunShape:
    data = _object(path)
    found = data.get("tasks")
    tasks: dict[str, Any] = found if isinstance(found, dict) else {}
    per_task = {
        int(t): v["repeats"]
        for t, v in tasks.items()
        if t.isascii() and t.isdigit() and isinstance(v, dict) and type(v.get("repeats")) is int
    }
    keys = (data.get("ngrp") or {}).get("keys") if isinstance(data.get("ngrp"), dict) else None
    total = keys.get("expected") if isinstance(keys, dict) and type(keys.get("expected")) is int else None
    rows = keys.get("rollout_rows") if isinstance(keys, dict) else None
    if type(rows) is not int:  # Gym's own summary: the records it judged
        run = data.get("run")
        verdicts = run.get("verdicts") if isinstance(run, dict) else None
        counts = list(verdicts.values()) if isinstance(verdicts, dict) else []
        rows = sum(counts) if counts and all(type(n) is int for n in counts) else None
    return RunShape(path, "quality summary", per_task=per_task, total=total, judged=rows)


def _verdicts(path: Path) -> RunShape:
    keys = {key for row in iter_rows(path) if (key := rollout_key(row.data)) is not None}
    per_task: Counter = Counter(task for task, _ in keys)
    return RunShape(path, "rollout verdicts", per_task=per_task, keys=keys, judged=len(keys))


def _repeat_levels(path: Path) -> RunShape:
    data = read_json(path)
    indices: dict[str | None, set[int]] = {}
    for entry in data if isinstance(data, list) else []:
        index = entry.get("_ng_rollout_index") if isinstance(entry, dict) else None
        if type(index) is int:
            indices.setdefault(agent_name(entry), set()).add(index)
    return RunShape(path, "repeat-level metrics", repeat_indices=indices)


def _profile_summary(path: Path) -> RunShape:
    counts = _object(path).get("counts")
    expected = counts.get("expected") if isinstance(counts, dict) else None
    return RunShape(
        path, "profile summary", total=expected if type(expected) is int else None, partial_ok=False
    )


_READERS = {
    PROFILE: lambda p: _profile(p),
    QUALITY: lambda p: _quality_summary(p),
    VERDICTS: lambda p: _verdicts(p),
    REPEATS: lambda p: _repeat_levels(p),
    PROFILE_SUMMARY: lambda p: _profile_summary(p),
}


def _object(path: Path) -> dict[str, Any]:
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    return data


def disagreements(inputs: RunShape, other: RunShape) -> list[Finding]:
    """Every way `other` disagrees with the inputs, as check findings naming both files and numbers."""
    found = [Finding(CODE, NOTE, 0, note) for note in other.notes]
    if other.per_task is not None and inputs.per_task is not None:
        found += _per_task(inputs, other)
    if other.keys is not None and inputs.keys is not None:
        extra = sorted(other.keys - inputs.keys)
        if extra:
            says = f"{len(extra)} rollout key(s) the inputs do not hold"
            found.append(_error(other, inputs, len(extra), says, [list(k) for k in extra[:10]]))
    if other.total is not None and inputs.total is not None and other.total != inputs.total:
        says = f"{other.total} expected rollouts for the run, the inputs {inputs.total}"
        found.append(_error(other, inputs, abs(other.total - inputs.total), says))
    if other.repeat_indices is not None and inputs.repeat_indices is not None:
        found += _repeats(inputs, other)
    return found


def _per_task(inputs: RunShape, other: RunShape) -> list[Finding]:
    assert inputs.per_task is not None and other.per_task is not None
    theirs, ours = other.per_task, inputs.per_task
    out = []
    unknown = sorted(t for t in theirs if t not in ours)
    if unknown:
        says = f"{len(unknown)} task(s) the inputs do not hold (first: task {unknown[0]})"
        out.append(_error(other, inputs, len(unknown), says))
    more = sorted(t for t in theirs if t in ours and theirs[t] > ours[t])
    fewer = sorted(t for t in theirs if t in ours and theirs[t] < ours[t])
    absent = sorted(t for t in ours if t not in theirs)
    if more:
        out.append(_error(other, inputs, len(more), _count_phrase(other, inputs, more)))
    if fewer or absent:
        words = _count_phrase(other, inputs, fewer) if fewer else ""
        if absent:
            words += ("; " if words else "") + f"no rollouts for {len(absent)} task(s) the inputs hold"
        severity = WARNING if other.partial_ok else ERROR
        message = (
            f"{other.path} ({other.what}) says {words} ({inputs.path}): a partial run, masked rollouts, "
            "or another run's file"
        )
        out.append(Finding(CODE, severity, len(fewer) + len(absent), message))
    return out


def _count_phrase(other: RunShape, inputs: RunShape, tasks: list[int]) -> str:
    """ "16 rollouts per task where the inputs hold 4 (12 tasks)": the most common pair of counts."""
    assert inputs.per_task is not None and other.per_task is not None
    pairs = Counter((other.per_task[t], inputs.per_task[t]) for t in tasks)
    (theirs, ours), n = pairs.most_common(1)[0]
    rest = f"; {len(tasks) - n} more task(s) with other counts" if len(tasks) > n else ""
    return (
        f"{theirs} rollouts per task where the inputs hold {ours} ({n} task(s), first: task {tasks[0]}{rest})"
    )


def _repeats(inputs: RunShape, other: RunShape) -> list[Finding]:
    assert inputs.repeat_indices is not None and other.repeat_indices is not None
    out = []
    for agent, indices in other.repeat_indices.items():
        ours = inputs.repeat_indices.get(agent, set())
        extra = sorted(indices - ours)
        if extra:
            label = "no agent_ref" if agent is None else f"agent {agent}"
            says = (
                f"{len(indices)} repeats for {label} where the inputs hold {len(ours)} "
                f"(rollout indices {extra[0]}..{extra[-1]} are not in them)"
            )
            out.append(_error(other, inputs, len(extra), says))
    return out


def _error(other: RunShape, inputs: RunShape, count: int, says: str, examples: list | None = None) -> Finding:
    return Finding(
        CODE,
        ERROR,
        count,
        f"{other.path} ({other.what}) says {says}: {inputs.path} disagrees, so the files are not of one run",
        "use the files of one run; a profile or health files made from other inputs must be made again",
        examples or [],
    )


def cross_check(inputs: Path, others: list[Path], rollouts: tuple[str, int] | None = None) -> list[Finding]:
    """Findings for every other file that disagrees with the inputs (read once, only when others given),
    or, for health files, with `rollouts` (the rollouts file's path and rows): a summary of 96 judged
    records beside a rollouts file of 2 rows is not of this rollouts file, whatever the inputs say."""
    if not others:
        return []
    ours = inputs_shape(inputs)
    found = []
    for other in others:
        shape = shape_of(other)
        said = disagreements(ours, shape) + _judged(shape, rollouts)
        if not any(f.severity != NOTE for f in said) and not shape.notes:
            said.append(Finding(CODE, NOTE, 0, f"{other} ({shape.what}) agrees with {inputs}"))
        found += said
    return found


def _judged(other: RunShape, rollouts: tuple[str, int] | None) -> list[Finding]:
    """A health file judged more rows than the rollouts file holds (another run's): an error; fewer (made
    before the run finished): a warning, with the command that judges the file as it is now."""
    if rollouts is None or other.judged is None or other.judged == rollouts[1]:
        return []
    path, rows = rollouts
    says = f"{other.path} ({other.what}) was made from {other.judged} rollout rows; {path} holds {rows}"
    if other.judged > rows:
        fix = "use the files of one run; judge this one: ngrp health ... --overwrite"
        return [Finding(CODE, ERROR, other.judged - rows, f"{says}: it is not of this rollouts file", fix)]
    fix = "judge the run as it is now: ngrp health ... --overwrite"
    return [Finding(CODE, WARNING, rows - other.judged, f"{says}: made before the run finished?", fix)]
