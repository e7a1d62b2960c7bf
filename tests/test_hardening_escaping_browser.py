"""Issue 38, class 2: one escaping path for every HTML output, agent fields included. A payload that would
inject an element, run a script or break out of an attribute, a `<script>` block, a comment or a title is
planted in every field of an agent run (tests/hostile_agent_rows.py: tool names, argument keys and values,
tool outputs and their keys, reasoning, messages, prompts, ids, the agent name, component names, an extra
verifier field); `report.html` and every viewer page (task table, task pages, compare pages, a search and
an agent filter carrying the payload) are opened in Chromium and searched for any element the payloads
would add. Counted: injected elements 0 and raw (unescaped) payloads 0 in each page's source, while the
payloads do show, as text."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
from browser_fixtures import BROWSER_MARK
from cli_helpers import ENTRY
from hostile_agent_rows import MARK, payload, write_hostile_run
from view_helpers import Viewer

pytestmark = BROWSER_MARK


TASKS = 3
INJECTED = "document.querySelectorAll('[id^=pwn], [onload], [onerror]').length"
# the page's own script elements hold no payload: one planted there would have been parsed as one
PLANTED_SCRIPTS = (
    "[...document.scripts].filter(s => s.id.startsWith('pwn') || s.text.includes('pwned')).length"
)
SHOWN = "document.body.innerText.split('<svg id=pwn').length - 1"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    rollouts, planter = write_hostile_run(root / "a", tasks=TASKS)
    other, _ = write_hostile_run(root / "b", tasks=TASKS)
    profile = rollouts.with_name("rollouts_reward_profiling.jsonl")
    for args in ([*_profile(rollouts)], [*_profile(other)],
                 ["report", profile, "--rollouts", rollouts, "-o", root / "report.html"],
                 ["report", profile, "--rollouts", rollouts, "-o", root / "report_compare.html",
                  "--compare", other.with_name("rollouts_reward_profiling.jsonl")]):  # fmt: skip
        done = subprocess.run([*ENTRY, *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    agent = orjson.loads(rollouts.read_bytes().splitlines()[0])["agent_ref"]["name"]
    return {"root": root, "rollouts": rollouts, "other": other, "planter": planter, "agent": agent}


def _profile(rollouts: Path) -> list:
    return [
        "profile",
        "--inputs",
        rollouts.with_name("rollouts_materialized_inputs.jsonl"),
        "--rollouts",
        rollouts,
    ]


def _judge(page, source: str, where: str) -> dict[str, int]:
    counts = {
        "injected": page.evaluate(INJECTED) + page.evaluate(PLANTED_SCRIPTS),
        "raw": source.count(MARK),
        "shown": page.evaluate(SHOWN),
    }
    assert page.title() != "pwned" and "pwned" not in page.title(), where
    assert counts["injected"] == 0 and counts["raw"] == 0, (where, counts)
    assert page.errors == [], (where, page.errors)
    return counts


def _fields_shown(text: str, planter) -> set[str]:
    """The original strings whose payload the page shows as text (whole, or JSON-quoted in an argument
    view: found by its numbered element, `<svg id=pwnN `)."""
    return {original for n, original in enumerate(planter.payloads) if f"<svg id=pwn{n} " in text}


@pytest.mark.parametrize("name", ["report.html", "report_compare.html"])
def test_escaping_report_html_with_a_payload_in_every_agent_field(run, page, name):
    report = run["root"] / name
    page.goto(report.as_uri())
    counts = _judge(page, report.read_text(), name)
    print(f"{name}: {counts}")
    assert counts["shown"] > 50, counts  # the payloads are on the page, as text
    shown = _fields_shown(page.evaluate("document.body.textContent"), run["planter"])
    for original in ("search_docs", "query", "feature 0", "look at page 1", "Feature 0 is on page 1.",
                     "docs_simple_agent", "correctness"):  # fmt: skip
        assert original in shown, original


def test_escaping_every_viewer_page_with_a_payload_in_every_agent_field(run, page):
    agent = quote(run["agent"], safe="")
    paths = ["/", "/?q=" + quote(payload(999)), "/?agent=" + agent, "/compare",
             *(f"/task/{t}?a={agent}" for t in range(TASKS)),
             *(f"/compare/task/{t}?a={agent}" for t in range(TASKS))]  # fmt: skip
    shown: set[str] = set()
    total = {"injected": 0, "raw": 0, "shown": 0}
    root = run["root"]
    with Viewer(run["rollouts"], "--compare", run["other"], cache=root / "cache", cwd=root) as viewer:
        for path in paths:
            status, _, body = viewer.get(path)
            assert status == 200, path
            page.goto(viewer.url.rstrip("/") + path)
            counts = _judge(page, body.decode(), path)
            for key in total:
                total[key] += counts[key]
            shown |= _fields_shown(page.evaluate("document.body.textContent"), run["planter"])
    print(f"viewer: {len(paths)} pages, {total}, fields shown {len(shown)} of {len(run['planter'].payloads)}")
    assert total["injected"] == 0 and total["raw"] == 0 and total["shown"] > 100, total
    for original in ("search_docs", "query", "feature 0", "look at page 1", "Feature 0 is on page 1.",
                     "docs_simple_agent", "correctness", "verifier_note", "a verifier field", "odd_item",
                     "Which page documents feature 0?", "chatcmpl-tool-0_0-1", "odd_role"):  # fmt: skip
        assert original in shown, original
