"""`collect` against misbehaving HTTP peers no real server shows (issue 16): a peer that echoes the request
headers (the API key must reach no file and no log line), replies too large to hold, a reply with a null
message, a redirect to another host, an error reply that never ends, a reply without token counts. A
canned-reply aiohttp peer only."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from http_helpers import chat_reply, serve_app, sum_tasks

KEY = "sk-echo-5ecr3t-k3y-0123456789"


def _tasks(tmp_path, n=2):
    return sum_tasks(tmp_path, n)


_chat = chat_reply


@pytest.fixture
def peer():
    """One aiohttp app; `state["mode"]` picks its misbehaviour, `state["posts"]` counts the POSTs it got."""
    from aiohttp import web

    state = {"mode": "echo200", "posts": 0, "seen_auth": []}

    async def handle(request):
        state["posts"] += 1
        await request.read()
        headers = dict(request.headers)
        state["seen_auth"].append(headers.get("Authorization"))
        mode = state["mode"]
        if mode == "echo200":
            padding = "z" * 1500  # longer than the stored bound of an extracted answer
            return web.json_response(_chat(f"4. Your request headers were {json.dumps(headers)} {padding}"))
        if mode in ("echo500", "echo400"):
            return web.Response(status=int(mode[-3:]), text=f"server error; request headers: {headers}")
        if mode == "no_usage":  # a server that gives no token counts (vLLM always does)
            reply = _chat("4")
            if state["posts"] % 2:
                del reply["usage"]
            else:
                reply["usage"] = {"prompt_tokens": 3, "completion_tokens": None}
            return web.json_response(reply)
        if mode == "busy503":
            return web.Response(status=503, text="overloaded")
        if mode == "null_message":
            return web.json_response({"choices": [{"message": None}]})
        if mode == "big200":
            return web.json_response(_chat("x" * (2 * 2**20)))
        if mode == "big200_chunked":
            reply = web.StreamResponse(status=200, headers={"content-type": "application/json"})
            await reply.prepare(request)
            await reply.write(b'{"choices": [{"message": {"content": "')
            for _ in range(64):
                await reply.write(b"y" * 2**15)
            await reply.write(b'"}}]}')
            return reply
        if mode == "slow500":  # an error page whose end never comes
            reply = web.StreamResponse(status=500)
            await reply.prepare(request)
            await reply.write(b"e" * 2**17)
            await asyncio.sleep(30)
            return reply
        if mode == "redirect":
            raise web.HTTPTemporaryRedirect(state["other"] + "/v1/chat/completions")
        if mode == "gym_odd_shapes":  # a /run reply whose response and usage are not objects
            odd = [{"response": "text", "reward": 1.0}, {"response": {"usage": [1, 2]}, "reward": "high"}]
            return web.json_response(odd[state["posts"] % 2])
        if mode == "gym_echo":
            response = {"output": [], "usage": {"output_tokens": 1}, "status": "completed", "echo": headers}
            return web.json_response({"response": response, "reward": 1.0})
        raise AssertionError(mode)

    async def models(request):  # the pre-flight check's GET /v1/models: a 500 that echoes the headers
        return web.Response(status=500, text=f"server error; request headers: {dict(request.headers)}")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    app.router.add_post("/run", handle)
    app.router.add_get("/v1/models", models)
    with serve_app(app) as url:
        state["url"] = url
        yield state


@pytest.fixture
def other_peer():
    """The host a redirect points at: it only counts what reaches it."""
    from aiohttp import web

    state = {"posts": 0}

    async def handle(request):
        state["posts"] += 1
        await request.read()
        return web.json_response(_chat("4"))

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    with serve_app(app) as url:
        state["url"] = url
        yield state


def _collect(run_ngrp, tmp_path, peer, *extra, env=None):
    _tasks(tmp_path)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "out" / "r.jsonl",
            "--base-url", peer["url"] + "/v1", "--model", "m", "--verifier", "exact", "--max-retries", "0",
            "--max-attempts", "1", "--json", "--skip-preflight", *extra]  # fmt: skip
    return run_ngrp(*argv, env={**os.environ, "OPENAI_API_KEY": KEY, **(env or {})})


def _written(tmp_path, proc) -> str:
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    return proc.stdout + proc.stderr + "".join(p.read_text(errors="replace") for p in files)


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_an_api_key_echoed_to_the_pre_flight_check_is_masked_in_its_refusal(run_ngrp, tmp_path, peer):
    _tasks(tmp_path)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "out" / "r.jsonl",
            "--base-url", peer["url"] + "/v1", "--model", "m", "--verifier", "exact", "--json"]  # fmt: skip
    proc = run_ngrp(*argv, env={**os.environ, "OPENAI_API_KEY": KEY})
    assert proc.returncode == 2 and "/v1/models answered HTTP 500" in proc.stderr, proc.stderr
    assert "Bearer ***" in proc.stderr and KEY not in proc.stdout + proc.stderr
    assert peer["posts"] == 0 and not (tmp_path / "out").exists()  # no row sent; the folder it made is gone


@pytest.mark.parametrize("mode", ["echo200", "echo500", "echo400"])
def test_an_echoed_api_key_reaches_no_file_and_no_output(run_ngrp, tmp_path, peer, mode):
    peer["mode"] = mode
    proc = _collect(run_ngrp, tmp_path, peer)
    assert peer["seen_auth"] and all(auth == f"Bearer {KEY}" for auth in peer["seen_auth"])  # it was sent
    assert "Traceback" not in proc.stderr, proc.stderr
    assert KEY not in _written(tmp_path, proc)
    stored = (tmp_path / "out" / ("r.jsonl" if mode == "echo200" else "r_failures.jsonl")).read_text()
    assert "Bearer ***" in stored  # the echo was stored, with the key masked
    if mode != "echo200":
        failures = _rows(tmp_path / "out" / "r_failures.jsonl")
        assert {f["_ng_failure_http_status"] for f in failures} == {int(mode[-3:])}


def test_an_echoed_key_in_a_gym_run_reply_is_masked(run_ngrp, tmp_path, peer):
    peer["mode"] = "gym_echo"
    _tasks(tmp_path)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "out" / "r.jsonl",
            "--agent", "a", "--gym-url", peer["url"] + "/run", "--max-retries", "0", "--json"]  # fmt: skip
    proc = run_ngrp(*argv, env={**os.environ, "OPENAI_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    assert KEY not in _written(tmp_path, proc)
    assert all(
        row["response"]["echo"]["Authorization"] == "Bearer ***"
        for row in _rows(tmp_path / "out" / "r.jsonl")
    )


@pytest.mark.parametrize("mode", ["big200", "big200_chunked"])
def test_a_reply_over_the_size_limit_is_a_failure_class(run_ngrp, tmp_path, peer, mode):
    peer["mode"] = mode
    proc = _collect(run_ngrp, tmp_path, peer, "--max-response-mb", "1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failures_by_class"] == {"response_too_large": 2}
    failures = _rows(tmp_path / "out" / "r_failures.jsonl")
    assert all("over the limit of 1048576 bytes" in f["_ng_failure_message"] for f in failures)
    assert (tmp_path / "out" / "r.jsonl").read_text() == ""


def test_an_error_reply_is_read_only_up_to_its_prefix(run_ngrp, tmp_path, peer):
    """The error page's end never comes: reading it whole would wait for the 20 s timeout."""
    peer["mode"] = "slow500"
    started = time.monotonic()
    proc = _collect(run_ngrp, tmp_path, peer, "--timeout", "20", "--concurrency", "2")
    assert time.monotonic() - started < 15, "the error reply was read to its end"
    failures = _rows(tmp_path / "out" / "r_failures.jsonl")
    assert [f["_ng_failure_http_status"] for f in failures] == [500, 500], proc.stderr
    assert all(len(f["_ng_failure_response_body"]) == 2000 for f in failures)


