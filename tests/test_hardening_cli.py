"""Regression tests for issue 16 through the command line: each finding, and a neighbour of its class.

Commands run in a forked child with a deadline (`hostile_helpers.run_bounded`), or through the entry script
when the arguments are bytes that are not UTF-8.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from hostile_helpers import make_world, run_bounded

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
DEAD = "http://127.0.0.1:9/v1"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    for name in ("numpy", "aiohttp", "jsonschema", "matplotlib.pyplot"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    from ngrp_lib.cli import COMMANDS

    for module, _ in COMMANDS.values():
        importlib.import_module(module)
    return make_world(tmp_path_factory.mktemp("world"))


def ngrp(tmp_path, *argv, env=None, timeout=60):
    done = run_bounded([str(a) for a in argv], tmp_path, env=env, timeout=timeout)
    assert done.code is not None, f"ngrp {' '.join(map(str, argv))} hung"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def one_error_line(done, *needles):
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), done.stderr
    assert all(line.startswith(("error: ", "  hint: ")) for line in lines), done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def collect_argv(tmp_path, tasks, *extra):
    return ["collect", "--input", tasks, "--output", tmp_path / "out" / "r.jsonl", "--base-url", DEAD,
            "--model", "m", "--verifier", "exact", "--max-retries", "0", "--abort-after", "1",
            "--skip-preflight", *extra]  # fmt: skip


# ---------------------------------------------------------------- 3: lock files


def test_a_symlinked_collector_lock_does_not_clobber_its_target(world, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("my thesis\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "r.jsonl.lock").symlink_to(victim)
    done = ngrp(tmp_path, *collect_argv(tmp_path, world.tasks))
    assert done.code == 3
    one_error_line(done, "r.jsonl.lock", "symlink")
    assert victim.read_text() == "my thesis\n"
    assert not (tmp_path / "out" / "r.jsonl").exists()


def test_a_symlinked_ledger_lock_does_not_clobber_its_target(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "L").mkdir()
    (tmp_path / "L" / "results.tsv.lock").symlink_to(victim)
    done = ngrp(tmp_path, "ledger", "init", "--dir", tmp_path / "L", "--campaign", "c", "--metric", "m",
                "--direction", "max")  # fmt: skip
    assert done.code == 3
    one_error_line(done, "results.tsv.lock")
    assert victim.read_text() == "keep me\n" and not (tmp_path / "L" / "results.tsv").exists()


# ---------------------------------------------------------------- 6: non-finite ledger values


@pytest.mark.parametrize(
    ("option", "value"), [("--memory-gb", "-inf"), ("--elapsed-min", "nan"), ("--memory-gb", "-1")]
)
def test_ledger_record_refuses_non_finite_or_negative_numbers(world, tmp_path, option, value):
    before = (world.ledger / "results.tsv").read_bytes()
    done = ngrp(tmp_path, "ledger", "record", "--dir", world.ledger, "--from-json", world.stats_json,
                "--metric-key", "overall.mean", "--repo", tmp_path, option, value)  # fmt: skip
    assert done.code == 2, done.stderr
    assert (world.ledger / "results.tsv").read_bytes() == before


def test_a_bad_ledger_row_is_named_with_how_to_repair_it(world, tmp_path):
    import shutil

    from ngrp_lib.ledger.table import COLUMNS

    ledger = tmp_path / "L"
    shutil.copytree(world.ledger, ledger)
    fields = dict.fromkeys(COLUMNS, "")
    fields.update(index="1", status="keep", metric_value="0.5", memory_gb="nan")
    with open(ledger / "results.tsv", "a") as handle:
        handle.write("\t".join(fields[c] for c in COLUMNS) + "\n")
    done = ngrp(tmp_path, "ledger", "status", "--dir", ledger)
    assert done.code == 3
    one_error_line(done, "results.tsv:2", "row '1'", "memory_gb 'nan' is not a finite number", "edit line 2")


# ---------------------------------------------------------------- 7: durations and numbers


@pytest.mark.parametrize(
    "argv",
    [
        ["collect", "--timeout", "nan"],
        ["collect", "--timeout", "inf"],
        ["collect", "--timeout", "0"],
        ["collect", "--timeout", "-5"],
        ["collect", "--retry-base-delay", "nan"],
        ["collect", "--retry-base-delay", "-1"],
        ["serve", "--model", "m", "--dry-run", "--timeout", "nan"],
        ["serve", "--model", "m", "--dry-run", "--timeout", "inf"],
        ["serve", "stop", "--grace", "nan"],
        ["stats", "{profile}", "--target-width", "nan"],
        ["stats", "{profile}", "--target-width", "0"],
        ["stats", "{profile}", "--pass-threshold", "nan"],
        ["compare", "{profile}", "{profile}", "--alpha", "inf"],
        ["curriculum", "{profile}", "--tasks", "{tasks}", "-o", "{out}", "--min", "nan"],
        ["profile", "--inputs", "{materialized}", "--rollouts", "{rollouts}", "--pass-threshold", "inf"],
        [
            "ledger",
            "init",
            "--dir",
            "{out}",
            "--campaign",
            "c",
            "--metric",
            "m",
            "--direction",
            "max",
            "--target",
            "nan",
        ],
        [
            "ledger",
            "init",
            "--dir",
            "{out}",
            "--campaign",
            "c",
            "--metric",
            "m",
            "--direction",
            "max",
            "--per-run-timeout",
            "0m",
        ],
        [
            "ledger",
            "init",
            "--dir",
            "{out}",
            "--campaign",
            "c",
            "--metric",
            "m",
            "--direction",
            "max",
            "--deadline",
            "99999999h",
        ],
        [
            "ledger",
            "init",
            "--dir",
            "{out}",
            "--campaign",
            "c",
            "--metric",
            "m",
            "--direction",
            "max",
            "--deadline",
            "9999-12-31T23:59:59-05:00",
        ],
    ],
    ids=lambda argv: " ".join(a for a in argv if "{" not in a),
)
def test_bad_numbers_and_durations_are_usage_errors(world, tmp_path, argv):
    fields = {"profile": world.profile, "tasks": world.tasks, "out": tmp_path / "o",
              "materialized": world.materialized, "rollouts": world.rollouts}  # fmt: skip
    argv = [a.format(**fields) for a in argv]
    if argv[0] == "collect":
        argv = collect_argv(tmp_path, world.tasks, *argv[1:])
    done = ngrp(tmp_path, *argv)
    assert done.code == 2, (done.stdout, done.stderr)
    assert not (tmp_path / "out").exists() and not (tmp_path / "o").exists()


def test_no_command_takes_an_unchecked_float():
    """The class guard: every float option goes through FiniteFloat (click's float takes nan and inf)."""
    for path in (REPO / "scripts" / "ngrp_lib" / "commands").glob("*.py"):
        text = path.read_text()
        assert "type=float" not in text and "FloatRange" not in text, path.name
        assert "dir_okay=False" not in text and "exists=True" not in text, path.name  # exit 2 for a folder


# ---------------------------------------------------------------- 8: tracebacks that became one-line errors


@pytest.mark.parametrize("manifest", ["[]", '"a string"', "3"])
def test_a_resume_manifest_that_is_not_an_object(world, tmp_path, manifest):
    assert ngrp(tmp_path, *collect_argv(tmp_path, world.tasks)).code == 1
    (tmp_path / "out" / "r_run_manifest.json").write_text(manifest)
    done = ngrp(tmp_path, *collect_argv(tmp_path, world.tasks, "--resume"))
    assert done.code == 3
    one_error_line(done, "r_run_manifest.json", "no 'identity' block")


@pytest.mark.parametrize(
    ("row", "pointer"),
    [
        ({"agent_ref": {"name": ["a", "b"]}}, "/agent_ref/name"),
        ({"agent_ref": "a"}, "/agent_ref"),
        ({"task_source": ["s"]}, "/task_source"),
    ],
)
def test_routing_fields_of_the_wrong_type(tmp_path, row, pointer):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"responses_create_params": {"input": "q"}, "expected_answer": "1", **row}) + "\n"
    )
    done = ngrp(
        tmp_path, "materialize", "--input", tasks, "--output", tmp_path / "m.jsonl", "--num-repeats", "2"
    )
    assert done.code == 3
    one_error_line(done, "tasks.jsonl:1", pointer)
    done = ngrp(tmp_path, *collect_argv(tmp_path, tasks))
    assert done.code == 3
    one_error_line(done, "tasks.jsonl:1", pointer)


