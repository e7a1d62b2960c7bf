"""Issue 30, the agent's path: each wrong turn a fresh agent took, replayed with SKILL.md's own commands.

Every test here fails on the code before the fix it names."""

from __future__ import annotations

import json
import re
from pathlib import Path

from http_helpers import sum_tasks
from run_helpers import write_run
from test_collect_ux import flaky_peer  # noqa: F401  (fixture: a peer that answers 503 while "down")


def _run(tmp_path: Path, **kwargs) -> tuple[str, str]:
    rollouts, materialized = write_run(tmp_path / "results", **kwargs)
    return str(materialized), str(rollouts)


def test_health_asked_again_is_a_read_with_no_write(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path, truncate_every=5)
    first = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert first.returncode == 1, first.stderr
    written = {p.name: p.read_bytes() for p in (tmp_path / "results").iterdir()}
    again = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    # issue 36 #17: the same, unchanged run asked again answers as the first time and writes nothing
    assert again.returncode == 1 and json.loads(again.stdout) == json.loads(first.stdout)
    assert {p.name: p.read_bytes() for p in (tmp_path / "results").iterdir()} == written
    changed = run_ngrp(
        "health", "--inputs", inputs, "--rollouts", rollouts, "--json", "--loop-min-repeats", "9"
    )
    assert changed.returncode == 2  # what it would write differs: refused
    assert "--no-write" in changed.stderr  # the refusal names the way to ask again
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


def _two_runs(tmp_path: Path, run_ngrp, change_b, flip_b: int = 1) -> tuple[Path, Path]:
    """Runs A and B of the same tasks, profiled; `change_b(row)` edits B's rows (inputs and rollouts)."""
    profiles = []
    for name, flip, change in (("A", 0, None), ("B", flip_b, change_b)):
        rollouts, materialized = write_run(tmp_path / name, tasks=10, repeats=8, flip=flip)
        for path in (rollouts, materialized):
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            for row in rows:
                row["responses_create_params"]["temperature"] = 0.7
                if change:
                    change(row)
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        done = run_ngrp("profile", "--inputs", materialized, "--rollouts", rollouts)
        assert done.returncode == 0, done.stderr
        profiles.append(rollouts.with_name("rollouts_reward_profiling.jsonl"))
    return profiles[0], profiles[1]


def test_compare_says_how_the_runs_rows_differ(tmp_path, run_ngrp):
    """The wrong turn: an agent diffed the runs' rows by hand to learn that only the temperature differed."""

    def colder(row):
        row["responses_create_params"]["temperature"] = 0.2

    a, b = _two_runs(tmp_path / "t", run_ngrp, colder)
    text = run_ngrp("compare", a, b)
    assert "rows: runs differ only in temperature (0.7 vs 0.2)" in text.stdout
    report = json.loads(run_ngrp("compare", a, b, "--json").stdout)
    assert report["row_differences"]["fields"] == [
        {"field": "temperature", "n_tasks": 10, "a": 0.7, "b": 0.2, "varies": False}
    ]

    def other_prompt_and_cap(row):
        row["responses_create_params"]["max_output_tokens"] = 512
        row["responses_create_params"]["input"][0]["content"] = "Think step by step."

    a, b = _two_runs(tmp_path / "p", run_ngrp, other_prompt_and_cap)
    summary = json.loads(run_ngrp("compare", a, b, "--json").stdout)["row_differences"]["summary"]
    assert (
        summary == "runs differ in 2 fields: prompt (values vary by task); max_output_tokens (absent vs 512)"
    )
    same = run_ngrp("compare", a, a)
    assert "rows: the paired task rows are the same in both runs (10 tasks" in same.stdout


def test_compare_answers_whether_b_beats_a_in_one_line(tmp_path, run_ngrp):
    a, b = _two_runs(tmp_path / "t", run_ngrp, None)
    report = json.loads(run_ngrp("compare", a, b, "--json").stdout)
    answer = report["answer"]
    assert report["ci_low"] < 0 < report["ci_high"] and answer["claim"] == "not_detectable"
    assert f"n={report['n_tasks']} tasks" in answer["text"] and "includes 0" in answer["text"]
    assert run_ngrp("compare", a, b).stdout.rstrip().endswith(f"answer: {answer['text']}")

    def all_pass(row):
        if "response" in row:  # a rollout, not its input row
            row["reward"] = 1.0

    a, better = _two_runs(tmp_path / "w", run_ngrp, all_pass, flip_b=0)
    won = json.loads(run_ngrp("compare", a, better, "--json").stdout)
    assert won["ci_low"] > 0 and won["answer"]["claim"] == "b_better"
    assert won["answer"]["text"].startswith("B beats A: B - A = ")


