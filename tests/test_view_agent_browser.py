"""An agent run in `ngrp view`, in a real browser (Debian Chromium + Playwright): a multi-turn task page shows
every turn in order, long tool outputs start collapsed and open on a click, the input conversation is
collapsed, compare pages show both sides' turns, and a `<script>` planted in a tool name, an argument key and
a tool output shows as text and never runs."""

from __future__ import annotations

import pytest
from agent_rows import SCRIPT, write_run
from browser_fixtures import BROWSER_MARK
from view_helpers import Viewer

pytestmark = BROWSER_MARK

TURNS, CHARS = 6, 2000
AGENT = "docs_simple_agent"


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    root = tmp_path_factory.mktemp("agents")
    a = write_run(root / "a", tasks=3, repeats=2, turns=TURNS, chars=CHARS)
    b = write_run(root / "b", tasks=3, repeats=2, turns=TURNS, chars=CHARS, defects={(1, 0): "script"})
    with Viewer(b, "--compare", a, cache=root / "cache", cwd=root) as server:
        yield server


def test_task_page_shows_every_turn_in_order(viewer, page):
    page.goto(viewer.url.rstrip("/") + f"/task/0?a={AGENT}")
    card = page.locator("article[data-rollout-id='0-0']")
    turns = card.locator("li.item").evaluate_all("items => items.map(i => Number(i.dataset.turn))")
    assert turns == [t for t in range(1, TURNS) for _ in range(3)] + [TURNS, TURNS]
    kinds = card.locator("li.item").evaluate_all("items => items.map(i => i.className)")
    assert kinds[:3] == ["item item-reasoning", "item item-function_call", "item item-function_call_output"]
    assert kinds[-1] == "item item-message"
    call = card.locator("li.item-function_call").nth(1)
    assert "search_docs" in call.locator(".head").inner_text()
    assert call.locator("pre").inner_text() == '{\n  "query": "feature 0",\n  "page": 2\n}'
    output = card.locator("li.item-function_call_output details.item-text").first
    assert not output.evaluate("d => d.open"), "a long tool output starts collapsed"
    assert "2,000 chars" in output.locator("summary").inner_text()
    output.locator("summary").click()
    assert output.evaluate("d => d.open") and output.locator("pre").inner_text().startswith('{"page":1')
    conversation = page.locator("details.input-conversation")
    assert not conversation.evaluate("d => d.open")
    assert "Use search_docs" in (conversation.locator("li.item").first.text_content() or "")
    assert page.errors == []


def test_a_script_in_a_tool_name_argument_key_and_output_is_text(viewer, page):
    for path in (f"/task/1?a={AGENT}", f"/compare/task/1?a={AGENT}", "/?q=pwned"):
        page.goto(viewer.url.rstrip("/") + path)
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert "pwned" not in page.title(), path
        assert page.locator("script").count() == 1, "only the viewer's own script element"
    page.goto(viewer.url.rstrip("/") + f"/task/1?a={AGENT}")
    call = page.locator("article[data-rollout-id='1-0'] li.item-function_call").first
    assert call.locator("code.tool").inner_text() == "search" + SCRIPT
    assert SCRIPT in call.locator("pre").inner_text()
    output = page.locator("article[data-rollout-id='1-0'] li.item-function_call_output").first
    assert output.locator("pre").inner_text() == "found: " + SCRIPT
    assert page.errors == []


def test_compare_task_page_shows_both_sides_turns(viewer, page):
    page.goto(viewer.url.rstrip("/") + f"/compare/task/2?a={AGENT}")
    for side in ("a", "b"):
        items = page.locator(f"#side-{side} article[data-rollout-id='2-0'] li.item")
        assert items.count() == 3 * (TURNS - 1) + 2
    assert page.errors == []


def test_search_finds_a_tool_output(viewer, page):
    page.goto(viewer.url.rstrip("/") + "/?q=found%3A")
    rows = page.eval_on_selector_all("tr[data-task-index]", "rows => rows.map(r => r.dataset.taskIndex)")
    assert rows == ["1"]


def test_reward_components_show_on_the_rollout_card(viewer, page):
    """Each rollout card lists its reward_components, name=value, with the values the row holds."""
    import json
    from pathlib import Path

    rollouts = Path(json.loads(page.request.get(viewer.url + "tasks.json").text())["run"]["rollouts"])
    rows = [json.loads(line) for line in rollouts.read_text().splitlines() if line.strip()]
    page.goto(viewer.url.rstrip("/") + f"/task/2?a={AGENT}")
    for row in (r for r in rows if r["_ng_task_index"] == 2):
        card = page.locator(f"article[data-rollout-id='2-{row['_ng_rollout_index']}']")
        assert card.locator("dt", has_text="components").count() == 1
        shown = dict(part.split("=") for part in card.locator("code.components").inner_text().split())
        assert {k: float(v) for k, v in shown.items()} == row["reward_components"]
    assert page.errors == []
