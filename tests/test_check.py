"""`ngrp check`: key accounting against Gym's own numbers (golden stdout/stderr), a brute-force reference on
generated runs, the failures sidecar, line problems, and the CLI."""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ngrp_lib.artifacts import schemas
from ngrp_lib.artifacts.names import pack_key as pack
from ngrp_lib.artifacts.names import unpack_key as unpack
from ngrp_lib.audit.check import check_run
from ngrp_lib.audit.check_result import TaskCounts
from ngrp_lib.errors import InputError

GOLDEN = Path(__file__).resolve().parent / "golden" / "gym-0.7.0"
GYM_COMPLETION = re.compile(r"Reward profile completion: (\d+)/(\d+) rollout rows")
GYM_INPUT_ROWS = re.compile(r"Input rows: (\d+) total; (\d+) complete; (\d+) partial; (\d+) without rollouts")
GYM_MASKED = re.compile(r"Masked from quality metrics: (\d+) rollout rows")


def _case(case: str):
    folder = GOLDEN / case
    return check_run(folder / "rollouts_materialized_inputs.jsonl", folder / "rollouts.jsonl")


def _codes(result) -> dict[str, str]:
    return {f.code: f.severity for f in result.findings}


@pytest.mark.parametrize(
    "case,stdout",
    [
        ("case_complete", "strict.stdout.txt"),
        ("case_fan_out", "strict.stdout.txt"),
        ("case_masked", "strict.stdout.txt"),
        ("case_partial/partial_run", "partial.stdout.txt"),
        ("case_missing_task/partial_run", "partial.stdout.txt"),
    ],
)
def test_counts_match_gyms_completion_summary(case, stdout):
    gym = (GOLDEN / case / stdout).read_text()
    completed, expected = map(int, GYM_COMPLETION.search(gym).groups())
    total, complete, partial, none = map(int, GYM_INPUT_ROWS.search(gym).groups())
    masked = int(GYM_MASKED.search(gym).group(1))
    r = _case(case)
    assert (r.counts.completed, r.counts.expected, r.counts.masked) == (completed, expected, masked)
    assert r.tasks == TaskCounts(total, complete, partial, none)
    assert r.exit_code == (0 if completed == expected else 1)


def _gym_keys(stderr: str, label: str) -> list[list[int]]:
    match = re.search(label + r": (\[.*?\])", stderr)
    return [list(k) for k in ast.literal_eval(match.group(1))]


def test_missing_keys_match_gyms_error():
    for case in ("case_partial", "case_missing_task"):
        gym = (GOLDEN / case / "strict.stderr.txt").read_text()
        r = _case(case)
        missing = next(f for f in r.findings if f.code == "missing_rollouts")
        assert sorted(missing.examples) == sorted(_gym_keys(gym, "Missing rollout keys"))
        rollouts = GOLDEN / case / "rollouts.jsonl"
        assert missing.severity == "error" and f"ngrp collect --output {rollouts} --resume" in missing.fix
        assert "ngrp profile --allow-partial" in missing.fix


def test_extra_keys_match_gyms_error():
    gym = (GOLDEN / "case_extra" / "partial.stderr.txt").read_text()
    r = _case("case_extra")
    extra = next(f for f in r.findings if f.code == "extra_rollouts")
    assert extra.examples == _gym_keys(gym, "Extra rollout keys") == [[99, 0]]
    assert r.counts.extra == 1 and r.counts.missing == 0 and r.exit_code == 1


def test_duplicate_matches_gyms_error():
    gym = (GOLDEN / "case_duplicate" / "strict.stderr.txt").read_text()
    t, ro = map(int, re.search(r"Duplicate result row for rollout key \((\d+), (\d+)\)", gym).groups())
    r = _case("case_duplicate")
    dup = next(f for f in r.findings if f.code == "duplicate_rollouts")
    assert dup.examples[0]["key"] == [t, ro]
    lines = (GOLDEN / "case_duplicate" / "rollouts.jsonl").read_text().splitlines()
    keyed = [
        i + 1
        for i, line in enumerate(lines)
        if (lambda d: (d["_ng_task_index"], d["_ng_rollout_index"]))(json.loads(line)) == (t, ro)
    ]
    assert [dup.examples[0]["first_line"], dup.examples[0]["line"]] == keyed
    assert (
        f"ngrp merge {GOLDEN / 'case_duplicate' / 'rollouts.jsonl'} --output" in dup.fix and r.exit_code == 1
    )


