"""Agent rollouts in HTML without a browser: the report's explorer shows turns and escapes tool names,
argument keys and outputs; a rollout card of 200 items and 1 MB of tool output stays bounded."""

from __future__ import annotations

import pytest
from agent_rows import agent_row, write_run

from ngrp_lib.inspect.digest import digest
from ngrp_lib.view.pages import rollout_card
from ngrp_lib.view.turns import BUDGET, MAX_ITEM, MIN_ITEM


def test_explorer_shows_turns_and_escapes_tool_text(tmp_path):
    pytest.importorskip("matplotlib")
    from ngrp_lib.report.explorer import build_explorer

    run = write_run(
        tmp_path / "run", tasks=2, repeats=2, turns=3, defects={(0, 0): "script", (0, 1): "script"}
    )
    html = str(build_explorer(run, threshold=1.0, examples=2).html)
    assert "<script" not in html
    assert html.count("search&lt;script&gt;window.__pwned") >= 2  # the tool name, in each example
    assert "&quot;&lt;script&gt;window.__pwned" in html  # the argument key, inside the pretty JSON
    assert "found: &lt;script&gt;" in html
    assert html.count("class='turns'") == 4 and "input conversation (2 item(s))" in html


def test_a_huge_rollout_card_stays_bounded():
    row = agent_row(0, 0, turns=67, chars=15_000)  # 66 calls + outputs + reasoning: 200 items, ~1 MB
    items = row["response"]["output"]
    assert len(items) == 200
    tool_chars = sum(len(i["output"]) for i in items if i["type"] == "function_call_output")
    assert tool_chars > 950_000
    card = str(rollout_card(digest(row).to_json()))
    assert len(card) < BUDGET * 1.6, len(card)  # escaping and markup on top of the text budget
    assert card.count("<li class='item") == 200
    kept = max(MIN_ITEM, min(MAX_ITEM, BUDGET // 200))
    assert card.count(f"[... {15_000 - kept:,} chars cut ...]") == 66  # each tool output, cut to its share
