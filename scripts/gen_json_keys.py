#!/usr/bin/env python3
"""Write references/json-keys.md: every key of every file and `--json` summary, with its type, from schemas/.

An agent reading `ngrp stats --json` should not guess that a task is `per_task[].task` or that
`p_informative` is an object: this page lists each key path with its type and, where the schema has
one, its description. It is generated, so it cannot drift from the schemas (a test checks it is in step,
and that every key a command prints is listed).

\b
Usage:
  python3 scripts/gen_json_keys.py            # rewrite references/json-keys.md
  python3 scripts/gen_json_keys.py --check    # exit 1 if the file is out of date
Exit codes: 0 ok (or current), 1 out of date (--check), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "schemas"
DEFAULT_OUTPUT = REPO / "references" / "json-keys.md"
MAX_DEPTH = 6  # key paths deeper than this are summarised by their parent's type

HEADER = """\
# JSON keys: every file and `--json` summary, with types

Generated from `schemas/` by `python3 scripts/gen_json_keys.py`; do not edit by hand (a test fails when
this page and the schemas differ, or when a command prints a key that is not listed here). What the files
mean: `references/output-format.md`.

How to read a path: `a.b` is key `b` inside object `a`; `a[]` is each item of array `a`; `a{}` is each
value of an object keyed by names the data chooses (for example `p_informative{}` maps a group size to a
probability: `p_informative["8"]`); `@name` is a shape defined once under the schema's "shapes"
(`$defs`). A required key is marked `yes`; `null` in a type means the key is there with no value
(undefined, for example an interval on one task).
"""


def type_of(schema: Any) -> str:
    """A short type: `integer`, `number | null`, `array of string`, `one of: a, b`, `@estimate`."""
    if schema is True or schema == {}:
        return "any"
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        return "@" + schema["$ref"].rsplit("/", 1)[-1]
    if "const" in schema:
        return f"always {json.dumps(schema['const'])}"
    if "enum" in schema:
        return "one of: " + ", ".join(json.dumps(v) for v in schema["enum"])
    for word in ("oneOf", "anyOf"):
        if word in schema:
            return " or ".join(type_of(s) for s in schema[word])
    if "allOf" in schema:  # a shape plus more keys: both hold
        return " and ".join(type_of(s) for s in schema["allOf"])
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    words = [_one_type(kind, schema) for kind in kinds]
    return " | ".join(words) if words else "any"


def _one_type(kind: str, schema: dict) -> str:
    if kind == "array" and isinstance(schema.get("items"), dict):
        return f"array of {type_of(schema['items'])}"
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict) and not schema.get("properties"):
        return f"object of {type_of(extra)}"
    return kind


def key_rows(schema: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, str, bool, str]]:
    """(path, type, required, description) of every key under `schema`, depth first."""
    if not isinstance(schema, dict) or depth >= MAX_DEPTH:
        return
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path, type_of(sub), name in required, _description(sub)
        yield from _children(sub, path, depth)
    for pattern, sub in schema.get("patternProperties", {}).items():
        path = f"{prefix}{{{pattern}}}"
        yield path, type_of(sub), False, _description(sub) or _cell(f"any key matching `{pattern}`")
        yield from _children(sub, path, depth)


def _children(sub: Any, path: str, depth: int) -> Iterator[tuple[str, str, bool, str]]:
    if not isinstance(sub, dict):
        return
    yield from key_rows(sub, path, depth + 1)
    items = sub.get("items")
    if isinstance(items, dict):
        yield from key_rows(items, f"{path}[]", depth + 1)
    extra = sub.get("additionalProperties")
    if isinstance(extra, dict) and "$ref" not in extra:
        yield from key_rows(extra, f"{path}{{}}", depth + 1)
    for word in ("oneOf", "anyOf", "allOf"):
        for option in sub.get(word, []):
            yield from key_rows(option, path, depth + 1)


def _description(schema: Any) -> str:
    if not isinstance(schema, dict):
        return ""
    return _cell(" ".join(str(schema.get("description", "")).split()))


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a pipe would end the cell, even inside backticks."""
    return text.replace("|", "\\|")


def _table(rows: list[tuple[str, str, bool, str]]) -> list[str]:
    seen: set[str] = set()
    out = ["| key | type | required | meaning |", "|---|---|---|---|"]
    for path, kind, required, text in rows:
        if path in seen:  # oneOf branches may repeat a key
            continue
        seen.add(path)
        out.append(f"| `{_cell(path)}` | {_cell(kind)} | {'yes' if required else ''} | {text} |")
    return out


def schema_section(path: Path) -> list[str]:
    schema = json.loads(path.read_text(encoding="utf-8"))
    title = schema.get("title", path.stem)
    lines = [f"## `{path.name}`", "", f"{title}. {_description(schema)}".rstrip(), ""]
    top = type_of(schema)
    if top != "object":
        lines += [f"Top level: {_cell(top)}.", ""]
    body = (
        schema.get("items")
        if schema.get("type") == "array" and isinstance(schema.get("items"), dict)
        else schema
    )
    rows = list(key_rows(body, "[]" if body is not schema else ""))
    if rows:
        lines += [*_table(rows), ""]
    for name, shape in schema.get("$defs", {}).items():
        lines += [f"Shape `@{name}`: {type_of(shape)}. {_description(shape)}".rstrip(), ""]
        rows = list(key_rows(shape))
        if rows:
            lines += [*_table(rows), ""]
    return lines


def render() -> str:
    parts = [
        HEADER,
        "Contents: " + " · ".join(f"`{p.name}`" for p in sorted(SCHEMAS.glob("*.schema.json"))),
        "",
    ]
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        parts += schema_section(path)
    return "\n".join(parts).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate references/json-keys.md from schemas/.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="file to write or check")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        if current != text:
            print(f"{args.output} is out of date: run python3 scripts/gen_json_keys.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
