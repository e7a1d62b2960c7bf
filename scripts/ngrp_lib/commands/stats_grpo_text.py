"""`ngrp stats` per-task lines: the tasks with the lowest pass rate (ties named, with the command that shows
their rollouts), and with `--group-size G` the tasks that give GRPO no learning signal at G, by id and prompt.

A group of G rollouts of one task teaches nothing when every reward in it is the same (no advantage). A
task whose P(group informative) at G is below one half does so in most groups: every all-fail and
all-pass task, and mixed tasks that are nearly always solved or nearly never. The rule is curriculum's
`--learnable-for G`, so the list here is what that command would drop.
"""

from __future__ import annotations

from typing import Any

from ..numbers import num

LEARNABLE = 0.5  # curriculum --learnable-for keeps tasks with P(informative) >= this
MAX_LISTED = 20
MAX_LOWEST = 5  # tasks named on the lowest-pass-rate line (all of them tie)


def lowest_task_lines(result: Any) -> list[str]:
    """The tasks at the lowest pass rate (mean reward when rewards are not pass/fail): every tie, up to
    MAX_LOWEST, the next rate's tasks, and the inspect command that shows why they fail. "Why does the
    worst task fail" starts here."""
    rows = [r for r in result.per_task if r.get("n")]
    if len(rows) < 2:
        return []
    key, what = ("pass_rate", "pass rate") if "successes" in rows[0] else ("mean_reward", "mean reward")
    rows = [r for r in rows if isinstance(r.get(key), (int, float)) and r[key] == r[key]]  # NaN: no rate
    rates = sorted({r[key] for r in rows})
    if len(rows) < 2:
        return []
    at = [sorted((r for r in rows if r[key] == rate), key=_task_order) for rate in rates[:2]]
    tie = f" ({len(at[0])} tied)" if len(at[0]) > 1 else ""
    lines = [f"lowest {what}: {num(rates[0], 3)}{tie}, of {len(rows)} tasks"]
    for r in at[0][:MAX_LOWEST]:
        prompt = " ".join(str(r.get("prompt", "")).split())
        agent = f" agent {r['agent']}" if r.get("agent") else ""
        lines.append(f'  task {task_words(r)}{agent}: {_score(r)}  "{prompt}"')
    if len(at[0]) > MAX_LOWEST:
        lines.append(f"  ... and {len(at[0]) - MAX_LOWEST} more (--json: per_task[])")
    if len(at) > 1:
        named = ", ".join(f"task {task_words(r)} {_score(r, short=True)}" for r in at[1][:MAX_LOWEST])
        more = f" and {len(at[1]) - MAX_LOWEST} more" if len(at[1]) > MAX_LOWEST else ""
        lines.append(f"  next lowest: {named}{more}")
    if result.rollouts:
        lines += _inspect_lines(result, at[0][:MAX_LOWEST])
    return lines


def _inspect_lines(result: Any, rows: list[dict]) -> list[str]:
    """`ngrp inspect` commands that show the failed rollouts of exactly these tasks, as stats counted them:
    one per agent (a task index names one task per agent), at stats' pass threshold."""
    threshold = (getattr(result, "settings", None) or {}).get("pass_threshold")
    return [
        f"  why they fail: {command}"
        for command in inspect_commands(result.rollouts, rows, failed=True, threshold=threshold)
    ]


def inspect_commands(
    rollouts: str, rows: list[dict], *, failed: bool = False, threshold: float | None = None
) -> list[str]:
    """`ngrp inspect ROLLOUTS [--agent A] --task N ...` showing exactly these tasks' rollouts: one command per
    agent (a task index names one task per agent); with `failed` only the failed ones, at `threshold`
    (None: inspect's default, 1.0). `rows` hold `task` and `agent`; the path is quoted for a shell."""
    import shlex

    at = "" if threshold is None or not failed else f" --pass-threshold {threshold}"
    by_agent: dict[str, list[dict]] = {}
    for r in rows:
        by_agent.setdefault(r.get("agent") or "", []).append(r)
    out = []
    for agent in sorted(by_agent):
        tasks = " ".join(f"--task {r['task']}" for r in by_agent[agent])
        only = f" --agent {shlex.quote(agent)}" if agent else ""
        out.append(
            f"ngrp inspect {shlex.quote(rollouts)}{only} {tasks}" + (" --failed" if failed else "") + at
        )
    return out


def _score(row: dict, short: bool = False) -> str:
    if "successes" in row:
        return f"{row['successes']}/{row['n']}" + ("" if short else " passed")
    return f"{num(row['mean_reward'], 3)}" + ("" if short else f" mean reward over {row['n']}")


