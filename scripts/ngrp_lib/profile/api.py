"""`run_profile` and `merge_profiles`: read -> align -> accumulate -> write, returning a typed result."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from .. import __version__
from ..artifacts.jsonl import atomic_outputs, gc_paused, refuse_existing
from ..artifacts.kinds import refuse_swapped
from ..artifacts.names import profile_paths_for, sibling
from ..errors import FindingsError, OutputError, UsageError
from ..numbers import MAX_MAGNITUDE, first_oversize
from .agents import LabelRows, TableLabels, agent_metrics, coverage_counts, repeat_level
from .align import Alignment, check_alignment, sorted_keys
from .dataset import Dataset, InputStore, numbers, plan_ids
from .extras import DEFAULT_PASS_THRESHOLD
from .group_rows import GroupRow, group_order, group_rows, median_shape
from .reader import ReadStats, read_dataset
from .records import LAST_MASKED_ID, NULL_POLICIES
from .summary import (
    Facts,
    account,
    add_agent_means,
    agent_entries,
    counts_of,
    data_warnings,
    gym_completion,
)
from .summary import GymCompletion as GymCompletion  # re-exported: ProfileResult.completion
from .table import Table, build_table

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
class ProfileResult:
    outputs: dict[str, str]
    completion: GymCompletion
    counts: dict[str, int]
    agents: list[dict[str, Any]]
    profile_rows: int
    warnings: list[str] = field(default_factory=list)
    adaptive: dict[str, Any] | None = None  # an adaptive run: its first-round estimates (commands/profile)

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
    refuse_swapped(inputs, rollouts)
    unhealthy = None
    if options.exclude_unhealthy is not None:
        from ..artifacts.verdicts import load_unhealthy

        unhealthy = load_unhealthy(options.exclude_unhealthy).keys
    with gc_paused():  # one span: re-enabling between read and profile would trigger a full collection
        data, stats = read_dataset(inputs, rollouts, options.null_reward, options.allow_partial, unhealthy)
        sources = {
            "materialized_inputs": _file_ref(inputs, stats, "inputs"),
            "rollouts": _file_ref(rollouts, stats, "rollouts"),
        }
        result = profile_dataset(data, stats, options, paths, sources)
        del data, stats  # freed here, while the collector is still off
    return result


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
    data: Dataset,
    stats: ReadStats,
    options: ProfileOptions,
    paths: dict[str, Path],
    sources: dict[str, Any],
    notes: list[str] | None = None,
) -> ProfileResult:
    """Profile a dataset (one run, or the union of shards) into `paths`, all files or none."""
    with gc_paused():
        alignment = check_alignment(data, stats, options.allow_partial)
        check_null_rewards(data, options)
        table = build_table(data)
        refuse_oversize(table)
        facts = dataset_facts(data, table, alignment)
        coverage = coverage_counts(data, always=options.save_state)
        with atomic_outputs(paths, overwrite=options.overwrite) as out:  # all files or none
            state = out.get("profile_state")
            if state is not None:  # --save-state: a shard of a later merge
                from .state import write_exact, write_header

                write_header(state, table, facts, _shard_extra(data, table, coverage), options, sources)
                write_exact(state, data, table)
            data.inputs = InputStore()  # all that is needed of them is in the table and facts now
            n_rows, task_means = write_rows(out["reward_profiling"], group_rows(data, table), options, state)
            warnings = [*_read_warnings(stats, sources), *(notes or [])]
            coverage_entries = {name: entry for name, entry, _ in coverage}
            found = RowPass(facts, TableLabels(table), coverage_entries, n_rows, task_means)
            return finish(out, found, options, sources, warnings, paths, totals=run_totals(stats))


def write_rows(
    handle: IO[bytes], rows: Iterator[GroupRow], options: ProfileOptions, state: IO[bytes] | None = None
) -> tuple[int, dict[Any, list[float]]]:
    """Write the profile rows; return how many, and each label's per-task mean rewards in row order."""
    extras, threshold = not options.gym_only, options.pass_threshold
    task_means: dict[Any, list[float]] = {}
    n_rows = 0
    if state is not None:
        from .state import write_group
    for row in rows:
        handle.write(row.line(extras, threshold))
        n_rows += 1
        if row.rewards:
            task_means.setdefault(row.label, []).append(sum(row.rewards) / len(row.rewards))
        if state is not None:
            write_group(state, row)
    return n_rows, task_means


@dataclass
class RowPass:
    """What the pass that wrote the profile rows (of one run, or merged shards) leaves for the rest."""

    facts: Facts
    labels: LabelRows
    coverage: dict[str, dict[str, int]]  # per agent
    n_rows: int
    task_means: dict[Any, list[float]]  # each label's per-task mean rewards, in row order


