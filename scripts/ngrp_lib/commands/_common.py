"""Options and rendering shared by the command modules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import orjson

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON summary on stdout instead of text."
)
overwrite_option = click.option("--overwrite", is_flag=True, help="Replace existing output files.")

# Options of the commands that read a reward profile (stats, report, compare, curriculum).
PROFILE_PATH = click.Path(path_type=Path, dir_okay=False)
profile_argument = click.argument("profile", type=PROFILE_PATH)
answer_key_option = click.option(
    "--answer-key", metavar="K", help="Rollout field holding the final answer, for majority@k."
)


exclude_unhealthy_option = click.option(
    "--exclude-unhealthy",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="VERDICTS",
    help="rollout_verdicts.jsonl from `ngrp health`: leave its unhealthy rollouts out, as masked ones are.",
)


def pass_threshold_option(help: str = "Success means reward >= X (non-binary rewards).") -> Callable:
    return click.option("--pass-threshold", type=float, metavar="X", help=help)


def bootstrap_option(help: str = "Bootstrap replicates.") -> Callable:
    return click.option("--bootstrap", "n_bootstrap", type=int, default=2000, show_default=True, help=help)


interval_option = click.option(
    "--interval",
    type=click.Choice(["bounded", "t"]),
    default="bounded",
    show_default=True,
    help="Headline interval of rates in [0, 1]: bounded (Korn-Graubard; a one-sided bound at 0 or 1) or t.",
)


def seed_option(help: str = "Bootstrap seed.") -> Callable:
    return click.option("--seed", type=int, default=0, show_default=True, help=help)


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def emit(result: Any, as_json: bool, render_text: Callable[[Any], str]) -> None:
    """Print the result: JSON on stdout with --json, else the text rendering."""
    if as_json:
        payload = result.to_json() if hasattr(result, "to_json") else to_jsonable(result)
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())
    else:
        click.echo(render_text(result))
