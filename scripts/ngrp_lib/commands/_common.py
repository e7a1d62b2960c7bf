"""Options and rendering shared by the command modules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click
import orjson

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON summary on stdout instead of text."
)
overwrite_option = click.option("--overwrite", is_flag=True, help="Replace existing output files.")


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
