"""Unit tests for `ngrp collect` pieces that need no inference server: verifiers, conversions,
routing, and the refusal paths (outputs exist, lock held, changed config, malformed rows)."""

from __future__ import annotations

import contextlib
import json
import os

import pytest
from cli_helpers import ENTRY

from ngrp_lib.artifacts import answers
from ngrp_lib.artifacts.response import response_text
from ngrp_lib.collect import convert, verify
from ngrp_lib.collect.failover import make_router
from ngrp_lib.collect.routing import (
    Endpoint,
    load_endpoint_files,
    load_endpoints,
    normalize_base_url,
    public_url,
)
from ngrp_lib.collect.state import CollectorLock
from ngrp_lib.errors import InputError, UsageError

# ---- verifiers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "extracted", "correct"),
    [
        ("so \\boxed{4}.", "4", "4", True),
        ("first \\boxed{3} then \\boxed{\\frac{1}{2}}", "0.5", "\\frac{1}{2}", True),
        ("\\boxed{{1,060}}", "1060", "{1,060}", False),  # braces inside the box are not a number
        ("the sum is 1,060.", "1060", "1,060", True),
        ("answer 391.0", "391", "391.0", True),
        ("$\\boxed{ 7 }$", "7", "7", True),
        ("no number here", "4", None, False),
        ("\\boxed{x+1}", "x + 1", "x+1", True),  # non-numeric: compared without spaces
        ("2/4", "1/2", "2/4", True),
        ("\\boxed{-\\frac{1}{2}}", "-0.5", "-\\frac{1}{2}", True),  # a sign before \\frac
        ("\\boxed{1,2}", "12", "1,2", False),  # a list, not a thousands separator
        ("\\boxed{1,000}", "1000", "1,000", True),
        ("\\boxed{0}", "1e-7", "0", False),  # the tolerance is relative: 0 is not 1e-7
        ("the answer is 1e3", "1000", "1e3", True),  # an exponent is part of the number
        ("\u2212 5 so \u22125", "-5", "\u22125", True),  # a Unicode minus sign
        ("\\boxed{1e100000000}", "4", "1e100000000", False),  # no 10**10**8 built: compared as text
        ("so 1 + 1 = 2 in base-2.", "2", "2", True),  # a hyphen after a word is not a minus sign
        ("the result: 7-3", "3", "3", True),  # nor one between two numbers
        ("x = -3, so (-3)", "-3", "-3", True),  # after space, '=' or '(' it is a sign
    ],
)
def test_math_verifier(text, expected, extracted, correct):
    out = verify.verify_math(text, expected)
    assert out == {"reward": 1.0 if correct else 0.0, "extracted_answer": extracted, "is_correct": correct}


def test_last_boxed_balances_nested_braces():
    assert answers.last_boxed("\\boxed{\\frac{a}{b}} and \\boxed{{x}}") == "{x}"
    assert answers.last_boxed("\\boxed{open") is None


@pytest.mark.parametrize(
    ("text", "expected", "got", "correct"),
    [
        ("The answer is (C).", "C", "C", True),
        ("Answer: b", "(B)", "B", True),
        ("I pick \\boxed{D}", "A", "D", False),
        ("nothing", "A", None, False),
        ("The answer is a bit tricky; I pick (C)", "C", "C", True),  # "a" is a word here, not option A
        ("(a)", "A", "A", True),
        ("the answer is A.", "A", "A", True),
    ],
)
def test_mcq_verifier(text, expected, got, correct):
    out = verify.verify_mcq(text, expected)
    assert (out["extracted_answer"], out["is_correct"]) == (got, correct)


