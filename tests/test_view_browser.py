"""`ngrp view` in a real browser: Debian's Chromium driven by Playwright (never `playwright install`).

Clicks through the viewer as a person would: filter to tasks with a failed rollout, open one, read its
rollouts' texts and rewards, move with the keyboard, open compare mode and find the planted flipped task
first, and check that a `<script>` planted in a prompt and a response shows as text and never runs.
Screenshots of the task table and a task page go to $NGRP_SCREENSHOT_DIR when it is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_fixtures import BROWSER_MARK
from run_helpers import SCRIPT, reward_of, text_of, write_run
from view_helpers import Viewer

pytestmark = BROWSER_MARK

TASKS, REPEATS, FLIPPED, SCRIPTED = 24, 8, 5, 3


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    root = tmp_path_factory.mktemp("browse")
    common = {
        "tasks": TASKS,
        "repeats": REPEATS,
        "flipped_task": FLIPPED,
        "script_task": SCRIPTED,
        "truncate_every": 7,
    }
    a, _ = write_run(root / "a", **common)
    b, _ = write_run(root / "b", flip=1, **common)
    with Viewer(b, "--compare", a, cache=root / "cache", cwd=root) as server:
        yield server


def shoot(tab, name: str) -> None:
    folder = os.environ.get("NGRP_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)


def listed(tab) -> list[int]:
    return [
        int(x)
        for x in tab.eval_on_selector_all("tr[data-task-index]", "rows => rows.map(r => r.dataset.taskIndex)")
    ]


def test_filter_to_failed_tasks_open_one_and_read_its_rollouts(viewer, page):
    page.goto(viewer.url)
    assert listed(page) == list(range(TASKS))
    shoot(page, "task_table")
    with page.expect_navigation():
        page.select_option("select[name=outcome]", "failed")  # the filter submits on change
    failed = [
        t for t in range(TASKS) if t != FLIPPED and any(reward_of(t, r, 1) == 0 for r in range(REPEATS))
    ]
    assert listed(page) == failed
    assert "outcome=failed" in page.url
    with page.expect_navigation():
        page.click("tr[data-task-index='2'] a")
    assert page.url.split("?")[0].endswith("/task/2")
    cards = page.locator("article[data-rollout-id]")
    assert cards.count() == REPEATS
    for r in range(REPEATS):
        card = page.locator(f"article[data-rollout-id='2-{r}']")
        assert card.locator("pre.final").inner_text() == text_of(2, r, 1)
        assert card.locator(".reward").inner_text() == str(int(reward_of(2, r, 1)))
        assert card.get_attribute("data-match") == ("1" if reward_of(2, r, 1) == 0 else "0")
    reasoning = page.locator("article[data-rollout-id='2-0'] details.reasoning")
    assert not reasoning.evaluate("d => d.open")
    page.keyboard.press("r")
    assert reasoning.evaluate("d => d.open"), "r opens every reasoning block"
    shoot(page, "task_page")
    with page.expect_navigation():
        page.keyboard.press("j")  # next task in the filtered table
    assert page.url.split("?")[0].endswith(f"/task/{failed[failed.index(2) + 1]}")
    with page.expect_navigation():
        page.keyboard.press("k")
    assert page.url.split("?")[0].endswith("/task/2")
    with page.expect_navigation():
        page.keyboard.press("u")
    assert listed(page) == failed, "back to the same filtered table"
    assert page.errors == []


def test_keyboard_in_the_table_and_layout_toggle(viewer, page):
    page.goto(viewer.url)
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.locator("tr.current").get_attribute("data-task-index") == "1"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url.split("?")[0].endswith("/task/1")
    grid = page.locator("#rollouts")
    assert "side" not in (grid.get_attribute("class") or "")
    page.keyboard.press("s")
    assert "side" in grid.get_attribute("class")
    page.reload()
    assert "side" in page.locator("#rollouts").get_attribute("class"), "the layout is remembered"
    page.keyboard.press("s")


def test_compare_mode_lists_the_planted_flip_first(viewer, page):
    page.goto(viewer.url)
    with page.expect_navigation():
        page.click("header.top a[href='/compare']")
    first = page.locator("table.pairs tbody tr").first
    assert first.get_attribute("data-task-index") == str(FLIPPED)
    assert "better in B" in first.inner_text() and "0/8" in first.inner_text() and "8/8" in first.inner_text()
    shoot(page, "compare")
    with page.expect_navigation():
        first.locator("a").click()
    a_side, b_side = page.locator("#side-a article"), page.locator("#side-b article")
    assert a_side.count() == b_side.count() == REPEATS
    assert {a_side.nth(i).locator(".reward").inner_text() for i in range(REPEATS)} == {"0"}
    assert {b_side.nth(i).locator(".reward").inner_text() for i in range(REPEATS)} == {"1"}
    shoot(page, "compare_task")
    assert page.errors == []


def test_a_planted_script_shows_as_text_and_never_runs(viewer, page):
    for path in (
        "/",
        f"/task/{SCRIPTED}?a=policy_agent",
        f"/compare/task/{SCRIPTED}?a=policy_agent",
        "/?q=pwned",
    ):
        page.goto(viewer.url.rstrip("/") + path)
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert "pwned" not in page.title(), path
    page.goto(viewer.url.rstrip("/") + f"/task/{SCRIPTED}?a=policy_agent")
    assert page.locator("section.prompt pre").inner_text().endswith(SCRIPT)
    assert page.locator(f"article[data-rollout-id='{SCRIPTED}-0'] pre.final").inner_text().endswith(SCRIPT)
    assert page.locator("script").count() == 1, "only the viewer's own script element"
    assert page.errors == []


def test_a_growing_run_shows_new_rows_on_reload(tmp_path, page):
    """A run still being collected: reload shows the rows appended meanwhile, "n of expected", and a
    half-written last line is a note, not an error."""
    rollouts, _ = write_run(tmp_path / "live", tasks=4, repeats=3, flipped_task=None, script_task=None)
    lines = rollouts.read_bytes().splitlines(keepends=True)
    rollouts.write_bytes(b"".join(lines[:5]))
    with Viewer(rollouts, cache=tmp_path / "cache", cwd=tmp_path) as server:
        page.goto(server.url)
        assert page.locator("h1").inner_text() == "4 tasks, 5 of 12 expected rollouts"
        with open(rollouts, "ab") as handle:
            handle.write(b"".join(lines[5:9]) + lines[9][:30])
        page.reload()
        assert page.locator("h1").inner_text() == "4 tasks, 9 of 12 expected rollouts"
        assert "last line is cut off" in page.locator(".notes").inner_text()
        with open(rollouts, "ab") as handle:
            handle.write(lines[9][30:] + b"".join(lines[10:]))
        page.reload()
        assert page.locator("h1").inner_text() == "4 tasks, 12 rollouts"
        # the rollouts column found by its header, not its place (a column added before it moved it once)
        headers = [text.split()[0] for text in page.locator("table thead th").all_inner_texts()]
        column = headers.index("n") + 1
        counts = page.locator(f"table tbody tr td:nth-child({column})").all_inner_texts()
        assert counts == ["3"] * 4, counts
        code, err = server.stop()
    assert code == 0 and "Traceback" not in err and page.errors == []