def test_stats_lists_the_tasks_useless_for_grpo_by_id_and_prompt(tmp_path, run_ngrp):
    """The wrong turn: the text output had no per-task table, so the agent read --json with python3 -c."""
    rollouts, inputs = write_run(tmp_path / "run", tasks=12, repeats=8)
    run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    profile = tmp_path / "run" / "rollouts_reward_profiling.jsonl"
    text = run_ngrp("stats", profile, "--group-size", "8").stdout
    report = json.loads(run_ngrp("stats", profile, "--group-size", "8", "--json").stdout)
    useless = sorted(r["task"] for r in report["per_task"] if r["p_informative"]["8"] < 0.5)
    assert useless and 0 in useless and 1 in useless  # all pass and all fail
    assert f"GRPO at G=8: {len(useless)} of 12 tasks give no learning signal" in text
    for task in useless:
        row = next(r for r in report["per_task"] if r["task"] == task)
        assert row["prompt"] == f"Question {task}: what is {task} times 10? Put the answer in \\boxed{{}}."
        assert f"  task {task}: {row['band'].replace('_', ' ')}, {row['successes']}/8 passed" in text
        assert row["prompt"] in text
    # the same rule as curriculum --learnable-for: what stats lists is what curriculum drops
    kept = tmp_path / "kept.jsonl"
    run_ngrp("curriculum", profile, "--tasks", inputs, "--output", kept, "--learnable-for", "8")
    kept_tasks = {json.loads(line)["_ng_task_index"] for line in kept.read_text().splitlines()}
    assert sorted(set(range(12)) - kept_tasks) == useless


def test_inspect_selects_rollouts_by_health_finding(tmp_path, run_ngrp):
    """The wrong turn: the agent grepped inspect's output to find the rollouts behind a health finding."""
    inputs, rollouts = _run(tmp_path, truncate_every=5)
    run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts)
    verdicts = tmp_path / "results" / "rollout_verdicts.jsonl"
    flagged = sorted(
        (v["_ng_task_index"], v["_ng_rollout_index"])
        for v in map(json.loads, verdicts.read_text().splitlines())
        if any(f["check"] == "ngrp/truncated_at_token_cap" for f in v["findings"])
    )
    assert flagged
    done = run_ngrp("inspect", rollouts, "--finding", "ngrp/truncated_at_token_cap", "--json")
    assert done.returncode == 0, done.stderr
    shown = sorted(
        (r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, done.stdout.splitlines())
    )
    assert shown == flagged
    narrowed = run_ngrp("inspect", rollouts, "--finding", "ngrp/truncated_at_token_cap", "--failed", "--json")
    failed = [json.loads(line) for line in narrowed.stdout.splitlines()]
    assert failed and all(r["passed"] is False for r in failed) and len(failed) < len(flagged)
    typo = run_ngrp("inspect", rollouts, "--finding", "ngrp/truncated")
    assert (
        typo.returncode == 2
        and "checks with findings in that file: ngrp/truncated_at_token_cap" in typo.stderr
    )
    other = tmp_path / "other"
    other.mkdir()
    alone = other / "rollouts.jsonl"
    alone.write_bytes(Path(rollouts).read_bytes())
    missing = run_ngrp("inspect", alone, "--finding", "ngrp/truncated_at_token_cap")
    assert missing.returncode == 2 and "run ngrp health" in missing.stderr
    given = run_ngrp(
        "inspect", alone, "--finding", "ngrp/truncated_at_token_cap", "--verdicts", verdicts, "--json"
    )
    assert len(given.stdout.splitlines()) == len(flagged)


def test_health_without_a_failures_file_does_not_claim_never_attempted(tmp_path, run_ngrp):
    inputs, rollouts = _run(tmp_path, drop=((2, 0), (3, 1)))
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert "never attempted" not in text
    assert "2 of 48 expected without a rollout (no failures file was read" in text
    failures = Path(rollouts).with_name("rollouts_failures.jsonl")
    failures.write_text("")
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert "2 of 48 expected never attempted" in text