def test_exact_and_regex_verifiers():
    assert verify.verify_exact("  Paris\n", "Paris")["reward"] == 1.0
    assert verify.verify_exact("paris", "Paris")["reward"] == 0.0
    check = verify.regex_verifier(r"ANSWER=(\w+)")
    assert check("ANSWER=no ... ANSWER=yes", "yes") == {
        "reward": 1.0,
        "extracted_answer": "yes",
        "is_correct": True,
    }
    assert check("nothing", "yes")["extracted_answer"] is None
    optional = verify.regex_verifier(r"answer(:)? is")  # the group takes no part: no answer, not a crash
    assert optional("the answer is 4", "4") == {"reward": 0.0, "extracted_answer": None, "is_correct": False}
    with pytest.raises(UsageError):
        verify.regex_verifier("(")


def test_make_verifier_needs_exactly_one():
    kw = {"answer_key": "expected_answer", "pattern": None, "timeout": 1.0}
    with pytest.raises(UsageError, match="exactly one"):
        verify.make_verifier(None, url=None, function=None, **kw)
    with pytest.raises(UsageError, match="exactly one"):
        verify.make_verifier("math", url="http://x/verify", function=None, **kw)
    with pytest.raises(UsageError, match="verifier-pattern"):
        verify.make_verifier("regex", url=None, function=None, **kw)
    with pytest.raises(UsageError, match="module:function"):
        verify.make_verifier(None, url=None, function="nocolon", **kw)


# ---- chat <-> responses conversion ----------------------------------------------------------------


def test_chat_request_from_responses_params():
    params = {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi "}, {"text": "there"}]},
            {"role": "developer", "content": "be brief", "type": "message"},
        ],
        "instructions": "You are terse.",
        "max_output_tokens": 16,
        "temperature": 0.7,
        "top_p": None,
        "metadata": {"extra_body": '{"seed": 3, "top_k": 5}'},
        "tools": [{"type": "function", "name": "add", "parameters": {"type": "object"}, "description": None}],
        "tool_choice": "auto",
    }
    body = convert.chat_request(params, "m", token_ids=True)
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi there"},
        {"role": "system", "content": "be brief"},
    ]
    assert body["max_tokens"] == 16 and body["temperature"] == 0.7 and "top_p" not in body
    assert body["seed"] == 3 and body["top_k"] == 5 and "metadata" not in body
    assert body["tools"] == [
        {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    ]
    assert body["tool_choice"] == "auto" and body["model"] == "m"
    assert body["logprobs"] is True and body["return_token_ids"] is True


def test_string_input_and_unsupported_items():
    assert convert.chat_messages({"input": "hello"}) == [{"role": "user", "content": "hello"}]
    with pytest.raises(convert.ConversionError):
        convert.chat_messages({"input": [{"type": "image_generation_call"}]})
    with pytest.raises(convert.ConversionError):
        convert.chat_request({"input": "x", "metadata": {"extra_body": "not json"}}, "m")


def test_responses_request_lifts_extra_body():
    params = {"input": "x", "metadata": {"extra_body": '{"seed": 1}', "tag": "a"}, "top_p": None}
    assert convert.responses_request(params, "m") == {
        "input": "x",
        "metadata": {"tag": "a"},
        "seed": 1,
        "model": "m",
    }


CHAT = {
    "id": "chatcmpl-abc",
    "created": 1700000000,
    "model": "tiny",
    "prompt_token_ids": [1, 2, 3],
    "choices": [
        {
            "index": 0,
            "finish_reason": "length",
            "token_ids": [7, 8],
            "message": {"role": "assistant", "content": "4", "reasoning_content": "hmm"},
            "logprobs": {
                "content": [
                    {"token": "token_id:7", "logprob": -0.5},
                    {"token": "token_id:8", "logprob": -1.5},
                ]
            },
        }
    ],
    "usage": {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 1},
    },
}


def test_response_from_chat_shape_and_tokens():
    response = convert.response_from_chat(CHAT, token_ids=True)
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["usage"] == {
        "input_tokens": 3,
        "input_tokens_details": {"cached_tokens": 1},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 5,
    }
    reasoning, message = response["output"]
    assert reasoning["type"] == "reasoning" and reasoning["summary"][0]["text"] == "hmm"
    assert message["content"] == [{"type": "output_text", "text": "4", "annotations": []}]
    assert message["prompt_token_ids"] == [1, 2, 3]
    assert message["generation_token_ids"] == [7, 8] and message["generation_log_probs"] == [-0.5, -1.5]
    assert response_text(response) == "4"  # what the built-in verifiers read


