"""`check` on an adaptive run (`collect --adaptive`): does each task's decision in the run manifest follow
the rule on the rewards stored now?

`curriculum`, `stats` and the report take a task's decision from the manifest's `adaptive.task_states`,
written when the collector's call ended. If the rollouts' rewards change afterwards (a hand edit, a file
put in its place, rewards re-scored in place), those decisions no longer follow from the rewards, and
nothing else says so. Here each task the manifest records as settled or reached_n has its rule replayed
(`stats.adaptive.replay`, the collector's own) on its stored outcomes (`outcome_of`, the collector's own),
and the decision and the repeats are compared with the manifest's. Tasks pending or out of attempts
have no decision to compare. A run a collector is writing now is not compared: its manifest is
rewritten only when the collector's call ends.

One streaming pass over the rollouts, made only for an adaptive run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import iter_parsed
from ..artifacts.names import rollout_key
from ..errors import NgrpError
from ..stats.adaptive import REACHED_N, SETTLED, Schedule, TaskState, outcome_of, parse_rule, replay
from ..stats.adaptive_run import AdaptiveRun
from .check_result import ERROR, EXAMPLES, Finding

COMPARED = (SETTLED, REACHED_N)  # the reasons that carry a decision
SHOWN = 3  # differing tasks the text names


@dataclass
class TaskDecision:
    reason: Any
    decision: Any
    repeats: Any


@dataclass
class Differing:
    task: int
    manifest: TaskDecision
    replayed: TaskDecision
    stored: int  # the task's rollouts in the file
    past_stop: int  # of them, how many have a rollout index at or past the replayed repeats

    def words(self) -> str:
        m, r = self.manifest, self.replayed
        replayed = (
            f"{r.decision} at {r.repeats}"
            if r.decision is not None
            else f"unsettled, its next round ending at repeat {r.repeats}"
        )
        return (
            f"task {self.task}: the manifest says {m.decision} at {m.repeats} repeats, the stored rewards"
            f" say {replayed} ({self.stored} stored)"
        )


@dataclass
class AdaptiveCheck:
    manifest: str
    rule: str
    schedule: str  # as collect's flags spell it: `--first-round 4`, `--rounds 1,1,2,4,8`
    pass_threshold: float
    compared: bool
    not_compared_because: str | None  # why nothing was compared (a live run, N unknown), else None
    tasks: int  # in the manifest's task_states
    tasks_compared: int = 0  # settled or reached_n
    agree: int = 0
    differ: int = 0
    not_compared: dict[str, int] = field(default_factory=dict)  # reason -> tasks (pending, out_of_attempts)
    decisions: dict[str, int] = field(default_factory=dict)  # the manifest's decisions of the tasks compared
    differing: list[Differing] = field(default_factory=list)  # the first EXAMPLES, by task index
    past_stop_tasks: int = 0  # differing tasks holding rollouts past where the rule now stops
    past_stop_rollouts: int = 0  # those rollouts (the collector refuses to resume with them)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["differing"] = [asdict(d) for d in self.differing]
        return out

    def line(self) -> str | None:
        """The text's line when nothing differs (a finding says it when something does)."""
        head = f"adaptive: {self.rule}, {self.schedule}: "
        if not self.compared:
            return head + f"the run's decisions are not compared: {self.not_compared_because}"
        if self.differ:
            return None
        decided = ", ".join(f"{n:,} {d.replace('_', ' ')}" for d, n in self.decisions.items())
        text = (
            f"the decisions of {self.tasks_compared:,} tasks, replayed from the stored rewards, agree with"
            f" the run's manifest ({decided or 'none'})"
        )
        return head + text + self._others()

    def _others(self) -> str:
        if not self.not_compared:
            return ""
        counts = ", ".join(f"{n:,} {reason.replace('_', ' ')}" for reason, n in self.not_compared.items())
        return f"; not compared, without a decision: {counts}"


def stored_outcomes(rollouts: Path, threshold: float, tasks: set[int]) -> dict[int, dict[int, bool | None]]:
    """Each stored rollout's outcome for the tasks asked about, by task and rollout index (a repeated key:
    its last row, as the collector reads it). Lines that are not rows are skipped: check counts them."""
    outcomes: dict[int, dict[int, bool | None]] = {task: {} for task in tasks}
    for _line, row in iter_parsed(rollouts):  # the fast reader: one orjson call a line, no Row objects
        if type(row) is not dict:
            continue
        key = rollout_key(row)
        if key is not None and key[0] in outcomes:
            outcomes[key[0]][key[1]] = outcome_of(row.get("reward"), threshold)
    return outcomes


