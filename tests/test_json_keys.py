"""references/json-keys.md: every key of every schema with its type, generated; and every key the analysis
commands print under --json is a key of their schema, so it is on that page (issue 30 item 1)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gen_json_keys
import jsonschema
import pytest
from run_helpers import write_run

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "references" / "json-keys.md"


def test_page_is_current():
    assert PAGE.read_text(encoding="utf-8") == gen_json_keys.render(), (
        "references/json-keys.md is stale: run python3 scripts/gen_json_keys.py"
    )


def test_the_keys_an_agent_guessed_are_on_the_page():
    """The wrong turns: `per_task[i]["task_index"]` (it is `task`); round() on `p_informative` (an object)."""
    page = PAGE.read_text(encoding="utf-8")
    assert "| `per_task[].task` | integer | yes |" in page
    assert "| `per_task[].p_informative` | object of number \\| null |" in page


def _resolve(schema: Any, root: dict) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _branches(schema: Any, root: dict) -> list[dict]:
    """The schema and every allOf/oneOf/anyOf branch under it, refs resolved."""
    schema = _resolve(schema, root)
    if not isinstance(schema, dict):
        return []
    out = [schema]
    for word in ("allOf", "oneOf", "anyOf"):
        for option in schema.get(word, []):
            out += _branches(option, root)
    return out


def _free_form(branches: list[dict]) -> bool:
    """An object whose keys are the data's, not ours: no named keys, no map type, and a description."""
    keyed = ("properties", "patternProperties", "additionalProperties")
    named = any(word in b for b in branches for word in keyed)
    return not named and any(b.get("description") for b in branches)


def undocumented(value: Any, schema: Any, root: dict, path: str = "") -> list[str]:
    """Key paths in `value` that its schema does not name (allowed only by a missing or `true`
    additionalProperties), so the generated page could not list them."""
    branches = _branches(schema, root)
    if isinstance(value, dict) and _free_form(branches):
        return []  # the data's own keys (a verifier's fields, a sample row), as its description says
    if isinstance(value, list):
        items = [b["items"] for b in branches if isinstance(b.get("items"), dict)]
        return [p for v in value for item in items[:1] for p in undocumented(v, item, root, f"{path}[]")]
    if not isinstance(value, dict):
        return []
    out = []
    for key, sub in value.items():
        where = f"{path}.{key}" if path else key
        named = [b["properties"][key] for b in branches if key in b.get("properties", {})]
        named += [
            s
            for b in branches
            for pattern, s in b.get("patternProperties", {}).items()
            if re.search(pattern, key)
        ]
        named += [
            b["additionalProperties"] for b in branches if isinstance(b.get("additionalProperties"), dict)
        ]
        if not named:
            out.append(where)
            continue
        out += undocumented(sub, named[0], root, where)
    return out


def _schema(name: str) -> dict:
    return json.loads((REPO / "schemas" / name).read_text(encoding="utf-8"))


@pytest.fixture
def two_runs(tmp_path, run_ngrp):
    profiles = []
    for name, flip in (("A", 0), ("B", 1)):
        rollouts, inputs = write_run(tmp_path / name, tasks=10, repeats=8, flip=flip, truncate_every=7)
        done = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts)
        assert done.returncode == 0, done.stderr
        profiles.append((inputs, rollouts, rollouts.with_name("rollouts_reward_profiling.jsonl")))
    return profiles


def test_every_key_the_analysis_commands_print_is_documented(two_runs, run_ngrp, tmp_path):
    (inputs, rollouts, profile), (_, _, profile_b) = two_runs
    runs = {
        "stats_result.schema.json": ("stats", profile, "--rollouts", rollouts, "--group-by", "level"),
        "compare_result.schema.json": ("compare", profile, profile_b),
        "check_output.schema.json": ("check", "--inputs", inputs, "--rollouts", rollouts),
        "health_result.schema.json": ("health", "--inputs", inputs, "--rollouts", rollouts, "--no-write"),
        "curriculum_result.schema.json": (
            "curriculum", profile, "--tasks", inputs, "--output", tmp_path / "k.jsonl", "--learnable-for", "8"
        ),
        "validate_output.schema.json": ("validate", inputs, rollouts, profile),
        "profile_result.schema.json": ("profile", "--inputs", inputs, "--rollouts", rollouts,
                                       "--output-dir", tmp_path / "p"),
    }  # fmt: skip
    found = {}
    for schema_name, args in runs.items():
        done = run_ngrp(*args, "--json")
        assert done.returncode in (0, 1), (args, done.stderr)
        printed = json.loads(done.stdout)
        root = _schema(schema_name)
        found[schema_name] = undocumented(printed, root, root)
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    lines = run_ngrp("inspect", rollouts, "--task", "3", "--json").stdout.splitlines()
    root = _schema("inspect_rollout.schema.json")
    assert lines and all(undocumented(json.loads(line), root, root) == [] for line in lines)
    written = run_ngrp("inspect", rollouts, "--truncated", "--tasks-out", tmp_path / "t.jsonl", "--json")
    root = _schema("inspect_tasks_out.schema.json")
    assert undocumented(json.loads(written.stdout), root, root) == []
    jsonschema.validate(json.loads(written.stdout), root)


def test_the_checker_finds_an_unnamed_key():
    root = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}}
    assert undocumented({"a": {"b": 1, "c": 2}, "d": 3}, root, root) == ["a.c", "d"]
    mapped = {
        "type": "object",
        "properties": {"m": {"type": "object", "additionalProperties": {"type": "number"}}},
    }
    assert undocumented({"m": {"8": 0.5}}, mapped, mapped) == []


def test_reward_component_keys_are_documented(tmp_path, run_ngrp):
    """stats and compare print `reward_components` only for rows that carry them (agent runs)."""
    import agent_rows

    runs = []
    for name in ("A", "B"):
        rollouts = agent_rows.write_run(tmp_path / name, defects={(1, 2): "missing_component"})
        inputs = rollouts.with_name("rollouts_materialized_inputs.jsonl")
        assert run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts).returncode == 0
        runs.append((rollouts, rollouts.with_name("rollouts_reward_profiling.jsonl")))
    (rollouts_a, profile_a), (rollouts_b, profile_b) = runs
    for schema_name, args in {
        "stats_result.schema.json": ("stats", profile_a, "--rollouts", rollouts_a),
        "compare_result.schema.json": ("compare", profile_a, profile_b),
    }.items():
        done = run_ngrp(*args, "--json")
        printed = json.loads(done.stdout)
        assert printed["reward_components"]["components"], printed.get("reward_components")
        root = _schema(schema_name)
        assert undocumented(printed, root, root) == [], schema_name
        jsonschema.validate(printed, root)
