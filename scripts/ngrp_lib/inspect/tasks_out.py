"""`ngrp inspect ... --tasks-out FILE`: the task lines behind a selection, to collect those tasks alone.

Health says of a zero cut at the token cap that whether more tokens would pass is unknown; the cheap way
to find out is to collect those tasks again at a larger cap, not the whole run. This writes the tasks of
every selected rollout (every filter applies; `--limit` does not: it limits what is shown) as task lines
that `ngrp collect --input FILE` takes:

- from the run's own tasks file, when its run manifest names it (`input.path`) and the file is unchanged
  (its sha256 is the manifest's): each task's original lines as Gym numbers them (`curriculum`'s mapping),
  in file order;
- else from the materialized inputs: one row per task, its first repeat's without `_ng_rollout_index` and
  without what differs between repeats (a per-repeat seed), as `curriculum --tasks MATERIALIZED` writes.

Each line carries its `_ng_task_index` (added where the tasks file had none; Gym and collect keep a row's
own index), so the new run numbers its tasks as the old one did and `ngrp compare OLD NEW --intersect`
pairs them. The result names the command that collects them: the run's own (from its manifest, as
`check`'s resume command is built) with the new input and output, and for a selection of capped rollouts
(`--truncated`, or a token-cap finding) `--max-output-tokens` at 4x the largest cap among them.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import atomic_output, dumps, refuse_existing
from ..artifacts.names import RCP, TASK_KEY, materialized_path_for, profile_paths_for
from ..errors import InputError

CAP_CHECKS = ("ngrp/truncated_at_token_cap", "model_call_runaway_generation")
CAP_FACTOR = 4  # the larger cap the next command asks for: a cut reply of n tokens gets 4n
# what else to raise for a finding whose "unknown" a re-collection settles (said beside the command)
RAISE = {
    "ngrp/context_window_exceeded": "serve the model with a longer context (`ngrp serve start ... -- "
    "--max-model-len N`) and collect them",
    "ngrp/ended_on_tool_call": "raise the agent's max_steps (its Gym config) and collect them",
}


@dataclass
class TasksOut:
    output: str
    source: str  # the file the lines come from
    source_kind: str  # "tasks": the run's tasks file (its manifest's input); "materialized": the inputs
    source_note: str | None  # why the run's tasks file was not used, when a manifest names one
    n_rollouts: int  # selected rollouts
    n_tasks: int
    n_lines: int  # lines written (a task on several byte-identical lines keeps them, as its repeats did)
    tasks: list[int]
    max_output_tokens: list[int]  # the selected rollouts' caps (materialized), distinct, ascending
    dropped_fields: list[str] = field(default_factory=list)  # materialized: fields that vary by repeat
    raise_cap_to: int | None = None  # the cap the next command asks for (capped selections)
    next: str | None = None  # the collect command for these tasks
    next_is_complete: bool = False  # False: add the run's server, sampling and verifier options
    then: list[str] = field(default_factory=list)  # to read the answer: profile, compare --intersect
    hint: str | None = None  # what else to raise (a context window, an agent's max_steps)
    selection: list[str] = field(default_factory=list)  # the filters, as inspect's footer says them

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _source(rollouts: Path, inputs: Path | None, manifest: dict | None) -> tuple[Path, str, str | None]:
    """(the file to map tasks from, its kind, why the run's tasks file was not taken)."""
    from ..collect.materialize import sha256_file

    note = None
    block = manifest.get("input") if isinstance(manifest, dict) else None
    if isinstance(block, dict) and isinstance(block.get("path"), str):
        path = Path(block["path"])
        if not path.is_file():
            note = f"the run's tasks file {path} is not found from here"
        elif sha256_file(path) != block.get("sha256"):
            note = f"the run's tasks file {path} changed since the run (its sha256 differs)"
        else:
            return path, "tasks", None
    if inputs is None:
        raise InputError(
            "--tasks-out needs the run's task lines: "
            + (note or "no run manifest names its tasks file")
            + ", and no materialized inputs were found beside the rollouts",
            path=rollouts,
            hint="pass --inputs ROLLOUTS_materialized_inputs.jsonl",
        )
    return inputs, "materialized", note


def write_tasks_out(result: Any, output: Path, *, overwrite: bool = False) -> TasksOut:
    """Write the task lines of every rollout `result` (an `InspectResult` read without a limit) selects."""
    from ..artifacts.manifest import manifest_beside
    from ..stats.curriculum import map_task_lines
    from .join import InputsIndex

    paths = result.paths
    manifest = manifest_beside(paths.rollouts)
    source, kind, note = _source(paths.rollouts, paths.inputs, manifest)
    refuse_existing([output], overwrite, inputs=[paths.rollouts, paths.inputs, source])
    selected: dict[int, set[str | None]] = {}
    n_rollouts = 0
    for shown in result.rollouts():
        selected.setdefault(shown.digest.task, set()).add(shown.digest.agent)
        n_rollouts += 1
    lines = map_task_lines(source)
    missing = [task for task in selected if task not in lines.rows]
    if missing:
        raise InputError(
            f"task {missing[0]} of the selection has no line in {source}"
            + (f" ({len(missing)} tasks have none)" if len(missing) > 1 else ""),
            path=source,
            hint="pass the run's own materialized inputs (--inputs)",
        )
    ordered = sorted((row.line, task, row) for task in selected for row in lines.rows[task])
    with atomic_output(output, overwrite=overwrite) as handle:
        for _, task, row in ordered:
            data = row.data if row.data.get(TASK_KEY) == task else {**row.data, TASK_KEY: task}
            handle.write(dumps(data))
    caps = _caps(InputsIndex.build(paths.inputs) if paths.inputs else None, selected)
    out = TasksOut(
        output=str(output), source=str(source), source_kind=kind, source_note=note, n_rollouts=n_rollouts,
        n_tasks=len(selected), n_lines=len(ordered), tasks=sorted(selected), max_output_tokens=caps,
        dropped_fields=lines.dropped_fields, selection=result.selection.describe(),
    )  # fmt: skip
    findings = result.selection.finding
    capped = result.selection.truncated or any(f in CAP_CHECKS for f in findings)
    if capped and caps:
        out.raise_cap_to = CAP_FACTOR * caps[-1]
    out.hint = next((RAISE[f] for f in findings if f in RAISE), None)
    if capped and not caps:
        out.hint = "collect them at a larger --max-output-tokens than the run's (its inputs do not say it)"
    _commands(out, output, manifest, paths, result)
    return out


def _caps(inputs: Any, selected: dict[int, set[str | None]]) -> list[int]:
    caps: set[int] = set()
    if inputs is None:
        return []
    try:
        for task, agents in selected.items():
            for agent in agents:
                row = inputs.row(task, agent)
                params = row.get(RCP) if isinstance(row, dict) else None
                cap = params.get("max_output_tokens") if isinstance(params, dict) else None
                if type(cap) is int and cap > 0:
                    caps.add(cap)
    finally:
        inputs.close()
    return sorted(caps)


def new_run_path(output: Path) -> Path:
    """Where the next command writes: `capped.jsonl` -> `capped/rollouts.jsonl` beside it."""
    return output.with_name(output.stem) / "rollouts.jsonl"


def _commands(out: TasksOut, output: Path, manifest: Any, paths: Any, result: Any) -> None:
    from ..artifacts.resume import entry_point, resume_argv

    rollouts = new_run_path(output)
    argv = None
    if isinstance(manifest, dict) and manifest.get("input") is not None:
        try:
            argv = resume_argv(_again(manifest, output, rollouts, out.raise_cap_to))
        except (KeyError, TypeError, ValueError, AttributeError):  # not a manifest of this shape
            argv = None
    if argv is not None and argv[-1] == "--resume":
        argv = argv[:-1]
        if out.raise_cap_to is not None and "--max-output-tokens" not in argv:
            argv += ["--max-output-tokens", str(out.raise_cap_to)]
        out.next, out.next_is_complete = shlex.join([*entry_point(), *argv]), True
    else:
        words = ["ngrp", "collect", "--input", str(output), "--output", str(rollouts)]
        repeats = _repeats(result)
        if repeats > 1:
            words += ["--num-repeats", str(repeats)]
        if out.raise_cap_to is not None:
            words += ["--max-output-tokens", str(out.raise_cap_to)]
        out.next = shlex.join(words)
    new_profile = profile_paths_for(rollouts)["reward_profiling"]
    old_profile = paths.profile or profile_paths_for(paths.rollouts)["reward_profiling"]
    then = []
    if not old_profile.is_file():  # the old run needs its profile too
        inputs = paths.inputs or materialized_path_for(paths.rollouts)
        then.append(
            f"ngrp profile --inputs {shlex.quote(str(inputs))} --rollouts {shlex.quote(str(paths.rollouts))}"
        )
    then.append(
        f"ngrp profile --inputs {shlex.quote(str(materialized_path_for(rollouts)))} --rollouts "
        f"{shlex.quote(str(rollouts))}"
    )
    then.append(f"ngrp compare {shlex.quote(str(old_profile))} {shlex.quote(str(new_profile))} --intersect")
    out.then = then


def _again(manifest: dict, output: Path, rollouts: Path, cap: int | None) -> dict:
    """The run's manifest as if it had read `output` into `rollouts` (no line limit, no shard), at
    max_output_tokens `cap` when given: what `resume_argv` turns into the command for these tasks."""
    again = copy.deepcopy(manifest)
    again["input"]["path"] = str(output)
    again["rollouts"]["path"] = str(rollouts)
    identity: dict = again["identity"]
    identity.pop("shard", None)
    materialize = identity.get("materialize")
    if isinstance(materialize, dict):
        materialize["limit"] = None  # it counted lines of the old tasks file
        if cap is not None:
            materialize["overrides"] = {**(materialize.get("overrides") or {}), "max_output_tokens": cap}
    return again


def _repeats(result: Any) -> int:
    """The most rollouts a task of the old run had (its inputs' count, else its rows)."""
    import numpy as np

    table = result.table
    expected = np.where(table.expected > 0, table.expected, table.n_rows)
    return int(expected.max()) if len(table) else 1


def render(out: TasksOut) -> list[str]:
    """The text `inspect --tasks-out` prints."""
    source = (
        f"lines of {out.source}, the run's tasks file"
        if out.source_kind == "tasks"
        else f"rows rebuilt from {out.source}, one per task"
    )
    lines = [
        f"wrote {out.output}: {out.n_tasks} tasks ({out.n_lines} {source}, each with its {TASK_KEY}), "
        f"behind {out.n_rollouts} selected rollouts"
        + (f" ({'; '.join(out.selection)})" if out.selection else "")
    ]
    if out.source_note:
        lines.append(f"  note: {out.source_note}; the rows come from the materialized inputs")
    if out.dropped_fields:
        lines.append(f"  left out (they differ between a task's repeats): {', '.join(out.dropped_fields)}")
    if out.n_tasks == 0:
        lines.append("  nothing selected: the file is empty")
        return lines
    if out.raise_cap_to is not None:
        caps = ", ".join(map(str, out.max_output_tokens))
        lines.append(
            f"next: collect those tasks alone at {CAP_FACTOR}x the cap (max_output_tokens {caps} -> "
            f"{out.raise_cap_to}; keep it within the server's context window):"
        )
    elif out.hint:
        lines.append(f"next: {out.hint}:")
    else:
        lines.append("next: collect those tasks alone:")
    lines.append(f"  {out.next}" + ("" if out.next_is_complete else "  (add the run's server and options)"))
    lines.append("then, to compare those tasks before and after:")
    lines += [f"  {command}" for command in out.then]
    return lines
