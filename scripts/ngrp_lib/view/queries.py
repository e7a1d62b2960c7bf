"""The viewer's queries: what each page shows, as the JSON its `.json` twin returns.

Pages and their JSON twins call the same function here, so a test of the JSON is a test of what the page
shows. Filters are the shared selection (`inspect.select`): a task is listed when it passes the task tests
and has a rollout passing the rollout and row tests. Results of recent selections are kept, so paging
through one does not repeat the work.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from ..errors import UsageError
from ..inspect.digest import CUT_SLACK, cut_middle, last_user_message
from ..inspect.facts import lines_holding
from ..inspect.select import Filters, Selection, make_selection, rollout_mask, row_ok, task_mask
from .index import RunIndex

PER_PAGE = 50
MAX_PER_PAGE = 500
SORTS = {
    "task": "task",
    "agent": "agent",
    "n": "n_rows",
    "pass_rate": "pass_rate",
    "mean_reward": "mean_reward",
    "tokens": "mean_tokens",
    "turns": "mean_turns",
    "truncated": "truncated_share",
    "band": "band",
}
BAND_ORDER = {"all_fail": 0, "mixed": 1, "all_pass": 2, "none": 3}
FILTER_KEYS = ("band", "outcome", "agent", "reward_min", "reward_max", "where", "q", "task", "truncated")
CACHED_SELECTIONS = 8
VIEW_MAX_CHARS = 20_000  # of each text of a rollout on a task page, unless ?full=1 (inspect cuts too)


def _float(query: Mapping[str, Any], name: str) -> float | None:
    text = (query.get(name) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"{name} must be a number, not {text!r}") from None


def _int(query: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    text = (query.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, not {text!r}") from None
    return min(max(value, low), high)


def _all(query: Any, name: str) -> list[str]:
    values = query.getall(name, []) if hasattr(query, "getall") else [query[name]] if name in query else []
    return [v for v in values if v.strip()]


@dataclass(frozen=True)
class Params:
    """A page's query: the selection, the order and the page. `filters` rebuilds the query string."""

    selection: Selection
    filters: tuple[tuple[str, str], ...]
    sort: str = "task"
    desc: bool = False
    page: int = 1
    per_page: int = PER_PAGE

    def query(self, **changes: Any) -> str:
        """The query string of this page with some parameters changed (None drops one)."""
        pairs = list(self.filters)
        base = {
            "sort": self.sort,
            "desc": "1" if self.desc else None,
            "page": self.page,
            "per_page": self.per_page,
        }
        base.update(changes)
        for key in ("sort", "desc", "page", "per_page"):
            value = base[key]
            default = {"sort": "task", "page": 1, "per_page": PER_PAGE}.get(key)
            if value is not None and value != default:
                pairs.append((key, str(value)))
        return urlencode(pairs)


def parse_params(query: Mapping[str, Any], threshold: float) -> Params:
    """Params from a request's query (a MultiDict or a plain dict); bad values are a UsageError (HTTP 400)."""
    outcome = (query.get("outcome") or "").strip()
    if outcome not in ("", "passed", "failed"):
        raise UsageError(f"outcome is passed or failed, not {outcome!r}")
    band = (query.get("band") or "").strip().replace("_", "-") or None
    text = (query.get("q") or "").strip()
    tasks = []
    for value in _all(query, "task"):
        try:
            task = int(value)
        except ValueError:
            raise UsageError(f"task must be a task index, not {value!r}") from None
        if not -(2**63) <= task < 2**63:  # the index's task column is int64
            raise UsageError(f"task index {value[:40]} is out of range")
        tasks.append(task)
    selection = make_selection(
        Filters(
            tasks=tasks,
            agent=query.get("agent") or None,
            passed=outcome == "passed",
            failed=outcome == "failed",
            threshold=threshold,
            reward_min=_float(query, "reward_min"),
            reward_max=_float(query, "reward_max"),
            search=text or None,
            grep_prompt=bool(text),
            where=_all(query, "where"),
            band=band,
            truncated=(query.get("truncated") or "") in ("1", "on", "true"),
        )
    )
    sort = (query.get("sort") or "task").strip()
    if sort not in SORTS:
        raise UsageError(f"sort is one of {', '.join(SORTS)}, not {sort!r}")
    filters = tuple((k, v) for k in FILTER_KEYS for v in _all(query, k))
    return Params(
        selection=selection,
        filters=filters,
        sort=sort,
        desc=(query.get("desc") or "") in ("1", "true"),
        page=_int(query, "page", 1, 1, 10**9),
        per_page=_int(query, "per_page", PER_PAGE, 1, MAX_PER_PAGE),
    )