def test_response_from_chat_completed_and_errors():
    done = json.loads(json.dumps(CHAT))
    done["choices"][0]["finish_reason"] = "stop"
    response = convert.response_from_chat(done)
    assert response["status"] == "completed" and response["incomplete_details"] is None
    assert "generation_token_ids" not in response["output"][-1]
    done["choices"][0]["token_ids"] = [7]
    with pytest.raises(convert.ConversionError, match="1 generated token ids but 2 logprobs"):
        convert.response_from_chat(done, token_ids=True)
    with pytest.raises(convert.ConversionError):
        convert.response_from_chat({"choices": []})


@pytest.mark.parametrize(
    ("usage", "missing", "stored"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 2}, [], (3, 2, 5)),
        (None, ["prompt_tokens", "completion_tokens"], (0, 0, 0)),
        ({}, ["prompt_tokens", "completion_tokens"], (0, 0, 0)),
        ({"prompt_tokens": 3}, ["completion_tokens"], (3, 0, 3)),
        ({"prompt_tokens": None, "completion_tokens": 4, "total_tokens": 9}, ["prompt_tokens"], (0, 4, 9)),
    ],
)  # fmt: skip
def test_chat_usage_stores_0_for_an_absent_count_and_names_it(usage, missing, stored):
    """A count the server did not give is stored as 0 (Gym's profiler needs a number) and named by
    missing_counts, so the row can say it was never given."""
    chat = {"choices": [{"message": {"content": "4"}, "finish_reason": "stop"}], "usage": usage}
    assert convert.missing_counts(chat) == missing
    got = convert.response_from_chat(chat)["usage"]
    assert (got["input_tokens"], got["output_tokens"], got["total_tokens"]) == stored
    assert got["input_tokens_details"] == {"cached_tokens": 0}


@pytest.mark.parametrize(
    "usage",
    ["12", [1], {"prompt_tokens": -1}, {"completion_tokens": 2.0}, {"prompt_tokens": True},
     {"total_tokens": "x"}, {"prompt_tokens_details": {"cached_tokens": "1"}}],
)  # fmt: skip
def test_chat_usage_of_another_kind_is_a_broken_reply(usage):
    chat = {"choices": [{"message": {"content": "4"}, "finish_reason": "stop"}], "usage": usage}
    with pytest.raises(convert.ConversionError, match="broken reply"):
        convert.response_from_chat(chat)


# ---- routing ----------------------------------------------------------------------------------------


def test_base_urls_and_credentials():
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert public_url("https://user:secret@h/v1?key=x") == "https://h/v1"
    with pytest.raises(UsageError):
        normalize_base_url("h:8000")
    with pytest.raises(UsageError, match="no \\?query") as refused:  # the path would land in the query
        normalize_base_url("http://u:p@h:8000/v1?key=x")
    assert "u:p" not in str(refused.value.message)


def test_router_keeps_task_repeats_together():
    """The live router's home rule (failover.FailoverRouter: task t to server t % n)."""
    endpoints = [Endpoint(f"http://h{i}/v1", "m") for i in range(3)]
    router = make_router(endpoints, limit=3)
    assert {router.endpoint_for(5).base_url for _ in range(4)} == {"http://h2/v1"}
    assert [router.endpoint_for(t).base_url for t in range(3)] == [e.base_url for e in endpoints]


