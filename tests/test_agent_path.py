"""Issue 30, the agent's path: each wrong turn a fresh agent took, replayed with SKILL.md's own commands.

Every test here fails on the code before the fix it names."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import write_run


def _run(tmp_path: Path, **kwargs) -> tuple[str, str]:
    rollouts, materialized = write_run(tmp_path / "results", **kwargs)
    return str(materialized), str(rollouts)


def test_health_asked_again_is_a_read_with_no_write(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path, truncate_every=5)
    first = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert first.returncode == 1, first.stderr
    written = {p.name: p.read_bytes() for p in (tmp_path / "results").iterdir()}
    again = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert again.returncode == 2
    assert "--no-write" in again.stderr  # the refusal names the way to ask again
    read = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json")
    assert read.returncode == 1, read.stderr
    report = json.loads(read.stdout)
    assert report["outputs"] is None
    before = json.loads(first.stdout)
    assert report["verdicts"] == before["verdicts"] and report["checks"] == before["checks"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "results").iterdir()} == written
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write")
    assert "nothing written (--no-write)" in text.stdout


def test_health_no_write_on_a_fresh_run_leaves_the_folder_alone(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path)
    before = sorted(p.name for p in (tmp_path / "results").iterdir())
    out = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == before


def _rollouts_saying(folder: Path, texts: list[str], expected: str) -> Path:
    """A rollouts file whose replies are `texts` (task 0, one repeat each), expecting `expected`."""
    rollouts, materialized = write_run(folder, tasks=1, repeats=len(texts))
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    for row in rows:
        row["expected_answer"] = expected
        message = row["response"]["output"][1]
        message["content"][0]["text"] = texts[row["_ng_rollout_index"]]
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rollouts


def _rescored(run_ngrp, rollouts: Path, *verifier: str) -> dict[int, dict]:
    out = rollouts.with_name("rescored.jsonl")
    done = run_ngrp("reverify", "--rollouts", rollouts, "--output", out, *verifier)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["_ng_rollout_index"]: r for r in rows}


def test_regex_verifier_takes_the_last_match_as_documented(tmp_path, run_ngrp):
    """The wrong turn: `(-?\\d+)` on "12 months ... 144" was expected to take 12; the table says last."""
    texts = ["There are 12 months, so 12 * 12 = 144", "The answer is 12. Check: 12 * 12 = 144"]
    rollouts = _rollouts_saying(tmp_path / "r", texts, "12")
    loose = _rescored(run_ngrp, rollouts, "--verifier", "regex", "--verifier-pattern", r"(-?\d+)")
    assert [loose[i]["extracted_answer"] for i in (0, 1)] == ["144", "144"]
    anchored = _rescored(run_ngrp, rollouts, "--overwrite", "--verifier", "regex", "--verifier-pattern",
                         r"answer is (-?\d+)")  # fmt: skip
    assert anchored[0]["extracted_answer"] is None and anchored[1]["extracted_answer"] == "12"
    assert anchored[1]["reward"] == 1.0
    table = (Path(__file__).resolve().parents[1] / "references" / "collection.md").read_text()
    assert "| `regex` |" in table and "the **last** match of `--verifier-pattern`" in table


def test_math_verifier_drops_a_trailing_comma(tmp_path, run_ngrp):
    texts = ["so x is 4, and we are done", "the total is 1,000.", "it is 4,"]
    rollouts = _rollouts_saying(tmp_path / "r", texts, "4")
    rows = _rescored(run_ngrp, rollouts, "--verifier", "math")
    assert [rows[i]["extracted_answer"] for i in (0, 1, 2)] == ["4", "1,000", "4"]
    assert [rows[i]["reward"] for i in (0, 1, 2)] == [1.0, 0.0, 1.0]


def test_collect_refuses_an_empty_task_file_naming_it(tmp_path, run_ngrp):
    """The wrong turn: an empty task file gave exit 0, "complete": true and 0 rows."""
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n")):
        tasks = tmp_path / name
        tasks.write_text(text)
        out = tmp_path / name.replace(".jsonl", "") / "rollouts.jsonl"
        server = ("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--verifier", "math")
        done = run_ngrp("collect", "--input", tasks, "--output", out, "--num-repeats", "2", *server, "--json")
        assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
        assert f"{tasks} holds no task rows" in done.stderr
        assert not out.parent.exists() or not any(out.parent.iterdir())


def test_collect_refuses_an_empty_materialized_file_naming_it(tmp_path, run_ngrp):
    materialized = tmp_path / "run" / "rollouts_materialized_inputs.jsonl"
    materialized.parent.mkdir()
    materialized.write_text("")
    server = ("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--verifier", "math")
    out = tmp_path / "run" / "rollouts.jsonl"
    done = run_ngrp("collect", "--materialized", materialized, "--output", out, *server)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert f"{materialized} holds no materialized rows" in done.stderr
    assert sorted(p.name for p in materialized.parent.iterdir()) == [materialized.name]


def test_no_command_calls_an_empty_run_a_success_silently(tmp_path, run_ngrp):
    folder = tmp_path / "empty"
    folder.mkdir()
    inputs, rollouts = folder / "rollouts_materialized_inputs.jsonl", folder / "rollouts.jsonl"
    inputs.write_text("")
    rollouts.write_text("")
    health = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write")
    assert health.returncode == 1 and "nothing to judge" in health.stdout
    assert (
        json.loads(
            run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
        )["ok"]
        is False
    )
    profile = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    assert "NO INPUT ROWS" in profile.stderr
    check = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts)
    assert check.returncode == 1
    stats = run_ngrp("stats", folder / "rollouts_reward_profiling.jsonl")
    assert stats.returncode != 0 and "no rows" in stats.stderr


BLOCKER = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("aiohttp", "vllm", "yarl", "multidict", "aiosignal", "frozenlist"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_analysis_commands_run_without_the_collection_packages(tmp_path):
    """The wrong turn: the system Python had no aiohttp, so the agent built a venv before any analysis.
    Here aiohttp (and vLLM) cannot be imported; every analysis command still answers, SKILL.md's way."""
    import subprocess
    import sys

    from conftest import SCRIPT

    blocker = tmp_path / "no_aiohttp.py"
    blocker.write_text(BLOCKER)
    inputs, rollouts = _run(tmp_path, truncate_every=5)
    profile = str(tmp_path / "results" / "rollouts_reward_profiling.jsonl")
    commands = [
        ("validate", rollouts),
        ("check", "--inputs", inputs, "--rollouts", rollouts),
        ("health", "--inputs", inputs, "--rollouts", rollouts),
        ("profile", "--inputs", inputs, "--rollouts", rollouts),
        ("stats", profile, "--rollouts", rollouts),
        ("compare", profile, profile),
        ("inspect", rollouts, "--task", "2", "--json"),
        (
            "curriculum",
            profile,
            "--tasks",
            inputs,
            "--output",
            str(tmp_path / "k.jsonl"),
            "--learnable-for",
            "4",
        ),
        ("report", profile, "--output", str(tmp_path / "report.html")),
    ]
    for args in commands:
        done = subprocess.run(
            [sys.executable, str(blocker), str(SCRIPT), *args], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode in (0, 1), (args, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "aiohttp" not in done.stderr, args
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"responses_create_params": {"input": "2+2?"}, "expected_answer": "4"}\n')
    collect = subprocess.run(
        [sys.executable, str(blocker), str(SCRIPT), "collect", "--input", str(tasks), "--output",
         str(tmp_path / "c" / "rollouts.jsonl"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert collect.returncode == 2 and "Traceback" not in collect.stderr
    assert "ngrp collect needs the Python package 'aiohttp'" in collect.stderr
    assert "-m pip install 'aiohttp>=3.9'" in collect.stderr
