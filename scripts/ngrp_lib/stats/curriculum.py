"""Select tasks for training by pass-rate band or GRPO learnability; write the ORIGINAL task rows back.

Profile rows are keyed by `_ng_task_index`. Original task lines get their index the way NeMo Gym 0.7.0
assigns it (`_preprocess_rows_from_config`): a row that already has `_ng_task_index` keeps it; otherwise
byte-identical raw lines share one index, numbered by first appearance in file order. Anything that
makes that mapping ambiguous is refused rather than guessed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import Row, atomic_output, dumps, iter_rows, refuse_existing
from ..artifacts.kinds import MATERIALIZED, TASKS, refuse_wrong_kind
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY, is_index, key_problem
from ..artifacts.numbering import TaskNumbering
from ..errors import FindingsError, InputError, UsageError
from . import estimators
from .adaptive_run import adaptive_basis, decision_selector, find_adaptive
from .denominators import Denominators, denominators
from .load import ProfileData, load_profile

# Dataset fields that Gym rewrites while materializing, so they may differ from the original line.
REWRITTEN_FIELDS = {"responses_create_params", "agent_ref", TASK_KEY}


@dataclass
class TaskLines:
    rows: dict[int, list[Row]]  # task index -> its original lines, in file order
    n_lines: int
    n_duplicate_lines: int  # lines byte-identical to an earlier one (same task, as in Gym)
    kind: str = "tasks"  # or "materialized": task rows rebuilt from a materialized inputs file
    dropped_fields: list[str] = field(default_factory=list)  # materialized: fields that vary by repeat


def map_task_lines(path: Path | str) -> TaskLines:
    """Replicate Gym's task numbering over an original tasks file; refuse ambiguous files. A materialized
    inputs file (rows stamped with `_ng_rollout_index`) is taken back to one task row per index."""
    path = Path(path)
    rows = list(iter_rows(path))
    if rows and ROLLOUT_KEY in rows[0].data:
        return _from_materialized(path, rows)
    numbering = TaskNumbering.for_source(path)
    explicit: dict[int, Row] = {}
    mapping: dict[int, list[Row]] = {}
    duplicates = 0
    for row in rows:
        seen = len(numbering.auto)
        index = numbering.index(row, path)
        if TASK_KEY in row.data:
            if index in explicit and explicit[index].raw != row.raw:
                raise FindingsError(
                    f"{path}: lines {explicit[index].line} and {row.line} are different tasks with "
                    f"the same {TASK_KEY} {index}; Gym would merge them, so the mapping is ambiguous",
                    hint="give every distinct task its own index",
                )
            explicit[index] = row
        else:
            duplicates += len(numbering.auto) == seen  # no new index: a byte-identical earlier line
        mapping.setdefault(index, []).append(row)
    _refuse_mixed(path, mapping, explicit, numbering.auto)
    return TaskLines(mapping, len(rows), duplicates)


def _from_materialized(path: Path, rows: list[Row]) -> TaskLines:
    """One task row per `_ng_task_index`, as Gym's materialize took it in: the first repeat's row without
    `_ng_rollout_index`, and without what differs between the task's repeats (a per-repeat seed in
    `responses_create_params.metadata.extra_body`, another agent's `agent_ref`), dropped at the deepest
    level where the repeats disagree. The task index is kept: it is the task's identity in every run."""
    by_task: dict[int, list[Row]] = {}
    for row in rows:
        task, rollout = row.data.get(TASK_KEY), row.data.get(ROLLOUT_KEY)
        if not (is_index(task) and is_index(rollout)):
            raise InputError(
                key_problem(row.data),
                path=path,
                line=row.line,
                hint="pass the run's *_materialized_inputs.jsonl unchanged, or the original tasks file",
            )
        by_task.setdefault(task, []).append(row)
    dropped: set[str] = set()
    mapping: dict[int, list[Row]] = {}
    for task, group in by_task.items():
        first = min(group, key=lambda r: r.data[ROLLOUT_KEY])
        values = [{k: v for k, v in r.data.items() if k != ROLLOUT_KEY} for r in group]
        data = _shared(values, "", dropped)
        mapping[task] = [Row(first.line, data, dumps(data))]
    return TaskLines(mapping, len(rows), 0, "materialized", sorted(dropped))


_MISSING = object()


