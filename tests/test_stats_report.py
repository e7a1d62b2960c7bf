"""`ngrp report`: a self-contained page (no external URLs) that renders non-blank in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import validated
from stats_helpers import rollout, write_profile, write_rollouts

from ngrp_lib.report.html import build_report
from ngrp_lib.stats.summary import StatsSettings

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def make_run(tmp_path: Path) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(0)
    tasks, k = 30, 8
    p = rng.beta(0.8, 0.8, tasks)
    rewards = (rng.random((tasks, k)) < p[:, None]).astype(int)
    lengths = (rng.normal(300, 80, (tasks, k)) + 200 * (1 - p[:, None])).clip(10).astype(int)
    prof = write_profile(
        tmp_path / "rollouts_reward_profiling.jsonl", rewards.tolist(), lengths=lengths.tolist()
    )
    rows = [
        rollout(t, j, int(rewards[t, j]), answer=str(rewards[t, j]), incomplete=bool(lengths[t, j] > 500))
        for t in range(tasks)
        for j in range(k)
    ]
    roll = write_rollouts(tmp_path / "rollouts.jsonl", rows)
    (tmp_path / "rollouts_failures.jsonl").write_text(
        json.dumps({"_ng_task_index": 0, "_ng_rollout_index": 8, "_ng_failure_class": "agent_request_failed"})
        + "\n"
    )
    other = (rng.random((tasks, k)) < np.clip(p - 0.15, 0, 1)[:, None]).astype(int)
    base = write_profile(tmp_path / "base_profile.jsonl", other.tolist())
    return prof, roll, base


def test_report_is_self_contained(tmp_path):
    prof, roll, base = make_run(tmp_path)
    out = tmp_path / "report.html"
    settings = StatsSettings(answer_key="extracted_answer", n_bootstrap=200)
    result = build_report(prof, out, rollouts=roll, compare=base, settings=settings)
    page = out.read_text()
    assert result.n_plots == 5 and page.count("<svg") == 5
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    for needle in (
        "pass@8",
        "maj@8",
        "all fail",
        "agent_request_failed",
        "Tasks that flipped",
        "240 scored rollouts",
    ):
        assert needle in page


def test_report_refuses_overwrite_and_cli_exit_codes(run_ngrp, tmp_path):
    prof, roll, _ = make_run(tmp_path)
    res = run_ngrp("report", prof, "--rollouts", roll, "--bootstrap", "100", "--json")
    assert res.returncode == 0, res.stderr
    default = tmp_path / "rollouts_reward_profiling_report.html"
    assert json.loads(res.stdout)["output"] == str(default) and default.exists()
    validated(json.loads(res.stdout), "report_result")
    assert json.loads(res.stdout)["bytes"] == default.stat().st_size
    again = run_ngrp("report", prof, "--bootstrap", "100")
    assert again.returncode == 2 and "--overwrite" in again.stderr
    # --overwrite replaces it (checked in-process: matplotlib is already imported there)
    before = default.stat().st_mtime_ns
    build_report(prof, default, settings=StatsSettings(n_bootstrap=0), overwrite=True)
    assert default.stat().st_mtime_ns >= before and "<svg" in default.read_text()
    assert run_ngrp("report", tmp_path / "missing.jsonl", "-o", tmp_path / "x.html").returncode == 3


def test_report_compare_with_itself_shows_the_identical_outcomes_finding(tmp_path):
    prof, _, _ = make_run(tmp_path)
    out = tmp_path / "self.html"
    build_report(prof, out, compare=prof, settings=StatsSettings(n_bootstrap=0))
    page = out.read_text()
    assert "identical outcomes: the same rollouts or seed?" in page and "within-task variance" in page
    assert "Korn-Graubard" in page and "pass^" in page


def test_missing_matplotlib_names_the_extra(run_ngrp_process, tmp_path):
    prof, _, _ = make_run(tmp_path)
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "matplotlib.py").write_text("raise ImportError('blocked for the test')\n")
    res = run_ngrp_process(
        "report", prof, "-o", tmp_path / "r.html", env={"PYTHONPATH": str(blocker), "PATH": "/usr/bin"}
    )
    assert res.returncode == 2
    repo = Path(__file__).resolve().parents[1]
    assert f"-m pip install '{repo}[report]'" in res.stderr  # the skill folder: no registry has the package


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(tmp_path):
    import matplotlib.image as mpimg

    prof, roll, base = make_run(tmp_path)
    out = tmp_path / "report.html"
    build_report(prof, out, rollouts=roll, compare=base, settings=StatsSettings(n_bootstrap=100))
    shot = tmp_path / "shot.png"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1200,2000",
        out.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert shot.exists(), "chromium wrote no screenshot"
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.var() > 0.01
    non_white = (pixels < 0.95).any(axis=-1).mean()
    assert non_white > 0.05, f"only {non_white:.1%} of pixels are not white"