def test_check_holds_the_runs_other_files_against_its_inputs(tmp_path, run_ngrp):
    """The wrong turn: a Gym folder held inputs and a quality summary for 4 repeats per task and a profile
    excerpt for 16; validate passed all files and stats said only that rollouts were missing."""
    inputs, rollouts = _run(tmp_path)  # 12 tasks x 4 repeats
    run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts)
    big_rollouts, big_inputs = write_run(tmp_path / "big", repeats=16)
    run_ngrp("profile", "--inputs", big_inputs, "--rollouts", big_rollouts)
    folder, big = tmp_path / "results", tmp_path / "big"
    agree = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts,
                     folder / "quality_summary.json", folder / "rollout_verdicts.jsonl")  # fmt: skip
    assert agree.returncode == 0, agree.stdout
    assert f"note: {folder / 'quality_summary.json'} (quality summary) agrees with {inputs}" in agree.stdout
    others = [big / "rollouts_reward_profiling.jsonl", big / "rollouts_profile_summary.json",
              big / "rollouts_repeat_level_metrics.json"]  # fmt: skip
    mixed = run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, *others)
    assert mixed.returncode == 1
    out = mixed.stdout
    assert (
        f"error: {others[0]} (reward profile) says 16 rollouts per task where the inputs hold 4 (12 task(s)"
        in out
    )
    assert f"{inputs} disagrees" in out
    assert (
        f"error: {others[1]} (profile summary) says 192 expected rollouts for the run, the inputs 48" in out
    )
    assert (
        f"{others[2]} (repeat-level metrics) says 16 repeats for agent policy_agent where the inputs hold 4"
        in out
    )
    report = json.loads(
        run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, *others, "--json").stdout
    )
    assert sum(f["code"] == "files_disagree" and f["severity"] == "error" for f in report["findings"]) == 4
    # the other way round: fewer in the other file is a partial run, a warning
    partial = run_ngrp(
        "check", "--inputs", big_inputs, "--rollouts", big_rollouts, folder / "rollout_verdicts.jsonl"
    )
    assert partial.returncode == 0
    assert (
        "warning: " in partial.stdout
        and "says 4 rollouts per task where the inputs hold 16" in partial.stdout
    )


