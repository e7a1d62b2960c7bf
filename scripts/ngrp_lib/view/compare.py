"""Compare mode: two runs of the same tasks, paired by (task index, agent), flipped tasks first.

Each pair is tested with `compare`'s own per-task test (`flip_tests`: Fisher's exact test on pass counts,
Benjamini-Hochberg over the pairs tested), so the viewer and `ngrp compare` call the same tasks flipped.
Pairing is by key; when both runs have materialized inputs, each pair's task data (the input row without
its prompt and stamps, as `compare` checks) is compared too, and a pair whose tasks differ is marked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .queries import Params, Views, task_url

ALPHA = 0.05


@dataclass
class Pairs:
    a: Views
    b: Views
    alpha: float = ALPHA
    rows: list[dict[str, Any]] = field(default_factory=list)  # in display order: flipped first
    only_a: int = 0
    only_b: int = 0

    def rebuild(self) -> None:
        """Pair the runs again (one of them grew)."""
        fresh = Pairs.build(self.a, self.b, self.alpha)
        self.rows, self.only_a, self.only_b = fresh.rows, fresh.only_a, fresh.only_b

    @classmethod
    def build(cls, a: Views, b: Views, alpha: float = ALPHA) -> Pairs:
        from ..stats.compare import flip_tests
        from ..stats.rowdiff import same_task

        pairs = cls(a, b, alpha)
        ta, tb = a.index.table, b.index.table
        where_b = {
            (int(t), tb.agents[int(c)]): g for g, (t, c) in enumerate(zip(tb.task, tb.agent, strict=True))
        }
        matched, seen_b = [], set()
        for ga, (t, c) in enumerate(zip(ta.task, ta.agent, strict=True)):
            gb = where_b.get((int(t), ta.agents[int(c)]))
            if gb is None:
                pairs.only_a += 1
                continue
            seen_b.add(gb)
            matched.append((ga, gb))
        pairs.only_b = len(tb.task) - len(seen_b)
        tested = [(ga, gb) for ga, gb in matched if ta.n_scored[ga] > 0 and tb.n_scored[gb] > 0]
        tests = flip_tests(
            [int(ta.n_passed[ga]) for ga, _ in tested],
            [int(ta.n_scored[ga]) for ga, _ in tested],
            [int(tb.n_passed[gb]) for _, gb in tested],
            [int(tb.n_scored[gb]) for _, gb in tested],
            alpha,
        )
        by_pair = dict(zip(tested, tests, strict=True))
        both_inputs = a.index.inputs is not None and b.index.inputs is not None
        for ga, gb in matched:
            test = by_pair.get((ga, gb))
            ra, rb = ta.pass_rate[ga], tb.pass_rate[gb]
            same = None
            if both_inputs:
                same = same_task(a.index.input_row(ga) or {}, b.index.input_row(gb) or {})
            pairs.rows.append(
                {
                    "task": int(ta.task[ga]),
                    "agent": ta.agents[int(ta.agent[ga])],
                    "preview": a.index.preview(ga),
                    "a": {
                        "n_passed": int(ta.n_passed[ga]),
                        "n_scored": int(ta.n_scored[ga]),
                        "pass_rate": _f(ra),
                    },
                    "b": {
                        "n_passed": int(tb.n_passed[gb]),
                        "n_scored": int(tb.n_scored[gb]),
                        "pass_rate": _f(rb),
                    },
                    "diff": _f(rb - ra),
                    "p_value": None if test is None else test.p_value,
                    "q_value": None if test is None else test.q_value,
                    "flipped": bool(test and test.flipped),
                    "direction": None if test is None else test.direction,
                    "same_task": same,
                    "_groups": (ga, gb),
                }
            )
        pairs.rows.sort(key=_display_key)
        return pairs

    def page(self, params: Params, flipped_only: bool = False) -> dict[str, Any]:
        rows = [r for r in self.rows if r["flipped"]] if flipped_only else self.rows
        agent = params.selection.agent
        if agent is not None:
            rows = [r for r in rows if r["agent"] == agent]
        total = len(rows)
        pages = max(1, math.ceil(total / params.per_page))
        page = min(params.page, pages)
        shown = rows[(page - 1) * params.per_page : page * params.per_page]
        extra = {"flipped": "1"} if flipped_only else {}
        return {
            "a": self.a.run_info(),
            "b": self.b.run_info(),
            "alpha": self.alpha,
            "test": "Fisher's exact test on pass counts per task, BH q-value < alpha (as ngrp compare)",
            "n_paired": len(self.rows),
            "n_only_a": self.only_a,
            "n_only_b": self.only_b,
            "n_flipped": sum(r["flipped"] for r in self.rows),
            "n_task_data_differs": sum(r["same_task"] is False for r in self.rows),
            "total": total,
            "page": page,
            "pages": pages,
            "per_page": params.per_page,
            "prev": _page_url(params, page - 1, extra) if page > 1 else None,
            "next": _page_url(params, page + 1, extra) if page < pages else None,
            "pairs": [_public(r, params) for r in shown],
        }

    def task(self, task: int, agent: str | None, params: Params) -> dict[str, Any]:
        for row in self.rows:
            if row["task"] == task and (row["agent"] == agent or agent is None):
                ga, gb = row["_groups"]
                return {
                    "pair": _public(row, params),
                    "a": {
                        "run": self.a.index.paths.rollouts.as_posix(),
                        "rollouts": self.a.rollouts_json(ga, None),
                    },
                    "b": {
                        "run": self.b.index.paths.rollouts.as_posix(),
                        "rollouts": self.b.rollouts_json(gb, None),
                    },
                    "back": "/compare",
                }
        raise LookupError(f"task {task} is not in both runs")


def _display_key(row: dict[str, Any]) -> tuple:
    flipped = row["flipped"]
    q = row["q_value"] if row["q_value"] is not None else 2.0
    diff = row["diff"]
    return (
        not flipped,
        q if flipped else 0.0,
        -abs(diff) if diff is not None else 1.0,
        row["task"],
        str(row["agent"]),
    )


def _public(row: dict[str, Any], params: Params) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if not k.startswith("_")}
    out["url"] = task_url("/compare/task", row["task"], row["agent"], params)
    return out


def _page_url(params: Params, page: int, extra: dict[str, str]) -> str:
    from urllib.parse import urlencode

    pairs = list(params.filters) + list(extra.items()) + ([("page", str(page))] if page > 1 else [])
    return "/compare" + (f"?{urlencode(pairs)}" if pairs else "")


def _f(value: Any) -> float | None:
    value = float(value)
    return None if value != value else value
