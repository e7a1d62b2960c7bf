#!/usr/bin/env python3
"""Write references/commands.md from the `--help` of every ngrp command, so the docs cannot drift.

Commands are discovered from `ngrp_lib.cli.COMMANDS` (and the subcommands of any group among them) and
each help text is produced by running the real CLI with `--help` at a fixed width of 80 columns.

\b
Usage:
  python3 scripts/gen_command_reference.py            # rewrite references/commands.md
  python3 scripts/gen_command_reference.py --check    # exit 1 if the file is out of date
Exit codes: 0 ok (or current), 1 out of date (--check), 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
REPO = SCRIPTS.parent
DEFAULT_OUTPUT = REPO / "references" / "commands.md"
WIDTH = "80"

HEADER = """\
# Command reference

Generated from each command's `--help` by `python3 scripts/gen_command_reference.py`; do not edit by
hand (a test fails when this file and the help texts differ). Paths are relative to the folder holding
`SKILL.md`. Every command below also runs as `python3 scripts/ngrp.py <command>`.

Exit codes for every command: 0 ok, 1 findings or incomplete data, 2 usage error or refused
overwrite, 3 unreadable or malformed input.
"""


def _help_text(args: list[str]) -> str:
    """Run `ngrp ARGS --help` through the real click group and return what it prints."""
    from click.testing import CliRunner

    from ngrp_lib.cli import cli

    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="ngrp", env={"COLUMNS": WIDTH})
    if result.exit_code != 0:
        raise RuntimeError(f"`ngrp {' '.join(args)} --help` exited {result.exit_code}: {result.output}")
    return result.output.rstrip() + "\n"


def _subcommands(name: str) -> list[str]:
    """Names of the subcommands when the command is a click group (for example `ledger init`)."""
    import click

    from ngrp_lib.cli import COMMANDS

    command = importlib.import_module(COMMANDS[name][0]).command
    if isinstance(command, click.Group):
        return sorted(command.list_commands(click.Context(command)))
    return []


def render() -> str:
    """The whole commands.md text."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    from ngrp_lib.cli import COMMANDS

    parts = [HEADER, "## Commands\n"]
    parts += [f"- `ngrp {name}`: {COMMANDS[name][1]}" for name in sorted(COMMANDS)]
    parts.append("")
    parts += _section(["ngrp"], [])
    for name in sorted(COMMANDS):
        parts += _section([f"ngrp {name}"], [name])
        for sub in _subcommands(name):
            parts += _section([f"ngrp {name} {sub}"], [name, sub])
    return "\n".join(parts)


def _section(title: list[str], args: list[str]) -> list[str]:
    return [f"## {title[0]}\n", "```text", _help_text(args).rstrip("\n"), "```\n"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate references/commands.md from --help.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="file to write or check")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            sys.stderr.write(f"{args.output} is out of date: run python3 scripts/gen_command_reference.py\n")
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