def test_a_materialized_row_breaking_the_schema_is_refused_before_any_request(tmp_path):
    rows = tmp_path / "m.jsonl"
    row = {"_ng_task_index": 0, "_ng_rollout_index": 0, "responses_create_params": {"input": "q"},
           "agent_ref": {"name": ["a"]}, "expected_answer": "1"}  # fmt: skip
    rows.write_text(json.dumps(row) + "\n")
    done = ngrp(tmp_path, "collect", "--materialized", rows, "--output", tmp_path / "out" / "r.jsonl",
                "--base-url", DEAD, "--model", "m", "--verifier", "exact")  # fmt: skip
    assert done.code == 3
    one_error_line(done, "m.jsonl:1", "/agent_ref/name")
    assert not (tmp_path / "out" / "r_failures.jsonl").exists()


def test_a_list_as_task_index_in_stats_rollouts(world, tmp_path):
    rollouts = tmp_path / "r.jsonl"
    rollouts.write_text(json.dumps({"_ng_task_index": [0], "_ng_rollout_index": 0, "reward": 1.0}) + "\n")
    done = ngrp(tmp_path, "stats", world.profile, "--rollouts", rollouts)
    assert done.code == 3
    one_error_line(done, "r.jsonl:1")


def test_a_broken_ipv6_base_url(world, tmp_path):
    done = ngrp(tmp_path, "collect", "--input", world.tasks, "--output", tmp_path / "out" / "r.jsonl",
                "--base-url", "http://[::1", "--model", "m", "--verifier", "exact")  # fmt: skip
    assert done.code == 2
    one_error_line(done, "not a valid URL")
    for url in ("http://h:99999/v1", "http://h:abc", "ftp://h/v1"):
        argv = ["collect", "--input", world.tasks, "--output", tmp_path / "out" / "r.jsonl",
                "--base-url", url, "--model", "m", "--verifier", "exact"]  # fmt: skip
        assert ngrp(tmp_path, *argv).code == 2
    argv = ["collect", "--input", world.tasks, "--output", tmp_path / "out" / "r.jsonl", "--base-url", DEAD,
            "--model", "m", "--verify-url", "http://[::1/verify"]  # fmt: skip
    assert ngrp(tmp_path, *argv).code == 2
    assert not (tmp_path / "out").exists()


