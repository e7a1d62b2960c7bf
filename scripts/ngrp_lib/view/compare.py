"""Compare mode: two runs of the same tasks, paired by `compare`'s key, flipped tasks first.

Pairs are keyed as `ngrp compare` keys them (`stats.compare.pair_keys`): by task index, and by agent too
only in a run that fans a task out to several agents, as Gym's profile rows name their agent. So two runs
of one task set under different agent names (two models collected directly: each row's agent is its
model) pair by task, and each pair's `agent` is what `compare --json` says in `per_task[].agent`. Each pair
is tested with `compare`'s own per-task test (`flip_tests`: Fisher's exact test on pass counts,
Benjamini-Hochberg over the pairs tested), so the viewer and `ngrp compare` call the same tasks flipped.
When both runs have materialized inputs, each pair's task data (the input row without its prompt and
stamps, as `compare` checks) is compared too, and a pair whose tasks differ is marked.
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
        from ..stats.compare import flip_tests, pair_keys
        from ..stats.rowdiff import same_task

        pairs = cls(a, b, alpha)
        ta, tb = a.index.table, b.index.table
        keys_a = pair_keys([int(t) for t in ta.task], [ta.agents[int(c)] for c in ta.agent])
        keys_b = pair_keys([int(t) for t in tb.task], [tb.agents[int(c)] for c in tb.agent])
        where_b = {key: g for g, key in enumerate(keys_b)}
        matched, seen_b = [], set()
        for ga, key in enumerate(keys_a):
            gb = where_b.get(key)
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
                    "agent": keys_a[ga][1],  # compare's per_task[].agent: set only when a run fans out
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
                    "_agents": (ta.agents[int(ta.agent[ga])], tb.agents[int(tb.agent[gb])]),
                }
            )
        pairs.rows.sort(key=_display_key)
        return pairs

    def page(self, params: Params, flipped_only: bool = False) -> dict[str, Any]:
        rows = [r for r in self.rows if r["flipped"]] if flipped_only else self.rows
        agent = params.selection.agent
        if agent is not None:  # the pair's agent, or the agent of either run's rollouts
            rows = [r for r in rows if r["agent"] == agent or agent in r["_agents"]]
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
            if row["task"] == task and (agent is None or agent == row["agent"] or agent in row["_agents"]):
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