def test_endpoints_file(tmp_path):
    path = tmp_path / "endpoints.json"
    path.write_text(json.dumps({"endpoints": [{"base_url": "http://127.0.0.1:9/v1", "model": "tiny"}]}))
    assert load_endpoints(path, None) == [Endpoint("http://127.0.0.1:9/v1", "tiny")]
    assert load_endpoints(path, "other")[0].model == "other"
    path.write_text(json.dumps({"endpoints": []}))
    with pytest.raises(InputError, match="no endpoints listed"):
        load_endpoints(path, None)
    path.write_text(json.dumps({"endpoints": [{"model": "tiny"}]}))
    with pytest.raises(InputError, match="base_url") as err:
        load_endpoints(path, None)
    assert err.value.pointer == "/endpoints/0"
    path.write_text(json.dumps({"endpoints": [{"base_url": "http://127.0.0.1:9/v1"}]}))
    with pytest.raises(InputError, match="pass --model"):
        load_endpoints(path, None)


def test_one_endpoints_file_per_node_all_servers_used_once(tmp_path):
    """`collect --endpoints a.json --endpoints b.json`: every server of every file, in order; a server
    that two files list (a node's file copied) is one server, not two with double its share of tasks."""
    urls = {"node1": ["http://node1:8000/v1", "http://node1:8001/v1"], "node2": ["http://node2:8000/v1"]}
    files = []
    for node, node_urls in urls.items():
        files.append(tmp_path / f"endpoints-{node}.json")
        files[-1].write_text(
            json.dumps({"endpoints": [{"base_url": u, "model": "policy"} for u in node_urls]})
        )
    again = tmp_path / "copy.json"
    again.write_text(files[0].read_text())
    assert [e.base_url for e in load_endpoint_files([*files, again], None)] == [
        *urls["node1"],
        *urls["node2"],
    ]
    assert {e.model for e in load_endpoint_files(files, "other")} == {"other"}


@pytest.mark.parametrize(
    ("content", "match"),
    [(None, "not found"), ("{not json", "unreadable"), ('{"servers": []}', "expected")],
)
def test_one_endpoints_reader_for_collect_and_serve(tmp_path, content, match):
    """collect and serve share artifacts.endpoints.read_endpoints, so both report a bad file the same way."""
    from ngrp_lib.artifacts.endpoints import read_endpoints
    from ngrp_lib.serve.run import status

    path = tmp_path / "endpoints.json"
    if content is not None:
        path.write_text(content)
    for read in (lambda p: load_endpoints(p, None), read_endpoints, status):
        with pytest.raises(InputError, match=match) as err:
            read(path)
        assert err.value.path == path
        if content is None:
            assert "ngrp serve" in err.value.hint


# ---- refusals through the CLI (no server needed: they happen before any request) --------------------


def _tasks(tmp_path, n=2, extra=""):
    path = tmp_path / "tasks.jsonl"
    lines = [
        json.dumps({"responses_create_params": {"input": f"q{i}"}, "expected_answer": str(i)})
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


DEAD = "http://127.0.0.1:9/v1"  # port 9 (discard) is closed here: connection refused at once


def _collect_argv(tmp_path, base_url: str, output: str = "r.jsonl", *, preflight: bool = False) -> list:
    """`ngrp collect` over tmp_path/tasks.jsonl with model `m` and the math verifier. Without the
    pre-flight check (these peers are dead, silent or canned): it has tests of its own."""
    return ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / output,
            "--base-url", base_url, "--model", "m", "--verifier", "math",
            *([] if preflight else ["--skip-preflight"])]  # fmt: skip


def _collect(run_ngrp, tmp_path, *extra):
    return run_ngrp(
        *_collect_argv(tmp_path, DEAD, "out/r.jsonl"),
        "--max-retries",
        "0",
        "--abort-after",
        "2",
        "--json",
        *extra,
    )


