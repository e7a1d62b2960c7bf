"""The rules behind the first run (issue 19), without a model server: what a failure says and whether
retrying can help, the early-stop rules, the pre-flight verdict on a model list, and the endpoint rule
(probed against closed local ports: real connection refusals)."""

from __future__ import annotations

import asyncio
import json

import pytest
from vllm_fixture import free_port

from ngrp_lib.artifacts.failures import Failure, FailureDigest, server_message
from ngrp_lib.collect import gym_backend
from ngrp_lib.collect.gym_run import GymTargets, RunTarget
from ngrp_lib.collect.preflight import ServerCheck, _judge_models, check_endpoints, needed
from ngrp_lib.collect.routing import Endpoint
from ngrp_lib.collect.run import EarlyStop
from ngrp_lib.errors import UsageError

CONTEXT_400 = (
    "This model's maximum context length is 2048 tokens. However, your prompt contains at least 2049 input"
    " tokens, which exceeds this limit even without any output tokens."
)


@pytest.mark.parametrize(
    ("klass", "status", "message", "kind", "retry_helps", "scope", "fix_says"),
    [
        ("agent_request_failed", None, "Cannot connect", "ClientConnectorError", True, None, "not answer"),
        ("timeout", None, "no answer within 1s", "TimeoutError", True, None, "--timeout"),
        ("agent_request_failed", 503, "HTTP 503", "HTTPError", True, None, "overloaded"),
        ("agent_run_error", 500, "HTTP 500", "HTTPError", True, None, "read its log"),
        ("agent_request_failed", 429, "HTTP 429", "HTTPError", True, None, "--concurrency"),
        ("agent_run_error", 401, "HTTP 401: Unauthorized", "HTTPError", False, "server", "$OPENAI_API_KEY"),
        ("agent_run_error", 403, "HTTP 403", "HTTPError", False, "server", "--api-key-env"),
        ("agent_run_error", 404, "HTTP 404: The model `x` does not exist.", "HTTPError", False, "server",
         "--model"),
        ("agent_run_error", 404, "HTTP 404: Not Found", "HTTPError", False, "server", "ending in /v1"),
        ("agent_run_error", 400, f"HTTP 400: {CONTEXT_400}", "HTTPError", False, "row", "--max-model-len"),
        ("agent_run_error", 400, "max_tokens=4000 cannot be greater than max_model_len=2048", "HTTPError",
         False, "row", "--max-model-len"),
        ("agent_run_error", 422, "HTTP 422: body.input: Field required", "HTTPError", False, "row", "rows"),
        ("agent_run_error", None, "unusable reply: no choices", "ConversionError", False, "row", "--api"),
        ("verify_failed", None, "row has no 'expected_answer'", "VerifyError", False, "row", "verifier"),
        ("verify_failed", None, "Cannot connect to host", "ClientConnectorError", True, None, "--resume"),
        ("timeout_exceeded", None, "the agent ran out of time", "", True, None, "--resume"),
    ],
)  # fmt: skip
def test_what_a_failure_says(klass, status, message, kind, retry_helps, scope, fix_says):
    failure = Failure(klass, status, message, kind)
    assert (failure.retry_helps, failure.scope) == (retry_helps, scope)
    assert fix_says in failure.fix()


def test_the_servers_own_message_is_found_in_every_common_shape():
    assert server_message('{"error": {"message": "The model `x` does not exist.", "code": 404}}') == (
        "The model `x` does not exist."
    )
    assert server_message('{"object": "error", "message": "old vLLM"}') == "old vLLM"
    assert server_message('{"error": "Unauthorized"}') == "Unauthorized"
    assert server_message('{"detail": [{"loc": ["body", "input"], "msg": "Field required"}]}') == (
        "body.input: Field required"
    )
    assert server_message("upstream  timed\nout") == "upstream timed out"
    assert server_message("<html><body>502</body></html>") is None
    assert server_message("") is None and server_message('{"ok": true}') is None
    assert len(server_message(json.dumps({"error": {"message": "x" * 5000}}))) == 500