def test_masked_and_null_reward_are_reported_but_not_errors():
    r = _case("case_masked")
    assert r.counts.masked == 1 and r.counts.null_reward == 1 and r.counts.absent_reward == 0
    assert _codes(r)["masked_rollouts"] == "note" and _codes(r)["rollouts_without_reward"] == "warning"
    assert (
        "ngrp profile --null-reward" in next(f for f in r.findings if f.code == "rollouts_without_reward").fix
    )
    # a clause whose count is 0 is left out (replay 2026-12-05, O1: '0 rollouts have ... and 17 ...')
    message = next(f for f in r.findings if f.code == "rollouts_without_reward").message
    assert message.startswith("1 rollouts have reward null; Gym counts them") and "0 have" not in message
    assert r.exit_code == 0


@pytest.mark.parametrize(
    ("zero", "capped", "words"),
    [(0, 17, "17 rollouts stopped at the token cap"), (3, 0, "3 rollouts have 0 completion tokens"),
     (3, 17, "3 rollouts have 0 completion tokens and 17 stopped at the token cap")],
)  # fmt: skip
def test_two_counts_in_one_sentence_leave_out_a_zero(zero, capped, words):
    from ngrp_lib.audit.findings import _both

    said = _both(f"{zero} rollouts have 0 completion tokens", zero, f"{capped} stopped at the token cap",
                 capped, alone=f"{capped} rollouts stopped at the token cap")  # fmt: skip
    assert said == words


def test_blank_line_and_missing_index():
    blank = _case("case_blank_line")
    assert blank.rollouts.blank_lines == 1 and _codes(blank)["rollouts_blank_lines"] == "error"
    assert blank.counts.missing == 0 and blank.exit_code == 1
    no_index = _case("case_missing_index")
    assert no_index.rollouts.rows_without_key == 1 and no_index.counts.missing == 1
    assert no_index.exit_code == 1


def test_fan_out_groups_by_task_and_agent():
    r = _case("case_fan_out")
    assert r.grouping == "task_and_agent"
    assert [(a.agent, a.expected, a.completed, a.tasks.total) for a in r.agents] == [
        ("agent_a", 6, 6, 3),
        ("agent_b", 6, 6, 3),
    ]


def test_order_is_reported(tmp_path):
    assert _case("case_complete").order == "completion_order"
    rows = sorted(
        (GOLDEN / "case_complete" / "rollouts.jsonl").read_text().splitlines(),
        key=lambda line: (json.loads(line)["_ng_task_index"], json.loads(line)["_ng_rollout_index"]),
    )
    (tmp_path / "rollouts.jsonl").write_text("\n".join(rows) + "\n")
    r = check_run(
        GOLDEN / "case_complete" / "rollouts_materialized_inputs.jsonl", tmp_path / "rollouts.jsonl"
    )
    assert r.order == "sorted_by_key" and "completion_order" not in _codes(r)


def _run_dir(tmp_path: Path, case: str = "case_partial") -> Path:
    for name in ("rollouts_materialized_inputs.jsonl", "rollouts.jsonl"):
        shutil.copy(GOLDEN / case / name, tmp_path / name)
    return tmp_path


def _failure(task: int, rollout: int, cls: str = "agent_run_error", **extra) -> bytes:
    row = {
        "_ng_failure_class": cls,
        "_ng_failure_type": "ClientResponseError",
        "_ng_failure_message": "boom",
        "_ng_failure_http_status": 500,
        "_ng_failure_response_body": None,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        **extra,
    }
    return orjson.dumps(row) + b"\n"


