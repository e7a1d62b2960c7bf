"""`ngrp ledger checkpoint` and `ngrp ledger handoff` on a temporary git repository with real runs:
the session-memory layout, what each file says, append-only timelines, git drift, stale runs, and
planted secrets absent from every file written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import check, schema
from ledger_helpers import ENTRY, LEDGER_RUN, git

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
LEDGER = Path("reports/auto_research/c1")
PLANTED = {
    "note": "baseline done; used OPENAI_API_KEY=sk-proj-PLANTEDa1b2c3d4e5 from the env",
    "next": "run with --api-key hf_PLANTEDqwertyuiop next",
    "decision": 'keep the header -H "Authorization: Bearer PLANTEDbearer99" out of the recipe',
}
pytestmark = pytest.mark.ledger_campaign(
    "--metric",
    "score",
    "--direction",
    "max",
    "--max-experiments",
    "5",
    "--target",
    "0.9",
    exclude_reports=True,
)
SECRETS = [
    "sk-proj-PLANTEDa1b2c3d4e5",
    "hf_PLANTEDqwertyuiop",
    "PLANTEDbearer99",
    "nvapi-PLANTEDzz998877",
    "PLANTEDpw",
]


def ledger_run(run_ngrp, repo: Path, code: str, *extra: str, args: tuple[str, ...] = ()) -> dict:
    argv = [*LEDGER_RUN, "--json", "--quiet", "--metric-regex", r"score=([0-9.]+)"]
    command = ["--", sys.executable, "-c", code, *args]
    return json.loads(check(run_ngrp(*argv, *extra, *command, cwd=repo)).stdout)


def checkpoint(run_ngrp, repo: Path, *args: str) -> dict:
    out = check(run_ngrp("ledger", "checkpoint", "--campaign", "c1", "--json", *args, cwd=repo)).stdout
    data = json.loads(out)
    jsonschema.validate(data, schema("ledger_checkpoint"))
    return data


def handoff(run_ngrp, repo: Path) -> tuple[str, dict]:
    text = check(run_ngrp("ledger", "handoff", "--campaign", "c1", cwd=repo)).stdout
    data = json.loads(check(run_ngrp("ledger", "handoff", "--campaign", "c1", "--json", cwd=repo)).stdout)
    jsonschema.validate(data, schema("ledger_handoff"))
    jsonschema.validate(data["status"], schema("ledger_status"))
    return text, data


def written_files(repo: Path) -> list[Path]:
    return [p for p in (repo / LEDGER).rglob("*") if p.is_file()]


def test_checkpoints_and_handoff_hold_what_a_new_agent_needs(run_ngrp, repo):
    url = "https://user:PLANTEDpw@host/v1"
    secret_arg = "--token=nvapi-PLANTEDzz998877"
    first_run = ledger_run(run_ngrp, repo, "print('score=0.61 [0.55, 0.67]')", "--description", f"base {url}")
    assert first_run["run_class"] == "ok"
    cp1 = checkpoint(run_ngrp, repo, *(x for k, v in PLANTED.items() for x in (f"--{k}", v)))
    session = Path(cp1["session"])
    assert re.fullmatch(r"\d{8}_\d{6}", session.name) and cp1["new_session"] is True
    assert sorted(p.name for p in (repo / session).iterdir()) == [
        "checkpoints.jsonl",
        "files.md",
        "handoff.md",
        "session_state.md",
        "timeline.md",
    ]
    timeline = repo / session / "timeline.md"
    first_timeline = timeline.read_bytes()
    timeline.write_bytes(
        first_timeline + b"- (agent) read the recipe's logging path\n"
    )  # an agent's own line

    crashed = ledger_run(run_ngrp, repo, "import sys; sys.exit(4)", args=(secret_arg,))
    assert crashed["run_class"] == "exit:4"
    cp2 = checkpoint(
        run_ngrp, repo, "--note", "exp 2 crashed (exit 4)", "--decision", "fix it on the same branch"
    )
    assert cp2["session"] == cp1["session"] and cp2["entry"]["number"] == 2 and cp2["new_session"] is False

    text = timeline.read_text()
    assert text.startswith(
        first_timeline.decode() + "- (agent) read the recipe's logging path\n"
    )  # append-only
    assert text.count("checkpoint 1") == 1 and "## " in text and "exp 2 crashed (exit 4)" in text

    state = (repo / session / "session_state.md").read_text()
    for expected in (
        "maximise `score`",
        "max_experiments: 2/5 attempted",
        "target 0.9 not reached",
        "Best so far: #1 exp/a",
        "Open runs: none",
        "Status: continue",
        "Attempted: 2",
        "fix it on the same branch",
        "Loaded skills: nemo-gym-reward-profiling",
    ):
        assert expected in state, expected
    files = (repo / session / "files.md").read_text()
    assert "logs/1/run.log" in files and "logs/2/run.log" in files and "### #2 exp/a crash" in files

    text_out, data = handoff(run_ngrp, repo)
    assert (repo / session / "handoff.md").read_text().rstrip("\n") == text_out.rstrip("\n")
    order = [text_out.index(h) for h in ("## Resume from here", "## State", "## Timeline", "## Git")]
    assert order == sorted(order)  # the companion skill's reading order
    assert data["reading_order"][:3] == ["handoff.md", "session_state.md", "timeline.md"]
    assert (
        data["last_checkpoint"]["number"] == 2 and data["last_checkpoint"]["note"] == "exp 2 crashed (exit 4)"
    )
    assert [d.split(" ", 1)[1] for d in data["decisions"]][-1] == "fix it on the same branch"
    assert data["git"]["differences"] == [] and "matches the last recorded run" in text_out
    assert any("--new-session" in c for c in data["commands"])

    outputs = [text_out, json.dumps(data)] + [p.read_text(errors="replace") for p in written_files(repo)]
    for secret in SECRETS:
        for where, content in zip(
            ["handoff text", "handoff json", *written_files(repo)], outputs, strict=True
        ):
            assert secret not in content, f"{secret} leaked into {where}"
    assert "OPENAI_API_KEY=***" in (repo / session / "session_state.md").read_text() or "***" in text_out


def test_handoff_says_where_git_differs_from_the_last_row(run_ngrp, repo):
    ledger_run(run_ngrp, repo, "print('score=0.5')")
    git(repo, "checkout", "-q", "main")
    (repo / "recipe.yaml").write_text("lr: 5e-6\n")
    text, data = handoff(run_ngrp, repo)
    diffs = " | ".join(data["git"]["differences"])
    assert "HEAD is on main; the last recorded run #1 was on exp/a" in diffs
    assert "HEAD is " in diffs and "uncommitted changes to 1 tracked file" in diffs
    assert data["git"]["uncommitted"] == [" M recipe.yaml"]
    assert "- differs: HEAD is on main" in text and data["session"] is None
    assert "no checkpoint yet" in text


def test_new_session_gets_its_own_folder(run_ngrp, repo):
    first = checkpoint(run_ngrp, repo, "--note", "planned the campaign")
    time.sleep(1.1)
    second = checkpoint(run_ngrp, repo, "--note", "resumed from the first session", "--new-session")
    assert first["session"] != second["session"] and second["entry"]["number"] == 1
    assert sorted(p.name for p in (repo / LEDGER / "session").iterdir()) == sorted(
        Path(s["session"]).name for s in (first, second)
    )
    _, data = handoff(run_ngrp, repo)
    assert data["session"] == second["session"] and [e["note"] for e in data["timeline"]] == [
        "planned the campaign",
        "resumed from the first session",
    ]


def test_refusals(run_ngrp, repo, tmp_path):
    assert (
        "must say something"
        in check(run_ngrp("ledger", "checkpoint", "--campaign", "c1", "--note", " ", cwd=repo), 2).stderr
    )
    dump = "\n".join(f"VAR_{i}=v{i}" for i in range(8))
    assert (
        "environment dump"
        in check(run_ngrp("ledger", "checkpoint", "--campaign", "c1", "--note", dump, cwd=repo), 2).stderr
    )
    assert not (repo / LEDGER / "session").exists()
    check(run_ngrp("ledger", "handoff", "--campaign", "nope", cwd=repo), 3)


def test_a_stale_run_is_flagged_and_does_not_hold_the_budget(repo):
    argv = [*ENTRY, *LEDGER_RUN, "--quiet", "--metric-regex", "score=([0-9.]+)", "--", "sleep", "60"]
    owner = subprocess.Popen(argv, cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = repo / LEDGER / "logs" / "1" / "run.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (record.exists() and '"pgid"' in record.read_text()):
        time.sleep(0.1)
    pgid = json.loads(record.read_text())["pgid"]
    owner.send_signal(signal.SIGKILL)  # ngrp dies without recording; its command keeps running
    owner.wait(timeout=30)
    try:
        status = json.loads(
            subprocess.run(
                [*ENTRY, "ledger", "status", "--campaign", "c1", "--json"],
                cwd=repo,
                capture_output=True,
                text=True,
            ).stdout
        )
        assert status["open_runs"][0]["owner_alive"] is False and status["open_runs"][0]["pgid"] == pgid
        text = subprocess.run(
            [*ENTRY, "ledger", "handoff", "--campaign", "c1"],
            cwd=repo,
            capture_output=True,
            text=True,
        ).stdout
        assert "run #1 is stale" in text and f"kill -TERM -- -{pgid}" in text
        assert "max_experiments: 0/5 attempted" in text  # a stale run does not count as running
    finally:
        os.killpg(pgid, signal.SIGKILL)  # the orphaned `sleep 60` this test started
