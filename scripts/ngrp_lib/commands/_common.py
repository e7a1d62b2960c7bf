"""Options and rendering shared by the command modules."""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from ..artifacts.terminal import say
from ..errors import InputError, OutputError

if TYPE_CHECKING:
    from ..artifacts.failures import FailureSummary


def _refuse_empty(
    path_type: click.Path, value: Any, param: click.Parameter | None, ctx: click.Context | None
) -> None:
    """An empty path is a usage error (exit 2, naming the option): Path("") is ".", the current folder."""
    if isinstance(value, (str, bytes)) and not value:
        path_type.fail("an empty path names no file", param, ctx)


class AnyPath(click.Path):
    """click.Path that refuses an empty value; `path_type` str or Path as click's."""

    def __init__(self, path_type: type = str) -> None:
        super().__init__(path_type=path_type)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _refuse_empty(self, value, param, ctx)
        return super().convert(value, param, ctx)


class FilePath(click.Path):
    """A file path (input or output). click itself would answer a folder with exit 2; here a folder where a
    file is expected is exit 3 (unreadable input, unwritable output), for every command alike, and whether
    the file exists and is regular is left to the reader (`artifacts.opening`), which says the same."""

    def __init__(self, role: str = "input") -> None:
        super().__init__(path_type=Path)
        self.role = role
        self.name = "file"  # the metavar: FILE

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _refuse_empty(self, value, param, ctx)
        given = os.fsdecode(value) if isinstance(value, (str, bytes)) else str(value)
        path = Path(os.fsdecode(super().convert(value, param, ctx)))
        if self.role == "output" and given.endswith(("/", os.sep)) and not os.path.isdir(path):
            raise OutputError(
                "ends in a slash: that names a folder, not a file",
                path=path,
                hint="give a file path to write",
            )  # Path() drops the slash: a file named like the folder would be written
        if os.path.isdir(path):
            if self.role == "output":
                raise OutputError("is a folder, not a file", path=path, hint="give a file path to write")
            raise InputError("is a folder, not a file", path=path, hint="give the path of a file")
        return path