def test_failures_sidecar_found_by_default_and_counted(tmp_path):
    run = _run_dir(tmp_path)
    (run / "rollouts_failures.jsonl").write_bytes(
        _failure(2, 1)
        + _failure(2, 1, "agent_request_failed", _ng_attempt_index=1)
        + _failure(0, 0)
        + _failure(50, 0)
    )
    r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
    assert r.failures is not None and r.failures.rows == 4
    assert r.failures_by_class == {"agent_run_error": 3, "agent_request_failed": 1}
    c = r.counts
    assert (
        c.failed_attempts,
        c.failed_keys,
        c.failed_keys_still_missing,
        c.failed_keys_recovered,
    ) == (
        4,
        3,
        1,
        1,
    )
    assert c.failure_keys_not_in_inputs == 1 and _codes(r)["failures_not_in_inputs"] == "warning"
    resume = f"ngrp collect --output {run / 'rollouts.jsonl'} --resume"
    assert resume in next(f for f in r.findings if f.code == "failed_attempts").fix
    assert r.exit_code == 1  # still missing (2, 1) and (2, 3)


def test_no_sidecar_means_no_failures(tmp_path):
    run = _run_dir(tmp_path, "case_complete")
    r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
    assert r.failures is None and r.counts.failed_attempts == 0 and r.exit_code == 0


def test_torn_tail_and_invalid_lines(tmp_path):
    run = _run_dir(tmp_path, "case_complete")
    data = (run / "rollouts.jsonl").read_bytes()
    (run / "rollouts.jsonl").write_bytes(data + b'[1]\n{"_ng_task_index": 0, "_ng_rol')
    r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
    assert r.rollouts.torn_tail and r.rollouts.invalid_lines == 1 and r.rollouts.invalid_examples == [13]
    assert _codes(r)["rollouts_torn_tail"] == "error" and r.counts.completed == 12 and r.exit_code == 1
    resume = f"ngrp collect --output {run / 'rollouts.jsonl'} --resume"
    assert resume in next(f for f in r.findings if f.code == "rollouts_torn_tail").fix


def test_duplicate_inputs(tmp_path):
    run = _run_dir(tmp_path, "case_complete")
    lines = (run / "rollouts_materialized_inputs.jsonl").read_bytes().splitlines(keepends=True)
    (run / "rollouts_materialized_inputs.jsonl").write_bytes(b"".join(lines + lines[:2]))
    r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
    assert r.inputs.duplicates == 2 and r.counts.expected == 12 and r.exit_code == 1
    assert r.inputs.duplicate_examples[0] == {"key": [0, 0], "first_line": 1, "line": 13}


def test_unreadable_inputs_raise_input_error(tmp_path):
    with pytest.raises(InputError):
        check_run(tmp_path / "nope.jsonl", GOLDEN / "case_complete" / "rollouts.jsonl")
    with pytest.raises(InputError):
        check_run(GOLDEN / "case_complete" / "rollouts_materialized_inputs.jsonl", tmp_path)


def test_pack_round_trip_and_order():
    keys = [(0, 0), (0, 1), (1, 0), (7, 2**32 - 1), (3, 2**32), (2**40, 5)]
    assert [unpack(pack(k)) for k in keys] == keys
    ints = [k for k in keys if isinstance(pack(k), int)]
    assert sorted(ints, key=pack) == sorted(ints)


# --- against a brute-force reference --------------------------------------------------------------------


@st.composite
def runs(draw):
    n_tasks = draw(st.integers(1, 6))
    agents = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n_tasks, max_size=n_tasks))
    repeats = draw(st.integers(1, 4))
    inputs = [(t, r, agents[t]) for t in range(n_tasks) for r in range(repeats)]
    keys = [(t, r) for t, r, _ in inputs]
    done = draw(st.lists(st.sampled_from(keys), max_size=len(keys) + 3))  # drops and duplicates
    extra = draw(st.lists(st.tuples(st.integers(10, 12), st.integers(0, 2)), max_size=2))
    order = draw(st.permutations(done + extra))
    masked = draw(st.sets(st.sampled_from(keys)))
    return inputs, order, masked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run=runs())
