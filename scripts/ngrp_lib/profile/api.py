"""`run_profile` and `merge_profiles`: read -> align -> accumulate -> write, returning a typed result."""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from .. import __version__
from ..artifacts.jsonl import atomic_outputs, refuse_existing
from ..artifacts.names import profile_paths_for, sibling
from ..errors import FindingsError, OutputError, UsageError
from ..numbers import MAX_MAGNITUDE, first_oversize
from .agents import agent_metrics, repeat_level
from .align import check_alignment
from .extras import DEFAULT_PASS_THRESHOLD
from .group_rows import profile_lines
from .reader import ReadStats, read_dataset
from .records import NULL_POLICIES, Dataset
from .summary import account
from .table import build_table

STATE_SUFFIX = "_profile_state"


@dataclass(frozen=True)
class ProfileOptions:
    output_dir: Path | None = None
    allow_partial: bool = False
    overwrite: bool = False
    gym_only: bool = False
    pass_threshold: float = DEFAULT_PASS_THRESHOLD
    null_reward: str = "exclude"
    save_state: bool = False
    exclude_unhealthy: Path | None = None  # a rollout_verdicts.jsonl: its unhealthy rollouts are masked

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["output_dir"] = None if self.output_dir is None else str(self.output_dir)
        out["exclude_unhealthy"] = None if self.exclude_unhealthy is None else str(self.exclude_unhealthy)
        return out


@dataclass
class GymCompletion:
    """Gym's `profile_completion_summary`: rollout rows and input rows (task groups) by completion."""

    expected_rollout_rows: int
    completed_rollout_rows: int
    missing_rollout_rows: int
    extra_rollout_rows: int
    reward_profile_completion_pct: float
    total_input_rows: int
    complete_input_rows: int
    partial_input_rows: int
    missing_input_rows: int  # task groups with no completed rollout, dropped from the output


@dataclass
class ProfileResult:
    outputs: dict[str, str]
    completion: GymCompletion
    counts: dict[str, int]
    agents: list[dict[str, Any]]
    profile_rows: int
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def output_paths(rollouts: Path, options: ProfileOptions) -> dict[str, Path]:
    paths = profile_paths_for(rollouts, options.output_dir)
    if options.save_state:
        base = (
            Path(rollouts) if options.output_dir is None else Path(options.output_dir) / Path(rollouts).name
        )
        paths["profile_state"] = sibling(base, STATE_SUFFIX, ".jsonl")
    return paths


def check_options(options: ProfileOptions) -> None:
    folder = None if options.output_dir is None else Path(options.output_dir)
    if folder is not None and folder.exists() and not folder.is_dir():
        raise OutputError("--output-dir is a file, not a folder", path=folder)  # exit 3, as in every command
    if not math.isfinite(options.pass_threshold):
        raise UsageError(f"--pass-threshold must be a finite number, not {options.pass_threshold}")
    if options.null_reward not in NULL_POLICIES:
        raise UsageError(
            f"--null-reward must be one of {', '.join(NULL_POLICIES)}, not {options.null_reward!r}"
        )


def run_profile(inputs: Path | str, rollouts: Path | str, options: ProfileOptions) -> ProfileResult:
    """Profile one run: Gym's three files plus our summary (and state, for a later merge)."""
    check_options(options)
    inputs, rollouts = Path(inputs), Path(rollouts)
    paths = output_paths(rollouts, options)
    refuse_existing(list(paths.values()), options.overwrite, inputs=[inputs, rollouts])
    unhealthy = None
    if options.exclude_unhealthy is not None:
        from ..audit.verdicts import load_unhealthy

        unhealthy = load_unhealthy(options.exclude_unhealthy).keys
    with no_gc():  # one span: re-enabling between read and profile would trigger a full collection
        data, stats = read_dataset(inputs, rollouts, options.null_reward, options.allow_partial, unhealthy)
        sources = {
            "materialized_inputs": _file_ref(inputs, stats, "inputs"),
            "rollouts": _file_ref(rollouts, stats, "rollouts"),
        }
        result = profile_dataset(data, stats, options, paths, sources)
        del data, stats  # freed here, while the collector is still off
    return result


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Reading allocates ~1M small containers and keeps many: the cyclic GC would rescan them all
    repeatedly (about a third of the run). Nothing here makes cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _file_ref(path: Path, stats: ReadStats, role: str) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "path": str(path),
        "sha256": stats.sha256[role].hexdigest(),
        "rows": stats.rows.get(role, 0),
    }
    if stats.blank_lines.get(role):
        ref["blank_lines"] = stats.blank_lines[role][:20]
    if role in stats.torn_tail:
        ref["torn_tail_line"] = stats.torn_tail[role]
    return ref


