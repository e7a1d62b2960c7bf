"""Ledger library: escaping, strict parsing, scrubbing, t quantiles, paired intervals, metric readers,
stop rules. The CLI is tested in test_ledger_cli.py."""

from __future__ import annotations

import json
import math
import statistics
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_helpers import git, make_repo, profile_with_means, write_profile

from ngrp_lib.errors import InputError, UsageError
from ngrp_lib.ledger import (
    CampaignSpec,
    MetricSource,
    RunInfo,
    init_campaign,
    ledger_status,
    read_ledger,
    record_run,
    scrub,
    table,
)
from ngrp_lib.ledger.campaign import LedgerPaths, parse_deadline, parse_duration_min
from ngrp_lib.ledger.gitinfo import read_git
from ngrp_lib.ledger.metric import from_json, from_log, from_profile, lookup
from ngrp_lib.ledger.paired import compare

T0 = datetime(2026, 3, 24, 8, 0, tzinfo=timezone.utc)

# Two-sided 95% Student-t critical values from printed tables (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 30: 2.042, 100: 1.984}


# --- TSV escaping and parsing -------------------------------------------------------------------


@pytest.mark.parametrize("text", ["plain", "a\tb", "line1\nline2\r\n", "back\\slash\\t", "", "\\n literal"])
def test_escape_round_trip_is_one_line(text):
    escaped = table.escape(text)
    assert "\t" not in escaped and "\n" not in escaped and "\r" not in escaped
    assert table.unescape(escaped) == text


