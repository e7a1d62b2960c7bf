"""`ngrp stats --group-size G` as text: the tasks that give GRPO no learning signal at G, by id and prompt.

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


def grpo_task_lines(result: Any) -> list[str]:
    """For each group size asked for with --group-size: the count, then each useless task."""
    sizes = result.settings.get("group_sizes")
    rows = [r for r in result.per_task if r.get("p_informative")]
    if not sizes or not rows:
        return []
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
                f"  task {r['task']}{agent}: {band}, {r['successes']}/{r['n']} passed, "
                f'P(informative) {num(p, 3)}  "{prompt}"'
            )
        unknown = sum(_unknown(r, size) for r in rows)
        if unknown:
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


def _unknown(row: dict, size: int) -> bool:
    """No P(informative) at this size (fewer scored rollouts than G): None, or NaN before JSON."""
    p = row["p_informative"].get(str(size))
    return p is None or p != p


def _useless(row: dict, size: int) -> bool:
    p = row["p_informative"].get(str(size))
    return p is not None and p < LEARNABLE