def test_counts_equal_brute_force(tmp_path, run):
    inputs, order, masked = run
    m, r = tmp_path / "m.jsonl", tmp_path / "r.jsonl"
    m.write_bytes(
        b"".join(
            orjson.dumps({"_ng_task_index": t, "_ng_rollout_index": ro, "agent_ref": {"name": a}}) + b"\n"
            for t, ro, a in inputs
        )
    )
    r.write_bytes(
        b"".join(
            orjson.dumps(
                {
                    "_ng_task_index": t,
                    "_ng_rollout_index": ro,
                    "response": {},
                    "reward": 1.0,
                    "mask_sample": (t, ro) in masked,
                }
            )
            + b"\n"
            for t, ro in order
        )
    )
    result = check_run(m, r)
    expected = {(t, ro) for t, ro, _ in inputs}
    seen = list(dict.fromkeys(order))
    completed = expected & set(seen)
    per_task = Counter(t for t, _ in expected)
    done_task = Counter(t for t, _ in completed)
    c = result.counts
    assert c.expected == len(expected) and c.completed == len(completed)
    assert c.missing == len(expected - completed) and c.extra == len(set(seen) - expected)
    assert c.duplicate_rollouts == len(order) - len(seen)
    assert c.masked == len({k for k in seen if k in masked})
    assert result.grouping == "task"  # one agent per task here
    assert result.tasks.complete == sum(1 for t in per_task if done_task[t] == per_task[t])
    assert result.tasks.none == sum(1 for t in per_task if done_task[t] == 0)
    assert result.tasks.partial == len(per_task) - result.tasks.complete - result.tasks.none
    assert result.order == ("sorted_by_key" if seen == sorted(seen) else "completion_order")
    by_agent = {a.agent: a for a in result.agents}
    for agent in {a for _, _, a in inputs}:
        keys = {(t, ro) for t, ro, a in inputs if a == agent}
        assert by_agent[agent].expected == len(keys) and by_agent[agent].completed == len(keys & completed)
    assert result.exit_code == (
        0 if completed == expected and c.extra == 0 and len(order) == len(seen) else 1
    )


# --- CLI -----------------------------------------------------------------------------------------------


def test_cli_text(run_ngrp):
    folder = GOLDEN / "case_partial"
    out = run_ngrp(
        "check",
        "--inputs",
        folder / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        folder / "rollouts.jsonl",
    )
    assert out.returncode == 1
    assert "rollouts: 10/12 completed, 2 missing" in out.stdout
    assert "tasks: 3 (2 complete, 1 partial, 0 with none)" in out.stdout
    assert "(2, 1), (2, 3)" in out.stdout and "fix: ngrp profile --allow-partial" in out.stdout
    assert "ngrp collect --output" in out.stdout  # ...and for a run Gym collected (no ngrp manifest):
    assert "no ngrp manifest here: resume with the tool that collected it (gym eval" in out.stdout
    ok = run_ngrp(
        "check",
        "--inputs",
        GOLDEN / "case_complete/rollouts_materialized_inputs.jsonl",
        "--rollouts",
        GOLDEN / "case_complete/rollouts.jsonl",
    )
    assert ok.returncode == 0 and "complete and consistent" in ok.stdout


def test_cli_json_matches_schema(run_ngrp, tmp_path):
    run = _run_dir(tmp_path, "case_duplicate")
    (run / "rollouts_failures.jsonl").write_bytes(_failure(1, 1))
    out = run_ngrp(
        "check",
        "--json",
        "--inputs",
        "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        "rollouts.jsonl",
        cwd=run,
    )
    assert out.returncode == 1
    payload = json.loads(out.stdout)
    errors = [e.message for e in schemas.validator("check_output").iter_errors(payload)]
    assert errors == []
    assert payload["files"]["failures"]["path"] == "rollouts_failures.jsonl"
    assert payload["counts"]["duplicate_rollouts"] == 1