def check_decisions(run: AdaptiveRun, rollouts: Path, live: bool) -> AdaptiveCheck:
    """Replay each decided task's rule on its stored rewards and compare with the manifest (`live`: a
    collector holds the run's lock; nothing is read or compared)."""
    states = run.decisions()
    result = AdaptiveCheck(
        manifest=run.manifest,
        rule=run.rule,
        schedule=run.schedule,
        pass_threshold=run.pass_threshold,
        compared=False,
        not_compared_because=None,
        tasks=len(states),
    )
    reasons = Counter(str(state.get("reason")) for state in states.values())
    result.not_compared = {r: n for r, n in sorted(reasons.items()) if r not in COMPARED}
    if live:
        result.not_compared_because = (
            "the run is in progress (its manifest records them when the collector's call ends)"
        )
        return result
    try:
        schedule = Schedule(run.first_round, run.num_repeats, run.later)
    except NgrpError:  # identity.materialize.num_repeats absent (it is checked when present)
        result.not_compared_because = f"{run.manifest} does not record identity.materialize.num_repeats"
        return result
    rule = parse_rule(run.rule)
    decided = {task: state for task, state in states.items() if state.get("reason") in COMPARED}
    outcomes = stored_outcomes(rollouts, run.pass_threshold, set(decided))
    result.compared, result.tasks_compared = True, len(decided)
    decisions: Counter = Counter()
    for task in sorted(decided):
        state = decided[task]
        decisions[str(state.get("decision"))] += 1
        replayed = replay(rule, schedule, outcomes[task])
        if (state.get("decision"), state.get("repeats")) == (replayed.decision, replayed.size):
            result.agree += 1
            continue
        result.differ += 1
        past = sum(1 for index in outcomes[task] if index >= replayed.size)
        result.past_stop_tasks += past > 0
        result.past_stop_rollouts += past
        if len(result.differing) < EXAMPLES:
            result.differing.append(_differing(task, state, replayed, len(outcomes[task]), past))
    result.decisions = dict(decisions.most_common())
    return result


def _differing(task: int, state: dict[str, Any], replayed: TaskState, stored: int, past: int) -> Differing:
    manifest = TaskDecision(state.get("reason"), state.get("decision"), state.get("repeats"))
    return Differing(
        task, manifest, TaskDecision(replayed.reason, replayed.decision, replayed.size), stored, past
    )


def decision_findings(check: AdaptiveCheck, resume: str) -> list[Finding]:
    """An error when some task's decision does not follow from its stored rewards; `resume` is the run's
    resume command (rebuilt from its manifest), which replays the rule on the files and rewrites the
    decisions."""
    if not check.differ:
        return []
    shown = "; ".join(d.words() for d in check.differing[:SHOWN])
    more = f"; and {check.differ - SHOWN} more" if check.differ > SHOWN else ""
    rule = f"{check.rule}, {check.schedule}, pass = reward >= {check.pass_threshold:g}"
    message = (
        f"{check.differ:,} of {check.tasks_compared:,} tasks' decisions in the run manifest do not follow"
        f" from the stored rewards ({rule}, replayed): {shown}{more}. The rewards changed after the run"
        " decided (edited, re-scored in place, or another rollouts file in its place), and curriculum and"
        " stats read these decisions"
    )
    keep = (
        f"{resume} (replays the rule on the stored rewards, collects the repeats it now asks for and"
        " rewrites the decisions)"
    )
    if check.past_stop_tasks:
        first = next((d for d in check.differing if d.past_stop), None)
        where = (
            "" if first is None else f"; task {first.task}: rollout indices {first.replayed.repeats} and up"
        )
        keep = (
            f"delete the {check.past_stop_rollouts} rollouts drawn past where the rule now stops"
            f" ({_tasks(check.past_stop_tasks)}{where}; the resume refuses them), then {keep}"
        )
    fix = f"if the stored rewards are not the run's, put back the rollouts it wrote; to keep them, {keep}"
    return [Finding("adaptive_decisions_differ", ERROR, check.differ, message, fix)]  # tasks: `adaptive`


def _tasks(n: int) -> str:
    return "1 task" if n == 1 else f"{n:,} tasks"
