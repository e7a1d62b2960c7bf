"""The resume command `check` and `collect` print is the run's own: parsed back by collect's own option
parser, it gives the identity the run's manifest holds, field for field (issue 36, wrong turn 3: the
printed command left out `--temperature 0.7`, and run as printed it was refused)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_helpers import SCRIPT

from ngrp_lib.artifacts.resume import resume_argv
from ngrp_lib.collect.state import build_manifest
from ngrp_lib.commands import collect as collect_cmd

SERVER = ("--base-url", "http://127.0.0.1:9/v1", "--model", "m")
RUNS = [
    (*SERVER, "--temperature", "0.7"),
    (*SERVER, "--temperature", "0.1", "--top-p", "0.95", "--max-output-tokens", "64"),
    (
        *SERVER,
        "--set",
        "top_k=20",
        "--set",
        'reasoning.effort="low"',
        "--set",
        'stop=["\\n\\n", "x y"]',
    ),  # fmt: skip
    (*SERVER, "--num-repeats", "4", "--seed-per-repeat", "--interleave", "--limit", "3", "--agent", "a b"),
    (
        *SERVER,
        "--verifier",
        "regex",
        "--verifier-pattern",
        r"\d+",
        "--answer-key",
        "gold",
        "--timeout",
        "600",
    ),  # fmt: skip
    ("--endpoints", "e.json", "--model", "m", "--api", "responses", "--temperature", "1e-05"),
    ("--gym-url", "http://127.0.0.1:11000", "--temperature", "0.0", "--concurrency", "4"),
]


def _options(argv: list[str]):
    """The CollectOptions collect itself builds from `argv` (no server is asked; endpoint files read)."""
    params = collect_cmd.command.make_context("collect", list(argv)).params
    shard = collect_cmd._refuse_expansion_options_with_materialized(params)
    return collect_cmd._collect_options(params, shard)


def _manifest(options) -> dict:
    files = {
        "materialized": {"path": str(options.materialized_path)},
        "rollouts": {"path": str(options.output)},
        "input": {"path": str(options.input)},
    }
    return build_manifest(options.identity("in-sha", "m-sha"), files, options.runtime())


@pytest.mark.parametrize("extra", RUNS, ids=lambda a: " ".join(a)[:60])
def test_the_printed_command_parses_back_to_the_runs_identity(tmp_path, monkeypatch, extra):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.json").write_text(json.dumps({"endpoints": [{"base_url": "http://127.0.0.1:9/v1",
                                                                "model": "m"}]}))  # fmt: skip
    argv = ["--input", "t.jsonl", "--output", "out/r.jsonl", *extra]
    first = _options(argv)
    manifest = json.loads(json.dumps(_manifest(first)))  # as read back from disk
    printed = resume_argv(manifest)
    again = _options(shlex.split(shlex.join(printed))[1:])  # through the shell, as the user pastes it
    assert again.resume
    assert again.identity("in-sha", "m-sha") == manifest["identity"]
    runtime = again.runtime()["options"]
    assert runtime == {k: manifest["options"][k] for k in runtime}  # the runtime options kept too


def test_every_sampling_override_of_the_identity_is_printed():
    from ngrp_lib.artifacts.resume import resume_command

    options = _options(["--input", "t.jsonl", "--output", "r.jsonl", *RUNS[0]])
    manifest = json.loads(json.dumps(_manifest(options)))
    assert "--temperature 0.7" in resume_command(manifest)


def test_an_override_with_a_flag_and_a_string_value_goes_by_set():
    """`--set temperature="hot"` (the server refuses it, but it is what the run asked) is not printed as
    `--temperature hot`, which the option parser refuses."""
    from ngrp_lib.artifacts.resume import _override_args

    assert _override_args({"temperature": "hot", "max_output_tokens": 8}) == [
        "--set", 'temperature="hot"', "--max-output-tokens", "8"]  # fmt: skip


def test_a_usage_error_is_not_hidden_by_the_round_trip(tmp_path, monkeypatch):
    """The parser the test uses is collect's: a bad value is refused there as on the command line."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(click.BadParameter):
        _options(["--input", "t.jsonl", "--output", "r.jsonl", *SERVER, "--temperature", "hot"])


