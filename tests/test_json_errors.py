"""Under --json every command that fails prints one error object on stdout (schemas/error.schema.json), with
the exit code and the stderr message it has without --json."""

from __future__ import annotations

import json

import click
import pytest
from stats_helpers import write_profile

from ngrp_lib.artifacts import schemas
from ngrp_lib.cli import COMMANDS, cli, wants_json


def _json_commands() -> list[list[str]]:
    """Every command path (group and subcommand) that has a --json option."""
    ctx = click.Context(cli)
    out = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name])
        elif any("--json" in p.opts for p in command.params):
            out.append(path)

    for name in COMMANDS:
        walk(cli.get_command(ctx, name), [name])
    return out


JSON_COMMANDS = _json_commands()


def _error(stdout: str) -> dict:
    payload = json.loads(stdout)
    schemas.validator("error").validate(payload)
    return payload["error"]


def test_the_walk_finds_the_commands():
    names = {" ".join(path) for path in JSON_COMMANDS}
    assert {"stats", "compare", "check", "profile", "collect", "ledger status", "serve status"} <= names


@pytest.mark.parametrize("path", JSON_COMMANDS, ids=[" ".join(p) for p in JSON_COMMANDS])
def test_a_usage_error_under_json_is_a_json_object_on_stdout(run_ngrp, path):
    with_json = run_ngrp(*path, "--json", "--no-such-option")
    without = run_ngrp(*path, "--no-such-option")
    assert with_json.returncode == without.returncode == 2
    assert with_json.stderr == without.stderr and without.stdout == ""
    error = _error(with_json.stdout)
    assert error["exit_code"] == 2 and error["kind"] == "usage" and "--no-such-option" in error["message"]


def test_unreadable_input_names_its_file(run_ngrp, tmp_path):
    r = run_ngrp("stats", tmp_path / "absent.jsonl", "--json")
    assert r.returncode == 3
    error = _error(r.stdout)
    assert error["kind"] == "input" and error["path"] == str(tmp_path / "absent.jsonl")


def test_a_malformed_line_gives_file_and_line(run_ngrp, tmp_path):
    prof = write_profile(tmp_path / "p_reward_profiling.jsonl", [[1, 0]] * 3)
    prof.write_text(prof.read_text() + "{not json\n")
    r = run_ngrp("stats", prof, "--json")
    assert r.returncode == 3
    error = _error(r.stdout)
    assert error["line"] == 4 and error["path"] == str(prof) and r.stderr.startswith("error: ")


def test_a_refusal_with_findings_keeps_exit_1(run_ngrp, tmp_path):
    a = write_profile(tmp_path / "a_reward_profiling.jsonl", [[1, 0]] * 3)
    b = write_profile(tmp_path / "b_reward_profiling.jsonl", [[1, 0]] * 4)
    r = run_ngrp("compare", a, b, "--json")
    assert r.returncode == 1
    error = _error(r.stdout)
    assert error["kind"] == "findings" and "--intersect" in error["hint"]


def test_json_after_a_double_dash_belongs_to_another_program():
    assert wants_json(["stats", "p.jsonl", "--json"])
    assert not wants_json(["ledger", "run", "--", "python", "train.py", "--json"])
