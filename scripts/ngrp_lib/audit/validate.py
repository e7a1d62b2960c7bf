"""`ngrp validate`: check artifacts against their schemas, streaming, one problem per line of output.

read (jsonl.iter_records) -> accumulate (FileReport, bounded list of problems + a count) -> render (command).
A problem is `file:line: /json/pointer: message`. Files are never loaded whole except `.json` documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..artifacts import schemas
from ..artifacts.jsonl import LONE_SURROGATE, Row, iter_records, read_json
from ..artifacts.jsonl import Problem as LineProblem
from ..artifacts.kinds import DESCRIPTION, kind_from_row, sniff
from ..artifacts.names import (
    AGENT_METRICS_SUFFIX,
    FAILURES_SUFFIX,
    MANIFEST_SUFFIX,
    MATERIALIZED_SUFFIX,
    PROFILE_SUMMARY_SUFFIX,
    REPEAT_METRICS_SUFFIX,
    REWARD_PROFILE_SUFFIX,
    ROLLOUT_KEY,
    TASK_KEY,
    pack_key,
    profile_key,
    rollout_key,
    task_label,
)
from ..artifacts.opening import require_regular
from ..errors import InputError, UsageError

JSONL_KINDS = ("tasks", "materialized", "rollouts", "failures", "reward_profile", "rollout_verdicts")
JSON_KINDS = (
    "agent_metrics",
    "repeat_level_metrics",
    "profile_summary",
    "run_manifest",
    "endpoints",
    "quality_summary",
)
KINDS = JSONL_KINDS + JSON_KINDS
DUPLICATE_CHECKED = ("materialized", "rollouts")
PROFILE_KEYED = ("reward_profile",)  # one row per (task, agent), as every reader of a profile requires
IDENTITY_CHECKED = ("materialized", "rollouts", "failures")

# (file suffix, extension) -> kind, Gym's naming plus ours.
_NAMED_KINDS = [
    (MATERIALIZED_SUFFIX, ".jsonl", "materialized"),
    (FAILURES_SUFFIX, ".jsonl", "failures"),
    (REWARD_PROFILE_SUFFIX, ".jsonl", "reward_profile"),
    (AGENT_METRICS_SUFFIX, ".json", "agent_metrics"),
    (REPEAT_METRICS_SUFFIX, ".json", "repeat_level_metrics"),
    (PROFILE_SUMMARY_SUFFIX, ".json", "profile_summary"),
    (MANIFEST_SUFFIX, ".json", "run_manifest"),
    ("endpoints", ".json", "endpoints"),  # `ngrp serve` writes ngrp_endpoints.json; hand-written ones too
    ("rollout_verdicts", ".jsonl", "rollout_verdicts"),  # `ngrp health`, `gym eval health-check`
    ("quality_summary", ".json", "quality_summary"),
]

SCHEMA = "schema"
DUPLICATE = "duplicate_key"
FLOAT_KEY = "float_identity_key"
WRONG_KIND = "wrong_kind"  # the rows are another artifact than the name or --kind says
MAX_MESSAGE = 240


@dataclass(frozen=True, slots=True)
class Problem:
    line: int | None
    pointer: str | None
    kind: str
    message: str

    def render(self, path: str) -> str:
        where = path if self.line is None else f"{path}:{self.line}"
        pointer = "" if self.pointer is None else f" {self.pointer or '/'}:"
        return f"{where}:{pointer} {self.message}"


@dataclass
class FileReport:
    path: str
    kind: str | None = None
    status: str = "valid"  # valid | invalid | unreadable
    lines: int = 0
    rows: int = 0
    problem_count: int = 0  # problems examined in detail (listed or not)
    problems: list[Problem] = field(default_factory=list)
    max_errors: int | None = 20
    # Once `max_errors` problems are listed, later bad lines are only counted (one each), not examined
    # with jsonschema: a file where every row is bad then costs no more to check than a valid one.
    lines_not_itemized: int = 0

    @property
    def full(self) -> bool:
        return self.max_errors is not None and len(self.problems) >= self.max_errors

    def add(self, problem: Problem) -> None:
        self.problem_count += 1
        self.status = "invalid"
        if not self.full:
            self.problems.append(problem)

    def add_line(self, problems: list[Problem]) -> None:
        """The problems of one line: itemized while the list has room, else the line is counted once."""
        if not problems:
            return
        if self.full:
            self.count_line()
            return
        for problem in problems:
            self.add(problem)

    def count_line(self) -> None:
        self.status = "invalid"
        self.lines_not_itemized += 1

    @property
    def not_shown(self) -> int:
        return self.problem_count - len(self.problems)


@dataclass
class ValidationResult:
    files: list[FileReport]

    @property
    def exit_code(self) -> int:
        statuses = {f.status for f in self.files}
        return 3 if "unreadable" in statuses else 1 if "invalid" in statuses else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": {"name": "ngrp", "version": __version__},
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "files": [_file_json(f) for f in self.files],
        }


def _file_json(report: FileReport) -> dict[str, Any]:
    return {
        "path": report.path,
        "kind": report.kind,
        "status": report.status,
        "lines": report.lines,
        "rows": report.rows,
        "problem_count": report.problem_count,
        "problems_not_shown": report.not_shown,
        "lines_not_itemized": report.lines_not_itemized,
        "problems": [
            {"line": p.line, "pointer": p.pointer, "kind": p.kind, "message": p.message}
            for p in report.problems
        ],
    }


def validate_files(
    paths: list[Path | str], kind: str | None = None, max_errors: int | None = 20
) -> ValidationResult:
    """Validate each file; a file that cannot be read is reported (status unreadable), never raised."""
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}", hint=f"choose one of: {', '.join(KINDS)}")
    unknown = [
        str(p)
        for p in paths
        if kind is None and Path(p).suffix == ".json" and kind_from_name(Path(p)) is None
    ]
    if unknown:
        raise UsageError(
            f"cannot tell which artifact these JSON files are: {', '.join(unknown[:5])}",
            hint=f"name them as Gym does (*_agent_metrics.json...) or pass --kind ({', '.join(JSON_KINDS)})",
        )
    return ValidationResult([validate_file(Path(p), kind, max_errors) for p in paths])


def validate_file(path: Path, kind: str | None = None, max_errors: int | None = 20) -> FileReport:
    report = FileReport(str(path), kind=kind or kind_from_name(path), max_errors=max_errors)
    try:
        require_regular(path)  # the readers' own check: FIFOs, devices, folders, symlink loops
        if report.kind in JSON_KINDS or (report.kind is None and path.suffix == ".json"):
            _validate_json(path, report)
        else:
            _validate_jsonl(path, report)
    except InputError as exc:
        report.status = "unreadable"
        report.problem_count += 1
        report.problems.append(Problem(None, None, "unreadable", exc.detail))
    return report


def kind_from_name(path: Path) -> str | None:
    """Gym's file naming: `<stem>_materialized_inputs.jsonl` and friends. None when the name does not tell."""
    for suffix, extension, kind in _NAMED_KINDS:
        if path.suffix == extension and path.stem.endswith(suffix):
            return kind
    return None


