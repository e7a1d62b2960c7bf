"""`ngrp ledger run` through the real entry script: real commands in temporary git repositories.

Each test runs real subprocesses (python, bash, sleep) and reads what the ledger, the run's log and
`ps` say afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import check, schema
from ledger_helpers import ENTRY, LEDGER_RUN, make_repo, profile_with_means

from ngrp_lib.ledger import read_ledger

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
LEDGER = Path("reports/auto_research/c1")
SCORE = r"score=(?P<value>[0-9.]+)"
pytestmark = pytest.mark.ledger_campaign(
    "--metric", "score", "--direction", "max", "--max-experiments", "8", "--per-run-timeout", "2m"
)


def run(run_ngrp, repo: Path, *command: str, options: tuple[str, ...] = (), code: int = 0) -> dict:
    """`ngrp ledger run --json` with the score regex; the parsed, schema-checked result."""
    argv = [*LEDGER_RUN, "--json", "--metric-regex", SCORE, *options, "--", *command]
    result = check(run_ngrp(*argv, cwd=repo), code)
    data = json.loads(result.stdout)
    jsonschema.validate(data, schema("ledger_run_result"))
    jsonschema.validate(data["record"], schema("ledger_record"))
    record = json.loads((repo / data["run_dir"] / "run.json").read_text())
    jsonschema.validate(record, schema("ledger_run"))
    assert record["state"] == "recorded" and record["run_class"] == data["run_class"]
    data["stderr"] = result.stderr
    return data


def rows(repo: Path):
    return read_ledger(repo / LEDGER / "results.tsv")


def group_left(pgid: int) -> list[str]:
    """Processes of a process group that `ps` still lists (zombies included), after a moment for init
    to reap what it inherited."""
    for _ in range(20):
        listing = subprocess.run(["ps", "-e", "-o", "pid=,pgid=,stat=,args="], capture_output=True, text=True)
        left = [line for line in listing.stdout.splitlines() if line.split()[1] == str(pgid)]
        if not left:
            return []
        time.sleep(0.1)
    return left


def test_a_run_that_prints_its_metric_is_kept_and_logged(run_ngrp, repo):
    secret = "sk-proj-PLANTEDa1b2c3d4e5"
    code = "import sys; print('training...'); print('score=0.625')"
    data = run(
        run_ngrp, repo, sys.executable, "-c", code, f"--api-key={secret}", options=("--description", "base")
    )
    assert (data["run_class"], data["status"], data["index"]) == ("ok", "keep", 1)
    row = data["record"]["row"]
    assert row["metric_value"] == 0.625 and row["branch"] == "exp/a" and row["launcher"] == "local"
    assert row["log_path"].endswith("logs/1/run.log") and row["elapsed_min"] is not None
    assert row["memory_gb"] is not None and data["memory_source"] == "host_rss"
    assert secret not in row["command"] and "--api-key=***" in row["command"]
    log = (repo / data["log"]).read_text()
    assert log == "training...\nscore=0.625\n"
    assert "score=0.625" in data["stderr"]  # teed to stderr as well (no --quiet)
    for path in (repo / LEDGER).rglob("*"):
        assert not path.is_file() or secret not in path.read_text(errors="replace"), path
    assert group_left(data["outcome"]["pgid"]) == []


def test_timeout_stops_the_whole_process_group(run_ngrp, repo):
    start = time.monotonic()
    data = run(
        run_ngrp,
        repo,
        "bash",
        "-c",
        "sleep 60 & sleep 60 & (setsid sleep 61 &); sleep 60",
        options=("--timeout", "2s", "--grace", "1"),
    )
    assert time.monotonic() - start < 30
    assert data["run_class"] == "timeout" and data["status"] == "crash"
    assert data["outcome"]["timed_out"] is True and data["outcome"]["signal"] == signal.SIGTERM
    assert group_left(data["outcome"]["pgid"]) == []
    ps = subprocess.run(["ps", "-e", "-o", "args="], capture_output=True, text=True).stdout
    assert "sleep 61" not in ps  # left the group with setsid, stopped all the same
    row = rows(repo)[0]
    assert row.fields["metric_value"] == "0.000000" and row.fields["memory_gb"] == "0.0"
    assert "[timeout: stopped at the 2s timeout" in row.fields["description"]


def test_sigterm_ignored_means_sigkill_after_the_grace(run_ngrp, repo):
    data = run(
        run_ngrp,
        repo,
        "bash",
        "-c",
        "trap '' TERM; sleep 60; sleep 60",
        options=("--timeout", "1s", "--grace", "1"),
    )
    assert data["run_class"] == "timeout" and data["outcome"]["signal"] == signal.SIGKILL
    assert group_left(data["outcome"]["pgid"]) == []


@pytest.mark.parametrize(
    ("script", "run_class", "evidence"),
    [
        (
            "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1",
            "oom",
            "CUDA out of memory",
        ),
        ("echo working; exit 137", "oom", ""),
        ("echo 'step 40 loss nan'; echo 'score=0.5'", "nan", "loss nan"),
        ("echo 'step 40 loss: 0.31'", "no_metric", ""),
        ("", "no_metric", ""),
        ("echo 'Traceback: boom' >&2; exit 3", "exit:3", "Traceback: boom"),
        ("kill -SEGV $$", "killed", ""),
    ],
)
def test_each_ending_is_classified_and_recorded_as_a_crash(run_ngrp, repo, script, run_class, evidence):
    data = run(run_ngrp, repo, "bash", "-c", script)
    assert data["run_class"] == run_class and data["status"] == "crash"
    assert evidence in data["evidence"]
    row = rows(repo)[0]
    assert row.fields["description"].startswith(f"[{run_class}: ")
    assert row.fields["metric_value"] == "0.000000"
    if run_class == "no_metric":
        assert "matches nothing" in data["detail"] and "tail -n 50" in data["detail"]
        assert data["log_tail"] == (["step 40 loss: 0.31"] if script else [])
    if run_class == "oom" and not evidence:
        assert "exit 137" in data["detail"]


def test_metric_from_a_json_the_run_writes_and_the_nearest_key_paths(run_ngrp, repo):
    k1 = {"k": 1, "value": 0.4, "ci_low": 0.3, "ci_high": 0.5, "n_tasks": 50}
    k4 = {"k": 4, "value": 0.7, "ci_low": 0.6, "ci_high": 0.8, "n_tasks": 50}
    write = f"import json; json.dump({ {'overall': {'pass_at_k': [k1, k4]}}!r}, open('m.json', 'w'))"

    def run_with(key: str) -> dict:
        argv = [*LEDGER_RUN, "--json", "--metric-from-json", "m.json", "--metric-key", key]
        return json.loads(check(run_ngrp(*argv, "--", sys.executable, "-c", write, cwd=repo), 0).stdout)

    good = run_with("overall.pass_at_k.k=1")
    row = good["record"]["row"]
    assert good["run_class"] == "ok"
    assert (row["metric_value"], row["ci_low"], row["ci_high"], row["n_tasks"]) == (0.4, 0.3, 0.5, 50)
    miss = run_with("pass_at_k.k=1")
    assert miss["run_class"] == "no_metric" and "overall.pass_at_k.k=1" in miss["detail"]
    record = run_ngrp(
        "ledger",
        "record",
        "--campaign",
        "c1",
        "--from-json",
        "m.json",
        "--metric-key",
        "pass_at_k.k=1",
        cwd=repo,
    )
    assert "nearest key paths: overall.pass_at_k.k=1" in check(record, 3).stderr


def test_paired_keep_and_discard_against_the_best_run(run_ngrp, repo, tmp_path):
    base = profile_with_means(tmp_path / "base.jsonl", [0.2, 0.4, 0.6, 0.5, 0.3, 0.4])
    better = profile_with_means(tmp_path / "better.jsonl", [0.3, 0.5, 0.72, 0.6, 0.41, 0.5])
    options = ("--profile", "{run_dir}/rollouts_reward_profiling.jsonl")

    def copy(source: Path, score: float) -> list[str]:
        target = '"$NGRP_LEDGER_RUN_DIR/rollouts_reward_profiling.jsonl"'
        return ["bash", "-c", f"cp {source} {target}; echo score={score}"]

    first = run(run_ngrp, repo, *copy(base, 0.45), options=options)
    second = run(run_ngrp, repo, *copy(better, 0.5), options=options)  # the best so far, by the metric
    third = run(run_ngrp, repo, *copy(base, 0.45), options=options)
    assert (first["status"], second["status"], third["status"]) == ("keep", "keep", "discard")
    assert second["record"]["row"]["compared_to"].startswith("#1 paired-t")
    assert third["record"]["row"]["compared_to"].startswith("#2 paired-t")
    expected = (repo / LEDGER / "logs" / "3" / "rollouts_reward_profiling.jsonl").resolve()
    assert third["record"]["row"]["profile_path"] == str(expected)
    # One path for every run: each run overwrites the last one's profile, so nothing can be paired.
    shared = repo / "shared_reward_profiling.jsonl"
    same = ("--profile", str(shared))
    run(run_ngrp, repo, "bash", "-c", f"cp {better} {shared}; echo score=0.9", options=same)
    again = run(
        run_ngrp,
        repo,
        "bash",
        "-c",
        f"cp {base} {shared}; echo score=0.9",
        options=(*same, "--compare-to", "4"),
    )
    assert again["status"] == "discard" and "overwritten" in again["record"]["reason"]


def test_refused_once_a_stop_rule_is_met(run_ngrp, tmp_path):
    repo = make_repo(tmp_path / "r")
    check(
        run_ngrp(
            "ledger",
            "init",
            "--campaign",
            "c1",
            "--metric",
            "score",
            "--direction",
            "max",
            "--max-experiments",
            "2",
            cwd=repo,
        ),
        0,
    )
    run(run_ngrp, repo, "bash", "-c", "echo score=0.1")
    run(run_ngrp, repo, "bash", "-c", "exit 2")
    marker = repo / "ran.txt"
    refused = run_ngrp(
        "ledger",
        "run",
        "--campaign",
        "c1",
        "--metric-regex",
        SCORE,
        "--",
        "bash",
        "-c",
        f"touch {marker}",
        cwd=repo,
    )
    assert "stop rule max_experiments is met" in check(refused, 1).stderr and refused.stdout == ""
    assert not marker.exists() and len(rows(repo)) == 2
    assert sorted(p.name for p in (repo / LEDGER / "logs").iterdir()) == ["1", "2"]


def test_two_runs_at_once_get_unique_indices(repo):
    argv = [*ENTRY, *LEDGER_RUN, "--json", "--quiet", "--metric-regex", SCORE, "--"]
    procs = [
        subprocess.Popen(
            [*argv, "bash", "-c", f"sleep 1; echo score=0.{i}"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    results = [json.loads(out) for out, _err in outs]
    assert sorted(r["index"] for r in results) == [1, 2]
    recorded = rows(repo)
    assert sorted(r.index for r in recorded) == [1, 2]
    by_index = {r.index: r for r in recorded}
    for result in results:
        log = (repo / result["log"]).read_text()
        assert f"score={by_index[result['index']].fields['metric_value']}" in log


def test_ctrl_c_stops_the_run_and_records_it(repo):
    argv = [
        *ENTRY,
        *LEDGER_RUN,
        "--json",
        "--quiet",
        "--metric-regex",
        SCORE,
        "--",
        "bash",
        "-c",
        "sleep 60 & sleep 60",
    ]
    proc = subprocess.Popen(argv, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = repo / LEDGER / "logs" / "1" / "run.json"
    deadline = time.monotonic() + 30
    while not (record.exists() and "running" in record.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    status_argv = [*ENTRY, "ledger", "status", "--campaign", "c1", "--json"]
    status = json.loads(subprocess.run(status_argv, cwd=repo, capture_output=True, text=True).stdout)
    assert [r["index"] for r in status["open_runs"]] == [1] and status["open_runs"][0]["owner_alive"] is True
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    data = json.loads(out)
    assert data["run_class"] == "killed" and data["outcome"]["stopped_by"] == "SIGINT"
    assert "Ctrl-C" in rows(repo)[0].fields["description"]
    assert group_left(data["outcome"]["pgid"]) == []


def test_leftover_processes_are_stopped_when_the_command_returns(run_ngrp, repo):
    data = run(run_ngrp, repo, "bash", "-c", "sleep 60 & echo score=0.3")
    assert data["run_class"] == "ok" and any("still running" in n for n in data["outcome"]["notes"])
    assert group_left(data["outcome"]["pgid"]) == []


def test_refusals_before_anything_runs(run_ngrp, repo):
    base = [*LEDGER_RUN]
    assert (
        "command not found"
        in check(run_ngrp(*base, "--metric-regex", SCORE, "--", "no-such-cmd-x", cwd=repo), 2).stderr
    )
    assert "no metric source" in check(run_ngrp(*base, "--", "true", cwd=repo), 2).stderr
    assert (
        "not a valid regular"
        in check(run_ngrp(*base, "--metric-regex", "(", "--", "true", cwd=repo), 2).stderr
    )
    assert (
        "needs --metric-key"
        in check(run_ngrp(*base, "--metric-from-json", "x.json", "--", "true", cwd=repo), 2).stderr
    )
    assert (
        "more than zero"
        in check(run_ngrp(*base, "--metric-regex", SCORE, "--timeout", "0", "--", "true", cwd=repo), 2).stderr
    )
    assert not (repo / LEDGER / "logs").exists() and rows(repo) == []


def test_outside_git_warns_how_to_start_a_repository(run_ngrp, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    init = check(
        run_ngrp("ledger", "init", "--campaign", "c1", "--metric", "m", "--direction", "max", cwd=plain), 0
    )
    assert "not in a git repository" in init.stderr and "git init" in init.stderr
    data = run(run_ngrp, plain, "bash", "-c", "echo score=1")
    assert data["record"]["row"]["branch"] == "none"
    assert any("not in a git repository" in w and "git init" in w for w in data["warnings"])
    subprocess.run(["git", "init", "-q", str(plain)], check=True)
    record = check(run_ngrp("ledger", "record", "--campaign", "c1", "--status", "crash", cwd=plain), 0)
    assert "no commit yet" in record.stderr and "git commit" in record.stderr


def test_dirty_tree_is_warned_at_record_time(run_ngrp, repo):
    (repo / "recipe.yaml").write_text("lr: 3e-6\n")
    data = run(run_ngrp, repo, "bash", "-c", "echo score=0.2")
    assert any("uncommitted changes" in w for w in data["warnings"])
    assert data["stderr"].count("uncommitted changes") == 1  # said once, before the run


def test_files_the_run_changed_are_listed(run_ngrp, repo):
    data = run(
        run_ngrp,
        repo,
        "bash",
        "-c",
        'echo hi > made.txt; echo x > "$NGRP_LEDGER_RUN_DIR/extra.txt"; echo score=1',
    )
    record = json.loads((repo / data["run_dir"] / "run.json").read_text())
    assert record["files_changed"] == ["made.txt"]  # the ledger's own folder is left out
    assert (repo / data["run_dir"] / "extra.txt").read_text() == "x\n"


def test_environment_of_the_run(run_ngrp, repo):
    data = run(run_ngrp, repo, "bash", "-c", 'echo "score=$NGRP_LEDGER_INDEX $NGRP_LEDGER_CAMPAIGN"')
    assert data["record"]["row"]["metric_value"] == 1.0
    assert (repo / data["log"]).read_text() == "score=1 c1\n"
    assert os.environ.get("NGRP_LEDGER_INDEX") is None
