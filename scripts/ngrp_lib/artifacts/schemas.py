"""Load the JSON Schemas in `schemas/` and hand out cached validators.

Schemas are found next to the package in a checkout (`<repo>/schemas/`) or, once installed, as the package
data `ngrp_lib/_schemas/` (pyproject maps one onto the other). Each validator is compiled once per process.

Besides the full jsonschema validator, `fast_check(name)` compiles a schema into plain Python predicates
when it uses only a small set of keywords (see `_fastpath.py`). Validation calls the predicate first and
runs full jsonschema only on rows it rejects, so error messages always come from jsonschema.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ..errors import InputError
from .fastpath import compile_schema

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # ngrp_lib/

# Artifact kind -> schema file stem. Kinds are the names `ngrp validate --kind` takes.
KIND_SCHEMAS: dict[str, str] = {
    "tasks": "task",
    "materialized": "materialized_input",
    "rollouts": "rollout",
    "failures": "failure",
    "reward_profile": "reward_profile",
    "agent_metrics": "agent_metrics",
    "repeat_level_metrics": "repeat_level_metrics",
    "profile_summary": "profile_summary",
    "run_manifest": "run_manifest",
    "endpoints": "endpoints",
    "validate_output": "validate_output",
    "check_output": "check_output",
    "rollout_verdicts": "rollout_verdict",
    "quality_summary": "quality_summary",
}


def schema_dir() -> Path:
    """`<checkout>/schemas` when running from a checkout, else the installed `ngrp_lib/_schemas`."""
    for candidate in (PACKAGE_DIR.parent.parent / "schemas", PACKAGE_DIR / "_schemas"):
        if (candidate / "rollout.schema.json").is_file():
            return candidate
    raise InputError(
        "cannot find the JSON Schemas (schemas/ next to scripts/, or ngrp_lib/_schemas when installed)",
        hint="reinstall the toolkit (pip install <path to this skill folder>) or restore the schemas/ folder",
    )


def schema_names() -> list[str]:
    return sorted(p.name.removesuffix(".schema.json") for p in schema_dir().glob("*.schema.json"))


@functools.cache
def load(name: str) -> dict[str, Any]:
    path = schema_dir() / f"{name}.schema.json"
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise InputError(f"cannot load schema: {exc}", path=path) from exc


@functools.cache
def validator(name: str) -> Any:
    """A compiled Draft 2020-12 validator for `schemas/<name>.schema.json`."""
    from jsonschema import Draft202012Validator

    schema = load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@functools.cache
def fast_check(name: str) -> Callable[[Any], bool] | None:
    """A predicate equal to `validator(name).is_valid`, or None when the schema is outside the fast subset."""
    return compile_schema(load(name))


def first_problem(name: str, instance: Any) -> tuple[str, str] | None:
    """(JSON pointer, message) of the first way `instance` breaks schema `name`, None when it is valid:
    the contract `validate` reports, for a command that refuses such a row (fast predicate first)."""
    fast = fast_check(name)
    if fast is not None and fast(instance):
        return None
    errors = sorted(validator(name).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return None
    error = errors[0]
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        missing = next((n for n in error.validator_value if f"{n!r} is a required" in error.message), None)
        if missing is not None:
            return "/" + "/".join([*parts, missing]), "required key is missing"
    message = error.message if len(error.message) <= 200 else error.message[:197] + "..."
    return "/" + "/".join(parts), message


def for_kind(kind: str) -> str:
    return KIND_SCHEMAS[kind]