def _validate_json(path: Path, report: FileReport) -> None:
    document = read_json(path)
    if report.kind is None:
        raise UsageError(f"{path}: cannot tell which artifact this JSON file is; pass --kind")
    report.lines = 1
    report.rows = len(document) if isinstance(document, list) else 1
    for problem in schema_problems(schemas.for_kind(report.kind), document, None):
        report.add(problem)


def _validate_jsonl(path: Path, report: FileReport) -> None:
    records = iter_records(path)
    leading = _until_first_row(records, report)
    if report.kind is None:
        if leading is None:
            return  # no rows at all: nothing to check the schema against
        report.kind = kind_from_row(leading.data)
    else:  # the name or --kind said: do the rows agree? (rollouts pass the materialized schema, ...)
        found = sniff(path)
        if found is not None and found != report.kind:
            report.add(Problem(None, None, WRONG_KIND, f"its first rows look like {DESCRIPTION[found]}, "
                               f"not {report.kind}: pass --kind {found} if that is what it is"))  # fmt: skip
    row_check = _RowChecker(report.kind)
    if leading is not None:
        row_check(leading, report)
    for record in records:
        report.lines = record.line
        if isinstance(record, Row):
            row_check(record, report)
        else:
            report.add_line([_line_problem(record)])


def _until_first_row(records: Iterator[Row | LineProblem], report: FileReport) -> Row | None:
    for record in records:
        report.lines = record.line
        if isinstance(record, Row):
            return record
        report.add_line([_line_problem(record)])
    return None


_LINE_CONTEXT = {
    "blank_line": "blank line (Gym's profiler rejects it: remove the line)",
    "torn_tail": (
        "torn last line: no newline and not valid JSON, an interrupted write "
        "(`ngrp profile --allow-partial` skips it; `ngrp collect --resume` repairs a run ngrp collected)"
    ),
}


