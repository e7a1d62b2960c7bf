"""Sampling controls: the options that set fields of `responses_create_params`, and what the rows used.

`overrides_from_options` turns Gym's `--temperature`, `--top-p`, `--max-output-tokens` and repeatable
`--set PATH=JSON` into one {dotted path: value} mapping, refusing bad values as usage errors that name the
option. `apply_overrides` writes them into a row's params when materializing: a top-level path replaces
that field (Gym's shallow merge); a dotted path (`reasoning.effort`) sets that one field inside the
object and keeps its other fields.

`sampling_used` reads back, from the rows themselves, what a run actually asked for: for each sampling
field any row sets, the distinct values and how many rows carry each (a row without the field counts
under `null`: the server's default).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ..errors import UsageError
from .names import RCP
from .reading import deeper_than

# Fields read back from the rows (`sampling_used`); dotted paths reach into objects.
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "max_output_tokens",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "reasoning.effort",
)
# The options with their own flag, and the field each sets.
NAMED_OPTIONS = {
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_output_tokens": "--max-output-tokens",
}
PROTECTED = ("input",)  # the prompt itself: never replaced by an option
# Bounds that keep every materialized row writable and readable (reading.MAX_DEPTH is 100 levels; the row
# adds two above the path), and max_output_tokens a number a server takes (a signed 32-bit count).
MAX_SET_PATH = 16
MAX_SET_DEPTH = 64
MAX_OUTPUT_TOKENS = 2**31 - 1


def overrides_from_options(
    temperature: float | None,
    top_p: float | None,
    max_output_tokens: int | None,
    sets: Iterable[str] = (),
) -> dict[str, Any]:
    """{dotted path: value} from the sampling options; a bad value is a UsageError naming its option."""
    overrides: dict[str, Any] = {}
    by_set: set[str] = set()
    for path, value in (
        ("temperature", temperature),
        ("top_p", top_p),
        ("max_output_tokens", max_output_tokens),
    ):
        if value is not None:
            overrides[path] = value
    for spec in sets:
        path, value = parse_set(spec)
        if path in overrides:
            raise UsageError(f"--set {spec!r}: {path} is given twice", hint="give each field once")
        overrides[path] = value
        by_set.add(path)
    for path, value in overrides.items():
        check_value(path, value, f"--set {path}" if path in by_set else None)
    return overrides


def parse_set(spec: str) -> tuple[str, Any]:
    """`PATH=JSON` -> (path, value); the value must be JSON (a string is quoted: reasoning.effort='"low"')."""
    path, sep, raw = spec.partition("=")
    path = path.strip()
    parts = path.split(".")
    shown = spec if len(spec) <= 80 else spec[:60] + "..."  # a 1,000-key path is not echoed whole
    if not sep or not path or any(not part for part in parts):
        raise UsageError(f"--set {shown!r}: expected PATH=JSON, for example --set top_k=20")
    if len(parts) > MAX_SET_PATH:
        raise UsageError(f"--set {shown!r}: PATH has {len(parts)} keys; at most {MAX_SET_PATH}")
    if parts[0] in PROTECTED:
        raise UsageError(
            f"--set {spec!r}: {parts[0]} is the prompt; --set changes sampling fields, never the input",
            hint="edit the task file to change prompts",
        )
    raw_shown = raw if len(raw) <= 60 else raw[:40] + "..."
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not any(word in str(exc).lower() for word in ("depth", "recursion")):
            raise UsageError(
                f"--set {path[:60]}: the value {raw_shown!r} is not JSON",
                hint="quote a string for the shell and for JSON: --set reasoning.effort='\"low\"'",
            ) from None
        value, deep = None, True  # orjson stopped at its 1,024 levels: deeper still
    else:
        deep = deeper_than(value, MAX_SET_DEPTH)
    if deep:
        raise UsageError(f"--set {path[:60]}: the value {raw_shown!r} nests more than {MAX_SET_DEPTH} levels")
    return path, value


def check_value(path: str, value: Any, option: str | None = None) -> None:
    """The range of the fields Gym names (whichever option set them; `option` names it in the error)."""
    option = option or NAMED_OPTIONS.get(path, f"--set {path}")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if path == "temperature" and not (number and math.isfinite(value) and value >= 0):
        raise UsageError(f"{option} must be a number >= 0, not {value!r}")
    if path == "top_p" and not (number and math.isfinite(value) and 0 < value <= 1):
        raise UsageError(f"{option} must be in (0, 1], not {value!r}")
    if path == "max_output_tokens" and not (
        number and math.isfinite(value) and value == int(value) and 1 <= value <= MAX_OUTPUT_TOKENS
    ):
        raise UsageError(
            f"{option} must be a whole number of tokens from 1 to {MAX_OUTPUT_TOKENS:,}, not {_short(value)}"
        )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:30] + "..."


def apply_overrides(params: dict, overrides: Mapping[str, Any]) -> dict:
    """A copy of `params` with every override written in; objects on a dotted path are copied, not shared."""
    out = dict(params)
    for path, value in overrides.items():
        *parents, leaf = path.split(".")
        target = out
        for name in parents:
            inner = target.get(name)
            target[name] = dict(inner) if isinstance(inner, dict) else {}
            target = target[name]
        target[leaf] = value
    return out


def field_value(params: Any, path: str) -> Any:
    """The value at a dotted path of a row's params, None where it is absent."""
    for name in path.split("."):
        if not isinstance(params, dict):
            return None
        params = params.get(name)
    return params


