"""Read a `*_reward_profiling.jsonl` into padded per-task matrices (and optional per-rollout extras).

A profile row is one task (or one task+agent in fan-out). Its `rollout_infos` hold one dict per measured
rollout. We keep a (tasks x max rollouts) float matrix per requested field, NaN-padded: a null or absent
value is NaN and is excluded (and counted) by every estimator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import iter_rows
from ..artifacts.kinds import PROFILE, ROLLOUTS, refuse_wrong_kind
from ..artifacts.names import (
    ROLLOUT_KEY,
    TASK_KEY,
    is_index,
    key_problem,
    pack_key,
    profile_key,
    rollout_key,
    task_label,
)
from ..artifacts.response import truncated
from ..errors import FindingsError, InputError
from ..numbers import MAX_MAGNITUDE, first_oversize

TaskKey = tuple[int, "str | None"]


@dataclass
class ProfileData:
    path: Path
    keys: list[TaskKey]
    samples: list[dict]
    rollout_index: Any  # int matrix (T, K), -1 where padded
    values: dict[str, Any]  # field -> float matrix (T, K), NaN where padded, null or absent
    n_rows_measured: int = 0
    extras: dict[str, Any] = field(default_factory=dict)  # per-rollout data joined from --rollouts
    n_unhealthy: int = 0  # rollouts of the file that are in `unhealthy` (left out when excluded)
    expected: list[int | None] = field(default_factory=list)  # each row's expected_num_rollouts, if stated
    listed: list[int] = field(default_factory=list)  # each row's rollouts in rollout_infos, before exclusion

    @property
    def n_tasks(self) -> int:
        return len(self.keys)

    def subset(self, mask: Any) -> ProfileData:
        """The tasks where the boolean mask is true (for per-group statistics)."""
        import numpy as np

        idx = np.flatnonzero(mask)
        return ProfileData(
            path=self.path,
            keys=[self.keys[i] for i in idx],
            samples=[self.samples[i] for i in idx],
            rollout_index=self.rollout_index[idx],
            values={k: v[idx] for k, v in self.values.items()},
            n_rows_measured=int((self.rollout_index[idx] >= 0).sum()),
            extras={
                k: (v[idx] if hasattr(v, "shape") else [v[i] for i in idx]) for k, v in self.extras.items()
            },
            expected=[self.expected[i] for i in idx] if self.expected else [],
            listed=[self.listed[i] for i in idx] if self.listed else [],
        )


def _row_key(row: dict, path: Path, line: int) -> TaskKey:
    key = profile_key(row)
    if key is None:
        raise InputError(
            f"{TASK_KEY} is missing or not a non-negative integer",
            path=path,
            line=line,
            hint="is this a *_reward_profiling.jsonl written by `gym eval profile` or `ngrp profile`?",
        )
    return key


def _infos(row: dict, path: Path, line: int) -> list[dict]:
    infos = row.get("rollout_infos")
    if not isinstance(infos, list) or not all(isinstance(info, dict) for info in infos):
        raise InputError(
            "rollout_infos is missing or not a list of objects",
            path=path,
            line=line,
            pointer="/rollout_infos",
            hint="stats need the per-rollout rewards in rollout_infos",
        )
    return infos


def _split_unhealthy(task: int, infos: list[dict], unhealthy: Any) -> tuple[list[dict], int]:
    """(the infos whose rollout is not in the packed-key set `unhealthy`, how many were)."""
    kept = [
        info
        for info in infos
        if not (is_index(r := info.get(ROLLOUT_KEY)) and pack_key((task, r)) in unhealthy)
    ]
    return kept, len(infos) - len(kept)


def load_profile(
    path: Path | str,
    fields: tuple[str, ...] = ("reward", "output_tokens"),
    unhealthy: Any = None,
    exclude: bool = False,
) -> ProfileData:
    """Load a profile file. Raises InputError (exit 3) on malformed rows or duplicate (task, agent) keys.

    `unhealthy` (packed rollout keys, from `artifacts.verdicts.load_unhealthy`) is counted into
    `n_unhealthy`; with `exclude` those rollouts are also left out, as if masked.
    """
    path = Path(path)
    refuse_wrong_kind(path, PROFILE)
    keys: list[TaskKey] = []
    samples: list[dict] = []
    per_task: list[list[dict]] = []
    seen: dict[TaskKey, int] = {}
    n_unhealthy = 0
    expected: list[int | None] = []
    listed: list[int] = []
    for row in iter_rows(path):
        key = _row_key(row.data, path, row.line)
        if key in seen:
            raise InputError(
                f"duplicate profile row for {task_label(*key)} (first at line {seen[key]})",
                path=path,
                line=row.line,
            )
        seen[key] = row.line
        keys.append(key)
        sample = row.data.get("sample")
        samples.append(sample if isinstance(sample, dict) else {})
        infos = _infos(row.data, path, row.line)
        _refuse_non_numbers(infos, fields, path, row.line)
        expected.append(_expected(row.data))
        listed.append(len(infos))
        if unhealthy:
            kept, n = _split_unhealthy(key[0], infos, unhealthy)
            n_unhealthy += n
            infos = kept if exclude else infos
        per_task.append(infos)
    rollout_index, values = _arrays(per_task, fields)
    for name in fields:
        _refuse_oversize(values[name], name, keys, path)
    measured = int((rollout_index >= 0).sum())
    return ProfileData(
        path, keys, samples, rollout_index, values, measured, n_unhealthy=n_unhealthy, expected=expected,
        listed=listed,
    )  # fmt: skip


def _arrays(per_task: list[list[dict]], fields: tuple[str, ...]) -> tuple[Any, dict[str, Any]]:
    """The rollout indices (-1: no rollout) and each field's values (NaN: none), a row per profile row."""
    import numpy as np

    width = max((len(infos) for infos in per_task), default=0)
    rollout_index = np.full((len(per_task), width), -1, dtype=np.int64)
    values = {name: np.full((len(per_task), width), np.nan) for name in fields}
    nan = float("nan")
    for i, infos in enumerate(per_task):
        m = len(infos)
        indices = [info.get(ROLLOUT_KEY) for info in infos]
        rollout_index[i, :m] = [r if is_index(r) else j for j, r in enumerate(indices)]
        for name in fields:
            # bool is an int here (True -> 1.0), as Gym counts bools; null, strings and absent values are NaN.
            raw = [info.get(name) for info in infos]
            values[name][i, :m] = [float(v) if isinstance(v, (int, float)) else nan for v in raw]
    return rollout_index, values