def _shared(values: list[Any], where: str, dropped: set[str]) -> Any:
    """What every value holds alike: the value itself, or for objects the keys every one holds with
    shared values (recursively); what differs is left out and its path added to `dropped`."""
    if all(v == values[0] for v in values):
        return values[0]
    if where.endswith(_EXTRA_BODY) and all(isinstance(v, str) for v in values):
        return _shared_extra_body(values, where, dropped)
    if not all(isinstance(v, dict) for v in values):
        dropped.add(where)
        return _MISSING
    out = {}
    for key in values[0]:
        path = f"{where}.{key}" if where else key
        inner = [v.get(key, _MISSING) for v in values]
        common = _MISSING if any(x is _MISSING for x in inner) else _shared(inner, path, dropped)
        if common is _MISSING:
            dropped.add(path)
        elif common != {} or values[0][key] == {}:  # an object emptied by what was dropped goes too
            out[key] = common
    return out


_EXTRA_BODY = "metadata.extra_body"


def _shared_extra_body(values: list[str], where: str, dropped: set[str]) -> Any:
    """`metadata.extra_body` is a JSON object in a string (materialize --seed-per-repeat adds `seed` to
    it): what the repeats share inside it, written back as materialize writes it; the whole field goes
    when nothing inside is shared (or it is not a JSON object)."""
    try:
        parsed = [json.loads(v) for v in values]
    except ValueError:
        parsed = []
    if not parsed or not all(isinstance(v, dict) for v in parsed):
        dropped.add(where)
        return _MISSING
    inner: set[str] = set()
    common = _shared(parsed, where, inner)
    if not common:
        return _MISSING  # the caller names the whole field as dropped
    dropped.update(inner)
    return json.dumps(common)


def _refuse_mixed(path: Path, mapping: dict, explicit: dict, auto: dict) -> None:
    clash = sorted(set(explicit) & set(auto.values()))
    if clash:
        lines = [r.line for r in mapping[clash[0]]]
        raise FindingsError(
            f"{path}: task index {clash[0]} is both written in a row and assigned by position "
            f"(lines {lines}); {len(clash)} such indices, so the mapping is ambiguous",
            hint=f"stamp {TASK_KEY} on every row, or on none",
        )


@dataclass
class Selection:
    mode: str  # "band" or "learnable"
    min_rate: float | None = None
    max_rate: float | None = None
    group_size: int | None = None
    min_informative: float = 0.5

    def check(self) -> None:
        if self.mode == "band":
            lo, hi = self.min_rate or 0.0, 1.0 if self.max_rate is None else self.max_rate
            if not 0.0 <= lo <= hi <= 1.0:
                raise UsageError(f"need 0 <= --min <= --max <= 1; got {lo} and {hi}")
        elif self.group_size is None or self.group_size < 2:
            raise UsageError("--learnable-for needs a group size of at least 2")
        elif not 0.0 <= self.min_informative <= 1.0:
            raise UsageError("--min-informative must be between 0 and 1")


@dataclass
class CurriculumResult:
    profile: str
    tasks: str
    output: str
    selection: dict
    key: str
    pass_threshold: float | None
    agent: str | None
    n_task_lines: int
    n_tasks_in_file: int
    n_duplicate_lines: int
    n_profiled: int  # profiled tasks with at least one scored rollout
    n_unscored: int  # profiled tasks whose rewards are all null
    n_undetermined: int  # learnable mode: fewer rollouts than the group size
    n_not_profiled: int  # tasks in the file with no profile row (never selected)
    n_selected: int
    n_written_lines: int
    n_key_replaced: int
    bands: dict = field(default_factory=dict)
    tasks_kind: str = "tasks"  # "materialized": --tasks was a materialized inputs file, one row per task
    dropped_fields: list[str] = field(default_factory=list)
    exclude_unhealthy: str | None = None  # the verdicts file whose unhealthy rollouts were left out
    n_unhealthy_excluded: int = 0  # rollouts of the profile left out by it
    adaptive: dict | None = None  # an adaptive run: its summary and whether its decisions chose the tasks
    denominators: Denominators | None = None  # of the rows read (the --agent's only, with --agent)
    # every selected task beside its lines in --tasks (1-based; a materialized --tasks: its rows' lines)
    selected_tasks: list[dict] = field(default_factory=list)
    # the lines of every selected task, flat and sorted (1-based lines of --tasks)
    selected_lines: list[int] = field(default_factory=list)
    # the mean pass rate over every profiled task (pass@1) with its 95% interval, as `stats` gives it
    pass_at_1: dict | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _counted(data: ProfileData, picked: list[int]) -> Denominators:
    """The denominators block (as stats and compare give it) of the profile rows picked."""
    import numpy as np

    mask = np.zeros(data.n_tasks, dtype=bool)
    mask[picked] = True
    return denominators(data.subset(mask))