class FolderPath(click.Path):
    """A folder path; an existing file where a folder is expected is exit 3, as in `FilePath`."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)
        self.name = "directory"  # the metavar: DIRECTORY

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _refuse_empty(self, value, param, ctx)
        path = Path(os.fsdecode(super().convert(value, param, ctx)))
        if os.path.lexists(path) and not os.path.isdir(path):
            raise InputError("is not a folder", path=path, hint="give the path of a folder")
        return path


INPUT_FILE = FilePath("input")
OUTPUT_FILE = FilePath("output")
FOLDER = FolderPath()


class FiniteFloat(click.ParamType):
    """A finite number (nan and inf are usage errors, exit 2), optionally bounded."""

    name = "float"

    def __init__(self, minimum: float | None = None, *, strict_minimum: bool = False) -> None:
        self.minimum, self.strict_minimum = minimum, strict_minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) and math.isfinite(value):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        low = self.minimum
        if low is not None and (number <= low if self.strict_minimum else number < low):
            self.fail(f"{number:g} must be {'>' if self.strict_minimum else '>='} {low:g}", param, ctx)
        return number


def require_inputs(inputs: Any, rollouts: Any) -> Any:
    """`--inputs`, or a usage error that names the way to get one: the inputs file beside the rollouts
    when it is there, else `ngrp assign-keys` (rows without a materialized inputs file)."""
    from ..artifacts.names import materialized_path_for
    from ..errors import UsageError

    if inputs:
        return inputs
    beside = materialized_path_for(rollouts) if rollouts else None
    if beside is not None and beside.is_file():
        hint = f"the run's inputs are beside its rollouts: --inputs {beside}"
    else:
        rows = shlex.quote(str(rollouts or "ROWS"))
        hint = (
            "pass the run's *_materialized_inputs.jsonl; rows without one (Gym's example rows): "
            f"`ngrp assign-keys {rows} --output run/rollouts.jsonl` writes them with "
            "run/rollouts_materialized_inputs.jsonl beside them"
        )
    raise UsageError("--inputs is required", hint=hint)


def count(minimum: int | None = None, maximum: int = 2**63 - 1) -> click.IntRange:
    """An integer option within bounds: at most what JSON (and orjson) can hold by default, so a value
    written to a manifest or a campaign file cannot fail half-way with "Integer exceeds 64-bit range".
    The lower bound is left to the library where it checks it (with its own message)."""
    return click.IntRange(minimum, maximum)


MAX_REPEATS = 100_000  # rollouts per task: beyond any profile, and the materialized rows are held in memory
MAX_SEED = 2**63 - 1

FINITE = FiniteFloat()
DURATION = FiniteFloat(0.0, strict_minimum=True)  # seconds or minutes: finite and > 0
DELAY = FiniteFloat(0.0)  # finite and >= 0 (0 = no wait)
NON_NEGATIVE = FiniteFloat(0.0)

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print a JSON summary on stdout instead of text."
)
overwrite_option = click.option("--overwrite", is_flag=True, help="Replace existing output files.")

# Options of the commands that read a reward profile (stats, report, compare, curriculum).
PROFILE_PATH = INPUT_FILE
profile_argument = click.argument("profile", type=PROFILE_PATH)
answer_key_option = click.option(
    "--answer-key", metavar="K", help="Rollout field holding the final answer, for majority@k."
)


def verifier_options(command: Callable) -> Callable:
    """The verifier choice `collect` and `reverify` share: built in, a /verify URL, or a function."""
    options = [
        click.option(
            "--verifier",
            type=click.Choice(["exact", "math", "mcq", "regex"]),
            default=None,
            help="Built-in verifier comparing the answer with the row's --answer-key field (which match each "
            "takes and how it normalises: references/collection.md).",
        ),
        click.option(
            "--verifier-pattern",
            default=None,
            help="Regex for --verifier regex: its LAST match in the reply counts (group 1 if any).",
        ),
        click.option(
            "--answer-key", default="expected_answer", show_default=True, help="Row field with the answer."
        ),
        click.option("--verify-url", default=None, help="A NeMo Gym resources server's /verify URL."),
        click.option("--verifier-fn", default=None, help="module:function(row, response) -> reward or dict."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


exclude_unhealthy_option = click.option(
    "--exclude-unhealthy",
    type=INPUT_FILE,
    metavar="VERDICTS",
    help="rollout_verdicts.jsonl from `ngrp health`: leave its unhealthy rollouts out, as masked ones are.",
)


def pass_threshold_option(help: str = "Success means reward >= X (non-binary rewards).") -> Callable:
    return click.option("--pass-threshold", type=FINITE, metavar="X", help=help)


def bootstrap_option(help: str = "Bootstrap replicates.") -> Callable:
    return click.option(
        "--bootstrap",
        "n_bootstrap",
        type=count(maximum=100_000),  # stats.uncertainty.MAX_BOOTSTRAP (not imported: --help stays cheap)
        default=2000,
        show_default=True,
        help=help,
    )


interval_option = click.option(
    "--interval",
    type=click.Choice(["bounded", "t"]),
    default="bounded",
    show_default=True,
    help="Headline interval of rates in [0, 1]: bounded (Korn-Graubard; a one-sided bound at 0 or 1) or t.",
)


def seed_option(help: str = "Bootstrap seed.") -> Callable:
    return click.option("--seed", type=count(maximum=MAX_SEED), default=0, show_default=True, help=help)


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
        say(render_text(result))


def class_counts(by_class: dict[str, int]) -> str:
    """`(agent_run_error 24, http_error 2)` for a summary line; empty when there is none."""
    return f" ({', '.join(f'{k} {v}' for k, v in by_class.items())})" if by_class else ""


def repaired_line(repaired: dict[str, str]) -> str:
    """`repaired torn tails: runs/t/rollouts.jsonl (truncated 120 bytes)`: file, then what was done."""
    return "repaired torn tails: " + ", ".join(f"{path} ({action})" for path, action in repaired.items())


def failure_lines(top_failures: list[FailureSummary]) -> list[str]:
    """The most common failure messages (collect's summary, check's report), one line each."""
    lines = []
    for f in top_failures:
        key = f.example_key
        example = f" (e.g. key ({key[0]}, {key[1]}))" if key else ""
        lines.append(f"  {f.count}x {f.failure_class}: {f.message}{example}")
    return ["most common failures:", *lines] if lines else []
