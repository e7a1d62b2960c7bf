"""`ngrp compare` as text: the paired difference, its tests and the flipped tasks (--json has all)."""

from __future__ import annotations

from ..numbers import interval, num, pval
from ..stats import methods
from ..stats.compare import CompareResult, TaskDiff
from ..stats.paired import IDENTICAL
from .stats_grpo_text import inspect_commands, task_words

MAX_FLIPS = 15
MAX_MOVED = 5  # tasks named per direction on the "moved most" lines


def render_compare(r: CompareResult) -> str:
    lines = [
        f"A: {r.path_a}",
        f"B: {r.path_b}",
        f"metric '{r.metric}', B - A over {r.n_tasks} paired tasks"
        + (
            f" ({r.n_dropped} dropped by --intersect: {r.n_only_a} only in A, {r.n_only_b} only in B)"
            if r.n_dropped
            else ""
        )
        + (f"; {r.n_undefined} tasks without a value excluded" if r.n_undefined else ""),
        f"  mean A {num(r.mean_a)}  mean B {num(r.mean_b)}  diff {num(r.mean_diff)}  se {num(r.se_diff)}",
        f"  95% paired {methods.label(r.ci_method)} {interval(r.ci_low, r.ci_high)}  p={pval(r.p_value_t)};  "
        f"95% paired {methods.label(r.boot_ci_method)} {interval(r.boot_ci_low, r.boot_ci_high)} "
        f"(B={r.n_bootstrap}, seed {r.seed})",
        f"  sign-flip permutation p={pval(r.p_value_permutation)} ({r.permutation_method}, "
        f"{r.n_permutations} sign patterns)",
        f"  minimum detectable effect (80% power, alpha {r.alpha}, from the {r.mde_basis}): "
        f"z {num(r.mde_80)}, t {num(r.mde_80_t)}; tasks needed for an effect of {num(r.effect)}: "
        f"{r.tasks_needed if r.tasks_needed is not None else 'n/a'}",
        f"  correlation of A's and B's per-task means: {num(r.correlation.value, 3)} "
        f"(n={r.correlation.n_tasks} tasks; pairing removes what they share)",
    ]
    if r.row_differences:
        lines.insert(2, f"rows: {r.row_differences['summary']}")
    if r.identical:
        lines.insert(2, f"finding: {IDENTICAL} ({r.identical.replace('_', ' ')})")
    if r.mcnemar:
        m = r.mcnemar
        lines.append(
            f"  McNemar (one rollout per task): A only {m.a_only_success}, B only {m.b_only_success},"
            f" exact p={pval(m.p_value)}"
        )
    if r.binary:
        lines.append(f"  tasks that flipped (Fisher exact per task, BH q < {r.alpha}): {r.n_flips}")
        for f in r.flips[:MAX_FLIPS]:
            agent = f" agent {f.agent}" if f.agent else ""
            lines.append(f"    task {f.task}{agent}: {f.a} -> {f.b}  q={pval(f.q_value)}")
    for name, curve in (("pass@k", r.pass_at_k), ("pass^k", r.pass_hat_k)):
        if curve:
            one = len({e.ci_method for e in curve}) == 1  # one method: said once, else at each k
            shown = ", ".join(
                f"k={e.k} {num(e.mean_diff, 3)} {'' if one else methods.tag(e.ci_method) + ' '}"
                f"{interval(e.ci_low, e.ci_high)} (n={e.n_tasks})"
                for e in curve
            )
            said = f" ({methods.tag(curve[0].ci_method)})" if one else ""
            lines.append(f"  {name} B - A, paired by task{said}: {shown}")
    for e in r.grpo_informative:
        lines.append(
            f"  GRPO-informative share at G={e.k} (P(a group of {e.k} holds a pass and a fail)): "
            f"A {num(e.mean_a, 3)}, B {num(e.mean_b, 3)}, B - A {num(e.mean_diff, 3)} "
            f"{interval(e.ci_low, e.ci_high)} ({methods.tag(e.ci_method)}, n={e.n_tasks} tasks"
            + (
                f"; {' and '.join(e.from_decisions)} by the adaptive run's decisions)"
                if e.from_decisions
                else ")"
            )
        )
    lines += [f"note: {n}" for n in r.notes if not n.startswith(IDENTICAL)]
    lines += moved_lines(r)
    lines.append(f"answer: {r.answer['text']}")
    return "\n".join(lines)


