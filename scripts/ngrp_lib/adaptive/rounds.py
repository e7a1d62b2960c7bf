"""`collect --adaptive RULE`: rounds of repeats, per task, driven from above the runner (`runner.collect`).

Every task gets R repeats; the rule (`stats.adaptive`) looks at a task's outcomes and gives an unsettled
task R more (or the schedule's next round: `--rounds 1,1,2,4,8`), up to N. Rounds are per task, not
barriers: the runner is called once with a follow-up
(`NextRounds`, the runner's `work.FollowUp`) that is told each rollout as it is written, replays that
task's rule on its outcomes so far, and answers the rows of the task's next round the moment its own
round is complete. The runner appends them to the materialized file in one write (the next
`_ng_rollout_index`; under the collector lock it holds) and queues them ahead of the file's rest, while
other tasks are still in earlier rounds. So a later round no longer waits for the slowest task of the
round before, and a server whose throughput grows with its batch keeps more in flight.

Until the call ends the materialized file holds the rounds in the order they began; then `advance`
(under the lock) rewrites it atomically in round order (every task's round 1, then round 2's rows...,
each round in the plan's order) and records the file's digest and every task's state in the manifest.
It does the same before a resumed call, which puts back a file a kill left mid-pipeline.

Nothing is remembered but the files: `advance` and the follow-up decide through the same replay
(`stats.adaptive.replay`) on the same outcomes, and a rollout is written before its task's next round is
appended, so a run killed anywhere and resumed makes the same decisions on the same rewards, and ends
with the same files, as a run never killed. The rows of later rounds come from expanding the tasks with
N repeats (the same expansion the first round's R repeats come from), so seeds and fields are those a
fixed-N run would send.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..artifacts import jsonl, names
from ..artifacts.names import ROLLOUT_KEY, TASK_KEY
from ..collect.materialize import expand, read_task_lines, sha256_file, task_source_lines
from ..collect.options import CollectOptions
from ..collect.result import CollectResult
from ..collect.run import stderr_log
from ..collect.runner import collect
from ..collect.state import CollectorLock, changed_fields, nothing_written
from ..errors import InputError, UsageError
from ..stats.adaptive import PENDING, SETTLED, Rule, Schedule, TaskState, outcome_of, replay

SUMMED = ("requests", "rollouts", "input_tokens", "cached_tokens", "output_tokens")
MANIFEST_KEY = "adaptive"  # the manifest block with the rounds' progress (the settings are in identity)


@dataclass(frozen=True)
class AdaptiveSettings:
    rule: Rule
    schedule: Schedule
    pass_threshold: float = 1.0
    # how the user gave the rounds (`rounds_text.rounds_option`): echoed as given, kept in the manifest's
    # progress block, not in the identity (`--rounds 2` and `--first-round 2` are one run to --resume)
    rounds_option: str | None = None

    def to_json(self) -> dict[str, Any]:
        """What --resume must find unchanged (the manifest's identity.adaptive; N is its
        identity.materialize.num_repeats, named as the option is)."""
        return {
            "rule": self.rule.spec,
            "interval": self.rule.interval,
            "first_round": self.schedule.first_round,
            "round_size": self.schedule.rounds[-1],  # the size that repeats
            "rounds": list(self.schedule.rounds),
            "pass_threshold": self.pass_threshold,
        }


@dataclass
class AdaptiveResult:
    """The last runner call's result (its counts cover the materialized file as it ends), the totals of
    every call, and the rounds' state."""

    collect: CollectResult
    runner_calls: int = 0
    succeeded: int = 0
    failed: int = 0
    elapsed_s: float = 0.0
    cost: dict[str, Any] = field(default_factory=dict)  # `SUMMED` cost fields over every runner call
    adaptive: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return self.collect.exit_code

    @property
    def next_step(self) -> str | None:
        return self.collect.next_step

    def to_json(self) -> dict[str, Any]:
        """The last runner call's fields (collect_result's shape) with the rounds under `adaptive`."""
        rounds = {k: v for k, v in self.adaptive.items() if k != "task_states"}
        totals = {
            "runner_calls": self.runner_calls,
            "succeeded_all_rounds": self.succeeded,
            "failed_all_rounds": self.failed,
            "elapsed_s_all_rounds": self.elapsed_s,
            "cost_all_rounds": self.cost,
        }
        return {**self.collect.to_json(), "adaptive": {**rounds, **totals}}