@dataclass
class Views:
    """The queries over one run's index."""

    index: RunIndex
    _matches: OrderedDict = field(default_factory=OrderedDict)

    # -- selection ---------------------------------------------------------------------------------------

    def matching(self, sel: Selection) -> tuple[Any, Any]:
        """(task mask, rollout mask) of the selection: tasks listed, and their rollouts that match."""
        import numpy as np

        key = repr(sel)
        if key in self._matches:
            self._matches.move_to_end(key)
            return self._matches[key]
        index, table = self.index, self.index.table
        rollouts = rollout_mask(sel, index.facts)
        tasks = task_mask(sel, table)
        has = np.zeros(len(table), dtype=bool)
        has[index.group[rollouts]] = True
        tasks &= has
        if sel.needs_rows:
            needle = sel.raw_needle()
            hits = (
                None
                if needle is None
                else lines_holding(index.paths.rollouts, needle, index.facts, index.scan.size)
            )
            for g in np.flatnonzero(tasks):
                tasks[g] = self._row_tests(sel, int(g), rollouts, hits)
            rollouts &= tasks[index.group]
        self._matches[key] = (tasks, rollouts)
        if len(self._matches) > CACHED_SELECTIONS:
            self._matches.popitem(last=False)
        return tasks, rollouts

    def _row_tests(self, sel: Selection, g: int, rollouts: Any, hits: Any) -> bool:
        """Whether task g has a rollout passing the row tests; rollouts failing them are cleared. The task's
        input row is tested once (where, and the prompt), then each rollout, its raw line first."""
        index = self.index
        input_row = index.input_row(g)
        members = [int(i) for i in index.rollouts_of(g) if rollouts[i]]
        if input_row is not None:
            if sel.where and not all(w.matches(input_row) for w in sel.where):
                rollouts[members] = False
                return False
            prompt = last_user_message(input_row.get("responses_create_params"))
            if sel.grep is None or (sel.grep_prompt and sel.grep.search(prompt)):
                return bool(members)
        found = False
        for i in members:
            if hits is not None and not hits[i]:
                rollouts[i] = False
                continue
            d, row, _ = index.digest(i, g)
            if row_ok(sel, d, input_row if input_row is not None else row):
                found = True
            else:
                rollouts[i] = False
        return found

    def ordered(self, params: Params) -> Any:
        """Table positions of the listed tasks in the page's order (undefined values last)."""
        import numpy as np

        tasks, _ = self.matching(params.selection)
        table = self.index.table
        positions = np.flatnonzero(tasks)
        column = SORTS[params.sort]
        if column == "agent":
            names = np.array([str(table.agents[int(a)]) for a in table.agent[positions]])
            key = np.unique(names, return_inverse=True)[1].astype(float)
        elif column == "band":
            key = np.array([BAND_ORDER[str(b)] for b in table.band[positions]], dtype=float)
        else:
            key = np.asarray(getattr(table, column)[positions], dtype=float)
        if params.desc:
            key = -key
        order = np.lexsort((table.agent[positions], table.task[positions], np.nan_to_num(key, nan=np.inf)))
        return positions[order]

    # -- pages -------------------------------------------------------------------------------------------

    def run_info(self) -> dict[str, Any]:
        index = self.index
        scan = index.scan
        notes = scan.notes()
        if index.added:
            notes.append(
                f"the rollouts file is growing (a run still being collected): {index.added} row(s) "
                "indexed since the viewer started; reload to see more"
            )
        if index.grown():
            notes.append("the rollouts file grew since this page was made: reload to see the new rows")
        if index.inputs is None:
            notes.append(
                "no materialized inputs beside the rollouts (pass --inputs): prompts come from the "
                "rollout rows and expected counts are unknown"
            )
        return {
            "rollouts": str(index.paths.rollouts),
            "inputs": None if index.paths.inputs is None else str(index.paths.inputs),
            "n_rollouts": len(index.facts),
            "n_tasks": len(index.table),
            "expected_rollouts": None
            if index.inputs is None
            else sum(group[2] for group in index.inputs.groups.values()),
            "pass_threshold": index.threshold,
            "agents": sorted({a for a in index.facts.agents if a is not None}),
            "indexed_from_cache": index.cached,
            "index_seconds": round(index.seconds, 3),
            "notes": notes,
        }

    def task_row(self, g: int, params: Params, rollouts: Any | None = None) -> dict[str, Any]:
        row = self.index.table.row(g)
        row["preview"] = self.index.preview(g)
        row["url"] = task_url("/task", row["task"], row["agent"], params)
        if rollouts is not None:
            row["n_matching"] = int(rollouts[self.index.rollouts_of(g)].sum())
        return row

    def tasks(self, params: Params) -> dict[str, Any]:
        """The task table page: one page of the listed tasks, with the totals and the page links."""
        ordered = self.ordered(params)
        _, rollouts = self.matching(params.selection)
        total = int(ordered.size)
        pages = max(1, math.ceil(total / params.per_page))
        page = min(params.page, pages)
        shown = ordered[(page - 1) * params.per_page : page * params.per_page]
        return {
            "run": self.run_info(),
            "filters": dict(params.filters),
            "query": [list(pair) for pair in params.filters],
            "selection": params.selection.describe(),
            "sort": params.sort,
            "desc": params.desc,
            "total": total,
            "page": page,
            "pages": pages,
            "per_page": params.per_page,
            "prev": f"/?{params.query(page=page - 1)}" if page > 1 else None,
            "next": f"/?{params.query(page=page + 1)}" if page < pages else None,
            "tasks": [self.task_row(int(g), params, rollouts) for g in shown],
        }

    def find(self, task: int, agent: str | None) -> int:
        """Table position of (task, agent); a task with one agent is also found without its agent."""
        import numpy as np

        table = self.index.table
        for code in [i for i, name in enumerate(table.agents) if name == agent]:
            g = table.position(task, code)
            if g is not None:
                return g
        hits = np.flatnonzero(table.task == task)
        if agent is None and hits.size == 1:
            return int(hits[0])
        raise LookupError(
            f"task {task}" + (f" agent {agent!r}" if agent is not None else "") + " is not in this run"
        )

    def rollouts_json(self, g: int, matches: Any | None, *, full: bool = False) -> list[dict[str, Any]]:
        """The task's rollouts, each text cut to VIEW_MAX_CHARS unless `full` (a run of long rollouts would
        make a page of hundreds of megabytes); `cut` says whether any text of the rollout was."""
        limit = None if full else VIEW_MAX_CHARS
        out = []
        for i in self.index.rollouts_of(g):
            d, _, _ = self.index.digest(int(i), g)
            item = d.to_json(limit)
            item["response_text"] = cut_middle(item["response_text"], limit)
            lengths = [*item["chars"].values(), len(d.response_text)]
            item["cut"] = limit is not None and max(lengths) > limit + CUT_SLACK
            item["matches"] = None if matches is None else bool(matches[int(i)])
            out.append(item)
        return out

    def task(self, task: int, agent: str | None, params: Params, full: bool = False) -> dict[str, Any]:
        """The task page: the task's row, its prompt once, its input fields, every rollout (texts cut unless
        `full`; `expand` is then the URL of the whole page), prev and next."""
        g = self.find(task, agent)
        tasks, rollouts = self.matching(params.selection)
        ordered = [int(x) for x in self.ordered(params)]
        position = ordered.index(g) if tasks[g] else None
        neighbour = {}
        for name, step in (("prev", -1), ("next", 1)):
            j = None if position is None else position + step
            neighbour[name] = (
                self.task_row(ordered[j], params)["url"] if j is not None and 0 <= j < len(ordered) else None
            )
        input_row = self.index.input_row(g)
        items = self.rollouts_json(g, rollouts if params.filters else None, full=full)
        expand = None
        if any(item["cut"] for item in items):
            url = task_url("/task", task, self.index.agent_name(g), params)
            expand = url + ("&" if "?" in url else "?") + "full=1"
        return {
            "run": self.run_info(),
            "filters": dict(params.filters),
            "selection": params.selection.describe(),
            "task": self.task_row(g, params, rollouts if params.filters else None),
            "position": None if position is None else position + 1,
            "total": len(ordered),
            "expand": expand,
            "prompt": items[0]["prompt"] if items else "",
            "expected_answer": items[0]["expected_answer"] if items else None,
            "input_fields": input_fields(input_row),
            **neighbour,
            "back": "/?" + params.query(),
            "rollouts": items,
        }


def task_url(base: str, task: int, agent: str | None, params: Params) -> str:
    """`/task/12?a=AGENT&<filters>`: `a` names the task's agent (fan-out gives a task several); the filters
    come along so the task page's previous / next follow the table."""
    pairs = ([("a", agent)] if agent is not None else []) + list(params.filters)
    if params.sort != "task" or params.desc:
        pairs += [("sort", params.sort)] + ([("desc", "1")] if params.desc else [])
    return f"{base}/{task}" + (f"?{urlencode(pairs)}" if pairs else "")


def input_fields(row: dict | None) -> dict[str, Any]:
    """The scalar fields of a materialized input row (the ones `where` can test), without the stamps."""
    if row is None:
        return {}
    return {
        k: v
        for k, v in row.items()
        if not k.startswith("_")
        and k not in ("responses_create_params", "agent_ref")
        and (v is None or isinstance(v, (str, int, float, bool)))
    }