def test_a_null_message_is_a_server_failure_not_an_empty_answer(run_ngrp, tmp_path, peer):
    peer["mode"] = "null_message"
    proc = _collect(run_ngrp, tmp_path, peer)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (tmp_path / "out" / "r.jsonl").read_text() == ""
    failures = _rows(tmp_path / "out" / "r_failures.jsonl")
    assert [f["_ng_failure_class"] for f in failures] == ["agent_run_error"] * 2
    assert all("no message object" in f["_ng_failure_message"] for f in failures)


def test_a_redirect_is_refused_unless_asked(run_ngrp, tmp_path, peer, other_peer):
    peer["mode"], peer["other"] = "redirect", other_peer["url"]
    proc = _collect(run_ngrp, tmp_path, peer)
    assert proc.returncode == 1, proc.stderr
    assert other_peer["posts"] == 0  # the prompt never went to the other host
    assert json.loads(proc.stdout)["failures_by_class"] == {"redirect_refused": 2}
    failures = _rows(tmp_path / "out" / "r_failures.jsonl")
    assert all("--follow-redirects" in f["_ng_failure_message"] for f in failures)
    proc = _collect(run_ngrp, tmp_path, peer, "--follow-redirects", "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert other_peer["posts"] == 2


def test_a_long_exact_answer_is_stored_bounded(run_ngrp, tmp_path, peer):
    """verify_exact's extracted answer is the whole reply: stored whole in `response`, bounded here."""
    peer["mode"] = "echo200"
    proc = _collect(run_ngrp, tmp_path, peer, env={"OPENAI_API_KEY": ""})  # no key, nothing masked
    rows = _rows(tmp_path / "out" / "r.jsonl")
    assert rows, proc.stderr
    for row in rows:
        text = row["response"]["output"][0]["content"][0]["text"]
        assert len(text) > 1000 and len(row["extracted_answer"]) < 1100
        assert row["extracted_answer"].startswith(text[:1000]) and "sha256" in row["extracted_answer"]


def test_a_gym_reply_of_odd_shapes_is_stored_without_a_crash(run_ngrp, tmp_path, peer):
    """Gym mode stores what /run answers, as Gym does; a response that is text, or usage that is a list,
    must not crash the collector's bookkeeping."""
    peer["mode"] = "gym_odd_shapes"
    _tasks(tmp_path)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "out" / "r.jsonl",
            "--agent", "a", "--gym-url", peer["url"] + "/run", "--max-retries", "0", "--json"]  # fmt: skip
    proc = run_ngrp(*argv)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert len(_rows(tmp_path / "out" / "r.jsonl")) == 2


