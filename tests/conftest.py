"""Shared test helpers. Tests never read ../shared: golden copies live in tests/golden/."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_fixtures import browser, page  # noqa: F401  (a real Chromium and a fresh tab in it)
from cli_helpers import INSTALLED, SCRIPT, ngrp_process  # noqa: F401  (SCRIPT: tests import it from here too)
from gym_stack_fixture import gym_stack  # noqa: F401  (session fixture: a real NeMo Gym stack)
from ledger_helpers import repo  # noqa: F401  (a throwaway git repository; see its ledger_campaign mark)
from slurm_fixture import slurm_cluster  # noqa: F401  (session fixture: a real one-node Slurm cluster)

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "gym-0.7.0"
if INSTALLED:
    # The installed-copy tier: ngrp_lib must come from the venv's site-packages, never from the tree.
    import ngrp_lib

    if REPO in Path(ngrp_lib.__file__).resolve().parents:
        raise RuntimeError(
            f"NGRP_TEST_NGRP is set but ngrp_lib is imported from the tree: {ngrp_lib.__file__}"
        )
else:
    sys.path.insert(0, str(REPO / "scripts"))

# Hypothesis keeps its files out of the tree (a local skill install copies the folder as it is).
# No deadline: speed is measured in benchmarks/, and a loaded 2-core machine must not fail a property.
from hypothesis import settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

set_hypothesis_home_dir(Path.home() / ".cache" / "ngrp" / "hypothesis")
settings.register_profile("ngrp", deadline=None)
settings.load_profile("ngrp")


@pytest.fixture
def golden() -> Path:
    return GOLDEN


@contextlib.contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    """contextlib.chdir, which Python 3.10 lacks."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _run_in_process(args, cwd: Path, input: str | None, env: dict | None) -> subprocess.CompletedProcess:
    """`ngrp ARGS` through `ngrp_lib.cli.main` in this process, with the cwd, stdin and environment a
    subprocess would have; an uncaught exception becomes exit 1 with its traceback on stderr, as Python's."""
    import traceback

    from click.testing import CliRunner

    from ngrp_lib.cli import main

    overrides: dict[str, str | None] | None = None
    if env is not None:  # a subprocess's env replaces the environment: unset what it leaves out
        overrides = {**{k: None for k in os.environ if k not in env}, **env}
    argv = [str(a) for a in args]
    with CliRunner().isolation(input=input, env=overrides) as (out, err, _mixed), _working_dir(cwd):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - report it as the interpreter would, then fail the call
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode("utf-8", "backslashreplace")
    return subprocess.CompletedProcess(["ngrp", *argv], code, stdout, stderr)


def _run_as_process(args, cwd: Path, input: str | None, env: dict | None) -> subprocess.CompletedProcess:
    return ngrp_process(*args, cwd=cwd, input=input, env=env)


@pytest.fixture
def run_ngrp(tmp_path):
    """Run `ngrp ARGS` from a temporary working directory; returns a CompletedProcess.

    In this process by default (the CLI tests' cost is then the command's, not an interpreter start);
    NGRP_TEST_SUBPROCESS=1 runs every call as `python3 <repo>/scripts/ngrp.py ARGS` instead, and
    NGRP_TEST_NGRP=<installed ngrp> as that executable (the installed-copy tier: tests/installed.sh).
    `run_ngrp_process` always does: the entry-point smoke tests use it.
    """
    subprocess_ = INSTALLED or os.environ.get("NGRP_TEST_SUBPROCESS") == "1"
    runner = _run_as_process if subprocess_ else _run_in_process

    def run(*args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None):
        return runner(args, cwd or tmp_path, input, env)

    return run


@pytest.fixture
def run_ngrp_in_process(tmp_path):
    """Run `ngrp ARGS` through `ngrp_lib.cli.main` in this process, always: for a test that spies on the
    library with monkeypatch. In the installed-copy tier that library is the install's (see above)."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None):
        return _run_in_process(args, cwd or tmp_path, input, env)

    return run


@pytest.fixture
def run_ngrp_process(tmp_path):
    """Run `python3 <repo>/scripts/ngrp.py ARGS` as a subprocess, by absolute path, from a temporary cwd."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None):
        return _run_as_process(args, cwd or tmp_path, input, env)

    return run


from vllm_fixture import tiny_model_dir, vllm_server, vllm_server_factory  # noqa: E402, F401


@pytest.fixture
def components_run(tmp_path, run_ngrp):
    """A profiled agent run whose rows carry reward components, one of them missing in rollout (2, 1)
    (test_reward_components, test_component_diff)."""
    from agent_rows import write_run

    folder = tmp_path / "run"
    write_run(folder, tasks=4, repeats=4, turns=3, defects={(2, 1): "missing_component"})
    res = run_ngrp(
        "profile", "--inputs", str(folder / "rollouts_materialized_inputs.jsonl"),
        "--rollouts", str(folder / "rollouts.jsonl"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return folder
