"""`ngrp ledger` through the real entry script, on a temporary git repository."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import check, schema
from ledger_helpers import profile_with_means

from ngrp_lib.ledger import read_ledger

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "schemas"


def init(run_ngrp, repo, *extra: str, code: int = 0):
    return check(
        run_ngrp("ledger", "init", "--campaign", "c1", "--metric", "mean_reward", *extra, cwd=repo), code
    )


def test_help_has_examples_and_exit_codes(run_ngrp):
    for sub in ("init", "record", "status"):
        out = check(run_ngrp("ledger", sub, "--help"), 0).stdout
        assert "Example:" in out and "Exit codes:" in out
    assert "ledger" in check(run_ngrp("--help"), 0).stdout


def test_campaign_end_to_end(run_ngrp, repo):
    out = init(run_ngrp, repo, "--direction", "max", "--target", "0.9", "--max-experiments", "5", "--json")
    created = json.loads(out.stdout)
    jsonschema.validate(created, schema("ledger_init"))
    campaign_file = repo / created["campaign_file"]
    jsonschema.validate(json.loads(campaign_file.read_text()), schema("ledger_campaign"))
    assert created["ledger"] == "reports/auto_research/c1/results.tsv"

    base = profile_with_means(repo / "base_reward_profiling.jsonl", [0.2, 0.4, 0.6, 0.5, 0.3])
    better = profile_with_means(repo / "b_reward_profiling.jsonl", [0.3, 0.5, 0.72, 0.6, 0.41])
    rec = ["ledger", "record", "--campaign", "c1", "--json"]
    first = json.loads(
        check(run_ngrp(*rec, "--profile", base, "--description", "baseline", cwd=repo), 0).stdout
    )
    jsonschema.validate(first, schema("ledger_record"))
    assert first["index"] == 1 and first["status"] == "keep" and first["row"]["branch"] == "exp/a"
    assert first["sampling"] is None  # no profile summary beside the profile
    sampling = {"temperature": [{"value": 0.2, "rows": 20}]}
    (repo / "b_profile_summary.json").write_text(json.dumps({"tool": {}, "counts": {}, "sampling": sampling}))
    second = json.loads(
        check(run_ngrp(*rec, "--profile", better, "--elapsed-min", "12.5", cwd=repo), 0).stdout
    )
    assert second["status"] == "keep" and second["row"]["compared_to"].startswith("#1 paired-t")
    jsonschema.validate(second, schema("ledger_record"))
    assert second["sampling"] == sampling  # what the run's rows used, from its profile summary
    shown = check(run_ngrp(*rec[:-1], "--profile", better, "--dry-run", cwd=repo), 0).stdout
    assert "sampling: temperature 0.2 (20 rows)" in shown
    log = repo / "run.log"
    log.write_text("epoch 3 val_reward=0.40\n")
    third = check(run_ngrp(*rec[:-1], "--log", log, "--metric-regex", r"val_reward=([0-9.]+)", cwd=repo), 0)
    assert "recorded #3" in third.stdout and "discard" in third.stdout
    miss = check(run_ngrp(*rec[:-1], "--log", log, "--metric-regex", r"accuracy=([0-9.]+)", cwd=repo), 3)
    assert "matches nothing" in miss.stderr and "--status crash" in miss.stderr
    check(run_ngrp(*rec[:-1], "--status", "crash", "--description", "OOM", cwd=repo), 0)

    status = run_ngrp("ledger", "status", "--campaign", "c1", "--json", cwd=repo)
    data = json.loads(check(status, 0).stdout)
    jsonschema.validate(data, schema("ledger_status"))
    assert data["attempted"] == 4 and data["counts"] == {"keep": 2, "discard": 1, "crash": 1}
    assert data["remaining"] == 1 and data["best"]["index"] == 2 and data["stop"] is False
    text = check(run_ngrp("ledger", "status", "--campaign", "c1", cwd=repo), 0).stdout
    assert "stop condition not yet met" in text and "4 attempted" in text
    rows = read_ledger(repo / "reports/auto_research/c1/results.tsv")
    assert [r.index for r in rows] == [1, 2, 3, 4] and rows[1].fields["elapsed_min"] == "12.50"


@pytest.mark.parametrize(
    ("options", "records", "rule"),
    [
        (["--target", "0.5"], [[0.6, 0.7, 0.5]], "target"),
        (["--max-experiments", "2"], [None, None], "max_experiments"),
        (["--deadline", "2020-01-01T00:00:00Z"], [], "deadline"),
        (["--deadline", "30m", "--per-run-timeout", "2h"], [], "deadline"),
    ],
)
def test_each_stop_rule_fires(run_ngrp, repo, options, records, rule):
    created = init(run_ngrp, repo, "--direction", "max", *options)
    assert ("has already passed" in created.stderr) == ("2020-01-01T00:00:00Z" in options)
    for i, means in enumerate(records):
        extra = (
            ["--status", "crash"]
            if means is None
            else ["--profile", profile_with_means(repo / f"{i}.jsonl", means)]
        )
        check(run_ngrp("ledger", "record", "--campaign", "c1", *extra, cwd=repo), 0)
    result = check(run_ngrp("ledger", "status", "--campaign", "c1", "--json", cwd=repo), 1)
    data = json.loads(result.stdout)
    assert data["stop"] is True and [r["rule"] for r in data["rules"] if r["met"]] == [rule]
    assert "STOP" in check(run_ngrp("ledger", "status", "--campaign", "c1", cwd=repo), 1).stdout


def test_deadline_as_budget_is_fixed_at_init(run_ngrp, repo):
    before = datetime.now(timezone.utc)
    data = json.loads(init(run_ngrp, repo, "--direction", "min", "--deadline", "2h", "--json").stdout)
    deadline = datetime.fromisoformat(data["campaign"]["deadline"])
    assert timedelta(minutes=119) < deadline - before < timedelta(minutes=121)


def test_init_refuses_overwrite_and_bad_input(run_ngrp, repo):
    init(run_ngrp, repo, "--direction", "max")
    ledger = repo / "reports/auto_research/c1/results.tsv"
    ledger.write_text(ledger.read_text() + "precious\n")
    assert "refusing to overwrite" in init(run_ngrp, repo, "--direction", "max", code=2).stderr
    assert ledger.read_text().endswith("precious\n")
    check(run_ngrp("ledger", "init", "--campaign", "c2", "--metric", "m", "--direction", "up", cwd=repo), 2)
    check(
        run_ngrp(
            "ledger",
            "init",
            "--campaign",
            "c2",
            "--metric",
            "m",
            "--direction",
            "max",
            "--deadline",
            "soon",
            cwd=repo,
        ),
        2,
    )
    check(run_ngrp("ledger", "status", "--campaign", "nope", cwd=repo), 3)
    check(run_ngrp("ledger", "status", cwd=repo), 2)


PLANTED = {
    "command": "OPENAI_API_KEY=sk-proj-PLANTEDa1b2c3d4e5 NGC_API_KEY=nvapi-PLANTEDzz998877 python run.py "
    "--api-key hf_PLANTEDqwertyuiop --token=PLANTEDtok3n https://u:PLANTEDpw@host/v1 "
    '-H "Authorization: Bearer PLANTEDbearer99"',
    "description": "retry with HF_TOKEN=hf_PLANTEDdesc123456 and password: PLANTEDpass2\tsee\nnext line",
    "recipe": "cfg.yaml ++policy.api_key=PLANTEDhydra77",
    "job-id": "ray-123 secret=PLANTEDjob5",
}
PLANTED_VALUES = [
    "sk-proj-PLANTEDa1b2c3d4e5",
    "nvapi-PLANTEDzz998877",
    "hf_PLANTEDqwertyuiop",
    "PLANTEDtok3n",
    "PLANTEDpw",
    "PLANTEDbearer99",
    "hf_PLANTEDdesc123456",
    "PLANTEDpass2",
    "PLANTEDhydra77",
    "PLANTEDjob5",
]


def test_planted_secrets_never_written(run_ngrp, repo):
    init(run_ngrp, repo, "--direction", "max")
    options = [x for key, value in PLANTED.items() for x in (f"--{key}", value)]
    profile = profile_with_means(repo / "p.jsonl", [0.5, 0.6])
    for extra in (["--profile", profile], ["--status", "crash"]):
        result = check(
            run_ngrp("ledger", "record", "--campaign", "c1", "--json", *options, *extra, cwd=repo), 0
        )
        for secret in PLANTED_VALUES:
            assert secret not in result.stdout and secret not in result.stderr
    written = [p for p in (repo / "reports").rglob("*") if p.is_file()]
    assert {p.name for p in written} == {"results.tsv", "campaign.json", "results.tsv.lock"}
    for path in written:
        content = path.read_text()
        for secret in PLANTED_VALUES:
            assert secret not in content, f"{secret} leaked into {path}"
    rows = read_ledger(repo / "reports/auto_research/c1/results.tsv")
    assert rows[0].fields["description"].endswith("\tsee\nnext line")  # tabs/newlines survive, escaped
    assert "python run.py" in rows[0].fields["command"]


def test_environment_dump_refused(run_ngrp, repo):
    init(run_ngrp, repo, "--direction", "max")
    dump = "\n".join(f"VAR_{i}=value{i}" for i in range(8))
    result = check(
        run_ngrp(
            "ledger", "record", "--campaign", "c1", "--status", "crash", "--description", dump, cwd=repo
        ),
        2,
    )
    assert "environment dump" in result.stderr
    assert read_ledger(repo / "reports/auto_research/c1/results.tsv") == []


def test_outside_git_and_detached(run_ngrp, tmp_path, repo):
    plain = tmp_path / "plain"
    plain.mkdir()
    check(
        run_ngrp(
            "ledger",
            "init",
            "--campaign",
            "c",
            "--metric",
            "m",
            "--direction",
            "max",
            "--dir",
            "L",
            cwd=plain,
        ),
        0,
    )
    out = json.loads(
        check(run_ngrp("ledger", "record", "--dir", "L", "--status", "crash", "--json", cwd=plain), 0).stdout
    )
    assert out["row"]["branch"] == out["row"]["commit"] == "none"
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach"], check=True)
    out = json.loads(
        check(
            run_ngrp(
                "ledger", "record", "--dir", "L", "--status", "crash", "--json", "--repo", repo, cwd=plain
            ),
            0,
        ).stdout
    )
    assert out["row"]["branch"].startswith("detached@") and out["index"] == 2


@pytest.mark.parametrize(
    ("tamper", "line", "words"),
    [
        (lambda text: "\tmaybe\t".join(text.rsplit("\tcrash\t", 1)), 3, "status 'maybe'"),
        (lambda text: text + "3\tonly-two-fields\n", 4, "found 2"),
        (lambda text: text.replace("index\t", "idx\t"), 1, "header"),
        (lambda text: text + text.splitlines(keepends=True)[1], 4, "already used on line 2"),
    ],
)
def test_malformed_ledger_exit_3_names_line(run_ngrp, repo, tamper, line, words):
    init(run_ngrp, repo, "--direction", "max")
    for _ in range(2):
        check(run_ngrp("ledger", "record", "--campaign", "c1", "--status", "crash", cwd=repo), 0)
    ledger = repo / "reports/auto_research/c1/results.tsv"
    ledger.write_text(tamper(ledger.read_text()))
    for args in (("status",), ("record", "--status", "crash")):
        result = check(run_ngrp("ledger", *args, "--campaign", "c1", cwd=repo), 3)
        assert f"results.tsv:{line}:" in result.stderr and words in result.stderr


APPENDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from ngrp_lib.ledger import LedgerPaths, MetricSource, RunInfo, record_run
    paths, tag, count = LedgerPaths(Path(sys.argv[2])), sys.argv[3], int(sys.argv[4])
    for i in range(count):
        run = RunInfo(status="crash", repo=paths.dir, description=f"{tag}-{i}", branch=tag, commit="c")
        record_run(paths, run, MetricSource())
    """
)


