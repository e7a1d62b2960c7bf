"""Compile a JSON Schema (a small subset of 2020-12) into a plain Python predicate.

Why: full jsonschema validation costs tens of microseconds per rollout row, several times the cost of
parsing it. Our artifact schemas use a handful of keywords, which compile to a few `isinstance` checks.

Contract: the predicate returns exactly what `Draft202012Validator(schema).is_valid(instance)` would
(tests compare the two on the golden files, on mutated rows and on hypothesis-generated values).
A schema that uses any keyword outside the subset is not compiled (`compile_schema` returns None) and
the caller validates with jsonschema alone. Callers still run jsonschema on every row the predicate
rejects, to get its error messages, so the predicate only ever decides the common case "valid".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# Keywords with no effect on validity (format is an annotation unless a format checker is passed).
_ANNOTATIONS = {
    "$schema",
    "$id",
    "$comment",
    "$defs",
    "title",
    "description",
    "default",
    "examples",
    "format",
}
_SUPPORTED = {
    "type",
    "required",
    "properties",
    "patternProperties",
    "additionalProperties",
    "items",
    "minimum",
    "maximum",
    "pattern",
    "$ref",
    "anyOf",
    "not",
}


class _Unsupported(Exception):
    pass


def _is_integer(value: Any) -> bool:
    # jsonschema counts 1.0 as an integer; bools are never numbers. Exact types first: the common case.
    kind = type(value)
    if kind is int:
        return True
    if kind is float:
        return value.is_integer()
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    kind = type(value)
    if kind is int or kind is float:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPE_CHECKS: dict[str, Check] = {
    "object": lambda v: type(v) is dict or isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": _is_number,
    "integer": _is_integer,
}


def compile_schema(root: dict[str, Any]) -> Check | None:
    """The predicate for `root`, or None when it uses a keyword outside the subset."""
    try:
        return _Compiler(root).compile(root, depth=0)
    except _Unsupported:
        return None


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def compile(self, schema: Any, depth: int) -> Check:
        if depth > 32:
            raise _Unsupported("schema nests too deep (recursive $ref?)")
        if schema is True or schema == {}:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, dict) or set(schema) - _SUPPORTED - _ANNOTATIONS:
            raise _Unsupported(str(schema)[:80])
        checks = [
            check
            for keyword, build in self._builders().items()
            if keyword in schema
            for check in [build(schema, depth + 1)]
            if check is not _always
        ]
        return _all_of(checks)

    def _builders(self) -> dict[str, Callable[[dict[str, Any], int], Check]]:
        return {
            "$ref": self._ref,
            "type": self._type,
            "minimum": self._minimum,
            "maximum": self._maximum,
            "pattern": self._pattern,
            "required": self._required,
            "properties": self._object_members,
            "patternProperties": self._object_members_if_no_properties,
            "additionalProperties": self._object_members_if_no_properties_or_patterns,
            "items": self._items,
            "anyOf": self._any_of,
            "not": self._not,
        }

    def _ref(self, schema: dict[str, Any], depth: int) -> Check:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/$defs/") or "/" in ref[len("#/$defs/") :]:
            raise _Unsupported(f"$ref {ref!r}")
        target = self.root.get("$defs", {}).get(ref[len("#/$defs/") :])
        if target is None:
            raise _Unsupported(f"$ref {ref!r} not found")
        return self.compile(target, depth)

    def _type(self, schema: dict[str, Any], depth: int) -> Check:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        try:
            tests = tuple(_TYPE_CHECKS[name] for name in names)
        except (KeyError, TypeError) as exc:
            raise _Unsupported(f"type {names!r}") from exc
        if len(tests) == 1:
            return tests[0]
        if len(tests) == 2:
            a, b = tests
            return lambda v: a(v) or b(v)
        return lambda v: any(test(v) for test in tests)

    def _minimum(self, schema: dict[str, Any], depth: int) -> Check:
        bound = schema["minimum"]
        return lambda v: not _is_number(v) or v >= bound

    def _maximum(self, schema: dict[str, Any], depth: int) -> Check:
        bound = schema["maximum"]
        return lambda v: not _is_number(v) or v <= bound

    def _pattern(self, schema: dict[str, Any], depth: int) -> Check:
        regex = re.compile(schema["pattern"])
        return lambda v: not isinstance(v, str) or regex.search(v) is not None

    def _required(self, schema: dict[str, Any], depth: int) -> Check:
        keys = tuple(dict.fromkeys(schema["required"]))
        if len(keys) == 1:
            (a,) = keys
            return lambda v: not isinstance(v, dict) or a in v
        if len(keys) == 2:
            a, b = keys
            return lambda v: not isinstance(v, dict) or (a in v and b in v)
        if len(keys) == 3:
            a, b, c = keys
            return lambda v: not isinstance(v, dict) or (a in v and b in v and c in v)

        def check(value: Any) -> bool:
            if not isinstance(value, dict):
                return True
            for key in keys:  # noqa: SIM110
                if key not in value:
                    return False
            return True

        return check

    def _object_members(self, schema: dict[str, Any], depth: int) -> Check:
        """properties + patternProperties + additionalProperties, compiled together (they interact)."""
        props = {key: self.compile(sub, depth) for key, sub in schema.get("properties", {}).items()}
        patterns = [
            (re.compile(p), self.compile(sub, depth))
            for p, sub in schema.get("patternProperties", {}).items()
        ]
        extra = self.compile(schema.get("additionalProperties", True), depth)
        named = tuple((key, check) for key, check in props.items() if check is not _always)
        if not patterns and extra is _always:
            return _properties_only(named)
        return _members(props, named, patterns, extra)

    def _object_members_if_no_properties(self, schema: dict[str, Any], depth: int) -> Check:
        return _always if "properties" in schema else self._object_members(schema, depth)

    def _object_members_if_no_properties_or_patterns(self, schema: dict[str, Any], depth: int) -> Check:
        if "properties" in schema or "patternProperties" in schema:
            return _always
        return self._object_members(schema, depth)

    def _items(self, schema: dict[str, Any], depth: int) -> Check:
        item = self.compile(schema["items"], depth)
        if item is _always:
            return _always

        def check(value: Any) -> bool:
            if not isinstance(value, list):
                return True
            for x in value:  # noqa: SIM110
                if not item(x):
                    return False
            return True

        return check

    def _any_of(self, schema: dict[str, Any], depth: int) -> Check:
        options = tuple(self.compile(sub, depth) for sub in schema["anyOf"])
        return lambda v: any(option(v) for option in options)

    def _not(self, schema: dict[str, Any], depth: int) -> Check:
        inner = self.compile(schema["not"], depth)
        return lambda v: not inner(v)


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


def _all_of(checks: list[Check]) -> Check:
    # Unrolled for the common sizes: a generator per call costs more than the checks themselves.
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda v: a(v) and b(v)
    if len(checks) == 3:
        a, b, c = checks
        return lambda v: a(v) and b(v) and c(v)
    checks_t = tuple(checks)

    def check(value: Any) -> bool:
        for one in checks_t:  # noqa: SIM110
            if not one(value):
                return False
        return True

    return check


def _properties_only(named: tuple[tuple[str, Check], ...]) -> Check:
    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        # A plain loop: faster than all() over a generator on the hot path.
        for key, sub in named:  # noqa: SIM110
            if key in value and not sub(value[key]):
                return False
        return True

    return check


def _members(
    props: dict[str, Check],
    named: tuple[tuple[str, Check], ...],
    patterns: list[tuple[re.Pattern, Check]],
    extra: Check,
) -> Check:
    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for key, item in value.items():
            matched = key in props
            if matched and not props[key](item):
                return False
            for regex, sub in patterns:
                if regex.search(key):
                    matched = True
                    if not sub(item):
                        return False
            if not matched and not extra(item):
                return False
        return True

    return check