def _line_problem(record: LineProblem) -> Problem:
    return Problem(record.line, None, record.kind, _LINE_CONTEXT.get(record.kind, record.message))


class _RowChecker:
    """Schema check for one row (fast predicate first, jsonschema for messages) and identity keys."""

    def __init__(self, kind: str) -> None:
        self.schema_name = schemas.for_kind(kind)
        self.fast = schemas.fast_check(self.schema_name)
        self.first_line: dict[Any, int] | None = {} if kind in DUPLICATE_CHECKED else None
        self.identity = kind in IDENTITY_CHECKED
        self.profile_lines: dict[Any, int] | None = {} if kind in PROFILE_KEYED else None

    def __call__(self, row: Row, report: FileReport) -> None:
        report.rows += 1
        data, line = row.data, row.line
        problems = self._identity_problems(data, line) if self.identity else []  # always: records the key
        if row.surrogates:
            problems.append(_surrogate_problem(row))
        if self.profile_lines is not None:
            problems += self._profile_problems(data, line)
        valid = self.fast(data) if self.fast is not None else None
        if report.full:
            # The predicate equals jsonschema's is_valid, so it decides alone here (no messages needed).
            ok = valid if valid is not None else schemas.validator(self.schema_name).is_valid(data)
            if problems or not ok:
                report.count_line()
            return
        if not valid:
            problems = schema_problems(self.schema_name, data, line) + problems
        report.add_line(problems)

    def _identity_problems(self, data: dict[str, Any], line: int) -> list[Problem]:
        key = rollout_key(data)
        if key is None:
            return _float_key_problems(data, line)
        if self.first_line is None:
            return []
        first = self.first_line.setdefault(pack_key(key), line)  # packed: a compact int per key
        if first == line:
            return []
        message = f"duplicate identity key ({key[0]}, {key[1]}); first seen at line {first}"
        return [Problem(line, None, DUPLICATE, message)]

    def _profile_problems(self, data: dict[str, Any], line: int) -> list[Problem]:
        key = profile_key(data)
        if key is None or self.profile_lines is None:
            return []
        first = self.profile_lines.setdefault(key, line)
        if first == line:
            return []
        message = f"duplicate profile row for {task_label(*key)}; first seen at line {first}"
        return [Problem(line, None, DUPLICATE, message)]


def _surrogate_problem(row: Row) -> Problem:
    message = (
        f"{row.surrogates} lone UTF-16 surrogate escape(s) (\\ud800-\\udfff without its pair) in the row's "
        "strings: not characters; ngrp reads each as U+FFFD (Python's json, so Gym, keeps them)"
    )
    return Problem(row.line, None, LONE_SURROGATE, message)


def _float_key_problems(data: dict[str, Any], line: int) -> list[Problem]:
    # JSON Schema counts 1.0 as an integer, but identity keys are joined as exact integers.
    out = []
    for name in (TASK_KEY, ROLLOUT_KEY):
        value = data.get(name)
        if isinstance(value, float) and value.is_integer() and value >= 0:
            message = f"write {int(value)}, not {value}: identity keys must be JSON integers"
            out.append(Problem(line, "/" + name, FLOAT_KEY, message))
    return out


def schema_problems(schema_name: str, instance: Any, line: int | None) -> list[Problem]:
    errors = schemas.validator(schema_name).iter_errors(instance)
    found = [Problem(line, _pointer(e), SCHEMA, _message(e)) for e in errors]
    return sorted(found, key=lambda p: p.pointer or "")


def _pointer(error: Any) -> str:
    parts = list(error.absolute_path)
    missing = _missing_property(error)
    if missing is not None:
        parts.append(missing)
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _missing_property(error: Any) -> str | None:
    if error.validator != "required":
        return None
    for name in error.validator_value:
        if error.message == f"{name!r} is a required property":
            return name
    return None


_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    type(None): "null",
    int: "integer",
}


def _message(error: Any) -> str:
    if error.validator == "required":
        return "required key is missing"
    if error.validator == "type":
        expected = (
            error.validator_value
            if isinstance(error.validator_value, str)
            else " or ".join(error.validator_value)
        )
        actual = _JSON_TYPES.get(type(error.instance), "number")
        return f"must be {expected}, got {actual} {_short(error.instance)}"
    text = error.message
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _short(value: Any) -> str:
    if isinstance(value, (dict, list)) or value is None:
        return ""
    text = orjson.dumps(value).decode()
    return f"({text})" if len(text) <= 60 else f"({text[:57]}...)"
