"""Schemas: every golden Gym file validates, broken copies fail at the right JSON pointer, and the
compiled fast path agrees with jsonschema exactly."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngrp_lib.artifacts import schemas
from ngrp_lib.artifacts.fastpath import compile_schema
from ngrp_lib.audit.validate import kind_from_name, schema_problems, validate_file

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
ARTIFACT_SCHEMAS = [
    "task",
    "materialized_input",
    "rollout",
    "failure",
    "reward_profile",
    "agent_metrics",
    "repeat_level_metrics",
    "profile_summary",
    "run_manifest",
]


def _golden_files() -> list[tuple[Path, str]]:
    """Every Gym artifact in the golden folders with the kind it must validate as."""
    out = []
    for path in sorted(GOLDEN.rglob("*.json*")):
        kind = kind_from_name(path)
        if kind is None and path.name.startswith("rollouts") and path.suffix == ".jsonl":
            kind = "rollouts"
        if path.name in ("raw_inputs.jsonl", "raw_inputs_with_duplicate_line.jsonl", "tasks.jsonl"):
            kind = "tasks"
        if path.name == "profile_reward_profiling_2rows.jsonl":
            kind = "reward_profile"
        if kind is not None:
            out.append((path, kind))
    return out


GOLDEN_FILES = _golden_files()
# Golden cases that are broken on purpose (Gym fails on them too); everything else must be valid.
BROKEN_ON_PURPOSE = {
    "case_duplicate/rollouts.jsonl",
    "case_blank_line/rollouts.jsonl",
    "case_missing_index/rollouts.jsonl",
}


def test_every_schema_file_is_a_valid_2020_12_schema():
    from jsonschema import Draft202012Validator

    names = schemas.schema_names()
    assert set(ARTIFACT_SCHEMAS + ["validate_output", "check_output"]) <= set(names)
    for name in names:
        schema = schemas.load(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(f"/{name}.schema.json")
        Draft202012Validator.check_schema(schema)


def test_shared_defs_are_identical_across_files():
    """Schemas are self-contained (no cross-file $ref); the copies of a shared definition must not drift."""
    seen: dict[str, tuple[str, dict]] = {}
    for name in schemas.schema_names():
        for def_name, body in schemas.load(name).get("$defs", {}).items():
            if def_name in seen:
                assert body == seen[def_name][1], (
                    f"$defs/{def_name} differs between {seen[def_name][0]} and {name}"
                )
            else:
                seen[def_name] = (name, body)


def test_golden_corpus_is_not_empty():
    kinds = {kind for _, kind in GOLDEN_FILES}
    assert {
        "tasks",
        "materialized",
        "rollouts",
        "reward_profile",
        "agent_metrics",
        "repeat_level_metrics",
    } <= kinds
    assert len(GOLDEN_FILES) >= 40


@pytest.mark.parametrize("path,kind", GOLDEN_FILES, ids=[str(p.relative_to(GOLDEN)) for p, _ in GOLDEN_FILES])
def test_golden_file_validates(path: Path, kind: str):
    report = validate_file(path, kind)
    rel = "/".join(path.parts[-2:])
    if rel in BROKEN_ON_PURPOSE:
        assert report.status == "invalid"
    else:
        assert report.status == "valid", [p.render(str(path)) for p in report.problems]
        assert report.rows > 0 or "case_no_rollouts" in path.parts  # Gym's files of a run with no rollout


def _first_row(case: str, name: str) -> dict:
    with open(GOLDEN / "gym-0.7.0" / case / name) as handle:
        return json.loads(handle.readline())


def _set(path: list, value):
    def mutate(row):
        target = row
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


def _delete(path: list):
    def mutate(row):
        target = row
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return mutate


ROLLOUT = ("case_complete", "rollouts.jsonl", "rollout")
MATERIALIZED = ("case_complete", "rollouts_materialized_inputs.jsonl", "materialized_input")
PROFILE = ("case_complete", "rollouts_reward_profiling.jsonl", "reward_profile")
BROKEN = [
    (ROLLOUT, _set(["_ng_task_index"], -1), "/_ng_task_index"),
    (ROLLOUT, _set(["_ng_task_index"], "0"), "/_ng_task_index"),
    (ROLLOUT, _set(["_ng_rollout_index"], True), "/_ng_rollout_index"),
    (ROLLOUT, _set(["_ng_rollout_index"], 1.5), "/_ng_rollout_index"),
    (ROLLOUT, _delete(["_ng_rollout_index"]), "/_ng_rollout_index"),
    (ROLLOUT, _set(["agent_ref", "name"], 7), "/agent_ref/name"),
    (ROLLOUT, _delete(["agent_ref", "name"]), "/agent_ref/name"),
    (ROLLOUT, _set(["response", "usage", "output_tokens"], "111"), "/response/usage/output_tokens"),
    (ROLLOUT, _set(["response", "usage", "input_tokens"], None), "/response/usage/input_tokens"),
    (ROLLOUT, _delete(["response", "usage"]), "/response/usage"),
    (
        ROLLOUT,
        _set(["response", "usage", "output_tokens_details", "reasoning_tokens"], "x"),
        "/response/usage/output_tokens_details/reasoning_tokens",
    ),
    (ROLLOUT, _set(["response", "output", 1], "text"), "/response/output/1"),
    (ROLLOUT, _set(["reward"], "1.0"), "/reward"),
    (ROLLOUT, _set(["mask_sample"], "false"), "/mask_sample"),
    (ROLLOUT, _delete(["response"]), "/response"),
    (MATERIALIZED, _set(["_ng_task_index"], None), "/_ng_task_index"),
    (MATERIALIZED, _set(["agent_ref"], "math_simple_agent"), "/agent_ref"),
    (MATERIALIZED, _set(["responses_create_params", "input"], 3), "/responses_create_params/input"),
    (PROFILE, _set(["mean/reward"], "0.75"), "/mean~1reward"),
    (PROFILE, _set(["rollout_infos", 2, "rollout_id"], "0-2"), "/rollout_infos/2/rollout_id"),
    (PROFILE, _set(["rollout_infos", 0, "output_tokens"], "100"), "/rollout_infos/0/output_tokens"),
    (PROFILE, _delete(["num_rollouts"]), "/num_rollouts"),
]


@pytest.mark.parametrize("source,mutate,pointer", BROKEN, ids=[f"{s[2]}{p}" for s, _, p in BROKEN])
def test_broken_copy_fails_at_pointer(source, mutate, pointer):
    case, name, schema = source
    row = _first_row(case, name)
    assert schema_problems(schema, row, 1) == []
    mutate(row)
    problems = schema_problems(schema, row, 1)
    assert [p.pointer for p in problems] == [pointer], problems
    assert schemas.fast_check(schema)(row) is False


def test_broken_agent_metrics_points_into_the_array():
    doc = json.loads((GOLDEN / "gym-0.7.0/case_fan_out/rollouts_agent_metrics.json").read_text())
    assert schema_problems("agent_metrics", doc, None) == []
    doc[1]["agent_ref"]["name"] = None
    doc[0]["mean/reward"] = "high"
    pointers = [p.pointer for p in schema_problems("agent_metrics", doc, None)]
    assert pointers == ["/0/mean~1reward", "/1/agent_ref/name"]


def test_failure_row_shapes():
    gym_row = {
        "_ng_failure_class": "agent_run_error",
        "_ng_failure_type": "ClientResponseError",
        "_ng_failure_message": "500, message='Internal Server Error'",
        "_ng_failure_http_status": 500,
        "_ng_failure_response_body": '{"detail": "did not collect"}',
        "_ng_task_index": 0,
        "_ng_rollout_index": 3,
        "_ng_attempt_index": 1,
        "agent_ref": {"name": "math_simple_agent"},
        "_ngrp_elapsed_s": 1.25,
        "_ngrp_retries": 2,
    }
    assert schema_problems("failure", gym_row, 1) == []
    no_reply = dict(gym_row, _ng_failure_class="agent_request_failed", _ng_failure_http_status=None)
    no_reply["_ng_failure_response_body"] = None
    assert schema_problems("failure", no_reply, 1) == []
    bad = dict(gym_row, _ng_failure_http_status="500")
    assert [p.pointer for p in schema_problems("failure", bad, 1)] == ["/_ng_failure_http_status"]
    assert [
        p.pointer for p in schema_problems("failure", {"_ng_task_index": 0, "_ng_rollout_index": 0}, 1)
    ] == ["/_ng_failure_class"]


def test_manifest_rejects_credentials_in_urls_and_options():
    manifest = {
        "tool": {"name": "ngrp", "version": "0.1.0"},
        "created_at": "2026-11-29T15:00:00Z",
        "input": {"path": "tasks.jsonl", "sha256": "a" * 64},
        "options": {"num_repeats": 8, "max_tokens": 512},
        "model": "my-policy",
        "servers": ["http://gpu1:8000/v1", {"url": "http://gpu2:8000/v1", "weight": 1}],
        "backend": "chat",
    }
    assert schema_problems("run_manifest", manifest, None) == []
    leaked = copy.deepcopy(manifest)
    leaked["servers"][0] = "http://user:hunter2@gpu1:8000/v1"
    assert [p.pointer for p in schema_problems("run_manifest", leaked, None)] == ["/servers/0"]
    keyed = copy.deepcopy(manifest)
    keyed["options"]["api_key"] = "sk-..."
    assert [p.pointer for p in schema_problems("run_manifest", keyed, None)] == ["/options"]


def test_profile_summary_first_version():
    summary = {
        "tool": {"name": "ngrp", "version": "0.1.0"},
        "inputs": {"rollouts": {"path": "r.jsonl", "sha256": "0" * 64}},
        "options": {"allow_partial": True},
        "counts": {"expected": 12, "completed": 10, "missing": 2, "extra": 0, "masked": 0, "null_reward": 0},
        "tasks": {"total": 3, "complete": 2, "partial": 1, "dropped": 0},
        "agents": [{"agent": "math_simple_agent", "counts": {"expected": 12}, "later_extension": [1, 2]}],
        "future_key": {"anything": True},
    }
    assert schema_problems("profile_summary", summary, None) == []
    summary["counts"]["missing"] = -2
    assert [p.pointer for p in schema_problems("profile_summary", summary, None)] == ["/counts/missing"]


# --- the fast path equals jsonschema -------------------------------------------------------------------


def _corpus() -> list[tuple[str, object]]:
    out = []
    for path, kind in GOLDEN_FILES:
        name = schemas.for_kind(kind)
        if path.suffix == ".json":
            out.append((name, json.loads(path.read_text())))
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                out.append((name, json.loads(line)))
    for (case, file, name), mutate, _ in BROKEN:
        row = _first_row(case, file)
        mutate(row)
        out.append((name, row))
    return out


def test_fast_path_compiles_the_hot_schemas():
    for name in ("rollout", "materialized_input", "task", "failure", "reward_profile", "agent_metrics"):
        assert schemas.fast_check(name) is not None, name


def test_fast_path_equals_jsonschema_on_corpus():
    corpus = _corpus()
    assert len(corpus) > 300
    for name, instance in corpus:
        fast = schemas.fast_check(name)
        if fast is not None:
            assert fast(instance) == schemas.validator(name).is_valid(instance), (name, instance)


def test_fast_path_refuses_unsupported_keywords():
    assert compile_schema({"type": "object", "propertyNames": {"pattern": "^a"}}) is None
    assert compile_schema({"$ref": "other.json#/x"}) is None
    assert compile_schema({"oneOf": [{"type": "string"}]}) is None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, 1.0, -1.0, 2.5])
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "usage",
                    "input_tokens",
                    "reward",
                    "_ng_task_index",
                    "x",
                    "mean/reward",
                    "rollout_id",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


def _mutated_rows():
    base = [_first_row(*src[:2]) for src in (ROLLOUT, MATERIALIZED, PROFILE)]
    paths = st.sampled_from(
        [
            ["_ng_task_index"],
            ["_ng_rollout_index"],
            ["reward"],
            ["agent_ref"],
            ["agent_ref", "name"],
            ["response"],
            ["response", "usage"],
            ["response", "usage", "input_tokens"],
            ["response", "output"],
            ["rollout_infos"],
            ["mean/reward"],
            ["sample"],
            ["responses_create_params"],
        ]
    )
    return st.tuples(st.sampled_from(range(len(base))), paths, json_values).map(
        lambda t: _apply(base[t[0]], t[1], t[2])
    )


def _apply(row: dict, path: list, value):
    row = copy.deepcopy(row)
    target = row
    for part in path[:-1]:
        if not isinstance(target, dict) or part not in target:
            return row
        target = target[part]
    if isinstance(target, dict):
        target[path[-1]] = value
    return row


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(ARTIFACT_SCHEMAS), instance=json_values | _mutated_rows())
def test_fast_path_equals_jsonschema_on_generated_values(name, instance):
    fast = schemas.fast_check(name)
    if fast is not None:
        assert fast(instance) == schemas.validator(name).is_valid(instance)