def _expected(row: dict) -> int | None:
    """The row's expected_num_rollouts (Gym's and ngrp's profiles state it); None if absent or no count."""
    value = row.get("expected_num_rollouts")
    return value if is_index(value) else None


def _refuse_non_numbers(infos: list[dict], fields: tuple[str, ...], path: Path, line: int) -> None:
    """A value of a measured field that is not a number, a bool or null (a string reward): refused, as
    `validate` flags it, instead of being read as missing."""
    for j, info in enumerate(infos):
        for name in fields:
            value = info.get(name)
            if value is not None and not isinstance(value, (int, float)):
                raise InputError(
                    f"rollout_infos[{j}].{name} is {type(value).__name__} {str(value)[:40]!r}, not a number",
                    path=path,
                    line=line,
                    pointer=f"/rollout_infos/{j}/{name}",
                    hint="write rewards as numbers (or null); `ngrp validate` lists every such value",
                )


def _refuse_oversize(matrix: Any, name: str, keys: list[TaskKey], path: Path) -> None:
    found = first_oversize(matrix)
    if found is not None:
        row, _, value = found
        raise FindingsError(
            f"{path}: rollout_infos[*].{name} of task {keys[row][0]} is {value:g}: beyond "
            f"+-{MAX_MAGNITUDE:g} sums and squares overflow, so no statistic of it would be a number",
            hint=f"rescale {name} (divide it by a constant) in the verifier, and profile again",
        )


def attach_rollouts(data: ProfileData, rollouts: Path | str, answer_key: str | None) -> dict[str, Any]:
    """Join per-rollout extras from a rollouts file by (task, rollout): answers and truncation flags.

    Adds `extras["answer"]` (object matrix, None = no answer) and `extras["truncated"]` (float matrix,
    NaN where the rollout is not in the file, so such rollouts are left out of majority@k and truncation
    rather than counted as "no answer"). Returns counts for the report's denominators.
    """
    import numpy as np

    position: dict[tuple[Any, Any], tuple[int, int]] = {}
    for i, (task, _agent) in enumerate(data.keys):
        for j, r in enumerate(data.rollout_index[i]):
            if r >= 0:
                position[(task, int(r))] = (i, j)
    answers = np.full(data.rollout_index.shape, None, dtype=object)
    truncated = np.full(data.rollout_index.shape, np.nan)
    matched = unmatched = 0
    first_line: dict[tuple[int, int], int] = {}
    refuse_wrong_kind(rollouts, ROLLOUTS, option="--rollouts")
    refused: list[int] = []
    for row in iter_rows(rollouts, refused=refused):
        if "rollout_infos" in row.data:
            raise InputError(
                "this is a reward profile, not a rollouts file", path=rollouts, line=row.line,
                hint="--rollouts takes the rollouts.jsonl the profile was made from",
            )  # fmt: skip
        key = rollout_key(row.data)
        if key is None:
            raise InputError(
                key_problem(row.data, "rollout"),
                path=rollouts,
                line=row.line,
                hint="`ngrp validate` names every bad row of the file",
            )
        where = position.get(key)
        if where is None:
            unmatched += 1
            continue
        if where in first_line:  # which copy's answer counts would be a guess
            raise FindingsError(
                f"rollout key {key} appears twice (lines {first_line[where]} and {row.line})",
                hint="deduplicate the rollouts first (ngrp merge keeps identical rows once)",
            )
        first_line[where] = row.line
        matched += 1
        truncated[where] = float(_is_truncated(row.data))
        if answer_key is not None:
            answers[where] = _answer(row.data.get(answer_key))
    data.extras["truncated"] = truncated
    if answer_key is not None:
        data.extras["answer"] = answers
    missing = int((data.rollout_index >= 0).sum()) - matched
    counts: dict[str, Any] = {
        "matched": matched,
        "not_in_profile": unmatched,
        "profile_rollouts_not_in_file": missing,
    }
    if refused:
        counts["refused_lines"] = refused
    return counts


def _is_truncated(row: dict) -> bool:
    return truncated(row)  # the one "truncated" (artifacts/response.py)


def _answer(value: Any) -> str | None:
    # Answers compare as strings; empty or missing means "no answer", its own class.
    if value is None:
        return None
    text = value if isinstance(value, str) else repr(value)
    return text if text.strip() else None
