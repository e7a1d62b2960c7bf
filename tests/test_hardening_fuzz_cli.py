"""Issue 38, the closing measure: every command form (each command and ledger subcommand) run with hostile
arguments ends with a documented exit code (0, 1, 2 or 3), no traceback and no hang. The arguments: none,
a file holding a 2,000-deep row, a NUL byte, invalid UTF-8 and a 400-digit number, an empty file, a folder,
and each option of the command in turn given every hostile value (negative, 1e999, nan, 2**70, empty, 5,000
characters, a control character, a 500-deep JSON value, `--set` shapes, the junk file, a folder). Counts are
printed."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import click
import pytest

from ngrp_lib.cli import COMMANDS, cli

HANG_S = 30  # a form still running after this long is a hang (each form here fails fast or finishes)
DEEP = "[" * 500 + "]" * 500
HOSTILE = ["-1", "1e999", "nan", str(2**70), "", "x" * 5000, "a\x07b", DEEP,
           "max_output_tokens=" + str(2**70), ".".join("k" * 1000) + "=1", "k=" + DEEP]  # fmt: skip
# forms that, given valid input, serve or run until stopped: only their refusals are fuzzed here
LONG_RUNNING = {("view",), ("serve",), ("collect",), ("ledger", "run")}


def _forms() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(cli)
    for name in sorted(COMMANDS):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            for sub in sorted(command.list_commands(ctx)):
                found = command.get_command(ctx, sub)
                assert found is not None
                yield (name, sub), found
        else:
            yield (name,), command


FORMS = list(_forms())


def _files(folder) -> dict[str, str]:
    junk = folder / "junk.jsonl"
    junk.write_bytes(
        b'{"a":' * 2000 + b"1" + b"}" * 2000 + b"\n"
        + b'{"_ng_task_index": 0, "_ng_rollout_index": 0, "x": "a\x00b"}\n'
        + b"\xff\xfe not utf-8\n" + b'{"reward": ' + b"9" * 400 + b"}\n"
    )  # fmt: skip
    empty = folder / "empty.jsonl"
    empty.write_bytes(b"")
    (folder / "dir").mkdir()
    return {"junk": str(junk), "empty": str(empty), "dir": str(folder / "dir")}


class _Hang(BaseException):
    pass


@contextlib.contextmanager
def _alarm(seconds: float, fired: list[bool]):
    """Stop a call still running after `seconds`; `fired` says so (the in-process runner reports any
    exception as a traceback, this one included, so the flag tells a hang from a traceback)."""

    def fire(*_):
        fired.append(True)
        raise _Hang

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _argument_sets(path: tuple[str, ...], command: click.Command, files: dict[str, str]) -> list[list[str]]:
    positional = [p for p in command.params if isinstance(p, click.Argument)]
    options = [p for p in command.params if isinstance(p, click.Option) and not p.is_flag and p.opts]
    sets: list[list[str]] = [[], ["--help"]]
    fill = [files["junk"]] * sum(1 for p in positional if p.required or p.nargs == -1)
    for file in files.values():
        sets.append([file] * max(len(positional), 1) if positional else [])
    required = [o for o in options if o.required]
    for option in options:
        # the other required options get a file, so the hostile value is read, not a "missing option"
        given = [x for o in required if o is not option for x in (o.opts[0], files["junk"])]
        for value in [*HOSTILE, files["junk"], files["dir"]]:
            sets.append([*fill, *given, option.opts[0], value])
    return sets


@pytest.mark.parametrize(("path", "command"), FORMS, ids=[" ".join(p) for p, _ in FORMS])
def test_fuzz_every_command_form_no_traceback_no_hang(tmp_path, run_ngrp, path, command, capsys):
    files = _files(tmp_path)
    tracebacks = hangs = runs = 0
    bad: list[str] = []
    for args in _argument_sets(path, command, files):
        if path in LONG_RUNNING and (not args or args[0] in (files["empty"],)):
            continue  # an empty but valid input would start serving: not a hang to count
        if path == ("serve", "start"):
            args = ["--dry-run", *args]  # never a real vLLM start here: what it would run is printed
        fired: list[bool] = []
        try:
            with _alarm(HANG_S, fired):
                got = run_ngrp(*path, *args)
        except _Hang:
            fired.append(True)
        if fired:
            hangs += 1
            bad.append(f"hang: {[a[:40] for a in args]}")
            continue
        runs += 1
        if "Traceback" in got.stderr or got.returncode not in (0, 1, 2, 3):
            tracebacks += 1
            bad.append(f"{got.returncode}: {[a[:40] for a in args]}: {got.stderr[-600:]}")
    with capsys.disabled():
        print(f"\nfuzz {' '.join(path)}: {runs} runs, tracebacks {tracebacks}, hangs {hangs}")
    assert not bad, bad[:3]