def test_checks_resume_command_is_the_runs_own_and_it_runs(tmp_path, flaky_peer):  # noqa: F811
    """The wrong turn: for a run collected with --endpoints by `python3 scripts/ngrp.py`, check printed
    `ngrp collect ... --base-url ...`. The printed command names the same server source and entry point,
    and running it as printed finishes the run."""
    import shlex
    import subprocess
    import sys

    from conftest import SCRIPT

    def ngrp(*args):
        return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    sum_tasks(tmp_path, 3)
    endpoints = tmp_path / "ngrp_endpoints.json"
    endpoints.write_text(json.dumps({"endpoints": [{"base_url": flaky_peer["url"] + "/v1", "model": "m"}]}))
    source = ("--endpoints", "ngrp_endpoints.json", "--verifier", "exact", "--max-retries", "0")
    first = ngrp(
        "collect", "--input", "tasks.jsonl", "--output", "out/r.jsonl", "--num-repeats", "2", *source
    )
    assert first.returncode == 1, first.stderr
    check = ngrp(
        "check", "--inputs", "out/r_materialized_inputs.jsonl", "--rollouts", "out/r.jsonl", "--json"
    )
    fix = next(f["fix"] for f in json.loads(check.stdout)["findings"] if f["code"] == "missing_rollouts")
    command = fix[: fix.index(" (runs only the missing keys)")]
    command = command[command.index(" or ") + 4 :] if " or " in command else command
    words = shlex.split(command)
    assert words[words.index("collect") - 1] == str(SCRIPT)  # the entry point the user ran
    assert "--endpoints" in words and "ngrp_endpoints.json" in words and "--base-url" not in words
    flaky_peer["down"] = False
    resumed = subprocess.run(words, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    rows = (tmp_path / "out" / "r.jsonl").read_text().splitlines()
    assert len({(json.loads(r)["_ng_task_index"], json.loads(r)["_ng_rollout_index"]) for r in rows}) == 6


def test_collect_after_a_resume_says_what_its_mean_reward_covers(tmp_path, flaky_peer, run_ngrp):  # noqa: F811
    """The wrong turn: after a resume the summary's mean reward (0.250 over 32 rows) was read as the
    run's (0.328 over 64)."""
    sum_tasks(tmp_path, 3)
    flaky_peer["down"] = False
    argv = ["collect", "--input", "tasks.jsonl", "--output", "out/r.jsonl", "--num-repeats", "2",
            "--base-url", flaky_peer["url"] + "/v1", "--model", "m", "--verifier", "exact"]  # fmt: skip
    first = run_ngrp(*argv)
    assert first.returncode == 0, first.stderr
    assert "mean reward 1.0000 over the 6 rollouts this invocation wrote" in first.stdout
    assert "not the" not in first.stdout
    rollouts = tmp_path / "out" / "r.jsonl"
    rows = rollouts.read_text().splitlines(keepends=True)
    rollouts.write_text("".join(rows[:4]))  # the run was killed after four rollouts
    resumed = run_ngrp(*argv, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "mean reward 1.0000 over the 2 rollouts this invocation wrote (not the 6 in the file: "
        "ngrp profile or stats for the whole run)" in resumed.stdout
    )


def test_every_command_counts_the_same_truncated_rollouts(tmp_path, run_ngrp):
    """The wrong turn: check and health counted 14 rollouts stopped at the token limit, inspect and the
    viewer 13: one hit exactly the limit without an `incomplete` status. One definition now."""
    rollouts, inputs = write_run(tmp_path / "results", tasks=6, repeats=4, truncate_every=5)
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    inputs_rows = [json.loads(line) for line in inputs.read_text().splitlines()]
    for row in (*rows, *inputs_rows):
        row["responses_create_params"]["max_output_tokens"] = 200
    said = sum(r["response"]["status"] == "incomplete" for r in rows)
    silent = next(r for r in rows if r["response"]["status"] == "completed")
    silent["response"]["usage"]["output_tokens"] = 200  # at the cap, and the response does not say so
    filtered = next(r for r in rows if r["response"]["status"] == "completed" and r is not silent)
    filtered["response"]["status"] = "incomplete"  # stopped for another reason: not at the token limit
    filtered["response"]["incomplete_details"] = {"reason": "content_filter"}
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    inputs.write_text("".join(json.dumps(r) + "\n" for r in inputs_rows))
    want = said + 1
    check = json.loads(run_ngrp("check", "--inputs", inputs, "--rollouts", rollouts, "--json").stdout)
    capped = next(f for f in check["findings"] if "stopped at the token cap" in f["message"])
    assert re.search(rf"\b{want} (rollouts )?stopped at the token cap", capped["message"]), capped["message"]
    health = json.loads(run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json").stdout)
    assert next(c for c in health["checks"] if c["id"] == "ngrp/truncated_at_token_cap")["findings"] == want
    shown = run_ngrp("inspect", rollouts, "--truncated", "--json").stdout.splitlines()
    keys = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, shown)}
    assert len(keys) == want
    assert (silent["_ng_task_index"], silent["_ng_rollout_index"]) in keys
    assert (filtered["_ng_task_index"], filtered["_ng_rollout_index"]) not in keys
    run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    profile = tmp_path / "results" / "rollouts_reward_profiling.jsonl"
    stats = json.loads(run_ngrp("stats", profile, "--rollouts", rollouts, "--json").stdout)
    assert stats["overall"]["reward_length"]["truncation"]["n_truncated"] == want


