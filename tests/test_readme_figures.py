"""README.md's figures (files an install carries, lines per package) match the checkout: they are written
by scripts/gen_readme_figures.py, and this fails when they drift."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "gen_readme_figures", REPO / "scripts" / "gen_readme_figures.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _in_git_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO, capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(not _in_git_checkout(), reason="an installed skill is not a git checkout")
def test_readme_figures_are_current():
    script = _script()
    readme = script.README.read_text()
    assert script.render(readme, script.tracked_files()) == readme, (
        "README.md's figures drifted: run python3 scripts/gen_readme_figures.py (and git add new files first)"
    )


def test_the_figures_are_recomputed_not_kept(tmp_path):
    script = _script()
    stale = "only tracked files arrive: 403 files, 2.9 MB\n| 1 | `artifacts/` 1 | 1 |\n"
    (tmp_path / "a.txt").write_text("x" * 1_500_000)
    fresh = script.render(stale, [tmp_path / "a.txt"])
    lines = script.python_lines("artifacts/")
    assert lines > 1
    assert (
        fresh == f"only tracked files arrive: 1 files, 1.5 MB\n| 1 | `artifacts/` {lines:,} | {lines:,} |\n"
    )