class SamplingTally:
    """Counts, row by row, the values of each sampling field (see `sampling_used`); cheap per row, as
    `profile` feeds it every rollout it reads: a row's fields are counted as one combination (rows of a run
    share a handful), and the combinations are split into fields when asked."""

    def __init__(self) -> None:
        self.rows = 0
        self._combinations: dict[tuple, int] = {}  # (fields set, their values, the types) -> rows
        self._odd: dict[str, Counter[tuple[str, Any]]] = {path: Counter() for path in SAMPLING_FIELDS}
        self._last: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # params' keys, sampling fields set

    def add(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        params = row.get(RCP)
        if type(params) is not dict:
            if isinstance(params, dict):
                self._add_fields(params)
            return
        # Only the fields a row sets are read: rows of a run share their params' keys, so the fields set
        # are found once per layout of keys (the last one is compared, not hashed), not looked up per row.
        keys = tuple(params)
        if keys != self._last[0]:
            self._last = keys, tuple(path for path in _TOP_FIELDS if path in params)
        fields = self._last[1]
        values = tuple(map(params.__getitem__, fields))
        if "reasoning" in params:  # reasoning.effort, one level down
            reasoning = params["reasoning"]
            effort = reasoning.get("effort") if type(reasoning) is dict else None
            fields, values = (*fields, _EFFORT), (*values, effort)
        # the types keep 1, 1.0 and true apart, which compare (and hash) equal
        key = (fields, values, tuple(map(type, values)))
        try:
            self._combinations[key] = self._combinations.get(key, 0) + 1
        except TypeError:  # a list or an object as a value: counted field by field
            self._add_fields(params)

    def _add_fields(self, params: Mapping[str, Any]) -> None:
        for path in SAMPLING_FIELDS:
            value = field_value(params, path)
            if value is not None:
                self._odd[path][_hashable(value)] += 1

    @property
    def counts(self) -> dict[str, Counter[tuple[str, Any]]]:
        """{field: Counter({hashable value: rows})} over every row added, absent values left out."""
        out = {path: Counter(odd) for path, odd in self._odd.items()}
        for (fields, values, _), rows in self._combinations.items():
            for path, value in zip(fields, values, strict=True):
                if value is not None:
                    out[path][_hashable(value)] += rows
        return out

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        """{field: [{"value": v, "rows": n}, ...]} for the fields some row sets, most rows first; the rows
        without the field count under null."""
        out: dict[str, list[dict[str, Any]]] = {}
        for path, counts in self.counts.items():
            if not counts:
                continue
            values = [(_value(key), n) for key, n in counts.items()]
            unset = self.rows - sum(counts.values())
            if unset:
                values.append((None, unset))
            values.sort(key=lambda item: (-item[1], orjson.dumps(item[0])))
            out[path] = [{"value": value, "rows": n} for value, n in values]
        return out


_TOP_FIELDS = tuple(path for path in SAMPLING_FIELDS if "." not in path)
_EFFORT = "reasoning.effort"
# the fields `SamplingTally.add` reads: the top-level ones, then reasoning.effort
assert (*_TOP_FIELDS, _EFFORT) == SAMPLING_FIELDS


def _hashable(value: Any) -> tuple[str, Any]:
    """A counter key that keeps 1, 1.0 and true apart and takes lists and objects (as JSON)."""
    if isinstance(value, (str, int, float, bool)):
        return type(value).__name__, value
    return "json", orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _value(key: tuple[str, Any]) -> Any:
    kind, value = key
    return orjson.loads(value) if kind == "json" else value


def sampling_used(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    tally = SamplingTally()
    for row in rows:
        tally.add(row)
    return tally.to_json()


def sampling_lines(sampling: Mapping[str, list[dict[str, Any]]] | None) -> list[str]:
    """`temperature 0.2 (96 rows), 1.0 (32 rows)`, one line per field; a field unset in some rows shows
    `default` for them. No line when the rows set no sampling field."""
    if not sampling:
        return []
    lines = []
    for path, values in sampling.items():
        shown = ", ".join(
            f"{'default' if v['value'] is None else orjson.dumps(v['value']).decode()} ({v['rows']} rows)"
            for v in values
        )
        lines.append(f"{path} {shown}")
    return lines
