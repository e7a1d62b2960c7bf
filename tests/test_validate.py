"""`ngrp validate`: the library (kinds, line problems, duplicates, bounds) and the CLI (exit codes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ngrp_lib.artifacts import schemas
from ngrp_lib.audit.validate import kind_from_name, kind_from_row, validate_file, validate_files
from ngrp_lib.errors import UsageError

GOLDEN = Path(__file__).resolve().parent / "golden" / "gym-0.7.0"
COMPLETE = GOLDEN / "case_complete"


def _rows(name: str = "rollouts.jsonl") -> list[bytes]:
    return (COMPLETE / name).read_bytes().splitlines(keepends=True)


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize(
    "name,kind",
    [
        ("rollouts_materialized_inputs.jsonl", "materialized"),
        ("rollouts_failures.jsonl", "failures"),
        ("rollouts_reward_profiling.jsonl", "reward_profile"),
        ("rollouts_agent_metrics.json", "agent_metrics"),
        ("rollouts_repeat_level_metrics.json", "repeat_level_metrics"),
        ("rollouts_profile_summary.json", "profile_summary"),
        ("rollouts_run_manifest.json", "run_manifest"),
        ("ngrp_endpoints.json", "endpoints"),
        ("rollouts.jsonl", None),
        ("tasks.jsonl", None),
        ("x_failures.json", None),
    ],
)
def test_kind_from_name(name, kind):
    assert kind_from_name(Path("results") / name) == kind


def test_kind_from_row():
    rollout = json.loads(_rows()[0])
    materialized = json.loads(_rows("rollouts_materialized_inputs.jsonl")[0])
    task = json.loads((GOLDEN / "raw_inputs.jsonl").read_text().splitlines()[0])
    assert kind_from_row(rollout) == "rollouts"
    assert kind_from_row({**rollout, "response": None}) == "rollouts"  # a failed first rollout
    assert kind_from_row({k: v for k, v in rollout.items() if k != "response"}) == "rollouts"
    assert kind_from_row(materialized) == "materialized"
    assert kind_from_row(task) == "tasks"
    assert kind_from_row(dict(task, _ng_task_index=4)) == "tasks"  # Gym keeps a preset task index
    assert kind_from_row(dict(task, response="a reference answer")) == "tasks"
    assert kind_from_row({"_ng_failure_class": "agent_run_error", "_ng_task_index": 0}) == "failures"


def test_content_detection_on_unnamed_files(tmp_path):
    shutil.copy(COMPLETE / "rollouts_materialized_inputs.jsonl", tmp_path / "inputs.jsonl")
    shutil.copy(COMPLETE / "rollouts.jsonl", tmp_path / "run.jsonl")
    assert validate_file(tmp_path / "inputs.jsonl").kind == "materialized"
    report = validate_file(tmp_path / "run.jsonl")
    assert (report.kind, report.status, report.rows, report.lines) == ("rollouts", "valid", 12, 12)


def test_line_problems_are_each_reported_with_their_line(tmp_path):
    rows = _rows()
    lines = [
        rows[0],
        b"\n",  # 2 blank
        b"   \t\n",  # 3 blank
        b"[1, 2]\n",  # 4 not an object
        b'{"reward": NaN}\n',  # 5 non-finite
        b'{"a": "\xff\xfe"}\n',  # 6 invalid UTF-8
        b"{not json}\n",  # 7 invalid JSON
        rows[1],
        rows[2][:100],  # 9 torn last line (no newline)
    ]
    report = validate_file(_write(tmp_path / "rollouts.jsonl", lines))
    found = [(p.line, p.kind) for p in report.problems]
    assert found == [
        (2, "blank_line"),
        (3, "blank_line"),
        (4, "not_an_object"),
        (5, "non_finite_literal"),
        (6, "invalid_utf8"),
        (7, "invalid_json"),
        (9, "torn_tail"),
    ]
    assert report.status == "invalid" and report.rows == 2 and report.lines == 9
    assert "NaN" in report.problems[3].message and "torn" in report.problems[-1].message


def test_last_row_without_newline_is_a_row_not_torn(tmp_path):
    rows = _rows()
    report = validate_file(_write(tmp_path / "rollouts.jsonl", [rows[0], rows[1].rstrip(b"\n")]))
    assert report.status == "valid" and report.rows == 2


def test_schema_problem_format(tmp_path):
    rows = _rows()
    bad = json.loads(rows[3])
    bad["_ng_task_index"] = -1
    bad["response"]["usage"]["total_tokens"] = "151"
    del bad["agent_ref"]["name"]
    path = _write(tmp_path / "rollouts.jsonl", [rows[0], rows[1], rows[2], orjson.dumps(bad) + b"\n"])
    report = validate_file(path)
    rendered = [p.render(str(path)) for p in report.problems]
    assert rendered == [
        f"{path}:4: /_ng_task_index: -1 is less than the minimum of 0",
        f"{path}:4: /agent_ref/name: required key is missing",
        f'{path}:4: /response/usage/total_tokens: must be number, got string ("151")',
    ]


def test_duplicates_name_both_lines(tmp_path):
    rows = _rows()
    path = _write(tmp_path / "rollouts.jsonl", [rows[0], rows[1], rows[0], rows[2], rows[1]])
    report = validate_file(path)
    msgs = [(p.line, p.kind, p.message) for p in report.problems]
    key0 = json.loads(rows[0])
    key1 = json.loads(rows[1])
    assert msgs == [
        (
            3,
            "duplicate_key",
            f"duplicate identity key ({key0['_ng_task_index']}, {key0['_ng_rollout_index']}); "
            "first seen at line 1",
        ),
        (
            5,
            "duplicate_key",
            f"duplicate identity key ({key1['_ng_task_index']}, {key1['_ng_rollout_index']}); "
            "first seen at line 2",
        ),
    ]


def test_failures_may_repeat_keys(tmp_path):
    row = {"_ng_failure_class": "agent_run_error", "_ng_task_index": 0, "_ng_rollout_index": 1}
    lines = [orjson.dumps(dict(row, _ng_attempt_index=i)) + b"\n" for i in range(3)]
    report = validate_file(_write(tmp_path / "rollouts_failures.jsonl", lines))
    assert report.kind == "failures" and report.status == "valid"


def test_max_errors_bounds_the_list_and_counts_the_rest(tmp_path):
    path = _write(tmp_path / "rollouts.jsonl", [b"[]\n"] * 50)
    report = validate_file(path, max_errors=5)
    assert len(report.problems) == 5 and report.problem_count == 5 and report.not_shown == 0
    assert report.lines_not_itemized == 45 and report.status == "invalid"
    everything = validate_file(path, max_errors=None)
    assert everything.problem_count == 50 and everything.not_shown == 0 and everything.lines_not_itemized == 0


def test_line_that_fills_the_list_is_itemized_whole(tmp_path):
    row = json.loads(_rows()[0])
    row["_ng_task_index"], row["reward"], row["mask_sample"] = -1, "x", "y"  # three problems on one line
    bad = orjson.dumps(row) + b"\n"
    path = _write(tmp_path / "rollouts.jsonl", [bad, _rows()[1], bad, _rows()[2]])
    report = validate_file(path, max_errors=2)
    assert (len(report.problems), report.problem_count, report.not_shown, report.lines_not_itemized) == (
        2,
        3,
        1,
        1,
    )


def test_lines_beyond_the_list_are_judged_exactly(tmp_path):
    """Past --max-errors rows are judged by the fast predicate alone; duplicates are still tracked."""
    rows = _rows()
    lines = [b"[]\n", rows[0], rows[1], rows[0], rows[2]]
    report = validate_file(_write(tmp_path / "rollouts.jsonl", lines), max_errors=1)
    assert report.lines_not_itemized == 1  # the duplicate on line 4; lines 2, 3 and 5 are valid


def test_very_long_line_is_validated_and_messages_stay_short(tmp_path):
    row = json.loads(_rows()[0])
    row["response"]["output"][1]["content"][0]["text"] = "x" * 20_000_000
    row["reward"] = "y" * 1_000_000
    report = validate_file(_write(tmp_path / "rollouts.jsonl", [orjson.dumps(row) + b"\n"]))
    assert [p.pointer for p in report.problems] == ["/reward"]
    assert len(report.problems[0].message) < 300


def test_unreadable_files(tmp_path):
    (tmp_path / "not_json_agent_metrics.json").write_text("{nope")
    (tmp_path / "folder.jsonl").mkdir()
    result = validate_files(
        [tmp_path / "missing.jsonl", tmp_path / "folder.jsonl", tmp_path / "not_json_agent_metrics.json"]
    )
    assert [f.status for f in result.files] == ["unreadable"] * 3
    assert result.exit_code == 3
    assert "No such file" in result.files[0].problems[0].message
    assert "not a regular file" in result.files[1].problems[0].message
    assert "invalid JSON" in result.files[2].problems[0].message


def test_unknown_json_file_needs_a_kind(tmp_path):
    path = tmp_path / "aggregate_metrics.json"
    path.write_text("{}")
    with pytest.raises(UsageError):
        validate_files([path])
    assert validate_files([path], kind="profile_summary").files[0].problems[0].pointer == "/counts"


def test_exit_code_is_worst_over_files(tmp_path):
    good = COMPLETE / "rollouts.jsonl"
    bad = _write(tmp_path / "rollouts.jsonl", [b"[]\n"])
    assert validate_files([good]).exit_code == 0
    assert validate_files([good, bad]).exit_code == 1
    assert validate_files([bad, tmp_path / "nope.jsonl"]).exit_code == 3


def test_empty_file_is_valid(tmp_path):
    report = validate_file(_write(tmp_path / "rollouts.jsonl", []))
    assert (report.status, report.kind, report.rows) == ("valid", None, 0)


# --- CLI -----------------------------------------------------------------------------------------------


def test_cli_text_and_exit_codes(run_ngrp, tmp_path):
    ok = run_ngrp("validate", COMPLETE / "rollouts.jsonl", COMPLETE / "rollouts_agent_metrics.json")
    assert ok.returncode == 0, ok.stderr
    assert "valid (rollouts, 12 rows)" in ok.stdout and "valid (agent_metrics, 1 row)" in ok.stdout
    bad = run_ngrp("validate", GOLDEN / "case_missing_index" / "rollouts.jsonl")
    assert bad.returncode == 1
    assert (
        f"{GOLDEN}/case_missing_index/rollouts.jsonl:1: /_ng_rollout_index: required key is missing"
        in bad.stdout
    )
    missing = run_ngrp("validate", "nope.jsonl")
    assert missing.returncode == 3 and "nope.jsonl: cannot read" in missing.stdout
    usage = run_ngrp("validate", "--kind", "bogus", "x.jsonl")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_cli_json_matches_its_schema(run_ngrp, tmp_path):
    path = _write(tmp_path / "r.jsonl", [b"[]\n"] * 30)
    out = run_ngrp(
        "validate", "--json", "--max-errors", "3", path, COMPLETE / "rollouts.jsonl", "missing.jsonl"
    )
    assert out.returncode == 3
    payload = json.loads(out.stdout)
    assert schemas.validator("validate_output").is_valid(payload)
    first = payload["files"][0]
    assert (first["problem_count"], first["lines_not_itemized"], len(first["problems"])) == (3, 27, 3)
    assert [f["status"] for f in payload["files"]] == ["invalid", "valid", "unreadable"]


def test_cli_help_has_example(run_ngrp):
    out = run_ngrp("validate", "--help")
    assert out.returncode == 0 and "Example:" in out.stdout and "Exit codes" in out.stdout


# --- junk never gives a traceback ----------------------------------------------------------------------

junk_lines = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.sampled_from(
            [b"", b" ", b"NaN", b'{"reward": Infinity}', b"[]", b"{", b'{"_ng_task_index": -1}', b"\xff"]
        ),
        st.builds(
            lambda v: json.dumps(v).encode(),
            st.recursive(
                st.none() | st.integers() | st.text(max_size=5),
                lambda c: st.lists(c) | st.dictionaries(st.text(max_size=3), c),
                max_leaves=8,
            ),
        ),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=junk_lines,
    name=st.sampled_from(
        [
            "rollouts.jsonl",
            "x_materialized_inputs.jsonl",
            "x_agent_metrics.json",
            "x_failures.jsonl",
            "tasks.jsonl",
        ]
    ),
)
def test_junk_gives_findings_not_crashes(tmp_path, lines, name):
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines))
    result = validate_files([path])
    assert result.exit_code in (0, 1, 3)
    for report in result.files:
        for problem in report.problems:
            assert problem.message and len(problem.message) < 400


def test_junk_via_cli_has_no_traceback(run_ngrp, tmp_path):
    for i, blob in enumerate(
        [b"\x00\xff{[", b"NaN\n\n[1]\n{", b'{"a":1}\n' * 3 + b'{"a"', b"\xef\xbb\xbf{}\n"]
    ):
        path = tmp_path / f"junk{i}.jsonl"
        path.write_bytes(blob)
        out = run_ngrp("validate", path)
        assert out.returncode in (1, 3) and "Traceback" not in out.stderr, out.stderr
        assert str(path) in out.stdout
    (tmp_path / "junk_agent_metrics.json").write_bytes(b"\x00{")
    out = run_ngrp("validate", tmp_path / "junk_agent_metrics.json")
    assert out.returncode == 3 and "Traceback" not in out.stderr


def test_integral_float_identity_keys_are_reported(tmp_path):
    """JSON Schema accepts 1.0 as an integer; joins (ngrp check, dict keys) need exact integers."""
    row = json.loads(_rows()[0])
    row["_ng_rollout_index"] = 2.0
    report = validate_file(_write(tmp_path / "rollouts.jsonl", [orjson.dumps(row) + b"\n"]))
    assert [(p.pointer, p.kind, p.message) for p in report.problems] == [
        ("/_ng_rollout_index", "float_identity_key", "write 2, not 2.0: identity keys must be JSON integers")
    ]
    assert (
        validate_files([tmp_path / "rollouts.jsonl"]).to_json()["files"][0]["problems"][0]["kind"]
        in (
            schemas.load("validate_output")["properties"]["files"]["items"]["properties"]["problems"][
                "items"
            ]["properties"]["kind"]["enum"]
        )
    )


def test_endpoints_files_validate(tmp_path):
    """`ngrp serve` writes one, people hand-write others for `collect --endpoints`: both can be checked."""
    good = tmp_path / "ngrp_endpoints.json"
    good.write_text(json.dumps({"endpoints": [{"base_url": "http://127.0.0.1:8000/v1", "model": "tiny"}]}))
    assert validate_file(good).status == "valid"
    bad = tmp_path / "my_servers.json"
    bad.write_text(json.dumps({"endpoints": [{"base_url": "http://127.0.0.1:8000"}]}))  # no /v1
    report = validate_file(bad, kind="endpoints")
    assert report.status == "invalid" and report.problems[0].pointer == "/endpoints/0/base_url"
