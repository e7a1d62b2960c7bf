"""Every runnable snippet in SKILL.md and references/ that is not an `ngrp` call (those are checked against
each command's --help in test_skill_docs_in_step.py) runs, as written, on the files the text says it
reads (issue 36, wrong turn 12: references/health.md's step-2 one-liner crashed with KeyError 'locator'
on a finding without one).

A snippet is a line in a fenced code block that starts an interpreter: `python3 -c`, `python -c`, `jq`,
`awk`. Each must be listed in RUNS with the run it reads; a new one fails until it is."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from agent_rows import write_run

from ngrp_lib.audit.health import run_health

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "SKILL.md", *sorted((REPO / "references").glob("*.md"))]
_RUNNABLE = re.compile(r"^\s*(python3? -c|jq|awk)\s")
# the snippets, by the start of their text, and the file names they read (in the run's folder)
RUNS = {
    "python3 -c \"import json,collections,sys; c=collections.Counter((r['_ng_task_index'],f['check']": (
        "rollout_verdicts.jsonl",
    ),
}


def snippets() -> list[tuple[str, str]]:
    """(document name, snippet line) for each runnable line in a fenced code block."""
    found = []
    for doc in DOCS:
        inside = False
        for line in doc.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("```"):
                inside = not inside
            elif inside and _RUNNABLE.match(line):
                found.append((doc.name, line.strip()))
    return found


def test_every_snippet_is_listed_with_what_it_reads():
    found = snippets()
    unknown = [f"{doc}: {line[:100]}" for doc, line in found if not any(line.startswith(k) for k in RUNS)]
    assert not unknown, "add each to RUNS (and run it here):\n" + "\n".join(unknown)
    assert found, "the snippet finder found none: its pattern no longer matches the docs"


def _agent_run(folder: Path) -> None:
    """An agent run with each planted defect, so every kind of finding (some without a locator) is in
    rollout_verdicts.jsonl."""
    defects = {(0, 1): "bad_args", (1, 2): "tool_error", (2, 3): "loop", (3, 0): "no_answer"}
    defects[(4, 1)] = "overflow"
    rollouts = write_run(folder, tasks=5, repeats=4, turns=4, defects=defects)
    run_health(folder / "rollouts_materialized_inputs.jsonl", rollouts)


def test_every_snippet_runs_on_a_real_run(tmp_path):
    _agent_run(tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "rollout_verdicts.jsonl").read_text().splitlines()]
    found = [f for row in rows for f in row["findings"]]
    assert any("locator" not in f for f in found) and any("locator" in f for f in found), (
        "the run needs findings with and without a locator: else it would not catch wrong turn 12"
    )
    for doc, line in snippets():
        reads = next(v for k, v in RUNS.items() if line.startswith(k))
        assert all((tmp_path / name).is_file() for name in reads)
        words = shlex.split(line)
        if words[0].startswith("python"):
            words[0] = sys.executable
        proc = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{doc}: {line[:80]}\n{proc.stderr}"
        assert proc.stdout.strip(), f"{doc}: {line[:80]} printed nothing"