def test_connection_refused_is_recorded_and_stops_early(run_ngrp, tmp_path):
    _tasks(tmp_path, n=5)
    proc = _collect(run_ngrp, tmp_path, "--concurrency", "1")
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failures_by_class"] == {"agent_request_failed": 2}
    assert "no reply" in summary["stopped_early"] and summary["missing"] == 5
    assert "--resume" in proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "r_failures.jsonl").read_text().splitlines()]
    assert [(r["_ng_task_index"], r["_ng_attempt_index"], r["_ng_failure_http_status"]) for r in rows] == [
        (0, 0, None),
        (1, 0, None),
    ]
    from ngrp_lib.artifacts import schemas

    for row in rows:
        schemas.validator("failure").validate(row)
    schemas.validator("run_manifest").validate(
        json.loads((tmp_path / "out" / "r_run_manifest.json").read_text())
    )
    _validate_summary(summary)


def _validate_summary(summary):
    from conftest import REPO
    from jsonschema import Draft202012Validator

    schema = json.loads((REPO / "schemas" / "collect_result.schema.json").read_text())
    Draft202012Validator(schema).validate(summary)


def test_fresh_run_refuses_existing_outputs_and_resume_counts_attempts(run_ngrp, tmp_path):
    _tasks(tmp_path, n=1)
    assert _collect(run_ngrp, tmp_path).returncode == 1
    proc = _collect(run_ngrp, tmp_path)
    assert proc.returncode == 2 and "--resume" in proc.stderr and "--overwrite" in proc.stderr
    for _ in range(3):
        proc = _collect(run_ngrp, tmp_path, "--resume", "--max-attempts", "3")
    summary = json.loads(proc.stdout)
    assert summary["exhausted"] == 1 and summary["attempted"] == 0  # three failed attempts: not retried again
    attempts = [json.loads(x)["_ng_attempt_index"] for x in (tmp_path / "out" / "r_failures.jsonl").open()]
    assert attempts == [0, 1, 2]


def test_resume_refuses_changed_configuration(run_ngrp, tmp_path):
    _tasks(tmp_path, n=1)
    assert _collect(run_ngrp, tmp_path).returncode == 1
    proc = _collect(run_ngrp, tmp_path, "--resume", "--num-repeats", "2")
    assert proc.returncode == 2 and "configuration changed" in proc.stderr and "num_repeats" in proc.stderr
    _tasks(tmp_path, n=2)  # the task file itself changed
    proc = _collect(run_ngrp, tmp_path, "--resume")
    assert proc.returncode == 2 and "input_sha256" in proc.stderr


def test_lock_held_by_another_collector(run_ngrp, tmp_path):
    _tasks(tmp_path, n=1)
    (tmp_path / "out").mkdir()
    with CollectorLock(tmp_path / "out" / "r.jsonl"):
        proc = _collect(run_ngrp, tmp_path)
    assert proc.returncode == 2 and f"pid {os.getpid()}" in proc.stderr
    assert not (tmp_path / "out" / "r_run_manifest.json").exists()


def test_malformed_task_row_names_the_line(run_ngrp, tmp_path):
    _tasks(tmp_path, n=2, extra='{"responses_create_params": {"input": "x"\n')
    proc = _collect(run_ngrp, tmp_path)
    assert proc.returncode == 3 and "tasks.jsonl:3:" in proc.stderr
    assert not (tmp_path / "out" / "r.jsonl").exists()


def test_missing_answer_field_is_refused_before_any_request(run_ngrp, tmp_path):
    (tmp_path / "tasks.jsonl").write_text('{"responses_create_params": {"input": "x"}}\n')
    proc = _collect(run_ngrp, tmp_path)
    assert proc.returncode == 3 and "expected_answer" in proc.stderr and ":1:" in proc.stderr


