"""Sampling controls (`--temperature`, `--top-p`, `--max-output-tokens`, `--set PATH=JSON`): parsing, bad
values (exit 2 naming the option), how they are written into the rows, and what the rows report back."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ngrp_lib.artifacts import jsonl
from ngrp_lib.artifacts.sampling import (
    SAMPLING_FIELDS,
    apply_overrides,
    overrides_from_options,
    sampling_lines,
    sampling_used,
)
from ngrp_lib.errors import UsageError

TASK = {
    "responses_create_params": {"input": "hi", "temperature": 1.0, "reasoning": {"summary": "auto"}},
    "expected_answer": "1",
    "agent_ref": {"name": "a"},
}


def test_overrides_from_the_named_options_and_set():
    got = overrides_from_options(0.2, 0.9, 64, ["top_k=20", 'reasoning.effort="low"', 'stop=["x"]'])
    assert got == {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 64,
        "top_k": 20,
        "reasoning.effort": "low",
        "stop": ["x"],
    }
    assert overrides_from_options(None, None, None) == {}


def test_a_dotted_path_keeps_the_other_fields_and_shares_nothing():
    params = {"input": "hi", "reasoning": {"summary": "auto"}, "temperature": 1.0}
    out = apply_overrides(params, {"reasoning.effort": "low", "temperature": 0.0, "metadata.a.b": 1})
    assert out == {
        "input": "hi",
        "reasoning": {"summary": "auto", "effort": "low"},
        "temperature": 0.0,
        "metadata": {"a": {"b": 1}},
    }
    assert params == {"input": "hi", "reasoning": {"summary": "auto"}, "temperature": 1.0}  # not changed


@pytest.mark.parametrize(
    ("args", "option"),
    [
        ((-0.1, None, None, ()), "--temperature"),
        ((float("inf"), None, None, ()), "--temperature"),
        ((None, 0.0, None, ()), "--top-p"),
        ((None, 1.01, None, ()), "--top-p"),
        ((None, None, 0, ()), "--max-output-tokens"),
        ((None, None, -3, ()), "--max-output-tokens"),
        ((None, None, None, ("temperature=-1",)), "--set temperature"),  # the option the user gave
        ((None, None, None, ("top_p=2",)), "--set top_p"),
        ((None, None, None, ("max_output_tokens=1.5",)), "--set max_output_tokens"),
        ((None, None, None, ("max_output_tokens=true",)), "--set max_output_tokens"),
        ((None, None, None, ("top_k=twenty",)), "--set"),
        ((None, None, None, ("input=1",)), "--set"),
        ((None, None, None, ("input.0.content=1",)), "--set"),
        ((None, None, None, ("top_k",)), "--set"),
        ((None, None, None, ("a..b=1",)), "--set"),
        ((0.5, None, None, ("temperature=0.7",)), "--set"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option(args, option):
    with pytest.raises(UsageError) as caught:
        overrides_from_options(*args)
    assert option in str(caught.value)


def test_materialize_writes_them_into_every_row(run_ngrp, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    out = tmp_path / "m.jsonl"
    done = run_ngrp("materialize", "--input", str(tasks), "--output", str(out), "--num-repeats", "2",
                    "--temperature", "0", "--top-p", "0.5", "--max-output-tokens", "16",
                    "--set", "top_k=20", "--set", 'reasoning.effort="low"')  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [r.data for r in jsonl.iter_rows(out)]
    assert [r["responses_create_params"] for r in rows] == [
        {
            "input": "hi",
            "temperature": 0,
            "top_p": 0.5,
            "max_output_tokens": 16,
            "top_k": 20,
            "reasoning": {"summary": "auto", "effort": "low"},
        }
    ] * 2


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--temperature", "-1"), ("--top-p", "0"), ("--max-output-tokens", "0"), ("--max-output-tokens", "2.5"),
     ("--set", "top_k=x"), ("--set", "input=[]")],
)  # fmt: skip
def test_cli_refuses_bad_values_with_exit_2(run_ngrp, tmp_path, flag, value):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    done = run_ngrp("materialize", "--input", str(tasks), "--output", str(tmp_path / "m.jsonl"), flag, value)
    assert done.returncode == 2
    assert flag in done.stderr
    assert not (tmp_path / "m.jsonl").exists()


def test_collect_refuses_sampling_options_with_materialized(run_ngrp, tmp_path):
    rows = tmp_path / "m.jsonl"
    rows.write_text(json.dumps({**TASK, "_ng_task_index": 0, "_ng_rollout_index": 0}) + "\n")
    done = run_ngrp("collect", "--materialized", str(rows), "--output", str(tmp_path / "r.jsonl"),
                    "--base-url", "http://127.0.0.1:9", "--model", "m", "--temperature", "0.2",
                    "--set", "top_k=2")  # fmt: skip
    assert done.returncode == 2
    assert "--temperature, --set only apply with --input" in done.stderr


def test_sampling_used_counts_distinct_values_per_field():
    rows = [
        {"responses_create_params": {"input": "x", "temperature": 0.2, "max_output_tokens": 8}},
        {"responses_create_params": {"input": "x", "temperature": 0.2}},
        {"responses_create_params": {"input": "x", "temperature": 1.0, "reasoning": {"effort": "low"}}},
        {"no_params": True},
    ]
    used = sampling_used(rows)
    assert used == {
        "temperature": [{"value": 0.2, "rows": 2}, {"value": 1.0, "rows": 1}, {"value": None, "rows": 1}],
        "max_output_tokens": [{"value": None, "rows": 3}, {"value": 8, "rows": 1}],
        "reasoning.effort": [{"value": None, "rows": 3}, {"value": "low", "rows": 1}],
    }
    assert sampling_lines(used)[0] == "temperature 0.2 (2 rows), 1.0 (1 rows), default (1 rows)"
    assert sampling_used([{"responses_create_params": {"input": "x"}}]) == {}
    assert sampling_lines({}) == []


def test_resume_with_a_changed_sampling_value_is_refused_naming_the_field(run_ngrp, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    capped = {**TASK, "responses_create_params": {**TASK["responses_create_params"], "max_output_tokens": 48}}
    tasks.write_text(json.dumps(capped) + "\n")
    out = tmp_path / "r.jsonl"
    base = ["collect", "--input", str(tasks), "--output", str(out), "--base-url", "http://127.0.0.1:9",
            "--model", "m", "--verifier", "exact", "--skip-preflight", "--max-retries", "0",
            "--abort-after", "1"]  # fmt: skip
    first = run_ngrp(*base, "--temperature", "0.2", "--set", "top_k=20")
    assert first.returncode == 1, first.stderr  # port 9 answers nothing: one failed attempt is written
    manifest = json.loads((tmp_path / "r_run_manifest.json").read_text())
    assert manifest["sampling"] == {"temperature": 0.2, "top_k": 20}
    # what the rows ask for, the task row's own cap included (the options alone do not show it)
    in_rows = manifest["sampling_in_rows"]
    assert in_rows["temperature"] == [{"value": 0.2, "rows": 1}]
    assert in_rows["top_k"] == [{"value": 20, "rows": 1}]
    assert in_rows["max_output_tokens"] == [{"value": 48, "rows": 1}]
    again = run_ngrp(*base, "--temperature", "0.5", "--set", "top_k=20", "--resume")
    assert again.returncode == 2
    assert "temperature: was 0.2, now 0.5" in again.stderr
    dropped = run_ngrp(*base, "--temperature", "0.2", "--resume")
    assert dropped.returncode == 2
    assert "top_k: was 20, now null" in dropped.stderr


def _field_by_field(rows: list) -> dict:
    """The tally spelled out: every row, every field, its value keyed with its JSON type."""
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        params = row.get("responses_create_params")
        for path in SAMPLING_FIELDS:
            value = params
            for name in path.split("."):
                value = value.get(name) if isinstance(value, dict) else None
            if value is not None:
                key = json.dumps([type(value).__name__, value], sort_keys=True)
                counts.setdefault(path, {})[key] = counts.setdefault(path, {}).get(key, 0) + 1
    return counts


_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 2]),
    st.sampled_from([0.0, 1.0, 0.5]),
    st.sampled_from(["low", "1"]),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 1), max_size=2),
)
_PARAMS = st.fixed_dictionaries(
    {},
    optional={
        **{path: _VALUE for path in SAMPLING_FIELDS if "." not in path},
        "reasoning": st.one_of(_VALUE, st.fixed_dictionaries({}, optional={"effort": _VALUE})),
        "input": st.just("x"),
    },
)


@given(
    st.lists(
        st.one_of(st.fixed_dictionaries({"responses_create_params": st.one_of(_PARAMS, _VALUE)})), max_size=12
    )
)
@example([{"responses_create_params": {"temperature": t}} for t in (1, 1.0, True, 1)])
def test_sampling_tally_equals_the_field_by_field_count(rows):
    # rows are tallied as combinations of values (the fast path) or field by field (a list or an object as a
    # value): either way the counts are those of every field read alone, with 1, 1.0 and true kept apart
    used = sampling_used(rows)
    expected = _field_by_field(rows)
    got = {
        path: {json.dumps([type(v["value"]).__name__, v["value"]], sort_keys=True): v["rows"] for v in values}
        for path, values in used.items()
    }
    for path, values in got.items():
        unset = len(rows) - sum(expected[path].values())
        assert values.pop(json.dumps(["NoneType", None]), 0) == unset
    assert got == expected