def finish(
    out: dict[str, IO[bytes]],
    found: RowPass,
    options: ProfileOptions,
    sources: dict[str, Any],
    warnings: list[str],
    paths: dict[str, Path],
    *,
    totals: dict[str, Any] | None = None,
) -> ProfileResult:
    """The agent and repeat-level files and the summary, from the labelled rows and the facts; `totals`
    (`run_totals`: tokens and sampling) when the rollouts were read here, not merged from states."""
    facts, labels, coverage = found.facts, found.labels, found.coverage
    repeats, incomplete = repeat_level(labels)
    masked_agents = {name: entry for name, entry in coverage.items() if entry["coverage/masked_rollouts"]}
    agents = agent_metrics(labels, repeats, masked_agents)
    out["agent_metrics"].write(orjson.dumps(agents))
    out["repeat_level_metrics"].write(orjson.dumps(repeats))
    completion, per_agent = gym_completion(facts.accounting), agent_entries(facts.accounting)
    counts = counts_of(completion, per_agent)
    add_agent_means(per_agent, agents, found.task_means)
    warnings = [*warnings, *data_warnings(counts, completion, incomplete, facts, options)]
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
        **(totals or {}),
    }
    out["profile_summary"].write(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return ProfileResult(outputs, completion, counts, per_agent, found.n_rows, warnings)


def run_totals(stats: ReadStats) -> dict[str, Any] | None:
    """The rollout rows' token totals and sampling, for the summary; None when no file was read (merged
    shard states carry neither)."""
    if "rollouts" not in stats.paths:
        return None
    return {
        "tokens": {
            "rows": stats.usage.rows,
            **stats.usage.to_json(),
            "requests": stats.usage.requests,
            "one_request_per_rollout": stats.usage.one_request_per_rollout(),
        },
        "sampling": stats.sampling.to_json(),
    }


_TASK_KEYS = {
    "total": "total_input_rows",
    "complete": "complete_input_rows",
    "partial": "partial_input_rows",
    "dropped": "missing_input_rows",
}


def dataset_facts(data: Dataset, table: Table, alignment: Alignment) -> Facts:

    non_binary = False
    if "reward" in table.columns:
        for rewards in table.column_blocks(table.columns.index("reward")):
            # NaN (no reward) is neither 0 nor 1 but is not scored: leave it out
            non_binary = non_binary or bool(((rewards != 0) & (rewards != 1) & (rewards == rewards)).any())
    return Facts(
        account(data),
        alignment.missing_count,
        alignment.missing,
        non_binary,
        len(table),
        int((table.labels >= 0).sum()),
    )


def _shard_extra(data: Dataset, table: Table, coverage: list) -> dict[str, Any]:
    """What a merge needs of a shard beyond its facts (see `state`)."""
    import numpy as np

    from .state import progressions

    perm, starts = group_order(table)
    store = data.results
    lines = {  # what `write_exact` and `write_rows` write after the header
        "p": len(store.plans) - (LAST_MASKED_ID + 1),
        "i": len(data.inputs),
        "r": len(store),
        "s": len(data.samples),
        "g": len(starts) if len(table) else 0,
    }
    negative_zero = False
    for j in range(len(table.columns)):
        for column in table.column_blocks(j):
            negative_zero = negative_zero or bool((np.signbit(column) & (column == 0)).any())
    return {
        "coverage": [[name, *entry.values(), *first] for name, entry, first in coverage],
        "agent_by_key": list(table.agent_by_key.items()),
        "tasks": progressions(np.unique(numbers(data.inputs, "task"))),
        "uniform": median_shape(table, perm, starts),
        "negative_zero": negative_zero,
        "lines": lines,
    }


def refuse_oversize(table: Table) -> None:
    """A numeric rollout field beyond +-MAX_MAGNITUDE would make Gym's means and deviations inf or nan.
    Only floats can be that large (ints are int64), so the store's floats are scanned first; the table
    (row by row, as one matrix would be) only when one of them is."""
    import numpy as np

    floats = numbers(table.store, "floats", "float64")
    blocks = range(0, len(floats), _BLOCK)
    if not any((np.abs(floats[lo : lo + _BLOCK]) > MAX_MAGNITUDE).any() for lo in blocks):
        return
    for lo in range(0, len(table), _BLOCK):
        found = first_oversize(table.matrix(np.arange(lo, min(lo + _BLOCK, len(table)))))
        if found is None:
            continue
        row, column, value = found
        name = table.columns[column]
        raise FindingsError(
            f"rollout (task {int(table.tasks[lo + row])}, rollout {int(table.rollouts[lo + row])}) has "
            f"{name} = {value:g}: beyond +-{MAX_MAGNITUDE:g} the profile's sums and squares overflow float64",
            hint=f"rescale {name} (divide it by a constant) in the verifier; profile again",
        )


_BLOCK = 65536


def check_null_rewards(data: Dataset, options: ProfileOptions) -> None:
    import numpy as np

    if options.null_reward != "error":
        return
    store = data.results
    bad_plans = np.array([not p.masked and p.reward_state != "ok" for p in store.plans], dtype=bool)
    bad = np.nonzero(bad_plans[plan_ids(store)])[0]
    if len(bad):
        keys = sorted_keys(numbers(store, "task"), numbers(store, "rollout"), bad)
        raise FindingsError(
            f"{len(bad)} measured rollouts have a null, absent or non-numeric reward: {keys}",
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
