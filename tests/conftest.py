"""Shared test helpers. Tests never read ../shared: golden copies live in tests/golden/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gym_stack_fixture import gym_stack  # noqa: F401  (session fixture: a real NeMo Gym stack)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
GOLDEN = REPO / "tests" / "golden" / "gym-0.7.0"
sys.path.insert(0, str(REPO / "scripts"))


@pytest.fixture
def golden() -> Path:
    return GOLDEN


@pytest.fixture
def run_ngrp(tmp_path):
    """Run `python3 <repo>/scripts/ngrp.py ARGS` by absolute path from a temporary working directory."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None, env: dict | None = None):
        return subprocess.run(
            [sys.executable, str(SCRIPT), *map(str, args)],
            cwd=cwd or tmp_path,
            capture_output=True,
            text=True,
            input=input,
            env=env,
            timeout=600,
        )

    return run


from vllm_fixture import tiny_model_dir, vllm_server, vllm_server_factory  # noqa: E402, F401
