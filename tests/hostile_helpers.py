"""Helpers for the hostile-input tests: a small valid run on disk, the bad paths, and `run_bounded`, which
runs one `ngrp` command line in a forked child with a deadline (a command that hangs on a FIFO fails the
test instead of hanging it)."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from dataclasses import dataclass
from pathlib import Path

BAD_KINDS = ("fifo", "device", "loop", "folder", "long")
LONG_LIMIT = 4096  # NGRP_MAX_LINE_BYTES in the child for the "long" kind


@dataclass
class Outcome:
    code: int | None  # None: the command did not finish before the deadline
    stdout: str
    stderr: str


def run_bounded(
    argv: list[str], tmp: Path, *, env: dict[str, str] | None = None, timeout: float = 30
) -> Outcome:
    """`ngrp ARGV` in a forked child (imports are inherited: it costs milliseconds), killed at `timeout`."""
    from ngrp_lib.cli import main

    out, err = tmp / "child.out", tmp / "child.err"

    def child() -> None:
        sys.stdout = open(out, "w")  # noqa: SIM115 - the child exits below
        sys.stderr = open(err, "w")  # noqa: SIM115
        os.environ.update(env or {})
        try:
            code = main(argv)
        except BaseException as exc:  # a crash must show as one: a traceback on stderr, exit 99
            import traceback

            traceback.print_exception(exc)
            code = 99
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        code = None
    else:
        code = process.exitcode
    read = lambda p: p.read_text(errors="replace") if p.exists() else ""  # noqa: E731
    return Outcome(code, read(out), read(err))


def make_bad(path: Path, kind: str) -> Path:
    """A path of the given bad kind: a FIFO, a device, a symlink loop, a folder, or a too-long line."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        other = path.with_name(path.name + ".other")
        path.symlink_to(other.name)
        other.symlink_to(path.name)
    elif kind == "folder":
        path.mkdir()
    elif kind == "long":
        row = {"_ng_task_index": 0, "_ng_rollout_index": 0, "pad": "x" * (LONG_LIMIT * 2)}
        path.write_text(json.dumps(row) + "\n")
    else:
        raise ValueError(kind)
    return path


@dataclass
class World:
    """A small valid run: tasks, materialized inputs, rollouts, its reward profile, a stats JSON, a log,
    an endpoints file and a ledger folder."""

    root: Path
    tasks: Path
    materialized: Path
    rollouts: Path
    profile: Path
    stats_json: Path
    log: Path
    ledger: Path


def make_world(root: Path) -> World:
    from ngrp_lib.collect.materialize import MaterializeOptions, materialize
    from ngrp_lib.ledger import CampaignSpec, init_campaign, resolve_dir
    from ngrp_lib.profile import ProfileOptions, run_profile

    root.mkdir(parents=True, exist_ok=True)
    tasks = root / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {"responses_create_params": {"input": f"what is {i}+1?"}, "expected_answer": str(i + 1)}
            )
            + "\n"
            for i in range(3)
        )
    )
    materialized = root / "rollouts_materialized_inputs.jsonl"
    materialize(tasks, materialized, MaterializeOptions(num_repeats=2, agent="a"))
    rollouts = root / "rollouts.jsonl"
    with open(rollouts, "w") as handle:
        for line in materialized.read_text().splitlines():
            row = json.loads(line)
            reward = float((row["_ng_task_index"] + row["_ng_rollout_index"]) % 2)
            response = {"output": [], "usage": {"output_tokens": 7}, "status": "completed"}
            handle.write(json.dumps({**row, "response": response, "reward": reward}) + "\n")
    run_profile(materialized, rollouts, ProfileOptions())
    stats_json = root / "stats.json"
    stats_json.write_text(json.dumps({"overall": {"mean": 0.5}}))
    log = root / "run.log"
    log.write_text("step 1\nscore=0.5\n")
    paths = resolve_dir(root / "ledger", None)
    init_campaign(paths, CampaignSpec(campaign="c", metric="score", direction="max"))
    return World(
        root,
        tasks,
        materialized,
        rollouts,
        root / "rollouts_reward_profiling.jsonl",
        stats_json,
        log,
        paths.dir,
    )
