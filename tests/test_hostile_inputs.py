"""Fuzz every reading command with paths that are not regular files or hold a line past the limit (issue 16).

Each (command, input, kind) runs `ngrp` in a forked child with a deadline: a FIFO must not hang it, a device
must not grow its memory, a symlink loop or a folder must not raise a traceback. Every case must end within
the deadline with one `error:` line naming the bad path and exit 3 (unreadable input). `validate` and
`check` read a file whose line is too long and report it as a finding (exit 1), as they report any bad line.
"""

from __future__ import annotations

import contextlib
import importlib
import shutil

import pytest
from hostile_helpers import BAD_KINDS, LONG_LIMIT, make_bad, make_world, run_bounded

URL = "http://127.0.0.1:9/v1"  # nothing listens: every case must stop before the first request
COLLECT = ["--base-url", URL, "--model", "m", "--verifier", "exact"]

# name -> (command line with X for the bad path, JSONL reader?); JSON documents have no "long" case.
CASES = {
    "stats": (["stats", "X"], True),
    "stats --rollouts": (["stats", "{profile}", "--rollouts", "X"], True),
    "compare a": (["compare", "X", "{profile}"], True),
    "compare b": (["compare", "{profile}", "X"], True),
    "report": (["report", "X", "-o", "{out}/r.html"], True),
    "report --rollouts": (["report", "{profile}", "--rollouts", "X", "-o", "{out}/r.html"], True),
    "report --compare": (["report", "{profile}", "--compare", "X", "-o", "{out}/r.html"], True),
    "curriculum": (["curriculum", "X", "--tasks", "{tasks}", "-o", "{out}/c.jsonl", "--min", "0"], True),
    "curriculum --tasks": (
        ["curriculum", "{profile}", "--tasks", "X", "-o", "{out}/c.jsonl", "--min", "0"],
        True,
    ),
    "merge": (["merge", "X", "-o", "{out}/m.jsonl"], True),
    "merge --inputs": (["merge", "{rollouts}", "--inputs", "X", "-o", "{out}/m.jsonl"], True),
    "materialize": (["materialize", "--input", "X", "--output", "{out}/mm.jsonl"], True),
    "collect --input": (["collect", "--input", "X", "--output", "{out}/c/r.jsonl", *COLLECT], True),
    "collect --materialized": (
        ["collect", "--materialized", "X", "--output", "{out}/c/r.jsonl", *COLLECT],
        True,
    ),
    "collect --endpoints": (
        [
            "collect",
            "--input",
            "{tasks}",
            "--output",
            "{out}/c/r.jsonl",
            "--endpoints",
            "X",
            "--verifier",
            "exact",
        ],
        False,
    ),
    "profile --inputs": (
        ["profile", "--inputs", "X", "--rollouts", "{rollouts}", "--output-dir", "{out}/p"],
        True,
    ),
    "profile --rollouts": (
        ["profile", "--inputs", "{materialized}", "--rollouts", "X", "--output-dir", "{out}/p"],
        True,
    ),
    "validate": (["validate", "X"], True),
    "check --inputs": (["check", "--inputs", "X", "--rollouts", "{rollouts}"], True),
    "check --rollouts": (["check", "--inputs", "{materialized}", "--rollouts", "X"], True),
    "ledger --profile": (
        ["ledger", "record", "--dir", "{ledger}", "--profile", "X", "--repo", "{out}"],
        True,
    ),
    "ledger --log": (
        [
            "ledger",
            "record",
            "--dir",
            "{ledger}",
            "--log",
            "X",
            "--metric-regex",
            "score=([0-9.]+)",
            "--repo",
            "{out}",
        ],
        False,
    ),
    "ledger --from-json": (
        [
            "ledger",
            "record",
            "--dir",
            "{ledger}",
            "--from-json",
            "X",
            "--metric-key",
            "overall.mean",
            "--repo",
            "{out}",
        ],
        False,
    ),
    "ledger status (results.tsv)": (["ledger", "status", "--dir", "{bad_ledger}"], False),
    "serve stop --endpoints-file": (["serve", "stop", "--endpoints-file", "X"], False),
    "inspect": (["inspect", "X"], True),
    "inspect --inputs": (["inspect", "{rollouts}", "--inputs", "X"], True),
    "inspect --profile": (["inspect", "{rollouts}", "--profile", "X"], True),
    "view": (["view", "X", "--port", "0", "--no-cache"], True),
    "view --inputs": (["view", "{rollouts}", "--inputs", "X", "--port", "0", "--no-cache"], True),
    "health --inputs": (["health", "--inputs", "X", "--rollouts", "{rollouts}"], True),
    "health --rollouts": (["health", "--inputs", "{materialized}", "--rollouts", "X"], True),
    "reverify --rollouts": (
        ["reverify", "--rollouts", "X", "--output", "{out}/v.jsonl", "--verifier", "exact"],
        True,
    ),
    "reverify --inputs": (
        [
            "reverify",
            "--rollouts",
            "{rollouts}",
            "--inputs",
            "X",
            "--output",
            "{out}/v.jsonl",
            "--verifier",
            "exact",
        ],
        True,
    ),
    "stats --exclude-unhealthy": (
        ["stats", "{profile}", "--rollouts", "{rollouts}", "--exclude-unhealthy", "X"],
        True,
    ),
}
FINDING_ON_LONG = {"validate", "check --inputs", "check --rollouts", "health --rollouts"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    # Imported once here, so that every forked child has them: a case then costs milliseconds.
    for name in ("aiohttp", "numpy", "jsonschema", "matplotlib.pyplot", "ngrp_lib.collect.runner"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from ngrp_lib.cli import COMMANDS

    for module, _ in COMMANDS.values():
        importlib.import_module(module)
    return make_world(tmp_path_factory.mktemp("world"))


def _cases():
    for name, (_, jsonl) in CASES.items():
        for kind in BAD_KINDS:
            if kind == "long" and not jsonl:
                continue
            yield pytest.param(name, kind, id=f"{name}-{kind}")


@pytest.mark.parametrize(("name", "kind"), list(_cases()))
def test_reading_command_refuses_bad_input(world, tmp_path, name, kind):
    argv_template, _ = CASES[name]
    bad = make_bad(
        tmp_path / ("bad.json" if "from-json" in name or "endpoints" in name else "bad.jsonl"), kind
    )
    out = tmp_path / "out"
    out.mkdir()
    bad_ledger = tmp_path / "bad_ledger"
    bad_ledger.mkdir()
    shutil.copy(world.ledger / "campaign.json", bad_ledger / "campaign.json")
    if name.startswith("ledger status"):
        bad = make_bad(bad_ledger / "results.tsv", kind)
    fields = {
        "profile": world.profile,
        "tasks": world.tasks,
        "rollouts": world.rollouts,
        "materialized": world.materialized,
        "ledger": world.ledger,
        "bad_ledger": bad_ledger,
        "out": out,
    }
    argv = [str(bad) if a == "X" else a.format(**fields) for a in argv_template]
    env = {"NGRP_MAX_LINE_BYTES": str(LONG_LIMIT)}
    done = run_bounded(argv, tmp_path, env=env, timeout=60)
    assert done.code is not None, f"`ngrp {' '.join(argv)}` hung on a {kind}"
    assert "Traceback" not in done.stderr, done.stderr
    expected = 1 if kind == "long" and name in FINDING_ON_LONG else 3
    assert done.code == expected, (done.code, done.stdout, done.stderr)
    if expected == 3 and name == "validate":  # validate reports every file, readable or not, on stdout
        assert f"{bad.name}: not a regular file" in done.stdout or "symlink loop" in done.stdout, done.stdout
    elif expected == 3:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert lines and lines[0].startswith("error: ") and bad.name in lines[0], done.stderr
        assert all(line.startswith(("error: ", "  hint: ")) for line in lines), done.stderr
    assert not list(out.rglob("*.tmp")) and not (out / "c" / "r.jsonl").exists()  # nothing written
