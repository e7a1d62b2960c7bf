"""Interop tier: NeMo Gym 0.7.0's own `gym eval profile` and `ngrp profile` on the same random runs must
write the same files. Needs `NGRP_GYM_VENV` (made by `.ci/install_gym.sh`); skipped otherwise."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from profile_compare import PROFILE_ARGS, compare_outputs, gym_profile
from profile_data import make_run, with_float_noise, write_run

pytestmark = pytest.mark.gym

CASES = [
    # (seed, shape, tasks, repeats, p_missing)
    (1, "plain", 6, 4, 0.0),
    (2, "plain", 5, 3, 0.25),
    (3, "fan_out", 4, 2, 0.0),
    (4, "env_servers", 4, 3, 0.1),
    (5, "no_agent", 3, 2, 0.0),
    (6, "plain", 7, 1, 0.0),
    # full-precision floats and groups past numpy's 8-wide pairwise block: sums must be Gym's to the bit
    (7, "noisy", 12, 12, 0.0),
    (8, "noisy_fan_out", 9, 17, 0.2),
]


@pytest.fixture(scope="module")
def gym_bin() -> Path:
    venv = os.environ.get("NGRP_GYM_VENV")
    if not venv:
        pytest.skip(
            "NGRP_GYM_VENV is not set: run `export NGRP_GYM_VENV=$(.ci/install_gym.sh)` for the gym tier"
        )
    gym = Path(venv) / "bin" / "gym"
    if not gym.exists():
        pytest.skip(f"NGRP_GYM_VENV={venv} has no bin/gym: rerun .ci/install_gym.sh")
    return gym


@pytest.mark.parametrize(("seed", "shape", "tasks", "repeats", "p_missing"), CASES)
def test_gym_and_ngrp_write_the_same_files(
    gym_bin, tmp_path, run_ngrp, seed, shape, tasks, repeats, p_missing
):
    if shape.startswith("noisy"):
        run = with_float_noise(
            make_run(seed, shape.removeprefix("noisy").lstrip("_") or "plain", tasks, repeats, p_missing),
            seed,
        )
    else:
        run = make_run(seed, shape, tasks, repeats, p_missing)
    gym_dir, ours_dir = tmp_path / "gym", tmp_path / "ours"
    write_run(run, gym_dir)
    shutil.copytree(gym_dir, ours_dir)
    gym = gym_profile(gym_bin, gym_dir, run.partial)
    assert gym.returncode == 0, gym.stderr[-3000:]
    flags = ["--allow-partial"] if run.partial else []
    ours = run_ngrp("profile", *PROFILE_ARGS, *flags, cwd=ours_dir)
    assert ours.returncode == 0, ours.stderr
    assert compare_outputs(ours_dir / "rollouts.jsonl", gym_dir / "rollouts.jsonl", allow_extras=True) == []
    gym_only = tmp_path / "gym_only"
    shutil.copytree(gym_dir.parent / "ours", gym_only)
    assert (
        run_ngrp("profile", *PROFILE_ARGS, *flags, "--gym-only", "--overwrite", cwd=gym_only).returncode == 0
    )
    assert compare_outputs(gym_only / "rollouts.jsonl", gym_dir / "rollouts.jsonl") == []  # the same bytes
    # the printed summary's Gym lines agree too (paths are relative in both)
    assert ours.stdout.splitlines()[:7] == gym.stdout.strip().splitlines()[-7:]


def test_gym_strict_failure_matches(gym_bin, tmp_path, run_ngrp):
    run = make_run(9, "plain", 4, 3, 0.3)
    assert run.partial
    gym_dir, ours_dir = tmp_path / "gym", tmp_path / "ours"
    write_run(run, gym_dir)
    shutil.copytree(gym_dir, ours_dir)
    gym = gym_profile(gym_bin, gym_dir, partial=False)
    ours = run_ngrp("profile", *PROFILE_ARGS, cwd=ours_dir)
    assert gym.returncode == ours.returncode == 1
    gym_message = gym.stderr.strip().splitlines()[-3].removeprefix("ValueError: ")
    assert gym_message.split(". Missing rollout keys")[0] in ours.stderr
