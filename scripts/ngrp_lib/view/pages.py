"""HTML pages of the viewer, rendered from the same dicts their `.json` twins return.

Every value reaches the page through `markup` templates, which escape it; nothing here builds HTML from
run text by hand. The task table and the rollout card are shared with the report's explorer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

from ..inspect.task_line import rate_text, task_summary, with_lines
from ..numbers import num, pct, short, signed
from .markup import Markup, escape, join, render
from .turns import input_html, turns_html

KEYS = {
    "tasks": "j/k move, Enter open, / search, n/p page",
    "task": "j/k or \u2192/\u2190 next/previous task, u back, s layout, r reasoning",
    "compare": "j/k move, Enter open, n/p page",
    "compare_task": "u back",
    "error": "",
}
COLUMNS = (
    ("task", "task"),
    (None, "line"),  # the task file's lines (1-based), when the run's manifest records them
    ("agent", "agent"),
    (None, "prompt"),
    ("n", "n"),
    ("pass_rate", "pass rate [95% CI]"),
    ("mean_reward", "mean reward"),
    ("tokens", "mean tokens"),
    ("turns", "turns / calls"),
    ("truncated", "truncated"),
    ("band", "band"),
)


def page(
    title: str, body: Markup, *, name: str, run: str, notes: Iterable[str] = (), compare: bool = False
) -> Markup:
    nav = [Markup('<a href="/">tasks</a>')]
    if compare:
        nav.append(Markup('<a href="/compare">compare</a>'))
    note_html = join(Markup("<p class='note'>") + escape(n) + Markup("</p>") for n in notes)
    return render(
        "base",
        title=title,
        page=name,
        nav=join(nav, " "),
        run=run,
        keys="keys: " + KEYS[name],
        notes=Markup(f"<div class='notes'>{note_html}</div>") if note_html else Markup(""),
        body=body,
    )


# -- the task table (viewer and report) -----------------------------------------------------------------


def task_row(t: dict[str, Any], url: str | None) -> Markup:
    rate, ci = rate_text(t)
    n = f"{t['n_rollouts']}" + (
        f"/{t['expected']}" if t.get("expected") not in (None, t["n_rollouts"]) else ""
    )
    if t.get("n_matching") is not None and t["n_matching"] != t["n_rollouts"]:
        n += f" ({t['n_matching']} match)"
    tokens = t["mean_output_tokens"]
    return render(
        "task_row",
        task=t["task"],
        task_cell=(Markup('<a href="') + url + Markup('">') + str(t["task"]) + Markup("</a>"))
        if url
        else str(t["task"]),
        lines=", ".join(map(str, t.get("source_lines") or [])),
        agent=t["agent"] if t["agent"] is not None else "",
        preview=t.get("preview", ""),
        n=n,
        rate=rate,
        ci=ci,
        mean_reward=short(t["mean_reward"]),
        tokens=num(tokens, 0),
        turns=_turns_cell(t),
        truncated=pct(t["truncated_share"], 0),
        band=t["band"],
        band_label=t["band"].replace("_", "-"),
    )


def _turns_cell(t: dict[str, Any]) -> str:
    """Mean model turns / mean tool calls per rollout."""
    turns, calls = t.get("mean_turns"), t.get("mean_tool_calls")
    if turns is None:
        return "n/a"
    return f"{short(turns)} / {short(calls)}"


def task_table(
    rows: list[dict[str, Any]], url: Callable[[dict], str | None], header: Callable[[str | None, str], Markup]
) -> Markup:
    headers = join(header(key, label) for key, label in COLUMNS)
    body = join(task_row(t, url(t)) for t in rows) or Markup(
        "<tr><td colspan='11' class='empty'>no task matches</td></tr>"
    )
    return render("task_table", headers=headers, rows=body)


def plain_header(key: str | None, label: str) -> Markup:
    return render_th(label, None, "")


def render_th(label: str, href: str | None, mark: str) -> Markup:
    if href is None:
        return Markup("<th>") + escape(label) + Markup("</th>")
    return Markup('<th><a href="') + escape(href) + Markup('">') + escape(label + mark) + Markup("</a></th>")


# -- the rollout card (viewer and report) ---------------------------------------------------------------


def rollout_card(r: dict[str, Any]) -> Markup:
    outcome = "masked" if r["masked"] else {True: "pass", False: "fail", None: "unscored"}[r["passed"]]
    finish = r["finish_status"] + (f" ({r['finish_reason']})" if r["finish_reason"] else "")
    verifier = join(
        Markup("<dt>") + escape(k) + Markup("</dt><dd><code>") + escape(short(v)) + Markup("</code></dd>")
        for k, v in r["verifier"].items()
    )
    if r.get("reward_components") is not None:
        parts = "  ".join(f"{k}={short(v)}" for k, v in r["reward_components"].items())
        verifier = (
            Markup("<dt>components</dt><dd><code class='components'>")
            + parts
            + Markup("</code></dd>")
            + verifier
        )
    reasoning = Markup("")
    turns = turns_html(r)
    if r["reasoning"] and not turns:  # an agent's reasoning is shown turn by turn
        reasoning = (
            Markup('<details class="reasoning"><summary>reasoning (')
            + escape(f"{r['chars']['reasoning']:,}")
            + Markup(" chars)</summary><pre class='text'>")
            + escape(r["reasoning"])
            + Markup("</pre></details>")
        )
    failure = Markup("")
    if r["failure"]:
        failure = Markup("<p class='failure'>") + escape(r["failure"]) + Markup("</p>")
    tokens = r["output_tokens"]
    return render(
        "rollout",
        outcome=outcome,
        outcome_label=outcome,
        rollout_id=r["rollout_id"],
        rollout=r["_ng_rollout_index"],
        reward=short(r["reward"]),
        match="" if r.get("matches") is None else ("1" if r["matches"] else "0"),
        tokens="n/a" if tokens is None else f"{tokens:,}",
        finish=finish,
        finish_status=r["finish_status"],
        extracted=short(r["extracted_answer"]),
        expected=short(r["expected_answer"]),
        verifier=verifier,
        failure=failure,
        reasoning=reasoning,
        turns=turns,
        final_text=r["final_text"] or "(empty)",
    )


# -- viewer pages ---------------------------------------------------------------------------------------


def _options(values: Iterable[tuple[str, str]], chosen: str) -> Markup:
    return join(
        Markup('<option value="')
        + escape(v)
        + Markup('"')
        + Markup(" selected" if v == chosen else "")
        + Markup(">")
        + escape(label)
        + Markup("</option>")
        for v, label in values
    )


def _pager(data: dict[str, Any]) -> Markup:
    prev = (
        Markup('<a id="page-prev" rel="prev" href="') + escape(data["prev"]) + Markup('">&larr; previous</a>')
        if data["prev"]
        else Markup("")
    )
    nxt = (
        Markup('<a id="page-next" rel="next" href="') + escape(data["next"]) + Markup('">next &rarr;</a>')
        if data["next"]
        else Markup("")
    )
    return join([prev, f" page {data['page']} of {data['pages']} ({data['total']} tasks) ", nxt])


def _of_expected(n: int, expected: int | None) -> str:
    """The rollouts count: "37 of 48 expected" while a run is collected (the materialized inputs say
    how many), else "48"."""
    return str(n) if expected is None or expected == n else f"{n} of {expected} expected"


def tasks_page(data: dict[str, Any], *, compare: bool) -> Markup:
    run, f = data["run"], data["filters"]
    sort, desc = data["sort"], data["desc"]

    def header(key: str | None, label: str) -> Markup:
        if key is None:
            return render_th(label, None, "")
        flip = key == sort and not desc
        pairs = [tuple(pair) for pair in data["query"]] + [("sort", key)] + ([("desc", "1")] if flip else [])
        mark = (" \u25bc" if desc else " \u25b2") if key == sort else ""
        return render_th(label, "/?" + urlencode(pairs), mark)

    table = task_table(data["tasks"], lambda t: t["url"], header)
    listed = f"{data['total']} listed" + (": " + "; ".join(data["selection"]) if data["selection"] else "")
    body = render(
        "tasks",
        n_tasks=run["n_tasks"],
        n_rollouts=_of_expected(run["n_rollouts"], run.get("expected_rollouts")),
        threshold=short(run["pass_threshold"]),
        listed=listed,
        table=table,
        pager=_pager(data),
        band_options=_options(
            [("", "any"), ("all-fail", "all fail"), ("mixed", "mixed"), ("all-pass", "all pass")],
            f.get("band", "").replace("_", "-"),
        ),
        outcome_options=_options(
            [("", "any"), ("failed", "has a failed rollout"), ("passed", "has a passed rollout")],
            f.get("outcome", ""),
        ),
        agent_options=_options([("", "any")] + [(a, a) for a in run["agents"]], f.get("agent", "")),
        reward_min=f.get("reward_min", ""),
        reward_max=f.get("reward_max", ""),
        where=f.get("where", ""),
        truncated_checked=Markup(" checked") if f.get("truncated") else Markup(""),
        q=f.get("q", ""),
        sort=sort,
        desc_field=Markup('<input type="hidden" name="desc" value="1">') if desc else Markup(""),
    )
    return page("tasks", body, name="tasks", run=run["rollouts"], notes=run["notes"], compare=compare)


def _link(href: str | None, ident: str, label: str, rel: str) -> Markup:
    if not href:
        return Markup('<span class="off">') + escape(label) + Markup("</span>")
    return (
        Markup(f'<a id="{ident}" rel="{rel}" href="')
        + escape(href)
        + Markup('">')
        + escape(label)
        + Markup("</a>")
    )


def _fields(fields: dict[str, Any]) -> Markup:
    if not fields:
        return Markup("")
    rows = join(
        Markup("<tr><th>") + escape(k) + Markup("</th><td>") + escape(short(v)) + Markup("</td></tr>")
        for k, v in fields.items()
    )
    return Markup("<table class='input-fields'><caption>input fields</caption>") + rows + Markup("</table>")


def _matching(data: dict[str, Any]) -> str:
    flags = [r["matches"] for r in data["rollouts"] if r.get("matches") is not None]
    if not flags:
        return ""
    return f"({sum(flags)} match the filter: {'; '.join(data['selection'])}; the others are faded)"


def _expand_link(href: str | None) -> Markup:
    """The link to the whole page when texts were cut (`[... N chars cut ...]` marks each cut)."""
    if not href:
        return Markup("")
    return (
        Markup(' <a id="expand" href="') + escape(href) + Markup('">long texts are cut: show them whole</a>')
    )


def task_page(data: dict[str, Any], *, compare: bool) -> Markup:
    t = data["task"]
    position = (
        f"{data['position']} of {data['total']} listed" if data["position"] else "not in the filtered list"
    )
    body = render(
        "task",
        back=data["back"],
        prev_link=_link(data["prev"], "prev", "\u2190 previous", "prev"),
        next_link=_link(data["next"], "next", "next \u2192", "next"),
        position=position,
        task=t["task"],
        agent_label=f" (agent {t['agent']})" if t["agent"] is not None else "",
        summary=with_lines(t, task_summary(t)),
        prompt=data["prompt"],
        conversation=input_html(data["rollouts"][0]["input"] if data["rollouts"] else []),
        expected=short(data["expected_answer"]),
        fields=_fields(data["input_fields"]),
        n_rollouts=len(data["rollouts"]),
        matching=escape(_matching(data)) + _expand_link(data.get("expand")),
        rollouts=join(rollout_card(r) for r in data["rollouts"]),
    )
    run = data["run"]
    return page(
        f"task {t['task']}", body, name="task", run=run["rollouts"], notes=run["notes"], compare=compare
    )


def _count(side: dict[str, Any]) -> str:
    if not side["n_scored"]:
        return "n/a"
    return f"{side['n_passed']}/{side['n_scored']} = {num(side['pass_rate'], 2)}"


def compare_page(data: dict[str, Any], flipped_only: bool, agent: str) -> Markup:
    rows = []
    for p in data["pairs"]:
        flip = (
            ""
            if not p["flipped"]
            else "\u2191 better in B"
            if p["direction"] == "better_in_b"
            else "\u2193 worse in B"
        )
        same = {True: "yes", False: "DIFFERS", None: "not checked"}[p["same_task"]]
        rows.append(
            render(
                "pair_row",
                task=p["task"],
                agent=p["agent"] if p["agent"] is not None else "",
                url=p["url"],
                preview=p["preview"],
                a=_count(p["a"]),
                b=_count(p["b"]),
                diff=signed(p["diff"]),
                q=short(p["q_value"]),
                flip=flip,
                same=same,
                row_class="flipped" if p["flipped"] else "",
            )
        )
    unpaired = f"{data['n_only_a']} task(s) only in A and {data['n_only_b']} only in B are left out. "
    differs = (
        f"{data['n_task_data_differs']} paired task(s) hold different task data: check both runs used the "
        "same task rows."
        if data["n_task_data_differs"]
        else ""
    )
    agents = sorted(set(data["a"]["agents"]) | set(data["b"]["agents"]))
    body = render(
        "compare",
        n_paired=data["n_paired"],
        n_flipped=data["n_flipped"],
        a=data["a"]["rollouts"],
        b=data["b"]["rollouts"],
        test=data["test"],
        alpha=data["alpha"],
        unpaired=unpaired,
        differs=differs,
        flipped_checked=Markup(" checked") if flipped_only else Markup(""),
        agent_options=_options([("", "any")] + [(a, a) for a in agents], agent),
        rows=join(rows) or Markup("<tr><td colspan='9' class='empty'>no pair matches</td></tr>"),
        pager=_pager(data),
    )
    notes = [f"A: {n}" for n in data["a"]["notes"]] + [f"B: {n}" for n in data["b"]["notes"]]
    return page(
        "compare",
        body,
        name="compare",
        run=f"{data['a']['rollouts']} vs {data['b']['rollouts']}",
        notes=notes,
        compare=True,
    )


def compare_task_page(data: dict[str, Any]) -> Markup:
    p = data["pair"]
    prompt = data["a"]["rollouts"][0]["prompt"] if data["a"]["rollouts"] else ""
    summary = (
        f"B - A = {signed(p['diff'])}, Fisher q (BH) {short(p['q_value'])}"
        + (", flipped" if p["flipped"] else ", not flipped")
        + ("" if p["same_task"] is not False else "; the two runs hold different task data for this key")
    )
    body = render(
        "compare_task",
        back=data["back"],
        task=p["task"],
        agent_label=f" (agent {p['agent']})" if p["agent"] is not None else "",
        a_rate=_count(p["a"]),
        b_rate=_count(p["b"]),
        summary=summary,
        prompt=prompt,
        conversation=input_html(data["a"]["rollouts"][0]["input"] if data["a"]["rollouts"] else []),
        a_run=data["a"]["run"],
        b_run=data["b"]["run"],
        a_rollouts=join(rollout_card(r) for r in data["a"]["rollouts"]),
        b_rollouts=join(rollout_card(r) for r in data["b"]["rollouts"]),
    )
    return page(
        f"compare task {p['task']}",
        body,
        name="compare_task",
        run=f"{data['a']['run']} vs {data['b']['run']}",
        compare=True,
    )
