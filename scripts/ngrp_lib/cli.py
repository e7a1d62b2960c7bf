"""The `ngrp` command group. Subcommands are imported only when used, so `ngrp --help` stays cheap.

Each command lives in `ngrp_lib/commands/<name>.py` as a click command named `command`: a thin shell
that turns options into arguments, calls one library function, renders the result and lets typed
errors reach `main`, which maps them to exit codes.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from . import __version__
from .artifacts.terminal import say
from .errors import EXIT_INPUT, EXIT_USAGE, MissingDependencyError, NgrpError, error_object

# name -> (module, one-line help). Add a line here when you add a command module.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("ngrp_lib.commands.validate", "Check artifacts against their schemas, line by line."),
    "check": ("ngrp_lib.commands.check", "Account for every rollout key: missing, extra, duplicate, failed."),
    "health": ("ngrp_lib.commands.health", "Is a zero the policy's fault? Judge every rollout's health."),
    "serve": ("ngrp_lib.commands.serve", "Start or stop local vLLM servers; write an endpoints file."),
    "materialize": ("ngrp_lib.commands.materialize", "Expand tasks into materialized inputs (Gym's rules)."),
    "assign-keys": (
        "ngrp_lib.commands.assign_keys",
        "Give rollouts without identity keys their keys and materialized inputs.",
    ),
    "collect": ("ngrp_lib.commands.collect", "Collect rollouts from vLLM/OpenAI servers; resumable."),
    "profile": ("ngrp_lib.commands.profile", "Gym-compatible reward profile (+ pass@k), strict or partial."),
    "stats": ("ngrp_lib.commands.stats", "pass@k, clustered intervals, variance, difficulty, reward-length."),
    "reverify": (
        "ngrp_lib.commands.reverify",
        "Re-score stored rollouts with another verifier; no generation.",
    ),
    "compare": ("ngrp_lib.commands.compare", "Paired comparison of two runs on the same tasks (B - A)."),
    "curriculum": ("ngrp_lib.commands.curriculum", "Select tasks by pass-rate band or learnability."),
    "report": ("ngrp_lib.commands.report", "One self-contained HTML report with plots."),
    "inspect": ("ngrp_lib.commands.inspect", "The rollouts behind a number: texts, rewards, verifiers."),
    "view": ("ngrp_lib.commands.view", "Browse a run (or two) in a local web page: tasks, rollouts, flips."),
    "merge": ("ngrp_lib.commands.merge", "Merge rollout shards: dedupe identical keys, refuse conflicts."),
    "ledger": ("ngrp_lib.commands.ledger", "Research ledger: init campaigns, record runs, check stop rules."),
}

EPILOG = """\b
Exit codes: 0 ok, 1 findings or incomplete data, 2 usage error or refused overwrite,
3 unreadable or malformed input, or a file that cannot be written.
"""


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(COMMANDS[cmd_name][0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ngrp")
def cli() -> None:
    """RL reward profiling in NeMo Gym's formats: collect, validate, profile, compare.

    \b
    Example:
      ngrp check --inputs rollouts_materialized_inputs.jsonl --rollouts rollouts.jsonl
      ngrp profile --inputs rollouts_materialized_inputs.jsonl --rollouts rollouts.jsonl
    """


def undecodable_argument(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python hands such bytes over as lone surrogates), shown
    with the bad bytes escaped; None when every argument is text. Values end up in JSON files and ledgers,
    which hold text only, so they are refused up front rather than half-way through a command."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return arg.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
    return None


def wants_json(argv: list[str]) -> bool:
    """Whether the command line asks for --json (before any `--`, after which arguments are another
    program's): its failures then also print the JSON error object on stdout."""
    args = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in args


# Third-party modules a command may import late, and what pip installs them as (pyproject.toml's minimums).
PIP_NAMES = {"aiohttp": "aiohttp>=3.9", "numpy": "numpy>=1.24", "yaml": "pyyaml>=6", "scipy": "scipy>=1.10"}


def missing_package(exc: ModuleNotFoundError, argv: list[str]) -> MissingDependencyError | None:
    """The one-line answer to a third-party package this command needs and cannot import; None for a
    module of ours or one we do not know (a real bug: let its traceback show)."""
    top = (exc.name or "").split(".")[0]
    if top not in PIP_NAMES:
        return None
    command = next((a for a in argv if a in COMMANDS), None)
    purpose = f"ngrp {command}" if command else "ngrp"
    return MissingDependencyError(top, f"{sys.executable} -m pip install '{PIP_NAMES[top]}'", purpose)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; map typed errors to exit codes (0 ok, 1 findings, 2 usage, 3 bad input or I/O error).
    Under --json a failure also prints `errors.error_object` on stdout (same exit code, same stderr)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["profile"] and "numpy" not in sys.modules:
        # profile's numpy work is on vectors, never matrices: OpenBLAS's extra threads only spin (0.1 s of CPU
        # for 80,000 rollouts, taken from whatever shares the machine, a vLLM server included). stats and
        # compare keep them for their bootstrap products. A value the user set is kept.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    code, failure = _run(argv, args)
    if failure is not None and wants_json(args):
        import orjson

        message, hint, exc = failure
        click.echo(orjson.dumps(error_object(message, code, hint, exc), option=orjson.OPT_INDENT_2).decode())
    return code


Failure = tuple[str, "str | None", object]  # message, hint, the exception (for its path, line, pointer)


def _run(argv: list[str] | None, args: list[str]) -> tuple[int, Failure | None]:
    """Run the command, report a failure on stderr; (exit code, None) on success, else (exit code, what
    failed) for the JSON error object."""
    bad = undecodable_argument(args)
    if bad is not None:
        failure: Failure = (
            f"argument '{bad}' is not valid UTF-8",
            "pass names, paths and text as UTF-8",
            None,
        )
        say(f"error: {failure[0]}\n  hint: {failure[1]}", err=True)
        return EXIT_USAGE, failure
    try:
        result = cli.main(args=argv, prog_name="ngrp", standalone_mode=False)
    except NgrpError as exc:
        say(exc.render(), err=True)
        return exc.exit_code, (exc.message, exc.hint, exc)
    except click.exceptions.Exit as exc:
        return exc.exit_code, None
    except click.ClickException as exc:
        exc.show()
        ctx = getattr(exc, "ctx", None)
        hint = f"see '{ctx.command_path} --help'" if ctx is not None else None
        return 2, (exc.format_message(), hint, exc)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        word = "aborted" if isinstance(exc, click.exceptions.Abort) else "interrupted"
        say(word, err=True)
        return 130, (word, None, None)
    except ModuleNotFoundError as exc:  # a package only some commands need (aiohttp for collect...)
        missing = missing_package(exc, args)
        if missing is None:
            raise
        say(missing.render(), err=True)
        return missing.exit_code, (missing.message, missing.hint, missing)
    except OSError as exc:  # disk full, a folder where a file should go...: say so, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        say(f"error: {where}{exc.strerror or exc}", err=True)
        return EXIT_INPUT, (f"{where}{exc.strerror or exc}", None, exc)
    # A command returns its exit code (for example 1 when `check` has findings) or None for success.
    return (result if isinstance(result, int) else 0), None


def run() -> None:
    sys.exit(main())