def test_cli_failures_option_overrides_the_default_sidecar(run_ngrp, tmp_path):
    run = _run_dir(tmp_path)
    (run / "rollouts_failures.jsonl").write_bytes(_failure(2, 1) + _failure(0, 0))
    (run / "other.jsonl").write_bytes(_failure(2, 3, "agent_request_failed"))
    args = (
        "check",
        "--json",
        "--inputs",
        "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        "rollouts.jsonl",
    )
    default = json.loads(run_ngrp(*args, cwd=run).stdout)
    assert default["files"]["failures"]["rows"] == 2
    out = run_ngrp(*args, "--failures", "other.jsonl", cwd=run)
    assert out.returncode == 1  # case_partial still misses (2, 1) and (2, 3)
    payload = json.loads(out.stdout)
    assert payload["files"]["failures"]["path"] == "other.jsonl" and payload["files"]["failures"]["rows"] == 1
    assert payload["failures_by_class"] == {"agent_request_failed": 1}
    assert payload["counts"]["failed_keys_still_missing"] == 1


def test_cli_errors(run_ngrp):
    out = run_ngrp("check", "--inputs", "nope.jsonl", "--rollouts", "nope2.jsonl")
    assert out.returncode == 3 and "nope.jsonl" in out.stderr and "Traceback" not in out.stderr
    usage = run_ngrp("check", "--inputs", "x.jsonl")
    assert usage.returncode == 2 and "--rollouts" in usage.stderr
    helptext = run_ngrp("check", "--help")
    assert helptext.returncode == 0 and "Example:" in helptext.stdout


