"""Running ngrp in tests and checking what it says: the subprocess call, exit codes, output schemas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
SCHEMAS = REPO / "schemas"
# NGRP_TEST_NGRP names an installed `ngrp` executable (tests/installed.sh sets it: the wheel installed in a
# fresh venv). Then every CLI call of the tests runs it, and conftest imports ngrp_lib from that install,
# never from scripts/. Unset, the calls run the tree's entry script.
INSTALLED = os.environ.get("NGRP_TEST_NGRP") or None
ENTRY: tuple[str, ...] = (INSTALLED,) if INSTALLED else (sys.executable, str(SCRIPT))


def ngrp_process(
    *args: Any,
    cwd: Path | None = None,
    input: str | None = None,
    env: dict | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """`ngrp ARGS` as a subprocess (text output): `python3 <repo>/scripts/ngrp.py` by absolute path, or the
    installed `ngrp` that NGRP_TEST_NGRP names."""
    return subprocess.run(
        [*ENTRY, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=input,
        env=env,
        timeout=timeout,
    )


def run_printed(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command ngrp printed (`ngrp collect ...`), run through a shell as a user pastes it. The folder of
    the entry point under test is first on PATH, as it is for a user who installed ngrp: the installed
    wheel's bin/ (NGRP_TEST_NGRP), or the venv's bin/ whose python runs the tree's script."""
    path = os.pathsep.join([str(Path(ENTRY[0]).parent), os.environ.get("PATH", "")])
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PATH": path})  # fmt: skip


def check(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    """The result, after asserting its exit code (the message shows both streams)."""
    assert result.returncode == code, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def schema(name: str) -> dict:
    """schemas/<name>.schema.json."""
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def validated(data: Any, name: str) -> Any:
    """`data`, after checking it against schemas/<name>.schema.json."""
    jsonschema.validate(data, schema(name))
    return data