def test_a_sidecar_row_prefers_the_servers_message_and_groups_by_problem():
    row = {"_ng_failure_class": "agent_run_error", "_ng_failure_http_status": 400,
           "_ng_failure_message": "400, message='Bad Request', url='http://h:1/v1/chat/completions'",
           "_ng_failure_response_body": json.dumps({"error": {"message": CONTEXT_400}})}  # fmt: skip
    failure = Failure.from_fields(row)  # as Gym writes it: its message does not hold the server's
    assert failure.message == f"HTTP 400: {CONTEXT_400}" and failure.context_length
    ours = Failure.from_fields({**row, "_ng_failure_message": f"HTTP 400 from http://h:1/v1: {CONTEXT_400}"})
    assert ours.message.startswith("HTTP 400 from http://h:1/v1: This model's")
    other_row = Failure("agent_run_error", 400, failure.message.replace("2049", "3172"))
    assert other_row.signature == failure.signature  # the same problem on another task's prompt
    assert Failure("agent_run_error", 401, failure.message).signature != failure.signature
    assert Failure.from_fields({}).failure_class == "(no class)"


def test_digest_ranks_failures_keeps_one_example_and_stays_bounded():
    digest = FailureDigest(limit=3)
    for i in range(5):
        digest.add(Failure("agent_run_error", 401, "HTTP 401"), (i, 0), still_missing=i != 0)
    digest.add(Failure("timeout", None, "no answer within 2s"), (9, 1))
    for i in range(4):
        digest.add(Failure("verify_failed", None, f"boom in rule r{i}x"), (i, 2))  # r0x..r3x: one signature
    digest.add(Failure("agent_run_error", 500, "HTTP 500"), (7, 7))  # a fourth signature: counted as other
    top = digest.top(2, api_key_env="MY_KEY")
    assert [(t.count, t.still_missing, t.example_key, t.http_status) for t in top] == [
        (5, 4, [0, 0], 401),
        (4, 4, [0, 2], None),
    ]
    assert "$MY_KEY" in top[0].fix and digest.other == 1 and len(digest.entries) == 3


def _stop(rows: list[tuple[Failure | None, int]], same_after: int = 3, no_reply_after: int = 4) -> EarlyStop:
    stop = EarlyStop(no_reply_after, same_after)
    for failure, task in rows:
        if failure is None:
            stop.success()
        elif stop.failure(failure, task):
            break
    return stop


KEY_401 = Failure("agent_run_error", 401, "HTTP 401: Unauthorized")
LONG = Failure("agent_run_error", 400, f"HTTP 400: {CONTEXT_400}")
REFUSED = Failure("agent_request_failed", None, "connection refused")


def test_early_stop_rules():
    assert (
        "3 rows in a row failed the same way: HTTP 401"
        in _stop([(KEY_401, 0), (KEY_401, 0), (KEY_401, 0)]).reason
    )
    # a row-specific failure counts tasks: all repeats of one task fail together and do not stop a run
    assert _stop([(LONG, 1)] * 8).reason is None
    stop = _stop([(LONG, 1), (LONG, 1), (LONG, 2), (LONG, 3)])
    assert "4 rows of 3 different tasks" in stop.reason and stop.cause is LONG
    assert _stop([(LONG, 1), (LONG, 2), (None, 5), (LONG, 3), (LONG, 4)]).reason is None  # a success resets
    assert _stop([(KEY_401, 0), (KEY_401, 0), (LONG, 1), (KEY_401, 0)]).reason is None  # so does another one
    stop = _stop([(REFUSED, t) for t in range(4)])
    assert "4 attempts in a row got no reply" in stop.reason and stop.cause.retry_helps
    stop = EarlyStop(2, 3)
    assert (
        stop.failure(REFUSED, 0, replied=True) is None and stop.no_reply_streak == 0
    )  # an agent's own class