def test_usage_errors(run_ngrp, tmp_path):
    _tasks(tmp_path)
    assert (
        "--model is required"
        in run_ngrp(
            "collect",
            "--input",
            tmp_path / "tasks.jsonl",
            "--output",
            tmp_path / "r.jsonl",
            "--base-url",
            DEAD,
            "--verifier",
            "math",
        ).stderr
    )
    proc = _collect(run_ngrp, tmp_path, "--api", "responses", "--return-token-ids")
    assert proc.returncode == 2 and "--api chat" in proc.stderr
    # repeats belong to materializing --input; with --materialized they would be silently ignored
    rows = tmp_path / "m.jsonl"
    row = {"responses_create_params": {"input": "hi"}, "_ng_task_index": 0, "_ng_rollout_index": 0}
    rows.write_text(json.dumps(row) + "\n")
    out = tmp_path / "m_out.jsonl"
    proc = run_ngrp("collect", "--materialized", rows, "--num-repeats", "16", "--output", out,
                    "--base-url", DEAD, "--model", "tiny", "--verifier", "math")  # fmt: skip
    assert proc.returncode == 2 and "--num-repeats only apply with --input" in proc.stderr
    assert not out.exists()


class _Peer:
    held: list = []


@pytest.fixture
def silent_peer():
    """A TCP server that accepts connections and never answers: a dead peer, not a fake inference server."""
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    held: list = []

    async def hold(reader, writer):
        held.append(writer)  # keep the connection open, say nothing
        await asyncio.sleep(3600)

    server = loop.run_until_complete(asyncio.start_server(hold, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    _Peer.held = held
    yield f"http://127.0.0.1:{port}/v1"
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)


def test_silent_server_times_out_retries_and_records(run_ngrp, tmp_path, silent_peer):
    _tasks(tmp_path, n=2)
    proc = run_ngrp(
        *_collect_argv(tmp_path, silent_peer),
        "--timeout",
        "0.3",
        "--max-retries",
        "2",
        "--retry-base-delay",
        "0.01",
        "--json",
    )
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failures_by_class"] == {"timeout": 2} and summary["completed"] == 0
    rows = [json.loads(line) for line in (tmp_path / "r_failures.jsonl").read_text().splitlines()]
    assert sorted(r["_ng_task_index"] for r in rows) == [0, 1]
    assert all(r["_ngrp_retries"] == 2 and r["_ng_failure_type"] == "TimeoutError" for r in rows)
    assert all(r["_ngrp_elapsed_s"] >= 0.9 for r in rows)  # three attempts of 0.3 s each


def test_bounded_admission_keeps_at_most_concurrency_requests_open(tmp_path, silent_peer):
    import subprocess
    import time

    _tasks(tmp_path, n=20)
    args = [
        *_collect_argv(tmp_path, silent_peer),
        "--timeout",
        "3",
        "--max-retries",
        "0",
        "--concurrency",
        "3",
        "--abort-after",
        "100",
    ]
    proc = subprocess.Popen([*ENTRY, *map(str, args)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(_Peer.held) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        assert len(_Peer.held) == 3  # 20 rows, but only 3 admitted while the first 3 hang
    finally:
        proc.kill()
        proc.wait()


def test_progress_line_reports_rate_eta_reward_and_errors():
    from ngrp_lib.artifacts.failures import Failure
    from ngrp_lib.collect.progress import ProgressBar, Tally

    tally = Tally(total=10)
    tally.add_result(1.0, 16)
    tally.add_result(0.0, 16)
    tally.add_failure(Failure("timeout", None, "no answer within 1s"), (0, 0))
    line = ProgressBar(tally, enabled=False).line()
    assert "3/10" in line and "rollouts/s" in line and "tok/s" in line and "ETA" in line
    assert "reward 0.500" in line and "timeout=1" in line


def test_limit_reads_only_the_first_lines(run_ngrp, tmp_path):
    _tasks(tmp_path, n=5)
    proc = _collect(run_ngrp, tmp_path, "--limit", "2", "--abort-after", "9")
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["expected"], summary["attempted"], summary["missing"]) == (2, 2, 2)
    materialized = (tmp_path / "out" / "r_materialized_inputs.jsonl").read_text().splitlines()
    assert [json.loads(line)["_ng_task_index"] for line in materialized] == [0, 1]
    _validate_summary(summary)


def test_regex_verifier_pattern_is_checked_before_any_request(run_ngrp, tmp_path):
    _tasks(tmp_path)
    argv = _collect_argv(tmp_path, DEAD)
    argv[argv.index("math")] = "regex"
    proc = run_ngrp(*argv)
    assert proc.returncode == 2 and "needs --verifier-pattern" in proc.stderr
    proc = run_ngrp(*argv, "--verifier-pattern", "(")
    assert proc.returncode == 2 and "not a valid regex" in proc.stderr
    assert not (tmp_path / "r.jsonl").exists()


@contextlib.contextmanager
def _canned_peer(status: int, body: bytes):
    """An HTTP peer that answers every POST with one fixed status and body and records each request's
    Authorization header: no inference at all (a refusing server, or a broken proxy's wrong shapes)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    reply = {"status": status, "body": body, "seen": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            reply["seen"].append(self.headers.get("authorization"))
            self.send_response(reply["status"])
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply["body"])))
            self.end_headers()
            self.wfile.write(reply["body"])

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", reply
    finally:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture
def refusing_peer():
    """Answers 401, as a server whose API key we lack."""
    with _canned_peer(401, b'{"error": {"message": "bad key"}}') as (url, reply):
        yield url, reply["seen"]


def test_api_key_env_is_sent_as_bearer_and_never_written(run_ngrp, tmp_path, refusing_peer):
    import os

    url, seen = refusing_peer
    _tasks(tmp_path, n=1)
    secret = "sk-test-4f1d9c"
    env = {**os.environ, "MY_KEY": secret, "OPENAI_API_KEY": "wrong-one"}
    argv = [*_collect_argv(tmp_path, url), "--api-key-env", "MY_KEY", "--max-retries", "0", "--json"]
    proc = run_ngrp(*argv, env=env)
    assert proc.returncode == 1, proc.stderr
    assert seen == [f"Bearer {secret}"]
    assert json.loads(proc.stdout)["failed"] == 1
    manifest = json.loads((tmp_path / "r_run_manifest.json").read_text())
    assert manifest["options"]["api_key_env"] == "MY_KEY"
    written = proc.stdout + proc.stderr + "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert secret not in written


@pytest.fixture
def wrong_shape_peer():
    """Answers 200 with a body the test sets: what a broken proxy or a misconfigured server sends."""
    with _canned_peer(200, b"{}") as peer:
        yield peer


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("chat", {"choices": ["oops"]}),
        ("chat", {"choices": [{"message": "str"}]}),
        ("chat", {"choices": [{"message": {"content": "4"}}], "usage": [1]}),
        ("chat", {"choices": [{"message": {"content": "4"}}], "usage": {"prompt_tokens": "abc"}}),
        ("responses", {"error": "nope"}),
    ],
)
def test_a_reply_of_the_wrong_shape_is_a_recorded_failure_not_a_crash(
    run_ngrp, tmp_path, wrong_shape_peer, api, body
):
    url, reply = wrong_shape_peer
    reply["body"] = json.dumps(body).encode()
    _tasks(tmp_path, n=2)
    proc = run_ngrp(*_collect_argv(tmp_path, url), "--api", api, "--max-attempts", "1", "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failed"] == 2 and summary["completed"] == 0
    failures = [json.loads(line) for line in (tmp_path / "r_failures.jsonl").read_text().splitlines()]
    assert [f["_ng_failure_class"] for f in failures] == ["agent_run_error"] * 2
    assert (tmp_path / "r.jsonl").read_text() == ""  # nothing passed off as a rollout


def test_an_input_that_is_also_an_output_is_never_deleted(run_ngrp, tmp_path):
    tasks = _tasks(tmp_path, n=1)
    before = tasks.read_bytes()
    proc = run_ngrp("collect", "--input", tasks, "--output", tasks, "--base-url", DEAD, "--model", "m",
                    "--verifier", "math", "--overwrite")  # fmt: skip
    assert proc.returncode == 2 and "both an input and an output" in proc.stderr
    proc = run_ngrp("materialize", "--input", tasks, "--output", tasks, "--agent", "a", "--overwrite")
    assert proc.returncode == 2 and "both an input and an output" in proc.stderr
    assert tasks.read_bytes() == before


def test_credentials_in_verify_url_are_not_written(run_ngrp, tmp_path):
    _tasks(tmp_path, n=1)
    argv = ["collect", "--input", tmp_path / "tasks.jsonl", "--output", tmp_path / "r.jsonl",
            "--base-url", DEAD, "--model", "m", "--verify-url", "http://admin:t0ps3cret@127.0.0.1:9/verify",
            "--max-retries", "0", "--skip-preflight"]  # fmt: skip
    proc = run_ngrp(*argv)
    assert proc.returncode == 1, proc.stderr
    manifest = (tmp_path / "r_run_manifest.json").read_text()
    assert "127.0.0.1:9/verify" in manifest
    written = proc.stdout + proc.stderr + "".join(p.read_text() for p in tmp_path.iterdir() if p.is_file())
    assert "t0ps3cret" not in written


def test_a_fresh_start_removes_temp_files_a_killed_collector_left(run_ngrp, tmp_path):
    """kill -9 while materializing leaves `.<name>.<random>.tmp`: the next start clears it."""
    _tasks(tmp_path, n=1)
    stale = tmp_path / ".r_materialized_inputs.jsonl.x1y2z3.tmp"
    stale.write_text("half a file")
    unrelated = tmp_path / ".other.jsonl.x1y2z3.tmp"
    unrelated.write_text("not ours")
    proc = run_ngrp(*_collect_argv(tmp_path, DEAD), "--max-retries", "0")
    assert proc.returncode == 1, proc.stderr
    assert not stale.exists() and unrelated.exists()


# ---- a fresh run reads its materialized file once ---------------------------------------------------


@pytest.mark.parametrize("shard", [None, "1/2"])
def test_a_fresh_run_reads_the_staged_materialized_file_once(tmp_path, monkeypatch, shard):
    """The staged file is written from the expanded rows (the shard's only) and read back in one pass that
    checks every row and hashes it: no separate hash, kind sniff or shard rewrite opens it again."""
    from ngrp_lib.artifacts import appending, reading
    from ngrp_lib.collect import runner
    from ngrp_lib.collect.materialize import MaterializeOptions, sha256_file
    from ngrp_lib.collect.options import CollectOptions
    from ngrp_lib.collect.shards import parse_shard

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"responses_create_params": {"input": f"q{i}"}}) + "\n" for i in range(4))
    )
    options = CollectOptions(
        output=tmp_path / "r.jsonl",
        endpoints=(Endpoint("http://127.0.0.1:9/v1", "m"),),
        input=tasks,
        materialize=MaterializeOptions(num_repeats=2, default_agent="m"),
        shard=parse_shard(shard) if shard else None,
    )
    opened: list[str] = []
    real_open = reading.open_input

    def counting_open(path, *args, **kwargs):
        opened.append(os.path.basename(path))
        return real_open(path, *args, **kwargs)

    for module in (reading, appending):  # every JSONL open: jsonl gathers these modules' functions
        monkeypatch.setattr(module, "open_input", counting_open)
    staging = runner._stage(options, None, runner.OutputBudget())
    assert staging is not None
    plan, keys = runner.scan_materialized(staging, None, shard=options.shard, staged=True)
    assert opened.count(staging.name) == 1
    assert plan.sha256 == sha256_file(staging)
    tasks_run = {task for task, _ in keys}
    assert tasks_run == ({1, 3} if shard else {0, 1, 2, 3}) and plan.rows == len(keys) == 2 * len(tasks_run)
    staged_tasks = [json.loads(line)["_ng_task_index"] for line in staging.read_text().splitlines()]
    assert set(staged_tasks) == tasks_run and len(staged_tasks) == plan.rows  # the shard's rows, no others