def _ledger(tmp_path: Path, *rows: list[str], header: str | None = None) -> Path:
    path = tmp_path / "results.tsv"
    lines = [header if header is not None else "\t".join(table.COLUMNS)] + ["\t".join(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _cells(**over: str) -> list[str]:
    base = {c: "" for c in table.COLUMNS}
    base.update(index="1", branch="b", status="keep", metric_value="0.5", metric_name="m")
    base.update(over)
    return [base[c] for c in table.COLUMNS]


@pytest.mark.parametrize(
    ("rows", "line", "words"),
    [
        ([_cells(), _cells(index="2")[:-1]], 3, "expected 20 tab-separated fields, found 19"),
        ([_cells(status="maybe")], 2, "status 'maybe'"),
        ([_cells(), _cells()], 3, "index 1 is already used on line 2"),
        ([_cells(index="x")], 2, "index 'x'"),
        ([_cells(metric_value="nan")], 2, "metric_value 'nan' is not a finite number"),
        ([_cells(description="bad \\q escape")], 2, "bad escape"),
        ([_cells(n_tasks="-3")], 2, "n_tasks '-3'"),
    ],
)
def test_malformed_rows_name_their_line(tmp_path, rows, line, words):
    path = _ledger(tmp_path, *rows)
    with pytest.raises(InputError) as err:
        read_ledger(path)
    assert err.value.line == line and err.value.exit_code == 3
    assert words in err.value.message


def test_malformed_header_and_tail(tmp_path):
    with pytest.raises(InputError) as err:
        read_ledger(_ledger(tmp_path, header="index\tbranch"))
    assert err.value.line == 1
    path = tmp_path / "results.tsv"
    path.write_text("\t".join(table.COLUMNS) + "\n" + "\t".join(_cells()))  # no final newline
    with pytest.raises(InputError) as err:
        read_ledger(path)
    assert err.value.line == 2 and "no newline" in err.value.message
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="UTF-8"):
        read_ledger(path)


def test_valid_rows_parse_to_types(tmp_path):
    rows = read_ledger(
        _ledger(tmp_path, _cells(ci_low="0.4", ci_high="0.6", n_tasks="12", description="a\\tb"))
    )
    data = rows[0].to_json()
    assert data["metric_value"] == 0.5 and data["ci_low"] == 0.4 and data["n_tasks"] == 12
    assert data["memory_gb"] is None and data["description"] == "a\tb" and data["line"] == 2


# --- secret scrubbing ---------------------------------------------------------------------------

SECRETS = [
    "sk-proj-Ab3dEf6hIj9kLmN0pQ",
    "nvapi-QwErTy123456789_abc",
    "hf_AbCdEfGhIjKlMnOpQrSt",
    "ghp_0123456789abcdefABCDEF",
    "hunter2pass",
    "s3cr3tv4lue",
    "tok-9f8e7d6c5b",
    "BearerTok3nValue",
    "AKIAABCDEFGHIJKLMNOP",
]


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLmN0pQ python run.py", "sk-proj-Ab3dEf6hIj9kLmN0pQ"),
        ("run --api-key nvapi-QwErTy123456789_abc --n 3", "nvapi-QwErTy123456789_abc"),
        ("HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt", "hf_AbCdEfGhIjKlMnOpQrSt"),
        ("git clone https://ghp_0123456789abcdefABCDEF@github.com/x/y", "ghp_0123456789abcdefABCDEF"),
        ("curl https://alice:hunter2pass@host:8000/v1/models", "hunter2pass"),
        ("export DB_PASSWORD='s3cr3tv4lue'; run", "s3cr3tv4lue"),
        ("run --token=tok-9f8e7d6c5b", "tok-9f8e7d6c5b"),
        ('curl -H "Authorization: Bearer BearerTok3nValue" x', "BearerTok3nValue"),
        ("++policy.generation.api_key=tok-9f8e7d6c5b", "tok-9f8e7d6c5b"),
        ('{"client_secret": "s3cr3tv4lue"}', "s3cr3tv4lue"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("curl -H 'Authorization: token 9f8e7d6c5b4a'", "9f8e7d6c5b4a"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("WANDB_API_KEY=s3cr3tv4lue\tNEXT=1", "s3cr3tv4lue"),
    ],
)
def test_scrub_removes_secret(text, secret):
    cleaned = scrub(text)
    assert secret not in cleaned and "***" in cleaned


@pytest.mark.parametrize(
    "text",
    [
        "python train.py --max-tokens 512 max_new_tokens=64 --metric-key overall.mean_reward",
        "sort_key=task tokenizer=qwen --seed 3 http://localhost:8000/v1",
        "the password policy is unchanged",
        "ngrp stats p.jsonl --pass-threshold 0.5 --answer-key extracted_answer",
        "shorter token budget, basic reward shaping, Bearer of bad news",
    ],
)
def test_scrub_leaves_ordinary_text(text):
    assert scrub(text) == text


# --- statistics ---------------------------------------------------------------------------------


def test_paired_compare_by_hand(tmp_path):
    # Per-task means A and B; differences 0.1, 0.2, 0.3, 0.0: mean 0.15, sd sqrt(0.05/3).
    a = profile_with_means(tmp_path / "a.jsonl", [0.5, 0.25, 0.0, 1.0])
    b = profile_with_means(tmp_path / "b.jsonl", [0.6, 0.45, 0.3, 1.0])
    result = compare(a, b)
    half = 3.182446305284263 * math.sqrt(0.05 / 3) / 2.0
    assert result.n_tasks == 4 and result.n_dropped == 0
    assert result.mean_diff == pytest.approx(0.15)
    assert (result.ci_low, result.ci_high) == (pytest.approx(0.15 - half), pytest.approx(0.15 + half))
    assert result.mean_a == pytest.approx(0.4375) and result.mean_b == pytest.approx(0.5875)


def test_paired_compare_uses_shared_tasks_only(tmp_path):
    a = write_profile(tmp_path / "a.jsonl", {0: [1, 0], 1: [0, 0], 2: [1, 1]})
    b = write_profile(tmp_path / "b.jsonl", {1: [1, 0], 2: [1, 0], 7: [1, 1]})
    result = compare(a, b)
    assert result.n_tasks == 2 and result.n_dropped == 2
    assert result.mean_diff == pytest.approx(((0.5 - 0.0) + (0.5 - 1.0)) / 2)


def test_from_profile_interval_against_statistics_module(tmp_path):
    values = [0.2, 0.9, 0.4, 0.4, 0.75, 0.1]
    got = from_profile(profile_with_means(tmp_path / "p.jsonl", values))
    half = T975[5] * statistics.stdev(values) / math.sqrt(len(values))
    assert got.value == pytest.approx(statistics.fmean(values))
    assert got.ci_low == pytest.approx(got.value - half, abs=1e-3)
    assert got.ci_high == pytest.approx(got.value + half, abs=1e-3)
    single = from_profile(profile_with_means(tmp_path / "one.jsonl", [0.3]))
    assert (single.value, single.ci_low, single.ci_high) == (pytest.approx(0.3), None, None)


# --- metric readers -----------------------------------------------------------------------------


def test_lookup_paths():
    data = {"overall": {"mean_reward": {"task_weighted": 0.5}}, "pass@1.0": 3, "l": [{"x": 1}], "a/b": 2}
    assert lookup(data, "overall.mean_reward.task_weighted") == (True, 0.5)
    assert lookup(data, "pass@1.0") == (True, 3)
    assert lookup(data, "l.0.x") == (True, 1)
    assert lookup(data, "/a~1b") == (True, 2)
    ks = {"pass_at_k": [{"k": 1, "value": 0.3}, {"k": 4, "value": 0.6}], "bands": [{"name": "hard", "n": 2}]}
    assert lookup(ks, "pass_at_k.k=4.value") == (True, 0.6)
    assert lookup(ks, "bands.name=hard.n") == (True, 2)
    assert lookup(ks, "pass_at_k.k=3")[0] is False
    assert lookup(data, "overall.nope")[0] is False


def test_from_json_shapes(tmp_path):
    path = tmp_path / "stats.json"
    path.write_text(
        json.dumps(
            {
                "overall": {
                    "mean_reward": {"task_weighted": 0.61, "task_weighted_ci": [0.55, 0.67]},
                    "pass@1": {"value": 0.4, "ci_low": 0.3, "ci_high": 0.5, "n_tasks": 50},
                    "plain": 0.2,
                    "interval": {"low": 0.1, "high": 0.3},
                },
            }
        )
    )
    got = from_json(path, "overall.mean_reward.task_weighted")
    assert (got.value, got.ci_low, got.ci_high) == (0.61, 0.55, 0.67)
    got = from_json(path, "overall.pass@1")
    assert (got.value, got.ci_low, got.ci_high, got.n_tasks) == (0.4, 0.3, 0.5, 50)
    got = from_json(path, "overall.plain", ci_key="overall.interval")
    assert (got.value, got.ci_low, got.ci_high) == (0.2, 0.1, 0.3)
    with pytest.raises(InputError, match="not found"):
        from_json(path, "overall.missing")
    with pytest.raises(InputError, match="not a finite number"):
        from_json(path, "overall.interval")


def test_from_json_reads_gym_agent_metrics_interval(golden):
    path = golden / "case_complete" / "rollouts_agent_metrics.json"
    got = from_json(path, "0.mean_across_repeats/mean/reward")
    data = json.loads(path.read_text())[0]
    assert got.value == data["mean_across_repeats/mean/reward"]
    assert got.ci_low == data["ci_low_95_across_repeats/mean/reward"]
    assert got.ci_high == data["ci_high_95_across_repeats/mean/reward"]


def test_from_profile_on_golden(golden):
    path = golden / "case_complete" / "rollouts_reward_profiling.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    means = [statistics.fmean(i["reward"] for i in r["rollout_infos"]) for r in rows]
    got = from_profile(path)
    assert got.value == pytest.approx(statistics.fmean(means)) and got.n_tasks == len(rows)
    assert got.ci_low < got.value < got.ci_high


def test_from_log(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("step 1 val/reward=0.41\nstep 2 val/reward=0.47 ci=[0.40,0.52]\nbye\n")
    assert from_log(log, r"val/reward=([0-9.]+)").value == 0.47  # the last match wins
    got = from_log(log, r"val/reward=(?P<value>[0-9.]+) ci=\[(?P<ci_low>[0-9.]+),(?P<ci_high>[0-9.]+)\]")
    assert (got.value, got.ci_low, got.ci_high) == (0.47, 0.40, 0.52)
    with pytest.raises(InputError, match="matches nothing") as err:
        from_log(log, r"accuracy=([0-9.]+)")
    assert "--status crash" in err.value.hint
    with pytest.raises(InputError, match="not a finite number"):
        from_log(log, r"(bye)")
    with pytest.raises(UsageError):
        from_log(log, r"(")


# --- campaign, durations and stop rules ---------------------------------------------------------


@pytest.mark.parametrize(("text", "minutes"), [("90m", 90), ("2h", 120), ("1h30m", 90), ("1.5h", 90),
                                               ("45s", 0.75), ("1d", 1440), ("30", 30)])  # fmt: skip
def test_durations(text, minutes):
    assert parse_duration_min(text) == pytest.approx(minutes)


def test_deadline_forms():
    assert parse_deadline("2026-03-24T18:00:00Z", T0) == "2026-03-24T18:00:00+00:00"
    assert parse_deadline("2026-03-24T20:00:00+02:00", T0) == "2026-03-24T18:00:00+00:00"
    assert parse_deadline("2026-03-24T18:00:00", T0) == "2026-03-24T18:00:00+00:00"  # no offset = UTC
    assert parse_deadline("10h", T0) == "2026-03-24T18:00:00+00:00"
    with pytest.raises(UsageError):
        parse_deadline("tomorrow", T0)
    with pytest.raises(UsageError):
        parse_duration_min("ninety")


def _campaign(tmp_path, **rules) -> LedgerPaths:
    paths = LedgerPaths(tmp_path / "ledger")
    init_campaign(paths, CampaignSpec(campaign="c", metric="mean_reward", **rules), now=T0)
    return paths


def _record(paths, tmp_path, means=None, status="auto", **run):
    source = MetricSource()
    if means is not None:
        source.profile = profile_with_means(tmp_path / f"p{len(list(tmp_path.iterdir()))}.jsonl", means)
    return record_run(paths, RunInfo(status=status, repo=tmp_path, **run), source)


def _rule(status, name):
    return next(r for r in status.rules if r.rule == name)


def test_target_rule_max_and_min(tmp_path):
    paths = _campaign(tmp_path / "a", direction="max", target=0.5)
    _record(paths, tmp_path, [0.3, 0.4, 0.35])
    assert not ledger_status(paths, now=T0).stop
    _record(paths, tmp_path, [0.6, 0.7, 0.8])
    status = ledger_status(paths, now=T0)
    assert status.stop and _rule(status, "target").met and status.best["index"] == 2

    paths = _campaign(tmp_path / "b", direction="min", target=0.2)
    _record(paths, tmp_path, [0.3, 0.4, 0.35])
    assert not ledger_status(paths, now=T0).stop
    _record(paths, tmp_path, [0.1, 0.15, 0.12])
    assert _rule(ledger_status(paths, now=T0), "target").met


def test_max_experiments_counts_crashes(tmp_path):
    paths = _campaign(tmp_path, direction="max", max_experiments=2)
    _record(paths, tmp_path, status="crash")
    status = ledger_status(paths, now=T0)
    assert not status.stop and status.remaining == 1
    _record(paths, tmp_path, status="crash")
    status = ledger_status(paths, now=T0)
    assert status.stop and _rule(status, "max_experiments").met and status.best is None


def test_deadline_and_not_enough_time_for_a_run(tmp_path):
    paths = _campaign(tmp_path, direction="max", deadline="10h", per_run_timeout="90m")
    early = ledger_status(paths, now=T0 + timedelta(hours=8))
    assert not early.stop and early.runs_that_fit == 1 and early.time_left_min == 120
    status = ledger_status(paths, now=T0 + timedelta(hours=9))  # 60 min left < 90 min per run
    assert status.stop and "less than one run" in _rule(status, "deadline").detail
    status = ledger_status(paths, now=T0 + timedelta(hours=11))
    assert status.stop and "passed" in _rule(status, "deadline").detail and status.time_left_min == -60


def test_default_rule_is_baseline_plus_three(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    status = ledger_status(paths, now=T0)
    assert status.default_rule and status.remaining == 4


def test_init_refuses_existing_and_bad_options(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    with pytest.raises(UsageError, match="refusing to overwrite"):
        init_campaign(paths, CampaignSpec(campaign="c", metric="m", direction="max"))
    with pytest.raises(UsageError):
        init_campaign(
            LedgerPaths(tmp_path / "x"), CampaignSpec(campaign="../evil", metric="m", direction="max")
        )
    with pytest.raises(UsageError):
        init_campaign(LedgerPaths(tmp_path / "y"), CampaignSpec(campaign="c", metric="m", direction="up"))


# --- suggestions --------------------------------------------------------------------------------


def test_suggestions_follow_the_paired_interval(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    first = _record(paths, tmp_path, [0.2, 0.4, 0.6, 0.5])
    assert first.status == "keep" and "baseline" in first.reason
    better = _record(paths, tmp_path, [0.3, 0.55, 0.7, 0.62])  # every task up by 0.10-0.15
    assert better.status == "keep" and better.row["compared_to"].startswith("#1 paired-t")
    noisy = _record(paths, tmp_path, [0.5, 0.4, 0.6, 0.7])  # vs #2: mixed signs
    assert noisy.status == "discard" and noisy.row["compared_to"].startswith("#2")
    forced = _record(paths, tmp_path, [0.5, 0.4, 0.6, 0.7], status="keep", description="simpler code")
    assert forced.status == "keep" and forced.overridden and forced.suggested == "discard"
    assert forced.row["description"].startswith("simpler code [override: suggested discard")
    vs_base = _record(paths, tmp_path, [0.32, 0.5, 0.71, 0.6], compare_to="baseline")
    assert vs_base.status == "keep" and vs_base.row["compared_to"].startswith("#1")
    # every task up by exactly 0.1 on 4 tasks: the t interval had no width ([0.1, 0.1], kept); the exact
    # bound for a constant difference, 0.1 q +- (1 - q) with q = 0.05^(1/4), is no evidence of a gain
    uniform = _record(paths, tmp_path, [0.3, 0.5, 0.7, 0.6], compare_to="baseline")
    assert uniform.status == "discard" and "constant-difference" in uniform.row["compared_to"]
    assert "ci=[-0.4798" in uniform.row["compared_to"]  # 0.1 q - (1 - q), q = 0.4729


def test_identical_outcomes_are_a_finding_and_discarded(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    _record(paths, tmp_path, [0.2, 0.4, 0.6, 0.5])
    again = _record(paths, tmp_path, [0.2, 0.4, 0.6, 0.5])  # the same rewards: the same rollouts or seed?
    assert again.status == "discard" and "identical outcomes: the same rollouts or seed?" in again.reason


def test_min_direction_keeps_decreases(tmp_path):
    paths = _campaign(tmp_path, direction="min")
    _record(paths, tmp_path, [0.5, 0.6, 0.7])
    assert _record(paths, tmp_path, [0.4, 0.45, 0.6]).status == "keep"
    assert _record(paths, tmp_path, [0.5, 0.55, 0.7]).status == "discard"


def test_loss_campaign_compares_rewards_upward(tmp_path):
    paths = LedgerPaths(tmp_path / "ledger")
    init_campaign(paths, CampaignSpec("c", "val_loss", "min", compare_direction="max"), now=T0)

    def run(loss, means):
        stats = tmp_path / f"loss{loss}.json"
        stats.write_text(json.dumps({"val_loss": loss}))
        profile = profile_with_means(tmp_path / f"p{loss}.jsonl", means)
        source = MetricSource(json_path=stats, metric_key="val_loss", profile=profile)
        return record_run(paths, RunInfo(repo=tmp_path), source)

    assert run(2.0, [0.2, 0.4, 0.6]).status == "keep"  # baseline
    better = run(1.8, [0.3, 0.55, 0.7])  # lower loss is best; its rewards rose on every task
    assert better.status == "keep" and better.row["compared_to"].startswith("#1")
    worse = run(1.9, [0.25, 0.5, 0.6])  # compared with #2 (lowest loss): rewards fell
    assert worse.status == "discard" and worse.row["compared_to"].startswith("#2")


def test_unpaired_and_no_interval(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    stats = tmp_path / "s.json"
    for value, low, high in ((0.5, 0.45, 0.55), (0.7, 0.6, 0.8), (0.75, 0.7, 0.8)):
        stats.write_text(json.dumps({"m": {"value": value, "ci": [low, high]}}))
        result = record_run(paths, RunInfo(repo=tmp_path), MetricSource(json_path=stats, metric_key="m"))
    assert [r.status for r in read_ledger(paths.ledger)] == ["keep", "keep", "discard"]  # last overlaps #2
    stats.write_text(json.dumps({"m": 0.99}))
    result = record_run(paths, RunInfo(repo=tmp_path), MetricSource(json_path=stats, metric_key="m"))
    assert result.status == "discard" and "no interval" in result.reason


def test_overrun_is_a_failure(tmp_path):
    paths = _campaign(tmp_path, direction="max", per_run_timeout="1h")
    result = _record(paths, tmp_path, [0.5, 0.6], elapsed_min=75.0)
    assert result.status == "discard" and "timeout" in result.reason
    assert ledger_status(paths, now=T0).overruns == 1


def test_crash_row_convention(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    result = _record(paths, tmp_path, status="crash", memory_gb=70.0, description="OOM")
    row = read_ledger(paths.ledger)[0].fields
    assert result.status == "crash" and row["metric_value"] == "0.000000" and row["memory_gb"] == "0.0"
    assert row["ci_low"] == row["ci_high"] == row["n_tasks"] == row["profile_path"] == ""


def test_metric_source_required_unless_crash(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    with pytest.raises(UsageError, match="no metric source"):
        record_run(paths, RunInfo(repo=tmp_path), MetricSource())
    assert read_ledger(paths.ledger) == []


# --- git ----------------------------------------------------------------------------------------


def test_git_info_branch_detached_and_outside(tmp_path):
    repo = make_repo(tmp_path / "repo")
    head, base = git(repo, "rev-parse", "HEAD"), git(repo, "rev-parse", "main")
    info = read_git(repo)
    assert (info.branch, info.commit, info.parent_commit, info.dirty) == ("exp/a", head, base, False)
    assert read_git(repo, parent_ref="main").parent_commit == base
    git(repo, "checkout", "-q", "--detach")
    assert read_git(repo).branch == f"detached@{head[:12]}"
    (repo / "recipe.yaml").write_text("changed\n")
    assert read_git(repo).dirty is True
    outside = tmp_path / "plain"
    outside.mkdir()
    assert read_git(outside).commit == "none" and read_git(outside).branch == "none"


def test_record_leaves_git_state_alone(tmp_path):
    repo = make_repo(tmp_path / "repo")
    before = {p: p.read_bytes() for p in (repo / ".git").rglob("*") if p.is_file()}
    mtimes = {p: p.stat().st_mtime_ns for p in before}
    paths = _campaign(tmp_path / "l", direction="max")
    record_run(paths, RunInfo(status="crash", repo=repo, parent_ref="main"), MetricSource())
    after = {p: p.read_bytes() for p in (repo / ".git").rglob("*") if p.is_file()}
    assert after == before and all(p.stat().st_mtime_ns == m for p, m in mtimes.items())
    row = read_ledger(paths.ledger)[0].fields
    assert row["branch"] == "exp/a" and row["parent_commit"] == git(repo, "rev-parse", "main")


# --- properties and failure safety --------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_escape_round_trip_property(text):
    escaped = table.escape(text)
    assert table.unescape(escaped) == text and not set(escaped) & {"\t", "\n", "\r"}


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_scrub_is_idempotent(text):
    once = scrub(text)
    assert scrub(once) == once


def test_failed_append_leaves_ledger_intact(tmp_path, monkeypatch):
    paths = _campaign(tmp_path, direction="max")
    _record(paths, tmp_path, status="crash")
    before = paths.ledger.read_bytes()

    def boom(fields):
        raise OSError("disk full")

    monkeypatch.setattr(table, "format_row", boom)
    with pytest.raises(OSError):
        _record(paths, tmp_path, status="crash")
    assert paths.ledger.read_bytes() == before
    assert sorted(p.name for p in paths.dir.iterdir()) == ["campaign.json", "results.tsv", "results.tsv.lock"]


def test_paired_compare_is_scipys_paired_interval(tmp_path):
    stats = pytest.importorskip("scipy.stats")
    a = write_profile(
        tmp_path / "a.jsonl", {0: [1, 0, 1], 1: [0, 0, 0], 2: [1, 1, 0], 3: [0, 1, 0], 9: [1, 1, 1]}
    )
    b = write_profile(
        tmp_path / "b.jsonl", {0: [1, 1, 1], 1: [0, 1, 0], 2: [1, 1, 1], 3: [1, 1, 1], 8: [0, 0, 0]}
    )
    result = compare(a, b)
    assert result.method == "paired-t (ngrp compare)"
    assert (result.n_tasks, result.n_dropped) == (4, 2)
    diffs = [1 / 3, 1 / 3, 1 / 3, 1 / 3 + 1 / 3]  # per-task mean B - A on tasks 0..3
    low, high = stats.ttest_1samp(diffs, 0.0).confidence_interval(0.95)
    assert result.mean_diff == pytest.approx(statistics.fmean(diffs), rel=1e-12)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert result.mean_a == pytest.approx((2 / 3 + 0 + 2 / 3 + 1 / 3) / 4)


def test_compare_to_index_checks(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    _record(paths, tmp_path, [0.2, 0.4, 0.6])
    _record(paths, tmp_path, status="crash")
    with pytest.raises(UsageError, match="crashed"):
        _record(paths, tmp_path, [0.3, 0.5, 0.7], compare_to="2")
    with pytest.raises(UsageError, match="no such index"):
        _record(paths, tmp_path, [0.3, 0.5, 0.7], compare_to="9")
    with pytest.raises(UsageError, match="--compare-to"):
        _record(paths, tmp_path, [0.3, 0.5, 0.7], compare_to="latest")
    assert len(read_ledger(paths.ledger)) == 2  # nothing written by the refused records
    ok = _record(paths, tmp_path, [0.3, 0.5, 0.7], compare_to="1")
    assert ok.row["compared_to"].startswith("#1")


def test_dry_run_writes_nothing(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    _record(paths, tmp_path, [0.2, 0.4, 0.6])
    before = paths.ledger.read_bytes()
    source = MetricSource(profile=profile_with_means(tmp_path / "dry.jsonl", [0.31, 0.5, 0.72]))
    result = record_run(paths, RunInfo(repo=tmp_path), source, dry_run=True)
    assert not result.written and result.index == 2 and result.status == "keep"
    assert paths.ledger.read_bytes() == before


def test_crash_with_metric_options_warns(tmp_path):
    paths = _campaign(tmp_path, direction="max")
    result = _record(paths, tmp_path, [0.5, 0.5], status="crash")
    assert result.status == "crash" and any("ignored" in w for w in result.warnings)


@pytest.mark.parametrize("target", [float("nan"), float("inf")])
def test_a_non_finite_target_is_refused(tmp_path, target):
    with pytest.raises(UsageError, match="--target must be a finite number"):
        paths = LedgerPaths(tmp_path / "l")
        init_campaign(paths, CampaignSpec(campaign="c", metric="mean_reward", direction="max", target=target))


def test_from_profile_leaves_out_a_task_with_only_null_rewards(tmp_path):
    """Gym writes such rows (every reward null); stats and compare leave the task out, so does the ledger."""
    rows = [
        {"_ng_task_index": t, "rollout_infos": [{"_ng_task_index": t, "_ng_rollout_index": r, "reward": v}
                                                for r, v in enumerate(rewards)]}
        for t, rewards in enumerate([[1.0, 0.0], [None, None], [1.0, 1.0]])
    ]  # fmt: skip
    path = tmp_path / "p_reward_profiling.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = from_profile(path)
    assert got.n_tasks == 2 and got.value == pytest.approx((0.5 + 1.0) / 2)
    only_null = tmp_path / "n_reward_profiling.jsonl"
    only_null.write_text(json.dumps(rows[1]) + "\n")
    with pytest.raises(InputError, match="no task has a numeric"):
        from_profile(only_null)
