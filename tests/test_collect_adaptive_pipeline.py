"""`collect --adaptive` runs each task's rounds as its own outcomes arrive, inside one runner call: a task
whose round is done starts its next one while another task is still in its first.

What no real server shows on demand is one task's request held while the others go on, so these tests
use a canned-reply peer that holds every request of one task until told to let go (the real-server tests
are in test_collect_adaptive_vllm.py). Rewards come from the keyed verifier there: by identity key alone,
so a killed and resumed run can be compared with an unkilled one byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from cli_helpers import ENTRY
from http_helpers import chat_app, chat_reply, serve_app, sum_tasks, with_n_choices
from test_collect_adaptive_vllm import KEYED_VERIFIER, outcome

from ngrp_lib.artifacts import jsonl
from ngrp_lib.stats.adaptive import Rule, Schedule, play

SCHEDULE = Schedule(first_round=1, num_repeats=4)  # rounds of one repeat: four rounds at most
HELD = 0  # the task whose requests the peer holds


@pytest.fixture
def holding_peer():
    """Answers chat requests with the right sum (n choices for n), except that a request for task HELD
    waits until `state["hold"]` is False (at most 60 s), and a task's k-th request is a 503 when
    `state["fail"][task] == k`."""
    import asyncio

    from aiohttp import web

    state = {"hold": True, "held": 0, "fail": {}}  # fail: task -> its request (1-based) answered 503

    async def chat(request):
        body = await request.json()
        number = int(body["messages"][-1]["content"].split()[-1].split("+")[0])
        state[number] = state.get(number, 0) + 1
        if state["fail"].get(number) == state[number]:
            return web.Response(status=503, text="busy")
        if number == HELD:
            state["held"] += 1
            for _ in range(1200):
                if not state["hold"]:
                    break
                await asyncio.sleep(0.05)
        return web.json_response(with_n_choices(chat_reply(str(number + 1)), body))

    with serve_app(chat_app(chat)) as url:
        state["url"] = url
        yield state
        state["hold"] = False
        time.sleep(0.2)  # the held handlers return before the server stops


def _start_json_run(folder: Path, url: str) -> subprocess.Popen:
    """`collect --adaptive ... --json` into run/r.jsonl as a subprocess (a test may signal or wait on it)."""
    argv = [*ENTRY, *_argv(folder, url, "run/r.jsonl", "--json")]
    return subprocess.Popen(argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _argv(folder: Path, url: str, out: str, *extra: str) -> list[str]:
    return ["collect", "--input", str(sum_tasks(folder, 4)), "--output", str(folder / out),
            "--base-url", url + "/v1", "--model", "m", "--verifier-fn", "keyed_verifier:score",
            "--num-repeats", "4", "--adaptive", "learnable", "--first-round", "1", "--concurrency", "4",
            "--max-retries", "0", "--timeout", "120", *extra]  # fmt: skip


def _keys(path: Path) -> list[tuple[int, int]]:
    return [(r.data["_ng_task_index"], r.data["_ng_rollout_index"]) for r in jsonl.iter_rows(path)]


def _sizes() -> dict[int, int]:
    return {t: play(Rule("learnable"), SCHEDULE, [outcome(t, r) for r in range(4)]).size for t in range(4)}


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "keyed_verifier.py").write_text(KEYED_VERIFIER)
    return tmp_path


def test_the_sizes_by_hand():
    # task 0 never passes, 1 always, 2 from its 6th repeat (never within 4), 3 alternates: mixed at 2
    assert _sizes() == {0: 4, 1: 4, 2: 4, 3: 2}


def test_a_task_goes_through_its_rounds_while_another_is_still_in_its_first(folder, holding_peer):
    proc = _start_json_run(folder, holding_peer["url"])
    out = folder / "run" / "r.jsonl"
    deadline = time.monotonic() + 60
    # every task but the held one finishes all its rounds while the held one's first is in flight
    others = {(t, r) for t, n in _sizes().items() if t != HELD for r in range(n)}
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and others <= set(_keys(out)):
            break
        time.sleep(0.05)
    assert holding_peer["held"] == 1 and others <= set(_keys(out)), _keys(out) if out.exists() else None
    holding_peer["hold"] = False
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    order = _keys(out)
    assert order.index((1, 3)) < order.index((HELD, 0))  # task 1's round 4 before the held task's round 1
    summary = json.loads(stdout)
    assert summary["adaptive"]["runner_calls"] == 1 and summary["completed"] == summary["expected"] == 14
    materialized = _keys(folder / "run" / "r_materialized_inputs.jsonl")
    assert materialized == sorted(materialized, key=lambda k: (k[1], k[0]))  # round order at the end
    assert sorted(order) == sorted(materialized)


def _run(folder: Path, url: str, out: str, *extra: str) -> subprocess.CompletedProcess:
    argv = [*ENTRY, *_argv(folder, url, out, *extra)]
    return subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=120)


def test_kill_9_mid_pipeline_then_resume_gives_the_files_of_an_unkilled_run(folder, holding_peer):
    killed = folder / "killed" / "r.jsonl"
    proc = subprocess.Popen(
        [*ENTRY, *_argv(folder, holding_peer["url"], "killed/r.jsonl")],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    # killed while task 1 is in a later round and the held task still in its first
    while time.monotonic() < deadline and proc.poll() is None:
        if killed.exists() and (1, 2) in set(_keys(killed)):
            break
        time.sleep(0.02)
    materialized = killed.with_name("r_materialized_inputs.jsonl")
    at_kill = _keys(materialized)
    proc.kill()
    proc.wait(timeout=30)
    assert (HELD, 0) in at_kill and (1, 2) in at_kill and (HELD, 0) not in set(_keys(killed))
    holding_peer["hold"] = False
    resumed = _run(folder, holding_peer["url"], "killed/r.jsonl", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    plain = _run(folder, holding_peer["url"], "plain/r.jsonl")
    assert plain.returncode == 0, plain.stderr
    plain_dir, killed_dir = folder / "plain", folder / "killed"
    name = "r_materialized_inputs.jsonl"
    assert (killed_dir / name).read_bytes() == (plain_dir / name).read_bytes()
    manifests = [json.loads((d / "r_run_manifest.json").read_text()) for d in (killed_dir, plain_dir)]
    assert manifests[0]["adaptive"] == manifests[1]["adaptive"]
    sha = [m["identity"]["materialized_sha256"] for m in manifests]
    assert sha[0] == sha[1] == manifests[0]["materialized"]["sha256"]

    def rewards(path):
        rows = jsonl.iter_rows(path)
        return {(r.data["_ng_task_index"], r.data["_ng_rollout_index"]): r.data["reward"] for r in rows}

    assert rewards(killed) == rewards(plain_dir / "r.jsonl")
    assert sorted(_keys(killed)) == sorted({(t, r) for t, n in _sizes().items() for r in range(n)})


def test_ctrl_c_mid_pipeline_leaves_files_in_round_order_and_resume_finishes(folder, holding_peer):
    import signal

    out = folder / "run" / "r.jsonl"
    proc = _start_json_run(folder, holding_peer["url"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and (1, 2) in set(_keys(out)):
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    summary = json.loads(stdout)
    assert summary["interrupted"] and summary["adaptive"]["tasks_by_reason"].get("pending", 0) >= 1
    materialized = folder / "run" / "r_materialized_inputs.jsonl"
    keys = _keys(materialized)
    assert keys == sorted(keys, key=lambda k: (k[1], k[0])) and (HELD, 0) in keys  # put in round order
    manifest = json.loads((folder / "run" / "r_run_manifest.json").read_text())
    states = manifest["adaptive"]["task_states"]
    assert manifest["materialized"]["rows"] == len(keys)
    assert states[str(HELD)]["reason"] == "pending"
    # task 1's last round may or may not have been sent before the interrupt (a loaded machine can take
    # the signal between writing (1, 2) and sending (1, 3)): its state follows what the file holds
    assert states["1"]["reason"] == ("reached_n" if (1, 3) in set(_keys(out)) else "pending")
    holding_peer["hold"] = False
    resumed = _run(folder, holding_peer["url"], "run/r.jsonl", "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(_keys(out)) == sorted({(t, r) for t, n in _sizes().items() for r in range(n)})


def test_a_failed_attempt_holds_only_its_task_and_another_pass_retries_it(folder, holding_peer):
    holding_peer["hold"] = False
    holding_peer["fail"] = {1: 2}  # task 1's round 2 fails once: its rounds 3 and 4 wait for the retry
    proc = _run(folder, holding_peer["url"], "run/r.jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["adaptive"]["runner_calls"] == 2 and summary["adaptive"]["failed_all_rounds"] == 1
    assert "1 tasks wait on a failed attempt" in proc.stderr
    out = folder / "run" / "r.jsonl"
    assert sorted(_keys(out)) == sorted({(t, r) for t, n in _sizes().items() for r in range(n)})
    failures = [json.loads(line) for line in out.with_name("r_failures.jsonl").read_text().splitlines()]
    assert [(f["_ng_task_index"], f["_ng_rollout_index"]) for f in failures] == [(1, 1)]