junk_row = st.dictionaries(
    st.sampled_from(
        [
            "_ng_task_index",
            "_ng_rollout_index",
            "reward",
            "mask_sample",
            "agent_ref",
            "_ng_failure_class",
            "_ng_environment_server",
            "response",
        ]
    ),
    st.none()
    | st.booleans()
    | st.integers(-2, 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=3)
    | st.dictionaries(st.just("name"), st.none() | st.integers() | st.text(max_size=3)),
    max_size=6,
).map(lambda d: json.dumps(d).encode())
junk_line = junk_row | st.binary(max_size=20) | st.sampled_from([b"", b"[]", b"NaN", b"{", b"\xff"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    inputs=st.lists(junk_line, max_size=6),
    rollouts=st.lists(junk_line, max_size=6),
    failures=st.lists(junk_line, max_size=3),
)
def test_junk_gives_findings_not_crashes(tmp_path, inputs, rollouts, failures):
    paths = []
    for name, lines in (("m.jsonl", inputs), ("r.jsonl", rollouts), ("r_failures.jsonl", failures)):
        (tmp_path / name).write_bytes(b"\n".join(lines))
        paths.append(tmp_path / name)
    try:
        result = check_run(*paths)
    except InputError as exc:  # a file whose first rows read as another kind of artifact (artifacts/kinds.py)
        assert exc.path in paths and exc.line is None, exc.message
        assert exc.detail.startswith(("looks like ", "this is ")), exc.message
        return
    assert result.exit_code in (0, 1)
    assert schemas.validator("check_output").is_valid(json.loads(json.dumps(result.to_json())))


def test_resume_fix_points_to_ngrp_only_for_runs_ngrp_collected(run_ngrp, tmp_path):
    for name in ("rollouts_materialized_inputs.jsonl", "rollouts.jsonl"):
        (tmp_path / name).write_bytes((GOLDEN / "case_partial" / name).read_bytes())
    (tmp_path / "rollouts_run_manifest.json").write_text("{}")  # as ngrp collect leaves it
    out = run_ngrp("check", "--inputs", tmp_path / "rollouts_materialized_inputs.jsonl",
                   "--rollouts", tmp_path / "rollouts.jsonl")  # fmt: skip
    assert out.returncode == 1 and "ngrp collect --output" in out.stdout
    assert "no ngrp manifest" not in out.stdout


def test_top_failures_and_a_fix_instead_of_resume_when_resuming_repeats_them(tmp_path, run_ngrp):
    run = _run_dir(tmp_path)  # (2, 1) and (2, 3) are missing
    body = json.dumps({"error": {"message": "Unauthorized"}})
    key_401 = {"_ng_failure_http_status": 401, "_ng_failure_response_body": body}
    sidecar = run / "rollouts_failures.jsonl"
    sidecar.write_bytes(
        _failure(2, 1, **key_401) + _failure(0, 0) + _failure(2, 1, **key_401) + _failure(2, 3, **key_401)
    )
    (run / "rollouts_run_manifest.json").write_text(json.dumps({"options": {"api_key_env": "MY_KEY"}}))
    r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
    first, second = r.top_failures
    assert (first.count, first.still_missing, first.example_key, first.http_status) == (
        3,
        3,
        [2, 1],
        401,
    )
    assert first.message == "HTTP 401: Unauthorized" and not first.retry_helps
    assert (second.count, second.still_missing, second.example_key) == (1, 0, [0, 0])  # recovered
    fixes = {f.code: f.fix for f in r.findings}
    assert "$MY_KEY" in fixes["failed_attempts"] and "--max-attempts" not in fixes["failed_attempts"]
    assert "a resume fails them again until this is fixed: put the key" in fixes["missing_rollouts"]
    text = run_ngrp("check", "--inputs", run / "rollouts_materialized_inputs.jsonl", "--rollouts",
                    run / "rollouts.jsonl")  # fmt: skip
    assert (
        "  most common failures:\n    3x agent_run_error: HTTP 401: Unauthorized (e.g. key (2, 1))"
        in text.stdout
    )
    payload = json.loads(run_ngrp("check", "--json", "--inputs", run / "rollouts_materialized_inputs.jsonl",
                                  "--rollouts", run / "rollouts.jsonl").stdout)  # fmt: skip
    assert schemas.validator("check_output").is_valid(payload) and payload["top_failures"] == [
        asdict(f) for f in r.top_failures
    ]
    # one missing key failed in a way another attempt may cure: resuming is the advice again
    sidecar.write_bytes(
        sidecar.read_bytes() + _failure(2, 3, "agent_request_failed", _ng_failure_http_status=503)
    )
    r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
    fixes = {f.code: f.fix for f in r.findings}
    assert "--max-attempts <more" in fixes["failed_attempts"] and "--resume" in fixes["missing_rollouts"]


def test_keys_out_of_the_runs_max_attempts_get_the_max_attempts_advice(tmp_path):
    """A plain --resume skips a key with --max-attempts failed attempts (the manifest records the limit)."""
    run = _run_dir(tmp_path)  # (2, 1) and (2, 3) are missing
    busy = {"_ng_failure_http_status": 503}
    sidecar = run / "rollouts_failures.jsonl"
    manifest = run / "rollouts_run_manifest.json"

    def fixes(limit: int, *failures: bytes) -> dict:
        sidecar.write_bytes(b"".join(failures))
        manifest.write_text(json.dumps({"options": {"api_key_env": "K", "max_attempts": limit}}))
        r = check_run(run / "rollouts_materialized_inputs.jsonl", run / "rollouts.jsonl")
        return {f.code: f.fix for f in r.findings}

    twice = (_failure(2, 1, "agent_request_failed", **busy), _failure(2, 1, "agent_request_failed", **busy))
    once = _failure(2, 3, "agent_request_failed", **busy)
    plain = fixes(5, *twice, once)  # attempts left: a plain --resume retries both
    assert "--max-attempts" not in plain["failed_attempts"] + plain["missing_rollouts"]
    assert f"--resume <the options of {manifest}> (runs only the missing keys)" in plain["missing_rollouts"]
    some = fixes(2, *twice, once)
    assert f"--resume <the options of {manifest}> --max-attempts <more than 2>" in some["failed_attempts"]
    assert some["missing_rollouts"].endswith(
        "1 of the failed keys reached the run's --max-attempts 2:"
        " add --max-attempts <more than 2> to retry them too"
    )
    spent = fixes(2, *twice, once, once)  # both missing keys used up their attempts
    assert f"--resume <the options of {manifest}> --max-attempts <more than 2>" in spent["missing_rollouts"]
    assert (
        "(retries them: 2 of the failed keys reached the run's --max-attempts 2)" in spent["missing_rollouts"]
    )
    assert "runs only the missing keys" not in spent["missing_rollouts"]
