"""Run one fixed pipeline with two checkouts of ngrp and diff every byte they write.

    python tests/same_outputs.py BASE_REF [OTHER_REF]     # OTHER_REF defaults to the working tree

For a change that must not change behaviour (a refactor, a module move): it profiles (strict, partial,
--merge of shard states), stats, compares, curriculum-exports and reports generated runs and the golden
cases with each checkout, and compares stdout, stderr, exit codes and every output file. Exit 0 when all
are identical, 1 with the differing files listed. Each checkout runs as `python scripts/ngrp.py` from a
temporary folder, so the run is the same as a user's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from profile_data import make_run, write_run  # noqa: E402

GOLDEN = REPO / "tests" / "golden" / "gym-0.7.0"
GOLDEN_CASES = ("case_complete", "case_fan_out", "case_masked", "case_partial/partial_run")


def _runs(into: Path) -> list[Path]:
    """Generated runs (every shape, with gaps) and copies of golden cases, each in its own folder."""
    folders = []
    for seed, shape in enumerate(("plain", "fan_out", "env_servers", "no_agent")):
        folder = into / f"gen_{shape}"
        folder.mkdir()
        write_run(make_run(seed, shape, tasks=30, repeats=8, p_missing=0.05 if seed % 2 else 0.0), folder)
        folders.append(folder)
    for case in GOLDEN_CASES:
        folder = into / case.replace("/", "_")
        shutil.copytree(GOLDEN / case, folder)
        for made in folder.glob("rollouts_*"):
            if made.name != "rollouts_materialized_inputs.jsonl":
                made.unlink()
        folders.append(folder)
    return folders


def _steps(folder: Path) -> list[list[str]]:
    m, r = "rollouts_materialized_inputs.jsonl", "rollouts.jsonl"
    profile = "rollouts_reward_profiling.jsonl"
    return [
        ["validate", m, r],
        ["check", "--inputs", m, "--rollouts", r, "--json"],
        ["profile", "--inputs", m, "--rollouts", r, "--allow-partial", "--save-state"],
        ["profile", "--inputs", m, "--rollouts", r, "--allow-partial", "--json", "--output-dir", "again"],
        ["stats", profile, "--rollouts", r, "--json", "--bootstrap", "200"],
        ["stats", profile, "--rollouts", r, "--bootstrap", "200"],
        ["compare", profile, "again/rollouts_reward_profiling.jsonl", "--bootstrap", "200"],
        ["compare", profile, "again/rollouts_reward_profiling.jsonl", "--json", "--bootstrap", "200"],
        ["curriculum", profile, "--tasks", m, "-o", "band.jsonl", "--min", "0.1", "--max", "0.9", "--json"],
        ["report", profile, "--rollouts", r, "-o", "report.html", "--bootstrap", "200"],
    ]


CREATED_AT = re.compile(rb'"created_at": "[^"]*"')


def _stable(data: bytes, work: Path) -> bytes:
    """The bytes with what differs between any two runs (the work folder, the time of writing) masked."""
    return CREATED_AT.sub(b'"created_at": "<time>"', data.replace(str(work).encode(), b"<work>"))


def _run_all(checkout: Path, work: Path) -> dict[str, bytes]:
    """Every step in every run folder; returns {name: bytes} of outputs, stdout, stderr and exit codes."""
    seen: dict[str, bytes] = {}
    for folder in _runs(work):
        for number, args in enumerate(_steps(folder)):
            proc = subprocess.run(
                [sys.executable, str(checkout / "scripts" / "ngrp.py"), *args],
                cwd=folder,
                capture_output=True,
                timeout=600,
            )
            tag = f"{folder.name}/step{number}-{args[0]}"
            seen[f"{tag}.stdout"] = _stable(proc.stdout, work)
            seen[f"{tag}.stderr"] = _stable(proc.stderr, work)
            seen[f"{tag}.exit"] = str(proc.returncode).encode()
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                seen[str(path.relative_to(work))] = _stable(path.read_bytes(), work)
    return seen


def _checkout(ref: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), ref],
        check=True,
        capture_output=True,
    )
    return into


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="ngrp-same-"))
    trees = []
    try:
        base = _checkout(argv[0], tmp / "base")
        trees.append(base)
        other = _checkout(argv[1], tmp / "other") if len(argv) == 2 else REPO
        if other != REPO:
            trees.append(other)
        # Both runs use the same folder name, so absolute paths printed in outputs match too.
        work = tmp / "work"
        results = []
        for checkout in (base, other):
            work.mkdir()
            results.append(_run_all(checkout, work))
            shutil.rmtree(work)
        a, b = results
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} outputs compared ({argv[0]} vs {argv[1] if len(argv) == 2 else 'working tree'})")
        for name in differ:
            print(f"DIFFERS: {name}")
        return 1 if differ else 0
    finally:
        for tree in trees:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True
            )
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
