"""The rules behind the first run (issue 19), without a model server: what a failure says and whether
retrying can help, the early-stop rules, the pre-flight verdict on a model list, and the endpoint rule
(probed against closed local ports: real connection refusals)."""

from __future__ import annotations

import asyncio
import json

import pytest
from vllm_fixture import free_port

from ngrp_lib.artifacts.failures import Failure, FailureDigest, server_message
from ngrp_lib.collect import gym_run
from ngrp_lib.collect.gym_targets import GymTargets, RunTarget
from ngrp_lib.collect.preflight import ServerCheck, _judge_models, check_endpoints, needed
from ngrp_lib.collect.routing import Endpoint
from ngrp_lib.collect.run import EarlyStop
from ngrp_lib.errors import UsageError

CONTEXT_400 = (
    "This model's maximum context length is 2048 tokens. However, your prompt contains at least 2049 input"
    " tokens, which exceeds this limit even without any output tokens."
)


# Every kind of failure (failures.Failure.kind), as collect (direct and Gym mode), reverify and Gym's own
# collector write it: whether another attempt can help, how far it reaches, and what each mode's fix says.
# (class, status, message, _ng_failure_type, kind, retry helps, scope, {mode: words its fix must hold})
FAILURES = [
    ("agent_request_failed", None, "Cannot connect", "ClientConnectorError", "no_reply", True, None,
     {"direct": "ngrp serve status", "gym": "gym env status"}),
    ("timeout", None, "no answer within 1s", "TimeoutError", "no_reply", True, None, {"direct": "--timeout"}),
    ("agent_request_failed", None, "every server is out", "NoHealthyServer", "no_reply", True, None,
     {"direct": "--resume"}),
    ("agent_request_failed", 503, "HTTP 503", "HTTPError", "overloaded", True, None,
     {"direct": "read its log", "gym": "Gym servers' logs"}),
    ("agent_run_error", 500, "HTTP 500", "HTTPError", "overloaded", True, None, {"direct": "read its log"}),
    ("agent_request_failed", 429, "HTTP 429", "HTTPError", "overloaded", True, None,
     {"direct": "--concurrency"}),
    ("agent_run_error", 408, "HTTP 408", "HTTPError", "overloaded", True, None, {"direct": "--resume"}),
    ("agent_run_error", 401, "HTTP 401: Unauthorized", "HTTPError", "key", False, "server",
     {"direct": "$OPENAI_API_KEY", "gym": "the Gym server expects"}),
    ("agent_run_error", 403, "HTTP 403", "HTTPError", "key", False, "server", {"direct": "--api-key-env"}),
    ("agent_run_error", 404, "HTTP 404: The model `x` does not exist.", "HTTPError", "model", False, "server",
     {"direct": "--model"}),
    ("agent_run_error", 404, "HTTP 404: Not Found", "HTTPError", "route", False, "server",
     {"direct": "--base-url ending in /v1", "gym": "--gym-url the head server"}),
    ("agent_run_error", 405, "HTTP 405: Method Not Allowed", "HTTPError", "route", False, "server",
     {"direct": "--base-url"}),
    ("agent_run_error", 501, "HTTP 501", "HTTPError", "route", False, "server", {"gym": "--gym-url"}),
    ("agent_request_failed", None, "URL is invalid", "InvalidUrlClientError", "route", False, "server",
     {"direct": "no such route"}),
    ("redirect_refused", 302, "HTTP 302 redirects to http://x/; not followed (pass --follow-redirects)",
     "RedirectRefused", "redirect", False, "server",
     {"direct": "--follow-redirects", "gym": "as --gym-url, or pass --follow-redirects"}),
    ("agent_request_failed", None, "too many redirects", "TooManyRedirects", "redirect", False, "server",
     {"direct": "as --base-url"}),
    ("agent_run_error", 204, "HTTP 204 from http://h/v1/chat/completions", "HTTPError", "odd_status", False,
     "server", {"direct": "--base-url", "gym": "--gym-url"}),
    ("response_too_large", 200, "reply of 2097152 bytes is over the limit (raise --max-response-mb)",
     "ResponseTooLarge", "too_large", False, "row",
     {"direct": "--max-response-mb", "gym": "--max-response-mb"}),
    ("response_too_large", None, "the row is 9 bytes, more than the line limit (8)", "LineTooLong",
     "too_large", False, "row", {"direct": "NGRP_MAX_LINE_BYTES"}),
    ("agent_run_error", 400, f"HTTP 400: {CONTEXT_400}", "HTTPError", "context_length", False, "row",
     {"direct": "--max-model-len", "gym": "max_model_len in the Gym config"}),
    ("agent_run_error", 400, "max_tokens=4000 cannot be greater than max_model_len=2048", "HTTPError",
     "context_length", False, "row", {"direct": "--max-model-len"}),
    ("agent_run_error", 422, "HTTP 422: body.input: Field required", "HTTPError", "invalid", False, "row",
     {"direct": "fix the rows", "gym": "the Gym server refused"}),
    ("agent_run_error", 413, "HTTP 413", "HTTPError", "invalid", False, "row", {"direct": "fix the rows"}),
    ("agent_run_error", None, "unusable reply: no choices", "ConversionError", "shape", False, "row",
     {"direct": "--api", "gym": "--gym-url names"}),
    ("agent_run_error", None, "/run answered non-JSON", "JSONDecodeError", "shape", False, "row",
     {"gym": "/run answered something"}),
    ("verify_failed", None, "row has no 'expected_answer'", "VerifyError", "verifier", False, "row",
     {"direct": "the verifier failed", "reverify": "reverify command with --resume"}),
    ("verify_failed", None, "result is not JSON: Type is not JSON serializable", "TypeError", "verifier",
     False, "row", {"direct": "the verifier failed"}),
    ("verify_failed", 422, "/verify: HTTP 422", "HTTPError", "verifier", False, "row",
     {"reverify": "the verifier failed"}),
    ("verify_failed", None, "Cannot connect to host", "ClientConnectorError", "verifier_transient", True,
     None,
     {"direct": "--verify-url did not answer", "reverify": "--verify-url did not answer"}),
    ("verify_failed", 503, "/verify: HTTP 503", "HTTPError", "verifier_transient", True, None,
     {"reverify": "overloaded"}),
    ("verify_failed", 404, "/verify: HTTP 404: model not found", "HTTPError", "route", False, "server",
     {"direct": "--verify-url the verifier's /verify URL", "reverify": "--verify-url the verifier's"}),
    ("verify_failed", 401, "/verify: HTTP 401", "HTTPError", "key", False, "server",
     {"reverify": "sends it no key"}),
    ("verify_failed", 307, "/verify: HTTP 307 redirects to http://x/verify", "RedirectRefused", "redirect",
     False, "server", {"direct": "--follow-redirects", "reverify": "give that URL as --verify-url"}),
    ("verify_failed", 200, "/verify: reply of 9 bytes is over the limit", "ResponseTooLarge", "too_large",
     False, "row", {"direct": "--max-response-mb", "reverify": "16 MiB"}),
    ("verify_failed", 204, "/verify: HTTP 204", "HTTPError", "odd_status", False, "server",
     {"reverify": "neither a reply nor an error"}),
    ("no_response", None, "the row has no response object to re-score", "MissingResponse", "no_response",
     False, "row", {"reverify": "collect those keys again"}),
    ("timeout_exceeded", None, "the agent ran out of time", "", "agent_class", True, None,
     {"gym": "reported this failure itself"}),
    ("cancelled", None, "drained", "", "agent_class", True, None, {"gym": "--resume"}),
    ("skipped", None, "the environment skipped it", "", "terminal", False, "row", {"gym": "terminal"}),
    ("(no class)", None, "failed", "", "unknown", True, None, {"gym": "--resume to retry"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("klass", "status", "message", "kind", "what", "retry_helps", "scope", "fixes"), FAILURES
)
def test_what_a_failure_says(klass, status, message, kind, what, retry_helps, scope, fixes):
    failure = Failure(klass, status, message, kind)
    assert (failure.kind, failure.retry_helps, failure.scope) == (what, retry_helps, scope)
    for mode, says in fixes.items():
        assert says in failure.fix(mode=mode), (mode, failure.fix(mode=mode))
    for mode in ("direct", "gym", "reverify"):
        fix = failure.fix(mode=mode)
        if not retry_helps:  # the fix of a failure that repeats never says only "try again"
            assert "to retry these keys" not in fix and "maybe lower --concurrency" not in fix, (mode, fix)
        if mode != "gym":
            assert "--gym-url" not in fix, (mode, fix)
        if mode != "direct":
            assert "--base-url" not in fix and "ngrp serve status" not in fix, (mode, fix)
        if mode == "reverify":  # reverify has neither option
            assert "--follow-redirects" not in fix and "--max-response-mb" not in fix, fix


def test_the_failure_table_covers_every_kind_and_every_class_the_collectors_write():
    import re
    from pathlib import Path

    from ngrp_lib.artifacts import failures

    kinds = set(re.findall(r"^\| (\w+) +\|", failures.__doc__ or "", re.M)) - {"kind"}
    assert {row[4] for row in FAILURES} == kinds
    source = Path(failures.__file__).parents[1] / "collect"
    written = set()
    for path in source.glob("*.py"):
        text = path.read_text()
        written |= set(re.findall(r'AttemptFailed\(\s*"(\w+)"', text))
        written |= set(re.findall(r'failure_class = "(\w+)"', text))
    assert written and written <= {row[0] for row in FAILURES}, written
    assert Failure("verify_failed", None, "x", terminal=True).kind == "terminal"
    assert Failure.from_fields({"_ng_failure_class": "judge_invalid", "_ng_failure_terminal": True}).terminal


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
    assert one.value.hint == "no row was sent"  # --skip-preflight would not bring a dead server back
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
            return await gym_run.preflight(session, head, 5, resolve=lambda url: targets)

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


@pytest.mark.parametrize(
    ("asked", "refused"),
    [
        ([2047, 16], None),
        ([16, 2048], None),
        ([16, 2049, 2048, 4000], ("t.jsonl:2", 2049, "; 1 more row does too")),
        ([2049, 2050, 4000], ("t.jsonl:1", 2049, "; 2 more rows do too")),
    ],
)
def test_the_context_budget_refuses_only_more_than_the_context(asked, refused):
    """A row may ask for the whole context (the real vLLM 0.32 answers it; tests/test_collect_first_run.py
    has the over-the-context case against it); one more token is refused, naming the first row."""
    from ngrp_lib.collect.preflight import OutputBudget

    budget = OutputBudget()
    for i, value in enumerate(asked, start=1):
        budget.see(f"t.jsonl:{i}", {"max_output_tokens": value})
    context = (2048, ServerCheck("http://127.0.0.1:8000/v1", "tiny", max_model_len=2048))
    if refused is None:
        budget.check(context)
        return
    row, value, more = refused
    with pytest.raises(UsageError) as err:
        budget.check(context)
    assert f"{row} asks for max_output_tokens {value}, more than the 2048-token context" in str(err.value)
    assert more in str(err.value)
