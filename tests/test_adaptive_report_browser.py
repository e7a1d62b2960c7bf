"""The HTML report of an adaptive run in Chromium (a module of its own: Playwright's sync API keeps an event
loop running while its browser is open, which the in-process CLI calls of test_adaptive_stats cannot share).
"""

from __future__ import annotations

from browser_fixtures import BROWSER_MARK
from test_adaptive_stats import N, _profile, runs  # noqa: F401 (the fixture: R=2, R=1, rounds 1,1,2,4)

pytestmark = BROWSER_MARK


def test_the_report_names_the_schedule_as_given(runs, run_ngrp, page):  # noqa: F811 (the fixture)
    """The HTML report of an adaptive run, in Chromium: its note says the rounds (`--rounds 1,1,2,4`), not
    the first round's size alone."""
    _profile(run_ngrp, runs["adaptive"])
    html = runs["adaptive"] / "report.html"
    proc = run_ngrp("report", runs["adaptive"] / "rollouts_reward_profiling.jsonl", "-o", html,
                    "--bootstrap", "100")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    page.goto(html.as_uri())
    note = page.locator("p.note", has_text="Adaptive collection").inner_text()
    assert f"Adaptive collection, rule learnable ({runs['flag']}, N={N}):" in note, note
    assert not page.errors
