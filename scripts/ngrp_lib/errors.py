"""Typed errors. The library raises these; the CLI maps each to its exit code in one place.

Exit codes: 0 ok, 1 findings or incomplete data, 2 usage (bad options, refusing to overwrite),
3 unreadable or malformed input, or an output that cannot be written (an OSError, mapped in cli.main).
"""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INPUT = 3


class NgrpError(Exception):
    """Base class. `hint` says what to do next."""

    exit_code = EXIT_FINDINGS

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


def error_object(message: str, exit_code: int, hint: str | None = None, exc: object = None) -> dict:
    """The one JSON error shape (schemas/error.schema.json) a `--json` command prints on stdout when it
    fails: {"error": {"message", "hint", "exit_code", "kind", "path", "line", "pointer"}}; the exit code
    is the same as without --json, and the text error still goes to stderr."""
    kinds = {EXIT_FINDINGS: "findings", EXIT_USAGE: "usage", EXIT_INPUT: "input"}
    path = getattr(exc, "path", None)
    return {
        "error": {
            "message": message,
            "hint": hint,
            "exit_code": exit_code,
            "kind": kinds.get(exit_code, "interrupted"),
            "path": None if path is None else str(path),
            "line": getattr(exc, "line", None),
            "pointer": getattr(exc, "pointer", None),
        }
    }


class FindingsError(NgrpError):
    """The input is readable but incomplete or inconsistent (missing, extra or duplicate keys...)."""

    exit_code = EXIT_FINDINGS


class UsageError(NgrpError):
    """Bad options or a refused action (such as overwriting an existing result)."""

    exit_code = EXIT_USAGE


class OutputExistsError(UsageError):
    def __init__(self, path: Path | str) -> None:
        super().__init__(
            f"{path} already exists; refusing to overwrite it",
            hint="pass --overwrite to replace it, or choose another output path",
        )
        self.path = Path(path)


class InputError(NgrpError):
    """Unreadable or malformed input. Names the file, line and JSON pointer where known."""

    exit_code = EXIT_INPUT

    def __init__(
        self,
        message: str,
        *,
        path: Path | str | None = None,
        line: int | None = None,
        pointer: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = None if path is None else Path(path)
        self.line = line
        self.pointer = pointer
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        if pointer is not None:
            where += f"{pointer or '/'}: "
        super().__init__(where + message, hint=hint)
        self.detail = message


def install_command(extra: str, module: str, root: Path | None = None) -> str:
    """How to install an optional extra: from the skill folder or checkout this code runs from (`root`,
    found from this file; the package is not on any registry), else the module alone."""
    import sys

    if root is None:
        root = Path(__file__).resolve().parents[2]  # <skill dir>/scripts/ngrp_lib/errors.py
    if (root / "pyproject.toml").is_file():
        return f"{sys.executable} -m pip install '{root}[{extra}]'"
    return f"{sys.executable} -m pip install {module}"


class OutputError(NgrpError):
    """An output path that cannot be written: a folder, a FIFO or device, a symlinked lock file (exit 3)."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str, *, path: Path | str, hint: str | None = None) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {message}", hint=hint)


class MissingDependencyError(NgrpError):
    exit_code = EXIT_USAGE

    def __init__(self, module: str, install: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package '{module}', which is not installed",
            hint=f"install it with: {install}",
        )
