#!/usr/bin/env python3
"""Rewrite README.md's figures from the checkout, so they cannot drift: the files an install carries
(`git ls-files`: a skill installed from a git repository is a clone, so it holds the tracked files) and
the lines of Python per package in the layout's table of layers.

The layers themselves (which package sits on which layer) are written by hand in README.md and in
tests/test_layout.py, which checks that the two agree; this script keeps their order and fills in the
counts.

\b
Usage:
  python3 scripts/gen_readme_figures.py            # rewrite README.md's figures
  python3 scripts/gen_readme_figures.py --check    # exit 1 if they are out of date
Exit codes: 0 ok (or current), 1 out of date (--check), 2 usage error (not a git checkout).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
LIB = REPO / "scripts" / "ngrp_lib"
FILES = re.compile(r"only tracked files arrive: [\d,]+ files, [\d.]+ MB")
LAYER_ROW = re.compile(r"^\| (\d+) \| (.*) \| ([\d,]+) \|$", re.MULTILINE)
NAME = re.compile(r"`([^`]+)`")


def tracked_files(repo: Path = REPO) -> list[Path]:
    """The files `git ls-files` lists (those present: a file deleted but not yet staged is left out)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout
    return [path for name in out.decode().split("\0") if name and (path := repo / name).is_file()]


def python_lines(name: str) -> int:
    """Lines of the package's .py files (a top-level module counts alone)."""
    target = LIB / name.removesuffix("/")
    paths = sorted(target.rglob("*.py")) if target.is_dir() else [LIB / name]
    return sum(len(path.read_text().splitlines()) for path in paths)


def _layer_row(match: re.Match) -> str:
    names = NAME.findall(match.group(2))
    counted = [(name, python_lines(name)) for name in names]
    cells = ", ".join(f"`{name}` {lines:,}" for name, lines in counted)
    return f"| {match.group(1)} | {cells} | {sum(lines for _, lines in counted):,} |"


def render(readme: str, files: list[Path]) -> str:
    """README.md's text with every figure recomputed."""
    megabytes = sum(path.stat().st_size for path in files) / 1e6
    text = FILES.sub(f"only tracked files arrive: {len(files):,} files, {megabytes:.1f} MB", readme)
    return LAYER_ROW.sub(_layer_row, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md's figures are out of date")
    args = parser.parse_args(argv)
    try:
        files = tracked_files()
    except (OSError, subprocess.CalledProcessError):
        print("gen_readme_figures: needs a git checkout (git ls-files)", file=sys.stderr)
        return 2
    readme = README.read_text()
    fresh = render(readme, files)
    if fresh == readme:
        return 0
    if args.check:
        print(
            "README.md's figures are out of date: run python3 scripts/gen_readme_figures.py", file=sys.stderr
        )
        return 1
    README.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