@pytest.mark.vllm
def test_the_printed_resume_command_runs_as_printed_against_vllm(vllm_server, tmp_path):
    """A run with --temperature 0.7 --set top_k=20, cut short (its last rows removed): `check` prints a
    resume command; pasted into a shell it is accepted and finishes the run, every key once."""
    ngrp = _three_sums_in(tmp_path)

    first = ngrp("collect", "--input", "tasks.jsonl", "--output", "out/r.jsonl", "--num-repeats", "2",
                 "--base-url", vllm_server.base_url, "--model", "tiny", "--verifier", "math",
                 "--temperature", "0.7", "--set", "top_k=20", "--concurrency", "2")  # fmt: skip
    assert first.returncode == 0, first.stderr
    rollouts = tmp_path / "out" / "r.jsonl"
    command = _cut_and_printed_resume(ngrp, rollouts, keep=3)
    assert "--temperature 0.7" in command and "--set top_k=20" in command, command
    resumed = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    keys = [(json.loads(r)["_ng_task_index"], json.loads(r)["_ng_rollout_index"])
            for r in rollouts.read_text().splitlines()]  # fmt: skip
    assert sorted(keys) == [(t, r) for t in range(3) for r in range(2)]


def test_the_printed_command_resumes_the_file_it_was_asked_about(tmp_path, monkeypatch):
    """A copy of a run keeps the manifest naming the original's rollouts: the fix check prints for the copy
    must resume the copy (run as printed, it resumed the original and left the copy as it was). A shard's
    file goes back to the run's name, which collect --shard suffixes again."""
    from ngrp_lib.artifacts.resume import resume_command

    monkeypatch.chdir(tmp_path)
    manifest = json.loads(json.dumps(_manifest(_options(["--input", "t.jsonl", "--output", "run/r.jsonl",
                                                         *SERVER]))))  # fmt: skip
    assert "--output run/r.jsonl" in resume_command(manifest)
    copied = resume_command(manifest, output="copy/r.jsonl")
    assert "--output copy/r.jsonl" in copied and "run/r.jsonl" not in copied
    manifest["identity"]["shard"] = "2/8"
    manifest["rollouts"]["path"] = "run/r-shard-2-of-8.jsonl"
    sharded = resume_command(manifest, output="copy/r-shard-2-of-8.jsonl")
    assert "--output copy/r.jsonl" in sharded and "--shard 2/8" in sharded


ADAPTIVE = [("--rounds", "2"), ("--first-round", "2"), ("--rounds", "1,1,2,4"), ("--rounds", "2,2"), ()]


@pytest.mark.parametrize("rounds", ADAPTIVE, ids=lambda a: " ".join(a) or "default")
def test_an_adaptive_runs_command_gives_the_rounds_as_the_user_did(tmp_path, monkeypatch, rounds):
    """Replay 2026-12-05 W3: `--rounds 2` was printed back as `--first-round 2`. The manifest's progress
    block keeps the spelling (`rounds_option`); the printed command uses it and still parses back to the
    run's identity (the sizes), so it is accepted as printed."""
    from ngrp_lib.adaptive.rounds import round_options

    monkeypatch.chdir(tmp_path)
    argv = ["--input", "t.jsonl", "--output", "r.jsonl", *SERVER, "--num-repeats", "8",
            "--adaptive", "learnable", *rounds]  # fmt: skip

    def options_of(args: list[str]):
        params = collect_cmd.command.make_context("collect", list(args)).params
        settings = collect_cmd._adaptive_settings(params["adaptive_rule"], params["first_round"],
                                                  params["pass_threshold"], params["num_repeats"],
                                                  params["round_sizes"])  # fmt: skip
        return round_options(_options(args), settings), settings

    first, settings = options_of(argv)
    manifest = json.loads(json.dumps(_manifest(first)))
    manifest["adaptive"] = {"rounds_option": settings.rounds_option}  # as `advance` writes it
    printed = resume_argv(manifest)
    shown = " ".join(rounds)  # the sizes as given (2,2 too: the last size repeats)
    assert (" ".join(printed).split("--adaptive learnable")[1].split(" --base-url")[0].strip()) == shown
    again, _ = options_of(shlex.split(shlex.join(printed))[1:])
    assert again.identity("in-sha", "m-sha") == manifest["identity"]
    del manifest["adaptive"]  # an older manifest: the option that sets these rounds, still accepted
    again, _ = options_of(shlex.split(shlex.join(resume_argv(manifest)))[1:])
    assert again.identity("in-sha", "m-sha") == manifest["identity"]


