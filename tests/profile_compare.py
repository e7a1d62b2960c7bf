"""Compare our profile outputs with Gym's: same keys in the same order, same row order, equal values.
Floats must be the same to the bit (ngrp's sums follow pandas' order and pairwise loop, its t quantiles are
scipy's). Only the t-interval ends (`ci_*`) may differ, by 1e-9 relative, and only where the installed
scipy's t quantiles are not those of the scipy beside Gym 0.7.0 (releases before 1.17, the newest on Python
3.10, differ by ~2e-11). `exact=False` allows 1e-9 relative everywhere."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path
from typing import Any

import orjson

GYM_FILES = ("_reward_profiling.jsonl", "_agent_metrics.json", "_repeat_level_metrics.json")
REL, ABS = 1e-9, 1e-12
# The arguments both `gym eval profile` and `ngrp profile` take for a run folder.
PROFILE_ARGS = ("--inputs", "rollouts_materialized_inputs.jsonl", "--rollouts", "rollouts.jsonl")
# scipy 1.18's t quantiles (Gym 0.7.0's venv) at (df, q): other releases' bits may differ
GYM_T_QUANTILES = {
    (1, 0.025): -12.706204736174705,
    (2, 0.975): 4.302652729749462,
    (4, 0.025): -2.7764451051977943,
}


def t_quantiles_are_gyms() -> bool:
    try:
        from scipy.special import stdtrit
    except ImportError:
        return False
    return all(float(stdtrit(df, q)) == v for (df, q), v in GYM_T_QUANTILES.items())


EXACT_T = t_quantiles_are_gyms()


def gym_profile(gym: Path, folder: Path, partial: bool = False) -> subprocess.CompletedProcess:
    """Run NeMo Gym's `gym eval profile` on a run folder (Hydra writes outputs/ into the cwd: the folder)."""
    args = [str(gym), "eval", "profile", *PROFILE_ARGS]
    if partial:
        args.append("++allow_partial_rollouts=True")
    return subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=300)


def load(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    if path.suffix == ".jsonl":
        return [orjson.loads(line) for line in data.splitlines() if line.strip()]
    return orjson.loads(data)


def same_value(ours: Any, theirs: Any, where: str, problems: list[str], exact: bool = True) -> None:
    if isinstance(theirs, float) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
        if exact and not EXACT_T and where.rsplit(".", 1)[-1].startswith("ci_"):
            exact = False  # this scipy's t quantiles are not Gym's to the bit (see the module docstring)
        if exact and not (type(ours) is float and (ours == theirs or (ours != ours and theirs != theirs))):
            problems.append(f"{where}: {ours!r} != {theirs!r} (not the same float)")
        elif not math.isclose(ours, theirs, rel_tol=REL, abs_tol=ABS):
            problems.append(f"{where}: {ours!r} != {theirs!r}")
    elif isinstance(theirs, dict) and isinstance(ours, dict):
        if list(ours) != list(theirs):
            problems.append(f"{where}: keys {list(ours)} != {list(theirs)}")
            return
        for key in theirs:
            same_value(ours[key], theirs[key], f"{where}.{key}", problems, exact)
    elif isinstance(theirs, list) and isinstance(ours, list):
        if len(ours) != len(theirs):
            problems.append(f"{where}: length {len(ours)} != {len(theirs)}")
            return
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            same_value(a, b, f"{where}[{i}]", problems, exact)
    elif type(ours) is not type(theirs) or ours != theirs:
        problems.append(f"{where}: {ours!r} != {theirs!r}")


def strip_extras(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if not k.startswith("ngrp/")} for row in rows]


def compare_outputs(
    ours_base: Path, gym_base: Path, *, allow_extras: bool = False, exact: bool = True
) -> list[str]:
    """`*_base` is the rollouts path whose stem names the outputs. Without `allow_extras` (ngrp's own
    `ngrp/` fields) and with `exact`, the files must also be the same bytes."""
    problems: list[str] = []
    for suffix in GYM_FILES:
        ours_path = ours_base.with_name(ours_base.stem + suffix)
        gym_path = gym_base.with_name(gym_base.stem + suffix)
        ours = load(ours_path)
        if allow_extras:
            ours = strip_extras(ours)
        same_value(ours, load(gym_path), suffix, problems, exact)
        if exact and not allow_extras and not problems and not same_bytes(ours_path, gym_path, EXACT_T):
            problems.append(f"{suffix}: the same values, other bytes")
    return problems


_CI_NUMBER = re.compile(rb'("ci_[^"]*": ?)-?[0-9][0-9.eE+\-]*')


def same_bytes(ours: Path, gym: Path, exact_t: bool) -> bool:
    """The two files byte for byte; where this scipy's t quantiles are not Gym's, with every ci_* number
    set aside (those may differ in the last digits) and the rest still compared byte for byte."""
    a, b = ours.read_bytes(), gym.read_bytes()
    if not exact_t:
        a, b = _CI_NUMBER.sub(rb"\g<1>0", a), _CI_NUMBER.sub(rb"\g<1>0", b)
    return a == b