def test_two_processes_appending_at_once(run_ngrp, tmp_path):
    check(
        run_ngrp("ledger", "init", "--campaign", "c", "--metric", "m", "--direction", "max", "--dir", "L"), 0
    )
    count = 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(REPO / "scripts"), str(tmp_path / "L"), tag, str(count)]
        )
        for tag in ("alpha", "beta")
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    rows = read_ledger(tmp_path / "L" / "results.tsv")  # strict: header, fields, unique indices
    assert sorted(r.index for r in rows) == list(range(1, 2 * count + 1))
    seen = {r.fields["description"] for r in rows}
    assert seen == {f"{tag}-{i}" for tag in ("alpha", "beta") for i in range(count)}
    for tag in ("alpha", "beta"):  # each writer's rows keep their order
        mine = [int(r.fields["description"].split("-")[1]) for r in rows if r.fields["branch"] == tag]
        assert mine == list(range(count))
    check(run_ngrp("ledger", "status", "--dir", "L"), 1)  # default rule: 4 attempted -> stop


def test_record_from_real_stats_json(run_ngrp, repo, golden):
    if "stats" not in check(run_ngrp("--help"), 0).stdout:
        pytest.skip("the stats command is not on this branch")
    profile = golden / "case_complete" / "rollouts_reward_profiling.jsonl"
    stats = json.loads(check(run_ngrp("stats", "--json", profile), 0).stdout)
    stats_path = repo / "stats.json"
    stats_path.write_text(json.dumps(stats))
    init(run_ngrp, repo, "--direction", "max")
    key = "overall.mean_reward.task_weighted"
    out = check(
        run_ngrp(
            "ledger",
            "record",
            "--campaign",
            "c1",
            "--from-json",
            stats_path,
            "--metric-key",
            key,
            "--profile",
            profile,
            "--json",
            cwd=repo,
        ),
        0,
    )
    row = json.loads(out.stdout)["row"]
    expected = stats["overall"]["mean_reward"]["task_weighted"]
    assert (row["metric_value"], row["ci_low"], row["ci_high"], row["n_tasks"]) == (
        expected["value"],
        expected["ci_low"],
        expected["ci_high"],
        expected["n_tasks"],
    )
