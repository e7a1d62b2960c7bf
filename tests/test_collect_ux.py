"""What `collect` and `check` tell a user at the edges of a run (a Ctrl-C, a refused pre-flight check, a
refused --resume, nothing completed): a canned-reply aiohttp peer for what no real server shows on demand
(a reply that takes long), and unreachable ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from cli_helpers import ENTRY
from http_helpers import chat_app, chat_reply, serve_app, sum_tasks, with_n_choices
from vllm_fixture import free_port

_chat = chat_reply


def _tasks(tmp_path, n=6):
    return sum_tasks(tmp_path, n)


@pytest.fixture
def slow_peer():
    """Answers the first `fast` chat requests at once (with the right answer), then hangs for a minute."""
    import asyncio

    from aiohttp import web

    state = {"posts": 0, "fast": 2}

    async def chat(request):
        body = await request.json()
        state["posts"] += 1
        if state["posts"] > state["fast"]:  # hang until the test lets go (at most a minute)
            for _ in range(1200):
                if state["fast"] >= state["posts"]:
                    break
                await asyncio.sleep(0.05)
        prompt = body["messages"][-1]["content"]
        # n choices, as a real server answers a grouped request (one per rollout of the task's group)
        return web.json_response(with_n_choices(_chat(str(int(prompt.split()[-1].split("+")[0]) + 1)), body))

    with serve_app(chat_app(chat, max_model_len=4096)) as url:
        state["url"] = url
        yield state
        state["fast"] = 1 << 30
        time.sleep(0.2)  # the hanging handlers return before the server stops


def _argv(tmp_path, url, *extra):
    return ["collect", "--input", str(_tasks(tmp_path)), "--output", str(tmp_path / "out" / "r.jsonl"),
            "--base-url", url + "/v1", "--model", "m", "--verifier", "exact", "--concurrency", "1",
            "--max-retries", "0", *extra]  # fmt: skip


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_prints_the_summary_and_the_resume_line_and_keeps_what_was_written(
    tmp_path, slow_peer, run_ngrp, as_json
):
    argv = _argv(tmp_path, slow_peer["url"], *(["--json"] if as_json else []))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.Popen(
        [*ENTRY, *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while slow_peer["posts"] <= slow_peer["fast"] and time.monotonic() < deadline:  # the third row hangs
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert len(_lines(tmp_path / "out" / "r.jsonl")) == 2
    if as_json:
        summary = json.loads(out)
        assert summary["interrupted"] is True and summary["exit_code"] == 130
        assert summary["completed"] == 2 and summary["missing"] == 4
        from ngrp_lib.artifacts import schemas

        assert schemas.first_problem("collect_result", summary) is None
    else:
        assert "rollouts: 2/6 done, 4 missing" in out
        assert "stopped early: interrupted (Ctrl-C)" in out
    assert "incomplete: rerun the same command with --resume" in err
    assert "aborted" not in err
    slow_peer["fast"] = 100
    again = run_ngrp(*argv, "--resume", "--json", env=env)
    assert again.returncode == 0, again.stderr
    keys = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in _lines(tmp_path / "out" / "r.jsonl")}
    assert len(keys) == 6 == len(_lines(tmp_path / "out" / "r.jsonl"))


@pytest.fixture
def models_peer():
    """GET /<status>/v1/models answers that status (200: a list serving model `m`)."""
    from aiohttp import web

    async def models(request):
        status = int(request.match_info["status"])
        if status == 200:
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
        return web.Response(status=status, text="no")

    app = web.Application()
    app.router.add_get("/{status}/v1/models", models)
    with serve_app(app) as url:
        yield url


def test_the_pre_flight_refusal_suggests_skip_preflight_only_where_the_route_is_missing(
    tmp_path, models_peer, run_ngrp
):
    def refusal(url, *extra, env=None):
        proc = run_ngrp(*_argv(tmp_path, url, "--overwrite", *extra), env=env)
        assert proc.returncode == 2, proc.stderr
        assert "no row was sent" in proc.stderr
        return proc.stderr

    for status in (404, 405, 501):
        assert "--skip-preflight" in refusal(f"{models_peer}/{status}"), status
    no_key = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    helpless = {
        "key missing": refusal(f"{models_peer}/401", env=no_key),
        "key refused": refusal(f"{models_peer}/403", env={**no_key, "OPENAI_API_KEY": "sk-wrong-0123456789"}),
        "wrong model": refusal(f"{models_peer}/200", "--model", "other"),
        "server error": refusal(f"{models_peer}/500"),
        "nothing listening": refusal(f"http://127.0.0.1:{free_port()}"),
    }
    for what, stderr in helpless.items():
        assert "--skip-preflight" not in stderr, what


@pytest.fixture
def flaky_peer():
    """Serves model `m`; a chat request fails with a 503 while `state["down"]`, else answers right."""
    from aiohttp import web

    state = {"down": True, "posts": 0, "status": 503}

    async def chat(request):
        body = await request.json()
        state["posts"] += 1
        if state["down"]:
            return web.Response(status=state["status"], text="warming up")
        prompt = body["messages"][-1]["content"]
        # n choices, as a real server answers a grouped request (one per rollout of the task's group)
        return web.json_response(with_n_choices(_chat(str(int(prompt.split()[-1].split("+")[0]) + 1)), body))

    with serve_app(chat_app(chat)) as url:
        state["url"] = url
        yield state


def _check_fixes(run_ngrp, tmp_path, out="out/r.jsonl"):
    rollouts = tmp_path / out
    inputs = rollouts.with_name(rollouts.stem + "_materialized_inputs.jsonl")
    proc = run_ngrp("check", "--json", "--inputs", inputs, "--rollouts", rollouts)
    return {f["code"]: f["fix"] for f in json.loads(proc.stdout)["findings"]}


def test_check_prints_the_whole_resume_command_from_the_manifest_and_it_runs(tmp_path, flaky_peer, run_ngrp):
    import shlex

    argv = ["collect", "--input", "tasks.jsonl", "--output", "out/r.jsonl", "--num-repeats", "2",
            "--seed-per-repeat", "--base-url", flaky_peer["url"] + "/v1", "--model", "m",
            "--verifier", "exact", "--concurrency", "3", "--timeout", "7.5", "--max-retries", "0",
            "--max-attempts", "5", "--api-key-env", "MY_KEY"]  # fmt: skip
    _tasks(tmp_path, 3)
    env = {**os.environ, "MY_KEY": "sk-secret-0123456789abcdef"}
    first = run_ngrp(*argv, env=env)
    assert first.returncode == 1, first.stderr
    fix = _check_fixes(run_ngrp, tmp_path)["missing_rollouts"]
    assert "<" not in fix and "sk-secret" not in fix
    command = fix[fix.index("ngrp collect") : fix.index(" (runs only the missing keys)")]
    words = shlex.split(command)
    assert words[:2] == ["ngrp", "collect"] and words[-1] == "--resume"
    assert {"--api-key-env", "MY_KEY", "--num-repeats", "--seed-per-repeat", "--max-attempts"} <= set(words)
    flaky_peer["down"] = False
    resumed = run_ngrp(*words[1:], "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["completed"] == 6
    assert "missing_rollouts" not in _check_fixes(run_ngrp, tmp_path)


def test_a_bare_resume_is_refused_with_the_runs_command_not_a_misleading_option(
    tmp_path, flaky_peer, run_ngrp
):
    first = run_ngrp(*_argv(tmp_path, flaky_peer["url"]))
    assert first.returncode == 1, first.stderr
    bare = run_ngrp("collect", "--output", "out/r.jsonl", "--resume")
    assert bare.returncode == 2
    assert "--model is required" not in bare.stderr and "--base-url" in bare.stderr
    assert f"--base-url {flaky_peer['url']}/v1 --model m" in bare.stderr
    assert bare.stderr.count("\n") <= 2  # the refusal and its hint
    nothing = run_ngrp("collect", "--output", "elsewhere/r.jsonl", "--input", "tasks.jsonl", "--resume")
    assert nothing.returncode == 2 and "--model is required" not in nothing.stderr
    assert "no server: pass --base-url" in nothing.stderr


def test_the_rebuilt_commands_defaults_are_collects():
    from ngrp_lib.artifacts.resume import DEFAULTS
    from ngrp_lib.commands.collect import command

    defaults = {p.name: p.default for p in command.params}
    assert DEFAULTS["max_response_bytes"] == defaults["max_response_mb"] * 2**20
    for name, value in DEFAULTS.items():
        if name != "max_response_bytes":
            assert defaults[name] == value, name


def test_a_sharded_runs_command_names_the_unsharded_output():
    from ngrp_lib.artifacts.resume import resume_argv

    manifest = {
        "input": {"path": "t.jsonl"},
        "rollouts": {"path": "o/r-shard-03-of-12.jsonl"},
        "options": {"concurrency": None},
        "identity": {"shard": "3/12", "materialize": {"num_repeats": 4}, "model": "m", "api": "chat"},
        "servers": [{"url": "http://h:1/v1", "model": "m"}],
    }
    argv = resume_argv(manifest)
    assert argv == ["collect", "--input", "t.jsonl", "--output", "o/r.jsonl", "--num-repeats", "4",
                    "--base-url", "http://h:1/v1", "--model", "m", "--shard", "3/12", "--resume"]  # fmt: skip


def test_a_refused_resume_names_each_changed_field_once_in_plain_text(tmp_path, flaky_peer, run_ngrp):
    argv = _argv(tmp_path, flaky_peer["url"], "--num-repeats", "2")
    assert run_ngrp(*argv).returncode == 1
    changed = [*argv, "--num-repeats", "3", "--seed-per-repeat", "--resume"]
    refused = run_ngrp(*changed)
    assert refused.returncode == 2
    assert "  num_repeats: was 2, now 3\n" in refused.stderr
    assert "  seed_per_repeat: was false, now true\n" in refused.stderr
    assert "materialize" not in refused.stderr and "{'" not in refused.stderr and "None" not in refused.stderr


def test_collects_summary_prints_counts_and_repairs_as_text_not_python(tmp_path, flaky_peer, run_ngrp):
    argv = _argv(tmp_path, flaky_peer["url"], "--abort-after", "100")
    first = run_ngrp(*argv)
    assert first.returncode == 1
    assert "6 failed attempts (agent_request_failed 6)," in first.stdout
    assert "{'" not in first.stdout + first.stderr
    rollouts = tmp_path / "out" / "r.jsonl"
    failures = tmp_path / "out" / "r_failures.jsonl"
    with failures.open("a") as f:
        f.write('{"_ng_task_index": 0, "_ng_ro')  # a writer killed mid-line
    flaky_peer["down"] = False
    again = run_ngrp(*argv, "--resume")
    assert again.returncode == 0, again.stderr
    assert f"repaired torn tails: {failures} (truncated 29 bytes)" in again.stdout
    assert "{'" not in again.stdout and rollouts.exists()


def test_task_labels_name_no_python_none(tmp_path):
    from stats_helpers import write_profile

    from ngrp_lib.artifacts.names import task_label
    from ngrp_lib.errors import FindingsError
    from ngrp_lib.stats.compare import compare_profiles

    assert task_label(10, None) == "task 10" and task_label(3, "x") == 'task 3 agent "x"'
    a = write_profile(tmp_path / "a.jsonl", [[1, 0], [0, 0], [1, 1]])
    b = write_profile(tmp_path / "b.jsonl", [[1, 0], [0, 0]])
    with pytest.raises(FindingsError) as refused:
        compare_profiles(a, b)
    assert "None" not in str(refused.value.message)


def test_materializes_hint_shows_json(tmp_path, run_ngrp):
    (tmp_path / "t.jsonl").write_text('{"responses_create_params": {"input": "hi"}}\n')
    proc = run_ngrp("materialize", "--input", "t.jsonl", "--output", "m.jsonl")
    assert proc.returncode == 2 and '{"name": "..."}' in proc.stderr and "{'" not in proc.stderr


@pytest.mark.parametrize("status", [503, 400])
def test_with_nothing_completed_check_leads_with_the_fix_or_the_resume_not_an_empty_profile(
    tmp_path, flaky_peer, run_ngrp, status
):
    flaky_peer["status"] = status
    first = run_ngrp(*_argv(tmp_path, flaky_peer["url"], "--abort-after-same", "100", "--max-attempts", "1"))
    assert first.returncode == 1, first.stderr
    fix = _check_fixes(run_ngrp, tmp_path)["missing_rollouts"]
    assert "profile" not in fix
    if status == 503:  # another attempt may work, once --max-attempts allows it (given once, the new one)
        assert fix.startswith("ngrp collect --input") and fix.split(" (")[0].count("--max-attempts") == 1
        assert "--resume --max-attempts <more than 1>" in fix
    else:  # the fix of the failure first, then the resume
        assert not fix.startswith("ngrp collect") and ", then ngrp collect --input" in fix


def test_profiling_zero_completed_rollouts_writes_gyms_empty_files_with_a_loud_warning(
    golden, tmp_path, run_ngrp
):
    case = golden / "case_no_rollouts" / "partial_run"
    for name in ("rollouts_materialized_inputs.jsonl", "rollouts.jsonl"):
        (tmp_path / name).write_bytes((case / name).read_bytes())
    inputs, rollouts = "rollouts_materialized_inputs.jsonl", "rollouts.jsonl"
    proc = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts, "--allow-partial")
    assert proc.returncode == 0  # what Gym's profiler does (the golden case), so a Gym pipeline keeps working
    assert "warning: NO ROLLOUT COMPLETED (0 of 12)" in proc.stderr and "EMPTY" in proc.stderr
    assert (tmp_path / "rollouts_reward_profiling.jsonl").read_bytes() == b""


def test_a_refused_run_removes_only_the_folders_and_lock_file_it_created(tmp_path, run_ngrp):
    dead = f"http://127.0.0.1:{free_port()}"
    tasks = _tasks(tmp_path)
    base = ["--input", tasks, "--base-url", dead + "/v1", "--model", "m", "--verifier", "exact"]
    refused = run_ngrp("collect", "--output", "new/deeper/r.jsonl", *base)
    assert refused.returncode == 2 and "no row was sent" in refused.stderr
    assert not (tmp_path / "new").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"responses_create_params": {"input": "hi"}}\n{not json\n')
    malformed = run_ngrp("collect", "--output", "new/r.jsonl", "--input", bad, *base[2:])
    assert malformed.returncode == 3 and not (tmp_path / "new").exists()
    # A folder that was there stays, and so does whatever it held; only the new lock file goes.
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "notes.txt").write_text("mine")
    assert run_ngrp("collect", "--output", "kept/r.jsonl", *base).returncode == 2
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert run_ngrp("collect", "--output", "empty/r.jsonl", *base).returncode == 2
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())
    # An earlier run's lock file is not this run's to remove.
    (tmp_path / "kept" / "r.jsonl.lock").write_text("")
    assert run_ngrp("collect", "--output", "kept/r.jsonl", *base).returncode == 2
    assert (tmp_path / "kept" / "r.jsonl.lock").exists()


def test_a_lock_file_unlinked_by_a_refused_run_is_not_locked_twice(tmp_path, monkeypatch):
    from ngrp_lib.collect import state
    from ngrp_lib.errors import UsageError

    output = tmp_path / "o" / "r.jsonl"
    first = state.CollectorLock(output).acquire()
    stale = os.open(first.path, os.O_RDWR)  # a second collector opened the file before it was unlinked
    first.discard()
    assert not first.path.exists() and not first.path.parent.exists()
    opened = iter([stale])
    real = state.open_lock_file
    monkeypatch.setattr(state, "open_lock_file", lambda path: next(opened, None) or real(path))
    second = state.CollectorLock(output).acquire()  # it locks the stale file first, sees it, locks anew
    assert first.path.exists() and os.fstat(second._fd).st_ino == os.stat(first.path).st_ino
    with pytest.raises(UsageError, match="another collector"):
        state.CollectorLock(output).acquire()
    second.release()


def test_checks_per_agent_lines_name_no_python_none(tmp_path, run_ngrp):
    rows = [
        {
            "_ng_task_index": 0,
            "_ng_rollout_index": 0,
            "agent_ref": {"name": "a"},
            "responses_create_params": {},
        },
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "responses_create_params": {}},
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "r.jsonl").write_text("")
    proc = run_ngrp("check", "--inputs", "m.jsonl", "--rollouts", "r.jsonl")
    assert proc.returncode == 1 and "  agent a: 0/1" in proc.stdout, proc.stdout + proc.stderr
    assert "  agent (no agent_ref): 0/1" in proc.stdout and "None" not in proc.stdout


def test_a_torn_line_and_nothing_completed_gets_no_partial_profile_advice(tmp_path, run_ngrp):
    rows = [{"_ng_task_index": 0, "_ng_rollout_index": i, "responses_create_params": {}} for i in range(2)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "r.jsonl").write_text('{"_ng_task_index": 0, "_ng_ro')
    proc = run_ngrp("check", "--json", "--inputs", "m.jsonl", "--rollouts", "r.jsonl")
    fixes = {f["code"]: f["fix"] for f in json.loads(proc.stdout)["findings"]}
    assert "profile" not in fixes["rollouts_torn_tail"] + fixes["missing_rollouts"]
    assert "--resume" in fixes["rollouts_torn_tail"]


def test_a_gym_runs_command_names_its_gym_url_and_a_materialized_file():
    from ngrp_lib.artifacts.resume import resume_command

    manifest = {
        "materialized": {"path": "m.jsonl"},
        "rollouts": {"path": "o/r.jsonl"},
        "options": {
            "concurrency": 8,
            "timeout": 300.0,
            "skip_preflight": True,
            "api_key_env": "OPENAI_API_KEY",
        },
        "identity": {"shard": None, "materialize": None, "model": "", "api": "gym"},
        "servers": [{"url": "http://127.0.0.1:11000/", "gym": True}],
    }
    assert resume_command(manifest) == (
        "ngrp collect --materialized m.jsonl --output o/r.jsonl --gym-url http://127.0.0.1:11000/"
        " --concurrency 8 --timeout 300 --skip-preflight --resume"
    )
    assert resume_command({"identity": {}}) is None  # not a collect manifest: no command, no crash


def test_ctrl_c_during_the_pre_flight_check_sends_nothing_and_leaves_nothing(tmp_path):
    import asyncio

    from aiohttp import web

    state = {"asked": 0, "posts": 0, "release": False}

    async def models(request):
        state["asked"] += 1
        for _ in range(1200):  # hang until the test lets go
            if state["release"]:
                break
            await asyncio.sleep(0.05)
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def chat(request):
        state["posts"] += 1
        return web.json_response(_chat("1"))

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    with serve_app(app) as url:
        argv = [*_argv(tmp_path, url), "--timeout", "60"]
        proc = subprocess.Popen([*ENTRY, *argv], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while not state["asked"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state["asked"] == 1  # the signal lands while the pre-flight check waits for /v1/models
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        state["release"] = True
        time.sleep(0.2)
    assert proc.returncode == 130, err
    assert state["posts"] == 0 and not (tmp_path / "out").exists() and "Traceback" not in err


def test_a_lock_path_replaced_on_every_try_gives_up_and_leaves_no_open_file(tmp_path, monkeypatch):
    """The re-lock loop is bounded: when the path never names the file just locked, acquire stops after
    its tries with a usage error, every descriptor it opened closed again."""
    import os

    from ngrp_lib.collect import state
    from ngrp_lib.errors import UsageError

    opened = []
    real_open = state.open_lock_file

    def tracking_open(path):
        opened.append(path)
        return real_open(path)

    monkeypatch.setattr(state, "open_lock_file", tracking_open)
    monkeypatch.setattr(state, "_names", lambda path, fd: False)
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(UsageError, match="replaced again and again") as err:
        state.CollectorLock(tmp_path / "r.jsonl").acquire()
    assert err.value.hint == "retry" and len(opened) == 100
    assert set(os.listdir("/proc/self/fd")) <= before  # closed, all of them