def _pick_agent(keys: list, agent: str | None) -> list[int]:
    agents = sorted({str(a) for _, a in keys if a is not None})
    tasks = [t for t, _ in keys]
    if agent is not None:
        picked = [i for i, (_, a) in enumerate(keys) if a == agent]
        if not picked:
            raise UsageError(f"no profile rows for agent {agent!r}; agents present: {agents}")
        return picked
    if len(set(tasks)) != len(tasks):
        raise UsageError(f"the profile has several agents per task ({agents}); choose one with --agent")
    return list(range(len(keys)))


def _check_same_rows(tasks: Path, rows: list[Row], sample: dict, task: int) -> None:
    # A profile made from a different tasks file would map rows silently wrong: compare dataset fields.
    if not sample:
        return
    for name, value in rows[0].data.items():
        if name not in REWRITTEN_FIELDS and name in sample and sample[name] != value:
            raise FindingsError(
                f"{tasks}:{rows[0].line}: field {name!r} differs from the profile's task {task}; "
                "is this the tasks file the run was made from?",
                hint="pass the original tasks file given to materialize / gym eval run",
            )


def _keep(selection: Selection, rate: float, n: int, c: int) -> bool | None:
    if selection.mode == "band":
        lo = selection.min_rate or 0.0
        hi = 1.0 if selection.max_rate is None else selection.max_rate
        return lo <= rate <= hi
    assert selection.group_size is not None  # mode "informative" always has one
    value = float(estimators.p_informative(n, c, selection.group_size))
    return None if math.isnan(value) else value >= selection.min_informative


@dataclass(frozen=True)
class RateOptions:
    """How the pass rate is taken and written: the field (`key`, with `key_n`), what counts as a pass
    (None: rewards must be 0 or 1), whose rows (None: the one agent there is), and the verdicts file
    whose unhealthy rollouts are left out."""

    key: str = "pass_rate"
    pass_threshold: float | None = None
    agent: str | None = None
    exclude_unhealthy: Path | str | None = None


@dataclass
class _Chosen:
    rows: dict[int, tuple[float, int]]  # task -> (pass rate, n)
    undetermined: int
    unscored: int


def export_curriculum(
    profile: Path | str,
    tasks: Path | str,
    output: Path | str,
    selection: Selection,
    rate: RateOptions = RateOptions(),
    *,
    overwrite: bool = False,
) -> CurriculumResult:
    """Write the selected original task rows with `rate.key` (pass rate) and `key_n` (its n) added.

    With `rate.exclude_unhealthy` (a rollout_verdicts.jsonl), pass rates stand on the healthy rollouts."""
    from ..artifacts.verdicts import load_unhealthy

    selection.check()
    check_key(rate.key)
    refuse_existing([Path(output)], overwrite, inputs=[profile, tasks])
    refuse_wrong_kind(tasks, (TASKS, MATERIALIZED), option="--tasks")  # before the profile is read
    excluded = rate.exclude_unhealthy
    unhealthy = None if excluded is None else load_unhealthy(excluded).keys
    data = load_profile(profile, ("reward",), unhealthy, exclude=unhealthy is not None)
    picked = _pick_agent(data.keys, rate.agent)
    n, c = _pass_counts(data, picked, rate.pass_threshold)
    lines = map_task_lines(tasks)
    _refuse_unmapped(tasks, lines, [data.keys[i][0] for i in picked])
    run = find_adaptive(profile)
    by_decision = None if run is None else decision_selector(run, selection)
    chosen = _choose(Path(tasks), lines, data, picked, selection, (n, c), by_decision)
    written, replaced = _write(output, lines, chosen.rows, rate.key, overwrite)
    overall = _pass_at_1(data, picked, run, rate.pass_threshold)
    bands = estimators.difficulty_band(n, c)
    return CurriculumResult(
        profile=str(profile),
        tasks=str(tasks),
        output=str(output),
        selection=asdict(selection),
        key=rate.key,
        pass_threshold=rate.pass_threshold,
        agent=rate.agent,
        n_task_lines=lines.n_lines,
        n_tasks_in_file=len(lines.rows),
        n_duplicate_lines=lines.n_duplicate_lines,
        n_profiled=int((n > 0).sum()),
        n_unscored=chosen.unscored,
        n_undetermined=chosen.undetermined,
        n_not_profiled=len(set(lines.rows) - {data.keys[i][0] for i in picked}),
        n_selected=len(chosen.rows),
        n_written_lines=written,
        n_key_replaced=replaced,
        bands={b: int((bands == b).sum()) for b in ("all_fail", "mixed", "all_pass")},
        tasks_kind=lines.kind,
        dropped_fields=lines.dropped_fields,
        exclude_unhealthy=None if excluded is None else str(excluded),
        n_unhealthy_excluded=data.n_unhealthy,
        adaptive=None if run is None else {**run.summary(), "selected_by": adaptive_basis(by_decision)},
        denominators=_counted(data, picked),
        selected_tasks=[
            {"task": task, "source_lines": [r.line for r in lines.rows[task]], "pass_rate": rate, "n": n}
            for task, (rate, n) in sorted(chosen.rows.items())
        ],
        selected_lines=sorted(r.line for task in chosen.rows for r in lines.rows[task]),
        pass_at_1=overall,
    )