def round_options(options: CollectOptions, settings: AdaptiveSettings) -> CollectOptions:
    """The options the runner gets: the first round's expansion (R repeats) and the settings in identity."""
    if options.input is None:
        raise UsageError(
            "--adaptive needs --input (raw tasks): it grows the materialized file round by round",
            hint="give the tasks file instead of --materialized",
        )
    if options.materialize.num_repeats != settings.schedule.num_repeats:
        raise UsageError("--adaptive: --num-repeats and the schedule's N differ")  # a caller's mistake
    first = replace(options.materialize, num_repeats=settings.schedule.first_round, one_line_per_task=True)
    block = settings.to_json() | {"num_repeats": settings.schedule.num_repeats}
    return replace(options, materialize=first, adaptive=block)


def full_plan(options: CollectOptions, settings: AdaptiveSettings) -> list[dict]:
    """Every row a fixed-N run would send (this shard's), in Gym's order."""
    assert options.input is not None
    records = list(read_task_lines(options.input, options.materialize.limit))
    full = replace(options.materialize, num_repeats=settings.schedule.num_repeats, one_line_per_task=True)
    rows = expand(records, full, options.input)
    if options.shard is not None:
        rows = [r for r in rows if options.shard.owns(r[TASK_KEY])]
    per_task = Counter(r[TASK_KEY] for r in rows)
    other = sorted(t for t, n in per_task.items() if n != settings.schedule.num_repeats)
    if other:  # byte-identical lines are one task (one_line_per_task): only a fan-out gets here
        raise UsageError(
            f"--adaptive: task {other[0]} has {per_task[other[0]]} rows, not --num-repeats"
            f" {settings.schedule.num_repeats} (one row per repeat and agent)",
            hint="collect one agent per run with --adaptive",
        )
    return rows


def identical_lines(options: CollectOptions) -> dict[int, list[int]]:
    """The tasks (this shard's) that several byte-identical lines share, with their line numbers: each
    is one task under --adaptive, sampled once (its first line's rows)."""
    assert options.input is not None
    records = read_task_lines(options.input, options.materialize.limit)
    lines = task_source_lines(records, options.input)
    shard = options.shard
    return {t: n for t, n in lines.items() if len(n) > 1 and (shard is None or shard.owns(t))}


async def collect_adaptive(
    options: CollectOptions,
    settings: AdaptiveSettings,
    session: Any,
    log: Callable[[str], None] = stderr_log,
    interrupt: Any = None,
) -> AdaptiveResult:
    """One runner call in which every task runs its rounds as its own outcomes arrive (`NextRounds`);
    then the files are put in their final order (`advance`). Another call follows only for tasks a failed
    attempt held back, and only while a call completes rollouts and the run was neither stopped nor
    interrupted (a key past --max-attempts holds its task no more: it is out of attempts)."""
    runner_options = round_options(options, settings)
    plan = full_plan(options, settings)
    shared = identical_lines(options)
    if shared:
        log(
            f"{len(shared)} tasks have several identical lines in {options.input} (Gym gives them one"
            " index): each is one task, sampled once, its rule on one sequence of outcomes"
        )
    resume_options = replace(runner_options, resume=True, overwrite=False)
    if not options.resume or nothing_written(options.output, options.failures_path):
        # round 1 through the runner's fresh path: staging, pre-flight, manifest
        first = NextRounds.start(plan, settings, task_states(plan, settings, {}, {}), {}, {})
        result = _add(None, await collect(runner_options, session, log, interrupt, first))
    else:
        _, follow_up = advance(resume_options, settings, plan)
        result = _add(None, await collect(resume_options, session, log, interrupt, follow_up))
    while True:
        summary, follow_up = advance(resume_options, settings, plan)
        result.adaptive = summary
        call = result.collect
        held = summary["tasks_by_reason"].get(PENDING, 0)
        if not held or call.stopped_early or call.interrupted or not call.succeeded:
            return result
        log(f"{held} tasks wait on a failed attempt: another pass for them")
        result = _add(result, await collect(resume_options, session, log, interrupt, follow_up))


@dataclass
class NextRounds:
    """The runner's follow-up (`collect.work.FollowUp`): told each rollout as it is written, it replays
    that task's rule on the task's outcomes so far and answers the rows of the task's next round the
    moment its own round is complete, while other tasks are still in earlier rounds. It decides as
    `advance` does on the same files (the same `replay`), so a run killed anywhere and resumed gives
    every task the same repeats."""

    settings: AdaptiveSettings
    rows_of: dict[int, dict[int, dict]]  # task -> rollout index -> its row in the fixed-N plan
    outcomes: dict[int, dict[int, bool | None]]
    spent: dict[int, set[int]]  # per task: indices out of attempts when the call began
    sizes: dict[int, int]  # per task: repeats in the materialized file

    @classmethod
    def start(
        cls,
        plan: list[dict],
        settings: AdaptiveSettings,
        states: dict[int, TaskState],
        outcomes: dict[int, dict[int, bool | None]],
        spent: dict[int, set[int]],
    ) -> NextRounds:
        rows_of: dict[int, dict[int, dict]] = defaultdict(dict)
        for row in plan:
            rows_of[row[TASK_KEY]][row[ROLLOUT_KEY]] = row
        sizes = {task: state.size for task, state in states.items()}
        return cls(settings, rows_of, {t: dict(o) for t, o in outcomes.items()}, spent, sizes)

    def __call__(self, row: dict, reward: Any) -> list[dict]:
        key = names.rollout_key(row)
        if key is None or key[0] not in self.sizes:
            return []
        task, index = key
        self.outcomes.setdefault(task, {})[index] = outcome_of(reward, self.settings.pass_threshold)
        size = self.sizes[task]
        state = replay(
            self.settings.rule, self.settings.schedule, self.outcomes[task], self.spent.get(task, set())
        )
        if state.size <= size:
            return []
        self.sizes[task] = state.size
        return [self.rows_of[task][i] for i in range(size, state.size)]