def grpo_task_lines(result: Any) -> list[str]:
    """For each group size asked for with --group-size: the count, then each useless task."""
    sizes = result.settings.get("group_sizes")
    rows = [r for r in result.per_task if r.get("p_informative")]
    if not sizes or not rows:
        return []
    adaptive = getattr(result, "adaptive", None)
    if adaptive and adaptive.get("rule") == "learnable":
        return [line for size in sizes for line in _adaptive_grpo_lines(result, size)]
    lines = []
    for size in sizes:
        useless = [r for r in rows if _useless(r, size)]
        useless.sort(key=lambda r: (r["band"] != "all_fail", r["band"] != "all_pass", r["task"]))
        bands = {b: sum(r["band"] == b for r in useless) for b in ("all_fail", "all_pass", "mixed")}
        lines.append(
            f"GRPO at G={size}: {len(useless)} of {len(rows)} tasks give no learning signal in most groups "
            f"(P(informative) < {LEARNABLE}): all fail {bands['all_fail']}, all pass {bands['all_pass']}, "
            f"mixed but lopsided {bands['mixed']}"
        )
        for r in useless[:MAX_LISTED]:
            agent = f" agent {r['agent']}" if r.get("agent") else ""
            p = r["p_informative"].get(str(size))
            prompt = " ".join(str(r.get("prompt", "")).split())
            band = r["band"].replace("_", " ")
            lines.append(
                f"  task {task_words(r)}{agent}: {band}, {r['successes']}/{r['n']} passed, "
                f'P(informative) {num(p, 3)}  "{prompt}"'
            )
        unknown = sum(_unknown(r, size) for r in rows)
        if unknown and adaptive:  # a rule that does not answer this question: more repeats undo the saving
            lines.append(
                f"  {unknown} of {len(rows)} tasks have fewer than {size} scored rollouts: no P(informative) "
                f"at G={size}, so not judged here; the adaptive run's rule {adaptive.get('rule')} does not "
                f"answer this question (collect --adaptive learnable does)"
            )
        elif unknown:
            lines.append(
                f"  {unknown} of {len(rows)} tasks have fewer than {size} scored rollouts: no P(informative) "
                f"at G={size}, so not judged here (curriculum --learnable-for {size} does not select them); "
                f"profile with at least {size} repeats"
            )
        if len(useless) > MAX_LISTED:
            lines.append(f"  ... and {len(useless) - MAX_LISTED} more (--json: per_task[].p_informative)")
        if useless:
            lines.append(
                f"  drop them: ngrp curriculum {result.profile} --tasks TASKS.jsonl --output KEPT.jsonl "
                f"--learnable-for {size}"
            )
    return lines


def _adaptive_grpo_lines(result: Any, size: int) -> list[str]:
    """A `learnable` adaptive run, by its decisions on every repeat (curriculum --learnable-for's rule): a
    task stopped at its first pass and fail is mixed, so some groups of G differ (kept); a task that never
    mixed ran to N and is all-fail or all-pass (no signal in any group). Never "profile with more repeats":
    that would undo what the run saved."""
    rows = [r for r in result.per_task if r.get("n")]
    decided = {
        d: [r for r in rows if r.get("adaptive_decision") == d] for d in ("mixed", "all_fail", "all_pass")
    }
    useless = sorted(
        decided["all_fail"] + decided["all_pass"], key=lambda r: (r["adaptive_decision"], _task_order(r))
    )
    pending = len(rows) - len(decided["mixed"]) - len(useless)
    n = result.adaptive.get("num_repeats")
    lines = [
        f"GRPO at G={size}, by the adaptive run's decisions (every repeat): {len(decided['mixed'])} of "
        f"{len(rows)} tasks settled mixed (a pass and a fail: kept by curriculum --learnable-for {size}); "
        f"{len(useless)} give no learning signal in any group: all fail {len(decided['all_fail'])}, "
        f"all pass {len(decided['all_pass'])} (each ran to N={n} without mixing)"
    ]
    for r in useless[:MAX_LISTED]:
        agent = f" agent {r['agent']}" if r.get("agent") else ""
        prompt = " ".join(str(r.get("prompt", "")).split())
        band = r["adaptive_decision"].replace("_", " ")
        lines.append(
            f'  task {task_words(r)}{agent}: {band}, {r.get("successes")}/{r["n"]} passed  "{prompt}"'
        )
    if len(useless) > MAX_LISTED:
        lines.append(f"  ... and {len(useless) - MAX_LISTED} more (--json: per_task[].adaptive_decision)")
    if pending:
        lines.append(
            f"  {pending} of {len(rows)} tasks not settled yet (no decision): resume the run to settle them"
        )
    fixed = result.adaptive.get("fixed_repeats")
    if any(g.group_size == size and g.from_decisions for g in result.overall.grpo_informative):
        lines.append(
            f"  (the P(GRPO group informative) line above gives G={size} from these decisions: a task "
            f"settled mixed counts 1, one that ran to N={n} unmixed 0, as fixed N counts them on the same "
            "draws)"
        )
    elif isinstance(fixed, int) and size > fixed:
        lines.append(
            f"  (the P(GRPO group informative) line above stands on the fixed design, the first {fixed} "
            f"repeats of every task: n/a at G={size}; the decisions here use every repeat)"
        )
    if useless:
        lines.append(
            f"  drop them: ngrp curriculum {result.profile} --tasks TASKS.jsonl --output KEPT.jsonl "
            f"--learnable-for {size}"
        )
    return lines


def task_words(row: dict) -> str:
    """`7 (line 9)`: the task index with its source lines, when the run recorded them."""
    from ..artifacts.task_lines import lines_text

    where = lines_text(row.get("source_lines"))
    return f"{row['task']} ({where})" if where else str(row["task"])


def _task_order(row: dict) -> tuple:
    """Integer task indices in numeric order (2 before 10), any other id after them as text."""
    task = row["task"]
    return (0, task, "") if type(task) is int else (1, 0, str(task))


def _unknown(row: dict, size: int) -> bool:
    """No P(informative) at this size (fewer scored rollouts than G): None, or NaN before JSON."""
    p = row["p_informative"].get(str(size))
    return p is None or p != p


def _useless(row: dict, size: int) -> bool:
    p = row["p_informative"].get(str(size))
    return p is not None and p < LEARNABLE