def _pass_at_1(data: ProfileData, picked: list[int], run: Any, pass_threshold: float | None) -> dict | None:
    """The benchmark-level pass rate of the picked rows (`stats.summary.benchmark_pass_rate`)."""
    import numpy as np

    from .summary import benchmark_pass_rate

    mask = np.zeros(data.n_tasks, dtype=bool)
    mask[picked] = True
    return benchmark_pass_rate(data.subset(mask), run, pass_threshold)


def _pass_counts(data: ProfileData, picked: list[int], pass_threshold: float | None) -> tuple[Any, Any]:
    """Scored rollouts and passes per picked row; refused when rewards are shaped and no threshold given."""
    success = estimators.successes(data.values["reward"][picked], pass_threshold)
    if success is None:
        raise UsageError(
            "rewards are not all 0 or 1; the pass rate needs a threshold",
            hint="pass --pass-threshold X (success means reward >= X)",
        )
    return estimators.counts(success)


def _refuse_unmapped(tasks: Path | str, lines: TaskLines, profiled: list[int]) -> None:
    missing = [task for task in profiled if task not in lines.rows]
    if missing:
        raise FindingsError(
            f"{len(missing)} profiled tasks have no line in {tasks} (for example task {missing[0]})",
            hint="pass the original tasks file the run was made from",
        )


def _choose(
    tasks: Path,
    lines: TaskLines,
    data: ProfileData,
    picked: list[int],
    selection: Selection,
    counts: tuple,
    by_decision: Callable[[int], bool | None] | None = None,
) -> _Chosen:
    """The tasks the selection keeps, each checked against the profile's sample of its row; an adaptive
    run's own decisions (`by_decision`) select where its rule answers the selection."""
    n, c = counts
    chosen = _Chosen({}, 0, 0)
    for row_i, i in enumerate(picked):
        task = data.keys[i][0]
        _check_same_rows(tasks, lines.rows[task], data.samples[i], task)
        if n[row_i] == 0:
            chosen.unscored += 1
            continue
        pass_rate = float(c[row_i] / n[row_i])
        keep = (
            _keep(selection, pass_rate, int(n[row_i]), int(c[row_i]))
            if by_decision is None
            else by_decision(task)
        )
        chosen.undetermined += keep is None
        if keep:
            chosen.rows[task] = (pass_rate, int(n[row_i]))
    return chosen


def check_key(key: str) -> None:
    """The pass-rate field must not replace what Gym reads (identity, routing, the request) or be empty."""
    if not key or key in REWRITTEN_FIELDS or key.startswith("_ng_"):
        raise UsageError(
            f"--key {key!r} would overwrite a field Gym reads",
            hint="choose a new field name such as pass_rate",
        )


def _write(output: Path | str, lines: TaskLines, chosen: dict, key: str, overwrite: bool) -> tuple[int, int]:
    ordered = sorted(
        (row.line, task, row) for task, rows in lines.rows.items() if task in chosen for row in rows
    )
    replaced = 0
    with atomic_output(output, overwrite=overwrite) as handle:
        for _, task, row in ordered:
            rate, n = chosen[task]
            replaced += key in row.data
            handle.write(dumps({**row.data, key: rate, f"{key}_n": n}))
    return len(ordered), replaced