def moved_lines(r: CompareResult) -> list[str]:
    """The tasks that moved most, each way (on pass rates, shown as pass counts A -> B, when the metric is
    pass/fail; else on the task means), with their source lines, and the commands that show their
    rollouts: B's failures on the tasks B lowered, A's on those it raised, and both runs side by side in
    the viewer. "Which tasks did B hurt?" starts here (--json per_task[] has every task)."""
    import shlex

    if r.identical:
        return []
    moved = [(change, t) for t in r.per_task if (change := _change(t, r.binary))]
    if not moved:
        return []
    what = "pass counts A -> B" if r.binary else f"mean {r.metric} A -> B"
    lower = [t for _, t in sorted((m for m in moved if m[0] < 0), key=lambda m: (m[0], *_order(m[1])))]
    higher = [t for _, t in sorted((m for m in moved if m[0] > 0), key=lambda m: (-m[0], *_order(m[1])))]
    lines = [f"tasks that moved most ({what}; every task: --json per_task[]):"]
    for side, tasks in (("lower in B", lower), ("higher in B", higher)):
        if tasks:
            shown = ", ".join(f"{_task(t)} {_counts(t, r.binary)}" for t in tasks[:MAX_MOVED])
            more = f", and {len(tasks) - MAX_MOVED} more" if len(tasks) > MAX_MOVED else ""
            lines.append(f"  {side} ({len(tasks)}): {shown}{more}")
    failed = r.metric == "reward"  # inspect's --failed judges the reward
    at = r.pass_threshold if failed else None
    shows = "failures on" if failed else "rollouts of"
    for who, path, tasks, how in (
        ("B", r.rollouts_b, lower, "lowered"),
        ("A", r.rollouts_a, higher, "raised"),
    ):
        if not tasks:
            continue
        rows = [{"task": t.task, "agent": t.agent} for t in tasks[:MAX_MOVED]]
        label = f"{who}'s {shows} the tasks B {how}"
        for command in inspect_commands(path or f"{who}_ROLLOUTS.jsonl", rows, failed=failed, threshold=at):
            lines.append(f"  {label}: {command}" + ("" if path else _no_rollouts(who)))
    a, b = (
        shlex.quote(p) if p else f"{w}_ROLLOUTS.jsonl" for w, p in (("A", r.rollouts_a), ("B", r.rollouts_b))
    )
    lines.append(f"  A and B side by side, flipped tasks first: ngrp view {b} --compare {a}")
    return lines


def _change(t: TaskDiff, binary: bool) -> float:
    """B - A of the task's pass rate (pass/fail metrics: what the counts shown say), else of its mean; 0
    when it did not move or a run has no value."""
    if binary and t.successes_a is not None and t.successes_b is not None and t.n_a and t.n_b:
        return t.successes_b / t.n_b - t.successes_a / t.n_a
    return t.diff or 0.0


def _no_rollouts(who: str) -> str:
    return f" ({who}'s rollouts are not beside its profile: name them with --rollouts-{who.lower()})"


def _task(t: TaskDiff) -> str:
    """`task 25 (line 27)`, with the agent when the runs fan tasks out."""
    row = {"task": t.task, "source_lines": t.source_lines}
    return f"task {task_words(row)}" + (f" agent {t.agent}" if t.agent else "")


def _counts(t: TaskDiff, binary: bool) -> str:
    if binary:
        return f"{t.successes_a}/{t.n_a} -> {t.successes_b}/{t.n_b}"
    return f"{num(t.mean_a, 3)} -> {num(t.mean_b, 3)}"


def _order(t: TaskDiff) -> tuple:
    return (t.task, str(t.agent))