def profile_dataset(
    data: Dataset, stats: ReadStats, options: ProfileOptions, paths: dict[str, Path], sources: dict[str, Any]
) -> ProfileResult:
    with no_gc():
        return _profile_inner(data, stats, options, paths, sources)


def _profile_inner(
    data: Dataset, stats: ReadStats, options: ProfileOptions, paths: dict[str, Path], sources: dict[str, Any]
) -> ProfileResult:
    alignment = check_alignment(data, stats, options.allow_partial)
    _check_null_rewards(data, options)
    table = build_table(data)
    _refuse_oversize(table)
    warnings = _read_warnings(stats, sources)
    rewards_by_label: dict[Any, list[float]] = {}
    n_rows = 0
    with atomic_outputs(paths, overwrite=options.overwrite) as out:  # all files or none
        for line, record in profile_lines(
            data, table, extras=not options.gym_only, pass_threshold=options.pass_threshold
        ):
            out["reward_profiling"].write(line)
            n_rows += 1
            if record["rewards"]:
                mean = sum(record["rewards"]) / len(record["rewards"])
                rewards_by_label.setdefault(record["label"], []).append(mean)
        repeats, incomplete = repeat_level(table)
        agents = agent_metrics(data, table, repeats)
        out["agent_metrics"].write(orjson.dumps(agents))
        out["repeat_level_metrics"].write(orjson.dumps(repeats))
        if options.save_state:
            write_state(out["profile_state"], data, options, sources)
        summary_counts, per_agent = account(data)
        completion = GymCompletion(**summary_counts)
        counts = _counts(completion, per_agent)
        _add_agent_means(per_agent, agents, rewards_by_label, table)
        warnings += _data_warnings(counts, completion, incomplete, table, options, alignment.missing)
        outputs = {name: str(path) for name, path in paths.items()}
        summary = {
            "tool": {"name": "ngrp", "version": __version__},
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "inputs": sources,
            "options": options.to_json(),
            "counts": counts,
            "tasks": {k: getattr(completion, v) for k, v in _TASK_KEYS.items()},
            "gym_completion": asdict(completion),
            "agents": per_agent,
            "outputs": outputs,
            "warnings": warnings,
        }
        out["profile_summary"].write(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return ProfileResult(outputs, completion, counts, per_agent, n_rows, warnings)


_TASK_KEYS = {
    "total": "total_input_rows",
    "complete": "complete_input_rows",
    "partial": "partial_input_rows",
    "dropped": "missing_input_rows",
}


def _counts(completion: GymCompletion, per_agent: list[dict[str, Any]]) -> dict[str, int]:
    masked = sum(a["counts"]["masked"] for a in per_agent)
    unhealthy = sum(a["counts"]["unhealthy_excluded"] for a in per_agent)
    null = sum(a["counts"]["null_reward"] for a in per_agent)
    non_numeric = sum(a["counts"]["non_numeric_reward"] for a in per_agent)
    return {
        "expected": completion.expected_rollout_rows,
        "completed": completion.completed_rollout_rows,
        "missing": completion.missing_rollout_rows,
        "extra": completion.extra_rollout_rows,
        "masked": masked,
        "measured": completion.completed_rollout_rows - masked - unhealthy,
        "null_reward": null,
        "non_numeric_reward": non_numeric,
        "unhealthy_excluded": unhealthy,
    }


def _add_agent_means(per_agent: list, agents: list, rewards_by_label: dict, table: Any) -> None:
    """Next to Gym's rollout-weighted mean/reward, the task-weighted one (mean of per-task means)."""
    pooled = {e["agent_ref"]["name"]: e.get("mean/reward") for e in agents}
    for entry in per_agent:
        task_means = rewards_by_label.get(entry["agent"])
        entry["mean_reward_rollout_weighted"] = pooled.get(entry["agent"])
        entry["mean_reward_task_weighted"] = sum(task_means) / len(task_means) if task_means else None


def _refuse_oversize(table: Any) -> None:
    """A numeric rollout field beyond +-MAX_MAGNITUDE would make Gym's means and deviations inf or nan."""
    found = first_oversize(table.matrix)
    if found is not None:
        row, column, value = found
        raise FindingsError(
            f"rollout (task {int(table.tasks[row])}, rollout {int(table.rollouts[row])}) has "
            f"{table.columns[column]} = {value:g}: beyond +-{MAX_MAGNITUDE:g} the profile's sums and squares "
            "overflow float64",
            hint=f"rescale {table.columns[column]} (divide it by a constant) in the verifier; profile again",
        )


def _check_null_rewards(data: Dataset, options: ProfileOptions) -> None:
    if options.null_reward != "error":
        return
    bad = sorted(k for k, r in data.results.items() if not r.masked and r.reward_state != "ok")
    if bad:
        raise FindingsError(
            f"{len(bad)} measured rollouts have a null, absent or non-numeric reward: {bad[:10]}",
            hint="fix the verifier, or choose --null-reward exclude (Gym's behaviour) or --null-reward zero",
        )


def _read_warnings(stats: ReadStats, sources: dict[str, Any]) -> list[str]:
    out = []
    for role, lines in stats.blank_lines.items():
        if not lines:
            continue
        name = "materialized_inputs" if role == "inputs" else "rollouts"
        out.append(
            f"skipped {len(lines)} blank line(s) in {sources[name]['path']} (first at line {lines[0]}); "
            "NeMo Gym's `gym eval profile` refuses such a file"
        )
    for role, line in stats.torn_tail.items():
        name = "materialized_inputs" if role == "inputs" else "rollouts"
        out.append(
            f"skipped the torn last line {line} of {sources[name]['path']} (an interrupted write, not a "
            "complete rollout; --allow-partial); the file was not changed"
        )
    return out


def _data_warnings(
    counts: dict[str, int],
    completion: GymCompletion,
    incomplete: list[dict[str, Any]],
    table: Any,
    options: ProfileOptions,
    missing: list[Any],
) -> list[str]:
    out = []
    if counts["null_reward"]:
        how = {
            "exclude": "left out of mean/reward and the other reward statistics, as Gym does, so those "
            "tasks' "
            "numbers stand on fewer rollouts; use --null-reward zero or error to decide otherwise",
            "zero": "counted as reward 0 (--null-reward zero)",
        }[options.null_reward]
        out.append(f"{counts['null_reward']} measured rollout(s) have a null or absent reward: {how}")
    if counts["non_numeric_reward"]:
        out.append(
            f"{counts['non_numeric_reward']} measured rollout(s) have a reward that is not a number (a "
            "string?): left out of mean/reward and the other reward statistics, as Gym does, whatever "
            "--null-reward says; fix the verifier (`ngrp validate` names the rows)"
        )
    if missing:
        out.append(
            f"partial profile: {len(missing)} rollout(s) missing (first {missing[:5]}); "
            f"{completion.partial_input_rows} partial and "
            f"{completion.missing_input_rows} dropped task group(s). "
            "Agent-level mean/* pools rollouts, so tasks with more completed rollouts weigh more; see "
            "mean_reward_task_weighted in the profile summary"
        )
    if incomplete:
        first = incomplete[0]
        out.append(
            f"{len(incomplete)} repeat(s) are missing rollouts for some tasks (e.g. agent="
            f"{first['agent_ref']['name']!r}, _ng_rollout_index={first['_ng_rollout_index']}, "
            f"missing_count={first['missing_count']}): repeat-level statistics use unequal sample sizes"
        )
    if counts["masked"]:
        out.append(f"{counts['masked']} masked rollout(s) (mask_sample) left out of the quality metrics")
    if counts["unhealthy_excluded"]:
        out.append(
            f"{counts['unhealthy_excluded']} unhealthy rollout(s) left out of the quality metrics as masked "
            f"ones are (--exclude-unhealthy {options.exclude_unhealthy}); Gym's files count them as masked"
        )
    if not options.gym_only and _non_binary_rewards(table):
        out.append(
            f"rewards are not all 0/1: ngrp/pass_rate and ngrp/pass@k count a rollout as passed when its "
            f"reward >= {options.pass_threshold:g} (--pass-threshold); state that threshold with any pass "
            "rate, or quote mean/reward"
        )
    if len(table.tasks) and all(label is None for label in table.labels):
        out.append(
            "no materialized row has an agent_ref (or _ng_environment_server): the agent and repeat-level "
            "metric files are empty, as in Gym"
        )
    return out


def _non_binary_rewards(table: Any) -> bool:
    import numpy as np

    if "reward" not in table.columns:
        return False
    rewards = table.matrix[:, table.columns.index("reward")]
    rewards = rewards[~np.isnan(rewards)]
    return bool(((rewards != 0) & (rewards != 1)).any())


def write_state(handle: IO[bytes], data: Dataset, options: ProfileOptions, sources: dict[str, Any]) -> None:
    """The exact per-row state `merge_profiles` needs (Gym's profile rows do not hold enough)."""
    header = {"ngrp_profile_state": 1, "null_reward": options.null_reward, "sources": sources}
    handle.write(orjson.dumps(header) + b"\n")
    for rec in data.inputs:
        handle.write(orjson.dumps(["i", rec.task, rec.rollout, rec.run_key, rec.agent]) + b"\n")
    for (task, rollout), res in data.results.items():
        head = orjson.dumps(["r", task, rollout, res.masked, res.names, res.values, res.reward_state])
        handle.write(head[:-1] + b"," + res.info + b"]\n")
    for (task, run_key), (rollout, raw) in data.samples.items():
        handle.write(orjson.dumps(["s", task, run_key, rollout])[:-1] + b"," + raw + b"]\n")