def _add(total: AdaptiveResult | None, call: CollectResult) -> AdaptiveResult:
    total = total or AdaptiveResult(collect=call)
    total.collect = call
    total.runner_calls += 1
    total.succeeded += call.succeeded
    total.failed += call.failed
    total.elapsed_s = round(total.elapsed_s + call.elapsed_s, 3)
    cost = getattr(call, "cost", {})
    if "input_unit" in cost:
        total.cost["input_unit"] = cost["input_unit"]  # each call's input is per rollout
    for name in SUMMED:  # a count no call reported stays None ("not reported", never 0)
        value = cost.get(name)
        if value is not None:
            total.cost[name] = total.cost.get(name, 0) + value
    return total


def advance(
    options: CollectOptions, settings: AdaptiveSettings, plan: list[dict]
) -> tuple[dict[str, Any], NextRounds]:
    """Under the collector lock: replay the rule on the files, rewrite the materialized file with every
    task's assigned repeats in round order (atomically; rows a pipelined call appended in the order their
    rounds began are put in place) and record the state in the manifest. Returns the manifest's progress
    block and the follow-up that goes on from this state."""
    with CollectorLock(options.output):
        manifest = _checked_manifest(options)
        outcomes, attempts = read_outcomes(options, settings.pass_threshold)
        spent = spent_indices(outcomes, attempts, options.max_attempts)
        states = task_states(plan, settings, outcomes, spent)
        refuse_past_stop(options, states, outcomes)
        rows = assigned_rows(plan, states, settings.schedule)
        jsonl.write_jsonl(options.materialized_path, rows, overwrite=True)
        sha = sha256_file(options.materialized_path)
        summary = summarize(states, settings) | {"identical_lines": _lines_json(identical_lines(options))}
        manifest["identity"]["materialized_sha256"] = sha
        manifest["materialized"].update(sha256=sha, rows=len(rows))
        manifest[MANIFEST_KEY] = summary
        jsonl.write_json(options.manifest_path, manifest, overwrite=True, indent=True)
    return summary, NextRounds.start(plan, settings, states, outcomes, spent)


def refuse_past_stop(
    options: CollectOptions, states: dict[int, TaskState], outcomes: dict[int, dict[int, bool | None]]
) -> None:
    """Refuse, before any file is rewritten, rollouts past where the rule stops on the stored rewards: the
    collector never draws them, so their task's rewards changed after they were drawn (edited, re-scored
    in place, another file). Kept, they would have no row in the rewritten materialized file."""
    past = {
        task: sorted(i for i in stored if i >= states[task].size)
        for task, stored in outcomes.items()
        if task in states and any(i >= states[task].size for i in stored)
    }
    if not past:
        return
    task, indices = min(past.items())
    raise InputError(
        f"{len(past)} tasks hold rollouts past where the rule stops on their stored rewards (task {task}:"
        f" rollout indices {', '.join(map(str, indices[:5]))}{' ...' if len(indices) > 5 else ''}; the"
        f" rule stops it at {states[task].size} repeats): their rewards changed after those were drawn",
        path=options.output,
        hint="put back the rollouts the run wrote, or delete those rows to keep these rewards;"
        f" ngrp check --inputs {options.materialized_path} --rollouts {options.output} names the tasks",
    )


def _lines_json(lines: dict[int, list[int]]) -> dict[str, list[int]]:
    return {str(task): numbers for task, numbers in sorted(lines.items())}


