"""The report's offline explorer: the task table and a few example rollouts per task, inside the report.

Built from the same parts as `ngrp view`: the run's facts and task table (`inspect`), the examples picked
by `pick_examples` (a pass and a fail where both exist), each rollout digested once, and the viewer's task
table and rollout cards rendered through escaping templates. Texts are cut to a budget so the page stays
small enough to mail; the section states its size and how to open the whole run with `ngrp view`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts import task_lines
from ..inspect.digest import cut_middle, digest
from ..inspect.facts import open_regular, parse_row, read_at, scan_all
from ..inspect.join import InputsIndex, resolve
from ..inspect.select import pick_examples
from ..inspect.task_line import task_summary
from ..inspect.tasks import summarize, tally
from ..view.markup import Markup, join, render, static_text
from ..view.pages import plain_header, rollout_card, task_table
from ..view.turns import input_html

TEXT_BUDGET = 1_000_000  # characters of rollout text in the whole section
MIN_CHARS, MAX_CHARS = 200, 1200  # per text of an example
CSS = """
.explorer .scroll{overflow-x:auto}.explorer table.tasks td.preview{max-width:300px}
.explorer .rollouts{display:grid;gap:8px;grid-template-columns:repeat(auto-fill,minmax(420px,1fr))}
.explorer section.task{border-top:1px solid #ddd;margin-top:14px}.explorer h3{margin:8px 0 2px}
.explorer td,.explorer th{border:0}.explorer .note{color:#555;font-size:12px}
"""


@dataclass
class Explorer:
    html: Markup
    n_tasks: int
    n_tasks_with_examples: int
    n_examples: int
    chars_per_text: int

    @property
    def bytes(self) -> int:
        return len(self.html.encode())


def rollouts_beside(profile: Path) -> Path | None:
    """`X.jsonl` beside `X_reward_profiling.jsonl`, when it exists."""
    name = re.sub(r"_reward_profiling$", "", profile.stem)
    candidate = profile.with_name(name + ".jsonl")
    return candidate if name != profile.stem and candidate.is_file() else None


def _anchor(task: int, agent: str | None) -> str:
    return f"ex-{task}" + ("" if agent is None else "-" + re.sub(r"[^A-Za-z0-9_-]", "_", agent))


def _budget(n_examples: int) -> tuple[int, int | None]:
    """(characters per text, how many examples fit) for the text budget."""
    if not n_examples:
        return MAX_CHARS, None
    per = TEXT_BUDGET // (3 * n_examples)  # prompt, reasoning and answer of each example
    if per >= MIN_CHARS:
        return min(per, MAX_CHARS), None
    return MIN_CHARS, TEXT_BUDGET // (3 * MIN_CHARS)


def build_explorer(
    rollouts: Path, *, threshold: float, answer_key: str = "expected_answer", examples: int = 2
) -> Explorer:
    """The explorer section for a rollouts file (its materialized inputs found beside it by stem)."""
    paths = resolve(rollouts)
    facts, scan, builder = scan_all(paths.rollouts, previews=True)
    table = summarize(tally(facts, threshold), facts.agents, threshold)
    table.lines = task_lines.for_rollouts(paths.rollouts)
    picked = pick_examples(facts, examples, threshold) if examples else facts.task[:0]
    chars, fit = _budget(len(picked))
    if fit is not None:
        picked = picked[:fit]
    by_task = _example_cards(paths, facts, picked, chars, threshold, answer_key)
    rows = []
    for g in range(len(table)):
        row = table.row(g)
        row["preview"] = (builder.previews or {}).get((row["task"], int(table.agent[g])), "")
        row["examples"] = by_task.get((row["task"], int(table.agent[g])), [])
        rows.append(row)
    sections = [_task_section(t, chars) for t in rows if t["examples"]]
    n_examples = sum(len(t["examples"]) for t in rows)
    intro = (
        f"{len(rows)} tasks and {n_examples} example rollouts (up to {examples} per task: a passing and a "
        f"failing one where both exist), each text cut to about {chars} characters"
        + (
            f"; examples for the first {len(sections)} tasks only, to keep the file small"
            if fit is not None
            else ""
        )
        + f". Read from {paths.rollouts} ({scan.rows} rollouts). Every rollout, with filters: "
    )
    url = lambda t: f"#{_anchor(t['task'], t['agent'])}" if t["examples"] else None  # noqa: E731
    table_html = render(
        "report_explorer_table", table=task_table(rows, url, plain_header), sections=join(sections)
    )
    kb = (len(table_html.encode()) + len(intro) + 200) / 1024
    html = render(
        "report_explorer",
        intro=intro,
        rollouts=paths.rollouts,
        size=f" This section is about {kb:,.0f} KB of the page.",
        table=table_html,
    )
    return Explorer(html, len(rows), len(sections), n_examples, chars)


def _example_cards(
    paths: Any, facts: Any, picked: Any, chars: int, threshold: float, answer_key: str
) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """The picked rollouts read back by offset and digested, per (task, agent code), texts cut to `chars`."""
    by_task: dict[tuple[int, int], list[dict[str, Any]]] = {}
    inputs = InputsIndex.build(paths.inputs) if paths.inputs else None
    handle = open_regular(paths.rollouts)
    try:
        for i in picked:
            line = int(facts.line[i])
            row = parse_row(read_at(handle, int(facts.offset[i]), int(facts.length[i])), line, paths.rollouts)
            task, code = int(facts.task[i]), int(facts.agent[i])
            input_row = inputs.row(task, facts.agents[code]) if inputs else None
            by_task.setdefault((task, code), []).append(
                digest(row, input_row, line=line, threshold=threshold, answer_key=answer_key).to_json(chars)
            )
    finally:
        handle.close()
        if inputs:
            inputs.close()
    return by_task


def _task_section(t: dict[str, Any], chars: int) -> Markup:
    return render(
        "report_explorer_task",
        anchor=_anchor(t["task"], t["agent"]),
        task=t["task"],
        agent=f" (agent {t['agent']})" if t["agent"] is not None else "",
        summary=task_summary(t),
        prompt=cut_middle(t["examples"][0]["prompt"], chars),
        input=input_html(t["examples"][0]["input"]),
        cards=join(rollout_card(card) for card in t["examples"]),
    )


def styles() -> str:
    """The explorer's CSS: the viewer's shared components plus a little layout."""
    return static_text("components.css") + CSS