def test_token_counts_the_server_did_not_give_are_stored_as_missing_not_as_zero(run_ngrp, tmp_path, peer):
    """The rollout holds 0 where Gym's profiler needs a number, and names the counts the server left out;
    `ngrp health` then says the counts are missing, not that the model generated nothing."""
    peer["mode"] = "no_usage"
    proc = _collect(run_ngrp, tmp_path, peer)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out" / "r.jsonl"
    rows = sorted(_rows(out), key=lambda r: r["_ng_task_index"])
    assert len(rows) == 2
    for row in rows:
        assert row["response"]["usage"]["output_tokens"] == 0
    assert sorted(row["_ngrp_usage_missing"] for row in rows) == [
        ["completion_tokens"],
        ["prompt_tokens", "completion_tokens"],
    ]
    inputs = tmp_path / "out" / "r_materialized_inputs.jsonl"
    assert run_ngrp("validate", out).returncode == 0
    health = run_ngrp("health", "--inputs", inputs, "--rollouts", out, "--json")
    assert health.returncode == 1, health.stderr
    verdicts = _rows(tmp_path / "out" / "r_rollout_verdicts.jsonl")
    checks = sorted(sorted(f["check"] for f in v["findings"]) for v in verdicts)
    assert checks == [["model_call_missing_token_counts"]] * 2  # not model_call_zero_completion_tokens
    checked = json.loads(run_ngrp("check", "--inputs", inputs, "--rollouts", out, "--json").stdout)
    assert checked["counts"]["zero_completion_tokens"] == 0  # check reads the counts as health does


@pytest.mark.parametrize(
    ("mode", "option"), [("big200", "--max-response-mb"), ("redirect", "--follow-redirects")]
)
def test_a_failure_every_attempt_repeats_stops_early_and_names_its_fix(
    run_ngrp, tmp_path, peer, other_peer, mode, option
):
    """Too large a reply, or a redirect not followed, repeats on every attempt: the run stops early, the
    summary and `check` name the option that cures it, and neither says a resume would help."""
    peer["mode"], peer["other"] = mode, other_peer["url"]
    _tasks(tmp_path, n=8)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "out" / "r.jsonl",
            "--base-url", peer["url"] + "/v1", "--model", "m", "--verifier", "exact", "--max-retries", "2",
            "--max-response-mb", "1", "--abort-after-same", "3", "--concurrency", "1", "--json",
            "--skip-preflight"]  # fmt: skip
    proc = run_ngrp(*argv)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["stopped_early"] and peer["posts"] == 3  # three tasks, each tried once: never retried
    assert summary["resume_helps"] is False and summary["next_step"].startswith("fix: "), summary
    assert option in summary["next_step"] and "--concurrency" not in summary["next_step"]
    top = summary["top_failures"][0]
    assert top["retry_helps"] is False and option in top["fix"] and "overloaded" not in top["fix"]
    out = tmp_path / "out"
    check = run_ngrp("check", "--inputs", out / "r_materialized_inputs.jsonl", "--rollouts", out / "r.jsonl",
                     "--json")  # fmt: skip
    assert check.returncode == 1, check.stderr
    fixes = [f["fix"] or "" for f in json.loads(check.stdout)["findings"]]
    assert any(option in fix for fix in fixes) and not any("--max-attempts" in fix for fix in fixes), fixes