def test_a_model_list_is_judged_like_vllm_answers_it():
    body = json.dumps({"object": "list", "data": [{"id": "tiny", "max_model_len": 2048}, {"id": "lora-a"}]})
    ok = _judge_models("http://h:1/v1", "tiny", body)
    assert ok.ok and ok.models == ("tiny", "lora-a") and ok.max_model_len == 2048
    assert _judge_models("http://h:1/v1", "lora-a", body).max_model_len is None  # not reported: no limit
    wrong = _judge_models("http://h:1/v1", "wrong-name", body)
    assert wrong.line() == (
        "model 'wrong-name' is not served at http://h:1/v1; it serves: tiny, lora-a;"
        " pass one of those as --model"
    )
    assert "--skip-preflight" in _judge_models("http://h:1/v1", "tiny", "[]").line()
    assert ServerCheck("u").to_json()["ok"] and not ServerCheck("u", problem="p").ok


def test_half_of_the_endpoints_rounded_up_must_pass():
    assert [needed(n) for n in (1, 2, 3, 4, 5, 8)] == [1, 1, 2, 2, 3, 4]


def _check(endpoints, log=None):
    import aiohttp

    async def go():
        async with aiohttp.ClientSession() as session:
            return await check_endpoints(endpoints, session, api_key=None, api_key_env="OPENAI_API_KEY",
                                         timeout=5, log=log or (lambda text: None))  # fmt: skip

    return asyncio.run(go())


def test_dead_endpoints_are_named_and_the_run_refused_when_too_few_pass():
    dead = [Endpoint(f"http://127.0.0.1:{free_port()}/v1", "tiny") for _ in range(3)]
    with pytest.raises(UsageError) as one:
        _check(dead[:1])
    assert (
        one.value.message
        == f"connection refused at {dead[0].base_url}: is the server running? `ngrp serve status`"
    )
    assert "no row was sent" in one.value.hint and "--skip-preflight" in one.value.hint
    with pytest.raises(
        UsageError, match=r"3 of 3 servers failed the pre-flight check \(at least 2 must pass\)"
    ) as all_:
        _check(dead)
    assert all(e.base_url in all_.value.message for e in dead)


def test_gym_preflight_names_a_dead_environment_server_the_head_lists():
    import aiohttp

    head = f"http://127.0.0.1:{free_port()}"  # it answered once (the targets), and is gone now
    env = RunTarget(f"http://127.0.0.1:{free_port()}/run", "string_match_environment_server", "legacy_agent")
    targets = GymTargets(by_agent={"string_match_simple_agent": env}, default=env, head_url=head)

    async def go():
        async with aiohttp.ClientSession() as session:
            return await gym_backend.preflight(session, head, 5, resolve=lambda url: targets)

    with pytest.raises(UsageError) as info:
        asyncio.run(go())
    origin = env.url.removesuffix("run")
    assert info.value.message.splitlines() == [
        f"connection refused at {origin} (string_match_environment_server, listed by the Gym head server"
        f" {head}): is the Gym stack running? `gym env status`",
        f"connection refused at {head}/health (the Gym head server): is the Gym stack running, and ready?"
        " `gym env status`",
    ]


def test_blocking_probes_for_callers_without_an_event_loop_name_the_server_without_credentials():
    from ngrp_lib.collect.preflight import blocking, check_server_blocking, check_verify_url

    port = free_port()
    check = blocking(check_verify_url, f"http://admin:t0ps3cret@127.0.0.1:{port}/verify", timeout=5)
    assert check.line() == (
        f"connection refused at http://127.0.0.1:{port}/ (the --verify-url server):"
        " is the resources server running? `gym env status`"
    )
    assert "t0ps3cret" not in json.dumps(check.to_json())
    dead = check_server_blocking(f"http://127.0.0.1:{port}/v1", model="tiny", timeout=5)
    assert (
        not dead.ok
        and dead.status is None
        and dead.problem == f"connection refused at http://127.0.0.1:{port}/v1"
    )
