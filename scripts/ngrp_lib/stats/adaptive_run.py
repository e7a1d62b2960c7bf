"""An adaptive run (`collect --adaptive`) seen from its profile: its settings and each task's decision (from
the run manifest beside its rollouts), and the first-round view of the profile.

Why the first round: when a task's repeats depend on its own outcomes, its pass rate over all its repeats
is not an unbiased estimate, and neither is a mean of such rates over tasks (a task that stopped at its
first fail weighs that fail more). The first round gave every task the same R repeats whatever happened:
a fixed design, so benchmark-level estimates and intervals stand on it alone. Per-task decisions use every
repeat: that is what the extra rounds were for.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artifacts import names
from ..artifacts.manifest import manifest_and_problem
from ..artifacts.rounds_text import NOT_RECORDED, rounds_words
from ..errors import InputError, NgrpError
from .adaptive import FAILED, PENDING, REACHED_N, SETTLED, Schedule, fixed_draws, parse_rule
from .load import ProfileData
from .rows import RowRule

REASONS = (SETTLED, REACHED_N, FAILED, PENDING)  # a task's `reason` in the manifest's task_states
FIRST_ROUND_NOTE = (
    "adaptive run ({rule}, {schedule}, at most N={n}): benchmark-level estimates and intervals use"
    " the fixed design alone: the first {fixed} repeats of every task, which every task got whatever its"
    " outcomes (later rounds went only to tasks the rule had not settled, so means over all repeats are"
    " biased); per-task rows and decisions use every repeat"
)


@dataclass
class AdaptiveRun:
    manifest: str
    rule: str
    first_round: int
    num_repeats: int
    progress: dict[str, Any] = field(default_factory=dict)  # the manifest's `adaptive` block
    later: tuple[int, ...] = ()  # the sizes of the rounds after the first (`--rounds`), the last repeating
    pass_threshold: float = 1.0  # a pass is reward >= this (`--pass-threshold`)

    @functools.cached_property
    def fixed(self) -> int:
        """The repeats every task got whatever its outcomes (`adaptive.fixed_draws`): what the statistics
        use. The first round when N is not known."""
        if self.num_repeats < self.first_round:
            return self.first_round
        return fixed_draws(parse_rule(self.rule), Schedule(self.first_round, self.num_repeats, self.later))

    def decisions(self) -> dict[int, dict[str, Any]]:
        """Task index -> {repeats, reason, decision}, as the run last recorded them."""
        states = self.progress.get("task_states") or {}
        return {int(task): state for task, state in states.items() if isinstance(state, dict)}

    def kept(self) -> dict[str, Any] | None:
        """The tasks the run's rule keeps, by its decisions on every repeat (`kept_decision`): the decision
        and how many tasks took it so far; None for a rule that keeps none (`width` measures)."""
        decision = kept_decision(self.rule)
        if decision is None:
            return None
        states = self.decisions().values()
        return {"decision": decision, "n_tasks": sum(s.get("decision") == decision for s in states)}

    def note(self) -> str:
        return FIRST_ROUND_NOTE.format(
            rule=self.rule, schedule=self.schedule, n=self.num_repeats, fixed=self.fixed
        )

    @property
    def schedule(self) -> str:
        """The rounds as the user gave them to collect (the manifest's `adaptive.rounds_option`):
        `--rounds 2` stays `--rounds 2`; `rounds of 4, the default`; `--rounds 1,1,2,4,8` (`--first-round
        4`) when an older manifest does not say."""
        return rounds_words((self.first_round, *self.later), self.progress.get("rounds_option", NOT_RECORDED))

    def summary(self) -> dict[str, Any]:
        """What stats, compare and the report print: rounds, tasks settled per round, rollouts saved."""
        p = self.progress
        assigned, fixed = p.get("rollouts_assigned"), p.get("rollouts_fixed_n")
        decisions = Counter(str(s.get("decision")) for s in self.decisions().values())
        return {
            "manifest": self.manifest,
            "rule": self.rule,
            "first_round": self.first_round,
            "rounds": [self.first_round, *self.later],
            "schedule": self.schedule,
            "num_repeats": self.num_repeats,
            "rounds_done": p.get("rounds_done"),
            "max_rounds": p.get("max_rounds"),
            "settled_per_round": p.get("settled_per_round") or {},
            "tasks_by_reason": p.get("tasks_by_reason") or {},
            "decisions": dict(sorted(decisions.items())),
            "rollouts_assigned": assigned,
            "rollouts_fixed_n": fixed,
            "rollouts_saved_share": None if not fixed or assigned is None else 1 - assigned / fixed,
            "estimates_from": f"fixed design ({self.fixed} repeats of every task)",
            "fixed_repeats": self.fixed,
        }


def find_adaptive(profile: Path | str | None, rollouts: Path | str | None = None) -> AdaptiveRun | None:
    """The adaptive run behind a profile, from the manifest beside its rollouts (`rollouts`, else the
    rollouts file the profile is named after); None for a fixed-N run or when no manifest is there."""
    source = Path(rollouts) if rollouts is not None else None
    if source is None and profile is not None:
        source = names.rollouts_path_of_profile(profile)
    if source is None:
        return None
    manifest, problem = manifest_and_problem(source)
    path = names.manifest_path_for(source)
    if problem is not None:
        raise InputError(
            f"the run manifest beside {source} cannot be read ({problem}): whether the run is adaptive"
            " (its estimates then use the first round alone) is unknown",
            path=path,
            hint="put back the manifest collect wrote, or move it aside if the run is not adaptive",
        )
    return adaptive_in(manifest, path)


def adaptive_in(manifest: dict[str, Any] | None, path: Path | str) -> AdaptiveRun | None:
    """The adaptive run a run manifest already read (`manifest_beside`) describes; None for a fixed-N run
    or no manifest. `path` is the manifest's, named in the InputError a malformed adaptive block raises."""
    if manifest is None:
        return None
    path = Path(path)
    identity = manifest.get("identity")
    if not isinstance(identity, dict) or not isinstance(identity.get("adaptive"), dict):
        return None
    block: dict[str, Any] = identity["adaptive"]
    materialize = identity.get("materialize")
    if materialize is not None and not isinstance(materialize, dict):
        raise InputError(f"identity.materialize is {_shown(materialize)}, not an object", path=path)
    repeats = (materialize or {}).get("num_repeats")
    found = manifest.get("adaptive")
    progress: dict[str, Any] = found if isinstance(found, dict) else {}
    _check_block(path, block, repeats, progress)
    later = tuple(block.get("rounds") or (None,))[1:]  # a run begun before --rounds: rounds of R
    threshold = float(block.get("pass_threshold", 1.0))
    return AdaptiveRun(
        str(path), str(block["rule"]), block["first_round"], repeats or 0, progress, later, threshold
    )


def _check_block(path: Path, block: dict[str, Any], repeats: Any, progress: dict[str, Any]) -> None:
    """What the readers rely on, as collect writes it: an InputError naming the manifest otherwise."""
    try:
        parse_rule(str(block.get("rule")))
    except NgrpError:
        raise InputError(f"identity.adaptive.rule {block.get('rule')!r} is not a rule", path=path) from None
    first = block.get("first_round")
    if type(first) is not int or first < 1:
        raise InputError(f"identity.adaptive.first_round is {first!r}, not a positive integer", path=path)
    rounds = block.get("rounds")
    if rounds is not None and not (
        isinstance(rounds, list)
        and rounds
        and rounds[0] == first
        and all(type(s) is int and s >= 1 for s in rounds)
    ):
        raise InputError(
            f"identity.adaptive.rounds is {rounds!r}, not sizes that begin with first_round", path=path
        )
    threshold = block.get("pass_threshold", 1.0)
    if type(threshold) not in (int, float) or not math.isfinite(threshold):
        raise InputError(f"identity.adaptive.pass_threshold is {threshold!r}, not a finite number", path=path)
    if repeats is not None and (type(repeats) is not int or repeats < 1):
        raise InputError(
            f"identity.materialize.num_repeats is {repeats!r}, not a positive integer", path=path
        )
    if type(repeats) is int and type(first) is int and repeats < first:
        raise InputError(
            f"identity.materialize.num_repeats is {repeats}, less than identity.adaptive.first_round"
            f" ({first})",
            path=path,
        )
    _check_progress(path, progress)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_progress(path: Path, progress: dict[str, Any]) -> None:
    """The manifest's `adaptive` block as the readers use it (each task's decision, the summary's counts):
    absent or null keys are allowed (an older manifest), a value of another shape is an InputError."""
    for key in ("tasks_by_reason", "settled_per_round", "task_states"):
        value = progress.get(key)
        if value is not None and not isinstance(value, dict):
            raise InputError(f"adaptive.{key} is {_shown(value)}, not an object", path=path)
    for key in ("rollouts_assigned", "rollouts_fixed_n", "rounds_done", "max_rounds"):
        value = progress.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise InputError(f"adaptive.{key} is {_shown(value)}, not a count", path=path)
    for task, state in (progress.get("task_states") or {}).items():
        where = f"adaptive.task_states.{task}"
        if not (type(task) is str and task.isascii() and task.isdigit()):
            raise InputError(f"adaptive.task_states has the key {_shown(task)}, not a task index", path=path)
        if not isinstance(state, dict):
            raise InputError(f"{where} is {_shown(state)}, not an object", path=path)
        reason, repeats, decision = state.get("reason"), state.get("repeats"), state.get("decision")
        if reason not in REASONS:
            known = ", ".join(REASONS)
            raise InputError(f"{where}.reason is {_shown(reason)}, not one of {known}", path=path)
        if type(repeats) is not int or repeats < 0:
            raise InputError(f"{where}.repeats is {_shown(repeats)}, not a count", path=path)
        if decision is not None and type(decision) is not str:
            raise InputError(f"{where}.decision is {_shown(decision)}, not text or null", path=path)


def first_round_view(data: ProfileData, first_round: int) -> ProfileData:
    """The profile with only each task's first `first_round` repeats (rollout index < R), packed left."""
    import numpy as np

    keep = RowRule(first_round).counted_indices(data.rollout_index)  # the one rule (`stats.rows`)
    order = np.argsort(~keep, axis=1, kind="stable")  # kept entries first, in their order
    width = int(keep.sum(axis=1).max()) if keep.size else 0
    kept = np.take_along_axis(keep, order, axis=1)[:, :width]

    def take(matrix: Any, fill: Any) -> Any:
        moved = np.take_along_axis(matrix, order, axis=1)[:, :width]
        return np.where(kept, moved, fill)

    extras = {
        name: take(value, None if value.dtype == object else np.nan)
        if getattr(value, "shape", None) == data.rollout_index.shape
        else value
        for name, value in data.extras.items()
    }
    return ProfileData(
        path=data.path,
        keys=list(data.keys),
        samples=list(data.samples),
        rollout_index=take(data.rollout_index, -1),
        values={name: take(matrix, np.nan) for name, matrix in data.values.items()},
        n_rows_measured=int(kept.sum()),
        extras=extras,
        n_unhealthy=data.n_unhealthy,
    )


def first_rounds(
    sides: dict[str, tuple[Path, ProfileData]],
) -> tuple[ProfileData, ProfileData, dict, dict[str, AdaptiveRun]]:
    """`compare`'s rule: each adaptive side is cut to its first round (a fixed design: R repeats of every
    task whatever happened); a fixed-N side is used whole. Paired differences then compare unbiased
    per-task estimates on both sides (a fixed side's N repeats are unbiased too, only more of them).
    Returns both sides' data, each adaptive side's summary and its run, by label."""
    out: list[ProfileData] = []
    runs: dict[str, Any] = {}
    found: dict[str, AdaptiveRun] = {}
    for label, (path, data) in sides.items():
        run = find_adaptive(path)
        if run is not None:
            data = first_round_view(data, run.fixed)
            runs[label], found[label] = run.summary(), run
        out.append(data)
    return out[0], out[1], runs, found


def adaptive_note(runs: dict[str, Any]) -> str | None:
    if not runs:
        return None
    sides = "; ".join(
        f"{label}: {r['rule']}, {r['schedule']}, fixed {r['fixed_repeats']}" for label, r in runs.items()
    )
    fixed = [label for label in ("A", "B") if label not in runs]
    rest = f"; {fixed[0]} is a fixed-N run, used whole" if fixed else ""
    return (
        f"adaptive run(s) ({sides}): each adaptive side is compared on its first round only (R repeats of"
        f" every task, a fixed design; later rounds depend on the outcomes and would bias the task"
        f" means){rest}"
    )


def decided_informative(run: AdaptiveRun, tasks: list[int]) -> Any:
    """Per task (in `tasks` order) the `learnable` run's estimate of P(a group of N is informative) from its
    decisions: 1 for a task settled mixed (its N draws would have mixed), 0 for one that ran to N without
    mixing, NaN for one not decided; fixed N's own unbiased estimate on the same draws. None when the run
    does not answer it: another rule, or a first round of N already (its rollouts give it)."""
    import numpy as np

    if kept_decision(run.rule) != "mixed" or run.fixed >= run.num_repeats:
        return None
    decisions = run.decisions()
    ones = {"mixed": 1.0, "all_fail": 0.0, "all_pass": 0.0}
    return np.array([ones.get(str(decisions.get(t, {}).get("decision")), np.nan) for t in tasks], dtype=float)


def kept_decision(rule: str) -> str | None:
    """The decision of the tasks a rule's run keeps: `mixed` for learnable (a pass and a fail, the tasks
    curriculum --learnable-for G keeps: GRPO-informative), `inside` for band:LOW,HIGH (curriculum --min LOW
    --max HIGH with that band); None for width:W, which measures and keeps none."""
    kind = parse_rule(rule).kind
    return "mixed" if kind == "learnable" else "inside" if kind == "band" else None


def decision_selector(run: AdaptiveRun, selection: Any) -> Callable[[int], bool | None] | None:
    """`curriculum`'s rule for an adaptive run: when the run's rule answers the selection's question, keep
    a task by its decision, made on every repeat (None for a task still pending or out of attempts):
    - `--learnable-for G` on a `learnable` run: the tasks found mixed (a pass and a fail), the keep/drop
      decision fixed N makes; --min-informative is not applied (a task stopped at its first mix);
    - `--min LOW --max HIGH` on a `band:LOW,HIGH` run with the same band: the tasks decided `inside`.
    Otherwise None: rates over all repeats decide, which the result flags as biased."""
    decisions = run.decisions()
    kept, wanted = kept_decision(run.rule), None
    if selection.mode == "learnable" and kept == "mixed":
        wanted = "mixed"
    elif selection.mode == "band" and kept == "inside":
        band = parse_rule(run.rule)  # band:LOW,HIGH or band:LOW,HIGH,RISK
        chosen = (selection.min_rate or 0.0, 1.0 if selection.max_rate is None else selection.max_rate)
        wanted = "inside" if (band.low, band.high) == chosen else None
    if wanted is None:
        return None

    def keep(task: int) -> bool | None:
        decision = decisions.get(task, {}).get("decision")
        return None if decision is None else decision == wanted

    return keep


def adaptive_basis(selector: Any) -> str:
    if selector is not None:
        return "the run's per-task decisions (every repeat)"
    return (
        "pass rates over all repeats: the run's rule does not answer this selection, and an adaptive run's"
        " rates are biased (a task's repeats depended on its outcomes); a fixed-N run, or --adaptive with"
        " the matching rule, answers it without bias"
    )


def rule_of(
    profile: Path | str | None = None,
    rollouts: Path | str | None = None,
    exclude_unhealthy: Path | str | None = None,
) -> RowRule:
    """The rule for a run: its adaptive first round when a manifest beside its rollouts says so, and the
    unhealthy rollouts of `exclude_unhealthy` (a verdicts file) left out."""
    from ..artifacts.verdicts import load_unhealthy

    run = find_adaptive(profile, rollouts)
    excluded = (
        frozenset(load_unhealthy(exclude_unhealthy).keys) if exclude_unhealthy is not None else frozenset()
    )
    return RowRule(None if run is None else run.fixed, excluded)