def test_a_gym_url_without_a_run_route_gets_a_gym_fix(run_ngrp, tmp_path, peer):
    _tasks(tmp_path)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "out" / "r.jsonl",
            "--agent", "a", "--gym-url", peer["url"] + "/nowhere/run", "--max-retries", "0",
            "--skip-preflight", "--json"]  # fmt: skip
    proc = run_ngrp(*argv)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failures_by_class"] == {"agent_run_error": 2}
    top = summary["top_failures"][0]
    assert top["http_status"] == 404 and "--gym-url" in top["fix"] and "/v1" not in top["fix"], top
    out = tmp_path / "out"
    check = run_ngrp("check", "--inputs", out / "r_materialized_inputs.jsonl", "--rollouts", out / "r.jsonl",
                     "--json")  # fmt: skip
    fixes = [f["fix"] or "" for f in json.loads(check.stdout)["findings"]]
    assert any("--gym-url" in fix for fix in fixes) and not any("/v1" in fix for fix in fixes), fixes


def test_keys_that_use_up_max_attempts_in_this_run_get_the_max_attempts_advice(run_ngrp, tmp_path, peer):
    """A 503 is worth retrying, but not by a plain --resume once the keys reached --max-attempts."""
    from ngrp_lib.artifacts import schemas

    peer["mode"] = "busy503"
    runs = [_collect(run_ngrp, tmp_path, peer, "--max-attempts", "2", *(("--resume",) if i else ()))
            for i in range(3)]  # fmt: skip
    first, second, third = (json.loads(p.stdout) for p in runs)
    assert all(schemas.validator("collect_result").is_valid(r) for r in (first, second, third))
    assert (first["failed"], first["exhausted"], first["resume_helps"]) == (2, 0, True)
    assert "--max-attempts N" not in first["next_step"]
    # the second run's attempts were the keys' last: say so now, not one useless run later
    assert (second["failed"], second["exhausted"], second["resume_helps"]) == (2, 2, False)
    assert second["next_step"] == (
        "incomplete: 2 keys reached --max-attempts 2;"
        " rerun the same command with --resume --max-attempts N (N > 2) to retry them"
    )
    assert (third["attempted"], third["exhausted"], third["next_step"]) == (0, 2, second["next_step"])
    assert peer["posts"] == 4


def test_a_key_too_short_to_mask_is_warned_about_once(run_ngrp, tmp_path, peer):
    """A key under the masking length leaves the run's redactor empty; the runner must still use that one
    redactor (an empty one is falsy) rather than build another and warn a second time."""
    peer["mode"] = "echo200"
    proc = _collect(run_ngrp, tmp_path, peer, env={"OPENAI_API_KEY": "ab"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("$OPENAI_API_KEY is shorter than") == 1, proc.stderr


def test_a_stop_reason_that_quotes_an_echoed_key_reaches_the_manifest_masked(run_ngrp, tmp_path, peer):
    """The reason collect stopped (the failure's message) is stored in the run manifest's runs[] for
    health to quote: the server's echo of the key in it is masked, as in the failures file."""
    peer["mode"] = "echo400"  # the same refusal of every row: --abort-after-same stops the run
    proc = _collect(run_ngrp, tmp_path, peer, "--abort-after-same", "2")
    from ngrp_lib.artifacts.names import manifest_path_for

    manifest = json.loads(manifest_path_for(tmp_path / "out" / "r.jsonl").read_text())
    reason = manifest["runs"][-1]["stopped_early"]
    assert reason and "Bearer ***" in reason, (reason, proc.stderr)
    assert KEY not in _written(tmp_path, proc)