@pytest.mark.vllm
def test_an_adaptive_runs_printed_resume_command_keeps_rounds_as_given_and_runs(vllm_server, tmp_path):
    """Replay 2026-12-05 W3 on a real run: started with `--rounds 2`, cut short, `check` prints the resume
    command with `--rounds 2` (not `--first-round 2`), and pasted into a shell it finishes the run."""
    ngrp = _three_sums_in(tmp_path, temperature=1.0)

    first = ngrp("collect", "--input", "tasks.jsonl", "--output", "out/r.jsonl", "--num-repeats", "4",
                 "--base-url", vllm_server.base_url, "--model", "tiny", "--verifier", "math",
                 "--adaptive", "learnable", "--rounds", "2")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "adaptive learnable (--rounds 2):" in first.stdout and "--first-round" not in first.stdout
    rollouts = tmp_path / "out" / "r.jsonl"
    command = _cut_and_printed_resume(ngrp, rollouts, keep=2)
    assert "--adaptive learnable --rounds 2 " in command and "--first-round" not in command, command
    resumed = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "adaptive learnable (--rounds 2):" in resumed.stdout
    done = ngrp("check", "--inputs", "out/r_materialized_inputs.jsonl", "--rollouts", "out/r.jsonl")
    assert done.returncode == 0, done.stdout + done.stderr


def _three_sums_in(folder: Path, temperature: float | None = None):
    """Writes folder/tasks.jsonl (three 'What is i+i?' tasks, 4-token cap) and returns a function running
    `ngrp ARGS...` in `folder` as a user's shell would."""
    params: dict = {"max_output_tokens": 4} | ({} if temperature is None else {"temperature": temperature})
    (folder / "tasks.jsonl").write_text("".join(json.dumps({"responses_create_params": {"input": [
        {"role": "user", "content": f"What is {i}+{i}?"}], **params},
        "expected_answer": str(2 * i)}) + "\n" for i in range(3)))  # fmt: skip

    def ngrp(*args):
        return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=folder,
                              capture_output=True, text=True, timeout=600)  # fmt: skip

    return ngrp


def _cut_and_printed_resume(ngrp, rollouts: Path, keep: int) -> str:
    """Cut the run's rollouts to their first `keep` rows (a run stopped early) and return the resume
    command `check` prints for the missing keys, as a user would copy it."""
    rows = rollouts.read_text().splitlines(keepends=True)
    rollouts.write_text("".join(rows[:keep]))
    check = ngrp("check", "--inputs", "out/r_materialized_inputs.jsonl", "--rollouts", "out/r.jsonl",
                 "--json")  # fmt: skip
    assert check.returncode == 1, check.stderr
    fix = next(f["fix"] for f in json.loads(check.stdout)["findings"] if f["code"] == "missing_rollouts")
    command = fix[: fix.index(" (runs only the missing keys)")]
    return command[command.index(" or ") + 4 :]
