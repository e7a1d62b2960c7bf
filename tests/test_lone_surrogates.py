"""A lone UTF-16 surrogate escape (`"\\ud800"`: half a pair, not a character; Python's json, so NeMo Gym,
reads and writes it) is read as U+FFFD by every reader: task rows, rollouts, a model's reply. So what ngrp
writes (materialized rows, collected rows, profiles), what the viewer shows and `inspect` prints hold
U+FFFD and are valid UTF-8, never the escape turned into six characters of text; `validate` names the
line (kind `lone_surrogate`)."""

from __future__ import annotations

import json
import os

import pytest
from http_helpers import chat_reply, serve_app
from run_helpers import text_of, write_run

from ngrp_lib.artifacts import jsonl

HALF = b"\\ud83d"  # the first half of an emoji's pair, as JSON writes it
FFFD = "\ufffd"


def _tasks(path, n=2):
    rows = [{"responses_create_params": {"input": f"what is {i}+1? PROMPT"}, "expected_answer": str(i + 1)}
            for i in range(n)]  # fmt: skip
    path.write_bytes(b"".join(json.dumps(r).encode().replace(b"PROMPT", HALF) + b"\n" for r in rows))
    return path


def test_every_reader_reads_a_lone_surrogate_as_fffd_and_counts_it():
    raw = b'{"a": "x ' + HALF + b' y", "' + HALF + b'": ["\\udc00", "\\ud83d\\ude00"]}'
    row = jsonl.parse_line(raw, 7)
    assert isinstance(row, jsonl.Row) and row.surrogates == 3
    assert row.data == {"a": f"x {FFFD} y", FFFD: [FFFD, "\U0001f600"]}  # a whole pair stays the emoji
    assert jsonl.loads(raw) == row.data
    written = jsonl.dumps(row.data)
    assert written.decode("utf-8") and b"\\\\u" not in written and json.loads(written) == row.data
    with pytest.raises(ValueError):
        jsonl.loads(b'{"a": "' + HALF)  # not JSON stays not JSON


def test_materialize_writes_fffd_and_validate_names_the_line(tmp_path, run_ngrp):
    tasks = _tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "m.jsonl"
    made = run_ngrp("materialize", "--input", tasks, "--output", out, "--agent", "a")
    assert made.returncode == 0, made.stderr
    text = out.read_bytes()
    assert b"\\\\ud83d" not in text and b"\\ud83d" not in text, text  # neither text nor a surrogate
    assert [json.loads(line)["responses_create_params"]["input"] for line in text.splitlines()] == [
        f"what is {i}+1? {FFFD}" for i in range(2)
    ]
    checked = run_ngrp("validate", tasks, "--kind", "tasks")
    assert checked.returncode == 1 and f"{tasks}:1: 1 lone UTF-16 surrogate" in checked.stdout
    assert f"{tasks}:2: 1 lone UTF-16 surrogate" in checked.stdout and "U+FFFD" in checked.stdout
    assert run_ngrp("validate", out).returncode == 0  # what ngrp wrote is clean


def test_the_viewer_shows_fffd(tmp_path):
    from ngrp_lib.inspect.join import resolve
    from ngrp_lib.view.index import open_index
    from ngrp_lib.view.queries import Views, parse_params

    rollouts, _ = write_run(tmp_path / "run", tasks=3, repeats=2)
    old = json.dumps(text_of(1, 1))[1:-1].encode()
    rollouts.write_bytes(rollouts.read_bytes().replace(old, b"half " + HALF + b" a pair"))
    views = Views(open_index(resolve(rollouts), threshold=1.0, directory=tmp_path / "cache"))
    shown = views.task(1, "policy_agent", parse_params({}, 1.0))["rollouts"][1]["final_text"]
    assert shown == f"half {FFFD} a pair"


def test_a_reply_holding_a_lone_surrogate_is_a_row_with_fffd(tmp_path, run_ngrp):
    """A canned peer: vLLM itself replaces bytes that are not UTF-8, so no real server sends this."""
    from aiohttp import web

    async def chat(request):
        await request.read()
        body = json.dumps(chat_reply("4 PROMPT")).encode().replace(b"PROMPT", HALF)
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    tasks = _tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "out" / "r.jsonl"
    with serve_app(app) as url:
        proc = run_ngrp("collect", "--input", tasks, "--output", out, "--base-url", url + "/v1", "--model",
                        "m", "--verifier", "exact", "--skip-preflight", "--json",
                        env={**os.environ, "OPENAI_API_KEY": ""})  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["failures_by_class"] == {}
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 and all(FFFD in json.dumps(r["response"], ensure_ascii=False) for r in rows)
    assert all(r["responses_create_params"]["input"].endswith(FFFD) for r in rows)


def test_the_report_shows_fffd(tmp_path, run_ngrp):
    from health_data import clean_run

    inputs, rollouts, _ = clean_run(tasks=4).write(tmp_path / "run")
    text = rollouts.read_bytes()
    first = json.loads(text.splitlines()[0])["response"]["output"][-1]["content"][0]["text"]
    rollouts.write_bytes(text.replace(json.dumps(first)[1:-1].encode(), b"half " + HALF + b" a pair", 1))
    made = run_ngrp("profile", "--inputs", inputs, "--rollouts", rollouts, "--output-dir", tmp_path / "p")
    assert made.returncode == 0, made.stderr
    (profile,) = (tmp_path / "p").glob("*_reward_profiling.jsonl")
    page = tmp_path / "report.html"
    done = run_ngrp("report", profile, "--rollouts", rollouts, "-o", page)
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    assert f"half {FFFD} a pair" in html and "\\ud83d" not in html