def _checked_manifest(options: CollectOptions) -> dict[str, Any]:
    """The run's manifest, refused (naming each field) when the run was not started with these settings.
    The materialized file's digest is left out: this layer is what changes it."""
    if not options.manifest_path.is_file():
        raise UsageError(
            f"cannot resume: {options.manifest_path} is missing, so the earlier run's configuration is"
            " unknown",
            hint="start over with --overwrite (earlier rollouts are discarded)",
        )
    manifest = jsonl.read_json(options.manifest_path)
    old = manifest.get("identity") if isinstance(manifest, dict) else None
    if not isinstance(old, dict) or not isinstance(manifest.get("materialized"), dict):
        raise UsageError(f"cannot resume: {options.manifest_path} is not an ngrp collect manifest")
    block = old.get("adaptive")
    if isinstance(block, dict) and "rounds" not in block:  # begun before --rounds: rounds of first_round
        block["rounds"] = [block.get("first_round")]  # the manifest advance writes back carries it
    input_sha = sha256_file(options.input) if options.input is not None else None
    changes = changed_fields(old, options.identity(input_sha, old.get("materialized_sha256", "")))
    if changes:
        raise UsageError(
            "refusing to resume: the configuration changed since this run started\n  " + "\n  ".join(changes),
            hint="rerun with the original options, or start over with --overwrite (or a new --output)",
        )
    return manifest


def read_outcomes(
    options: CollectOptions, threshold: float
) -> tuple[dict[int, dict[int, bool | None]], Counter]:
    """Each completed key's outcome (reward >= threshold; None without a finite reward) and each key's
    failed attempts. A torn last line (a kill mid-write) is cut first, as the runner does."""
    outcomes: dict[int, dict[int, bool | None]] = defaultdict(dict)
    attempts: Counter = Counter()
    for path in (options.output, options.failures_path):
        if path.exists():
            jsonl.repair_tail(path)
    if options.output.exists():
        for row in jsonl.iter_rows(options.output):
            key = names.rollout_key(row.data)
            if key is not None:
                outcomes[key[0]][key[1]] = outcome_of(row.data.get("reward"), threshold)
    if options.failures_path.exists():
        for row in jsonl.iter_rows(options.failures_path):
            key = names.rollout_key(row.data)
            if key is not None:
                attempts[key] += 1
    return outcomes, attempts


def spent_indices(
    outcomes: dict[int, dict[int, bool | None]], attempts: Counter, max_attempts: int
) -> dict[int, set[int]]:
    """Per task: the rollout indices that used up --max-attempts without completing."""
    spent: dict[int, set[int]] = defaultdict(set)
    for (task, index), n in attempts.items():
        if n >= max_attempts and index not in outcomes.get(task, {}):
            spent[task].add(index)
    return spent


def task_states(
    plan: list[dict],
    settings: AdaptiveSettings,
    outcomes: dict[int, dict[int, bool | None]],
    spent: dict[int, set[int]],
) -> dict[int, TaskState]:
    states: dict[int, TaskState] = {}
    for task in dict.fromkeys(r[TASK_KEY] for r in plan):
        states[task] = replay(
            settings.rule, settings.schedule, outcomes.get(task, {}), spent.get(task, set())
        )
    return states


def assigned_rows(plan: list[dict], states: dict[int, TaskState], schedule: Schedule) -> list[dict]:
    """The rows every task has been given, round by round (a later round's rows after every earlier
    round's), each round in the plan's order: the canonical order of a finished run's file."""
    chosen = [
        (schedule.round_of(row[ROLLOUT_KEY]), position, row)
        for position, row in enumerate(plan)
        if row[ROLLOUT_KEY] < states[row[TASK_KEY]].size
    ]
    chosen.sort(key=lambda item: (item[0], item[1]))
    return [row for _, _, row in chosen]


def summarize(states: dict[int, TaskState], settings: AdaptiveSettings) -> dict[str, Any]:
    """The manifest's progress block: rounds, each task's stop reason, rollouts against fixed N."""
    schedule = settings.schedule
    reasons = Counter(s.reason for s in states.values())
    pending_rounds = [s.rounds for s in states.values() if s.reason == PENDING]
    started = max((s.rounds for s in states.values()), default=0)
    settled = Counter(s.rounds for s in states.values() if s.reason == SETTLED)
    assigned = sum(s.size for s in states.values())
    return {
        **settings.to_json(),
        "rounds_option": settings.rounds_option,
        "num_repeats": schedule.num_repeats,
        "rounds_done": (min(pending_rounds) - 1) if pending_rounds else started,
        "rounds_started": started,
        "max_rounds": schedule.max_rounds,
        "tasks": len(states),
        "tasks_by_reason": dict(sorted(reasons.items())),
        "settled_per_round": {str(r): settled[r] for r in range(1, schedule.max_rounds + 1)},
        "rollouts_assigned": assigned,
        "rollouts_fixed_n": len(states) * schedule.num_repeats,
        "task_states": {
            str(task): {"repeats": s.size, "reason": s.reason, "decision": s.decision}
            for task, s in states.items()
        },
    }