def test_credentials_in_the_url_with_an_api_key_is_a_usage_error_before_any_request(world, tmp_path):
    argv = ["collect", "--input", world.tasks, "--output", tmp_path / "out" / "r.jsonl", "--base-url",
            "http://user:pa55@127.0.0.1:9/v1", "--model", "m", "--verifier", "exact"]  # fmt: skip
    done = ngrp(tmp_path, *argv, env={"OPENAI_API_KEY": "sk-abcdefgh"})
    assert done.code == 2
    one_error_line(done, "user:password@", "OPENAI_API_KEY")
    assert "pa55" not in done.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv",
    [
        [b"ledger", b"record", b"--dir", b"{ledger}", b"--from-json", b"{stats}", b"--metric-key",
         b"overall.mean", b"--description", b"\xff"],
        [b"ledger", b"init", b"--dir", b"{out}/L", b"--campaign", b"c", b"--metric", b"m\xff",
         b"--direction", b"max"],
        [b"materialize", b"--input", b"{tasks}", b"--output", b"{out}/m.jsonl", b"--agent", b"a\xff"],
        [b"stats", b"{out}/\xff.jsonl"],
    ],
    ids=["ledger-description", "ledger-metric", "materialize-agent", "path"],
)  # fmt: skip
def test_arguments_that_are_not_utf8(world, tmp_path, argv):
    fields = {"ledger": world.ledger, "stats": world.stats_json, "tasks": world.tasks, "out": tmp_path / "o"}
    argv = [_fill(a, fields) for a in argv]
    (tmp_path / "o").mkdir()
    before = (world.ledger / "results.tsv").read_bytes()
    done = subprocess.run([*ENTRY, *argv], capture_output=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr and b"not valid UTF-8" in done.stderr and b"\\xff" in done.stderr
    assert list((tmp_path / "o").iterdir()) == []  # no ledger folder, no stray .lock, no output
    assert (world.ledger / "results.tsv").read_bytes() == before


def _fill(arg: bytes, fields: dict) -> bytes:
    for key, value in fields.items():
        arg = arg.replace(b"{" + key.encode() + b"}", os.fsencode(value))
    return arg


# ---------------------------------------------------------------- 10: a killed merge's temp files


def test_a_sigkilled_merge_leaves_temps_the_next_merge_removes(tmp_path):
    shard = tmp_path / "s.jsonl"
    with open(shard, "w") as handle:
        for i in range(200_000):
            handle.write(json.dumps({"_ng_task_index": i, "_ng_rollout_index": 0, "pad": "x" * 100}) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([*ENTRY, "merge", str(shard), "-o", str(out / "m.jsonl")])
    deadline = time.monotonic() + 60
    while not list(out.glob(".m.jsonl.*.tmp")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = list(out.glob(".m.jsonl.*.tmp"))
    if not left:
        pytest.skip("the merge finished before it could be killed mid-write")
    done = subprocess.run([*ENTRY, "merge", str(shard), "-o", str(out / "m.jsonl")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not list(out.glob(".*.tmp")) and (out / "m.jsonl").exists()


# ---------------------------------------------------------------- 13: values that overflow


def _huge_run(tmp_path: Path, reward: float) -> tuple[Path, Path]:
    m, r = tmp_path / "h_materialized_inputs.jsonl", tmp_path / "h.jsonl"
    with open(m, "w") as mh, open(r, "w") as rh:
        for t in range(3):
            for k in range(4):
                row = {"_ng_task_index": t, "_ng_rollout_index": k, "agent_ref": {"name": "a"},
                       "responses_create_params": {"input": "q"}}  # fmt: skip
                mh.write(json.dumps(row) + "\n")
                rh.write(
                    json.dumps({**row, "response": {"output": []}, "reward": reward if (t + k) % 2 else 0.0})
                    + "\n"
                )
    return m, r


def test_rewards_of_1_7e308_are_a_clean_finding(tmp_path):
    m, r = _huge_run(tmp_path, 1.7e308)
    done = ngrp(tmp_path, "profile", "--inputs", m, "--rollouts", r)
    assert done.code == 1 and "RuntimeWarning" not in done.stderr
    one_error_line(done, "reward = 1.7e+308", "overflow")
    profile = tmp_path / "p_reward_profiling.jsonl"
    row = lambda t: {"_ng_task_index": t, "sample": {}, "rollout_infos": [  # noqa: E731
        {"_ng_task_index": t, "_ng_rollout_index": k, "reward": 1.7e308} for k in range(3)]}  # fmt: skip
    profile.write_text("".join(json.dumps(row(t)) + "\n" for t in range(3)))
    for argv in (
        ["stats", profile],
        ["compare", profile, profile],
        ["report", profile, "-o", tmp_path / "x.html"],
    ):
        done = ngrp(tmp_path, *argv)
        assert done.code == 1 and "RuntimeWarning" not in done.stderr, done.stderr
        one_error_line(done, "1.7e+308")
    assert not (tmp_path / "x.html").exists()


# ---------------------------------------------------------------- 14: one contract


def test_validate_refuses_what_the_commands_refuse(world, tmp_path):
    profile = tmp_path / "dup_reward_profiling.jsonl"
    lines = world.profile.read_text().splitlines()
    profile.write_text("\n".join([*lines, lines[0]]) + "\n")
    done = ngrp(tmp_path, "validate", profile)
    assert done.code == 1 and "duplicate profile row for task 0" in done.stdout, done.stdout
    assert ngrp(tmp_path, "stats", profile).code == 3  # the command refuses it too
    rows = [json.loads(line) for line in world.materialized.read_text().splitlines()]
    del rows[0]["responses_create_params"]
    materialized = tmp_path / "x_materialized_inputs.jsonl"
    materialized.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = ngrp(tmp_path, "validate", materialized)
    assert done.code == 1 and "/responses_create_params" in done.stdout, done.stdout
    done = ngrp(tmp_path, "collect", "--materialized", materialized, "--output", tmp_path / "out" / "r.jsonl",
                "--base-url", DEAD, "--model", "m", "--verifier", "exact")  # fmt: skip
    assert done.code == 3 and "/responses_create_params" in done.stderr


# ---------------------------------------------------------------- 15: folders as outputs


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{profile}", "-o", "{folder}"],
        ["materialize", "--input", "{tasks}", "--output", "{folder}"],
        ["curriculum", "{profile}", "--tasks", "{tasks}", "-o", "{folder}", "--min", "0"],
        ["merge", "{rollouts}", "-o", "{folder}"],
        [
            "collect",
            "--input",
            "{tasks}",
            "--output",
            "{folder}",
            "--base-url",
            DEAD,
            "--model",
            "m",
            "--verifier",
            "exact",
        ],
        ["ledger", "init", "--dir", "{tasks}", "--campaign", "c", "--metric", "m", "--direction", "max"],
        ["profile", "--inputs", "{materialized}", "--rollouts", "{rollouts}", "--output-dir", "{tasks}"],
        ["health", "--inputs", "{materialized}", "--rollouts", "{folder}"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_folder_or_file_where_the_other_is_expected_is_exit_3(world, tmp_path, argv):
    folder = tmp_path / "a_folder.jsonl"
    folder.mkdir()
    fields = {"profile": world.profile, "tasks": world.tasks, "rollouts": world.rollouts, "folder": folder,
              "materialized": world.materialized}  # fmt: skip
    done = ngrp(tmp_path, *[a.format(**fields) for a in argv])
    assert done.code == 3, done.stderr
    one_error_line(done)
    assert list(folder.iterdir()) == []


# ---------------------------------------------------------------- 16: a full disk names the file


def _limited(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by signal

    return apply


@pytest.mark.parametrize("command", ["merge", "materialize", "ledger", "profile"])
def test_a_write_that_fails_names_the_file(world, tmp_path, command):
    """A file size limit fails writes as a full disk does (an OSError from write(), no file name in it)."""
    big = tmp_path / "big.jsonl"
    rows = [{"_ng_task_index": i, "responses_create_params": {"input": "q" * 500}} for i in range(200)]
    if command == "merge":  # a rollouts shard
        rows = [dict(r, _ng_rollout_index=0, response={"output": []}, reward=1.0) for r in rows]
    big.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    out.mkdir()
    argv = {
        "merge": ["merge", big, "-o", out / "m.jsonl"],
        "materialize": ["materialize", "--input", big, "--output", out / "mm.jsonl", "--agent", "a"],
        "ledger": ["ledger", "init", "--dir", out / "L", "--campaign", "c", "--metric", "m" * 5000,
                   "--direction", "max"],
        "profile": ["profile", "--inputs", world.materialized, "--rollouts", world.rollouts,
                    "--output-dir", out],
    }[command]  # fmt: skip
    limit = 512 if command == "profile" else 4096
    done = subprocess.run([*ENTRY, *map(str, argv)], capture_output=True, text=True,
                          timeout=120, preexec_fn=_limited(limit))  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and "File too large" in done.stderr, done.stderr
    assert str(out) in done.stderr  # the file is named
    assert not list(out.rglob("*.tmp"))


# ---------------------------------------------------------------- found by our own hostile pass


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "{profile}", "-o", "{profile}", "--overwrite"],
        ["curriculum", "{profile}", "--tasks", "{tasks}", "-o", "{tasks}", "--min", "0", "--overwrite"],
        ["materialize", "--input", "{tasks}", "--output", "{tasks}", "--agent", "a", "--overwrite"],
        ["profile", "--inputs", "{profile}", "--rollouts", "{rollouts}", "--overwrite"],
    ],
    ids=lambda argv: argv[0],
)
def test_an_input_is_never_overwritten_as_an_output(world, tmp_path, argv):
    fields = {"profile": world.profile, "tasks": world.tasks, "rollouts": world.rollouts}
    before = {p: p.read_bytes() for p in (world.profile, world.tasks)}
    done = ngrp(tmp_path, *[a.format(**fields) for a in argv])
    assert done.code == 2
    one_error_line(done, "both an input and an output")
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize(
    "argv",
    [
        ["stats", "{profile}", "--k", "1,2,99999"],
        ["stats", "{profile}", "--group-size", "99999", "--json"],
        ["curriculum", "{profile}", "--tasks", "{tasks}", "-o", "{out}/c.jsonl", "--learnable-for", "99999"],
    ],
    ids=["k", "group-size", "learnable-for"],
)
def test_a_k_or_group_far_beyond_the_repeats_is_quick_and_undefined(world, tmp_path, argv):
    fields = {"profile": world.profile, "tasks": world.tasks, "out": tmp_path}
    started = time.monotonic()
    done = ngrp(tmp_path, *[a.format(**fields) for a in argv], timeout=120)
    assert done.code == 0 and time.monotonic() - started < 60, done.stderr
    if "--json" in argv:
        (entry,) = json.loads(done.stdout)["overall"]["grpo_informative"]
        assert entry["group_size"] == 99999 and entry["value"] is None and entry["n_tasks"] == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["stats", "{profile}", "--bootstrap", "100001"],
        ["compare", "{profile}", "{profile}", "--bootstrap", "1000000000"],
        ["stats", "{profile}", "--seed", "-1"],
        ["stats", "{profile}", "--json", "--seed", str(2**64)],
        ["stats", "{profile}", "--k", str(10**23)],
        ["curriculum", "{profile}", "--tasks", "{tasks}", "-o", "{out}/c.jsonl", "--min", "0",
         "--key", "_ng_task_index"],
        ["curriculum", "{profile}", "--tasks", "{tasks}", "-o", "{out}/c.jsonl", "--min", "0", "--key", ""],
        ["ledger", "init", "--dir", "{out}/L", "--campaign", "c", "--metric", "m", "--direction", "max",
         "--max-experiments", str(10**23)],
        ["ledger", "init", "--dir", "{out}/L", "--campaign", "c", "--metric", "", "--direction", "max"],
        ["materialize", "--input", "{tasks}", "--output", "{out}/m.jsonl", "--agent", ""],
        ["materialize", "--input", "{tasks}", "--output", "{out}/m.jsonl", "--agent", "a",
         "--num-repeats", str(10**20)],
        ["collect", "--concurrency", str(10**12)],
    ],
    ids=lambda argv: " ".join(a for a in argv[:1] + argv[-2:] if "{" not in a)[:40],
)  # fmt: skip
def test_option_values_that_broke_the_tool_are_usage_errors(world, tmp_path, argv):
    fields = {"profile": world.profile, "tasks": world.tasks, "out": tmp_path / "o"}
    argv = [a.format(**fields) for a in argv]
    if argv[0] == "collect":
        argv = collect_argv(tmp_path, world.tasks, *argv[1:])
    done = ngrp(tmp_path, *argv)
    assert done.code == 2, (done.stdout, done.stderr)
    assert not (tmp_path / "o").exists()


def test_a_report_with_no_scored_reward_prints_no_plotting_warning(tmp_path):
    profile = tmp_path / "p_reward_profiling.jsonl"
    infos = [{"_ng_task_index": 0, "_ng_rollout_index": k, "reward": None} for k in range(2)]
    profile.write_text(json.dumps({"_ng_task_index": 0, "sample": {}, "rollout_infos": infos}) + "\n")
    pytest.importorskip("matplotlib")
    done = ngrp(tmp_path, "report", profile, "-o", tmp_path / "r.html")
    assert done.code == 0 and "Warning" not in done.stderr, done.stderr


def test_the_falling_factorial_kernel_stops_past_the_largest_n():
    from ngrp_lib.stats.estimators import p_informative, pass_hat_k

    started = time.monotonic()
    assert math.isnan(pass_hat_k([4, 6], [2, 3], 10**12)[0])
    assert pass_hat_k([4, 6], [2, 3], 7).tolist() == pytest.approx([math.nan, math.nan], nan_ok=True)
    assert pass_hat_k([8], [8], 5).tolist() == [1.0]  # unchanged below the largest n
    assert math.isnan(p_informative([4], [2], 10**15)[0])
    assert time.monotonic() - started < 5