def test_ledger_stop_rules_are_amended_with_consent_and_on_the_record(tmp_path, run_ngrp):
    """The wrong turn: stop rules could not be changed after init, so an agent edited campaign.json."""
    ledger = tmp_path / "L"
    init = run_ngrp("ledger", "init", "--campaign", "c1", "--metric", "mean_reward", "--direction", "max",
                    "--max-experiments", "2", "--dir", ledger)  # fmt: skip
    assert init.returncode == 0, init.stderr
    for i in range(2):
        done = run_ngrp("ledger", "record", "--dir", ledger, "--status", "crash", "--description", f"run {i}",
                        "--branch", "b", "--commit", "abc")  # fmt: skip
        assert done.returncode == 0, done.stderr
    probe = run_ngrp("ledger", "status", "--dir", ledger)  # "may I launch?": one answer
    assert probe.returncode == 1 and "STOP: a stop rule is met" in probe.stdout
    before = (ledger / "campaign.json").read_bytes()
    no_reason = run_ngrp("ledger", "amend", "--dir", ledger, "--max-experiments", "4", "--reason", " ")
    assert no_reason.returncode == 2 and "--reason is required" in no_reason.stderr
    same = run_ngrp("ledger", "amend", "--dir", ledger, "--max-experiments", "2", "--reason", "user said so")
    assert same.returncode == 2 and "nothing to amend" in same.stderr
    assert (ledger / "campaign.json").read_bytes() == before
    amend = run_ngrp("ledger", "amend", "--dir", ledger, "--max-experiments", "4", "--target", "0.6",
                     "--reason", "user approved 2 more runs", "--json")  # fmt: skip
    assert amend.returncode == 0, amend.stderr
    changes = json.loads(amend.stdout)["changes"]
    assert [(c["rule"], c["old"], c["new"]) for c in changes] == [
        ("max_experiments", 2, 4),
        ("target", None, 0.6),
    ]
    campaign = json.loads((ledger / "campaign.json").read_text())
    assert campaign["max_experiments"] == 4 and campaign["target"] == 0.6
    assert [h["reason"] for h in campaign["history"]] == ["user approved 2 more runs"] * 2
    assert all(h["at"] for h in campaign["history"])
    status = run_ngrp("ledger", "status", "--dir", ledger)
    assert status.returncode == 0 and "2/4 attempted" in status.stdout
    assert "stop rules amended 2 time(s)" in status.stdout
    report = json.loads(run_ngrp("ledger", "status", "--dir", ledger, "--json").stdout)
    assert report["amendments"] == campaign["history"]
    from ngrp_lib.artifacts import schemas

    assert schemas.first_problem("ledger_campaign", campaign) is None
    assert schemas.first_problem("ledger_status", report) is None


def test_health_says_how_many_zeros_are_unhealthy_and_why(tmp_path, run_ngrp):
    """One command's text answers 'how many zeros are unhealthy, and why', with the --json under
    documented keys (zero_rewards.total, .unhealthy, .by_check)."""
    inputs, rollouts = _run(tmp_path, truncate_every=3)
    rows = [json.loads(line) for line in Path(rollouts).read_text().splitlines()]
    expected_why = sum(
        1 for r in rows if r["reward"] == 0.0 and r["response"]["status"] == "incomplete"
    )  # the truncated zeros (write_run's truncated rows keep their content)
    report = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write", "--json").stdout
    )
    zero = report["zero_rewards"]
    assert zero["total"] == sum(r["reward"] == 0.0 for r in rows)
    assert zero["unhealthy"] == expected_why > 0
    assert zero["by_check"] == {"ngrp/truncated_at_token_cap": expected_why}
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write").stdout
    assert f"zero rewards: {zero['total']}, of which {expected_why} unhealthy" in text
    assert f"why: ngrp/truncated_at_token_cap {expected_why}" in text


def test_stats_names_the_lowest_pass_rate_tasks_with_ties_and_the_inspect_command(tmp_path, run_ngrp):
    """The wrong turn: to answer "why does the lowest task fail" the agent first read stats --json with
    python3 -c to find that task; two tasks tied at 0/8, which it learnt only later."""
    rollouts, inputs = write_run(tmp_path / "run", tasks=12, repeats=8)
    run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
    profile = tmp_path / "run" / "rollouts_reward_profiling.jsonl"
    text = run_ngrp("stats", profile, "--rollouts", rollouts).stdout
    rows = json.loads(run_ngrp("stats", profile, "--json").stdout)["per_task"]
    rates = sorted({r["successes"] / r["n"] for r in rows})
    lowest = sorted(r["task"] for r in rows if r["successes"] / r["n"] == rates[0])
    after = sorted(r["task"] for r in rows if r["successes"] / r["n"] == rates[1])
    tied = f" ({len(lowest)} tied)" if len(lowest) > 1 else ""
    assert f"lowest pass rate: {rates[0]:.3f}{tied}, of 12 tasks" in text
    for task in lowest:
        row = next(r for r in rows if r["task"] == task)
        assert f'  task {task}: {row["successes"]}/8 passed  "{row["prompt"]}"' in text
    assert "  next lowest: " + ", ".join(f"task {t} " for t in after[:1]) in text
    picks = " ".join(f"--task {t}" for t in lowest[:5])
    assert f"  why they fail: ngrp inspect {rollouts} {picks} --failed" in text
    # the printed command runs and shows only those tasks' failed rollouts
    shown = run_ngrp("inspect", rollouts, *picks.split(), "--failed", "--json").stdout.splitlines()
    assert shown and {json.loads(line)["_ng_task_index"] for line in shown} <= set(lowest)
