"""Issue 38, class 5: range checks on every figure read from a server's /metrics. A hostile peer that
reports more prefix-cache hits than queries gave "prefix-cache hit rate 50000.0%" in collect's summary
and manifest; a rate outside [0, 1], a counter going down, a negative or non-finite counter is now "not
reported", with a note naming the server and why, and a server whose figures hold still counts."""

from __future__ import annotations

import json

import pytest
from http_helpers import chat_app, chat_reply, serve_app, sum_tasks, with_n_choices

from ngrp_lib.collect.metrics import HITS, QUERIES, hit_rate, parse_counters, prefix_cache

A, B = "http://a", "http://b"


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        ((10, 0), (20, 5010), "more prefix-cache hits (5010) than queries (10)"),  # the 50000%
        ((10, 20), (30, 25), "more prefix-cache hits"),  # hits above queries already before
        ((100, 50), (40, 20), "went down"),
        ((100, 50), (140, 40), "went down"),  # hits alone going down
        ((-5, 0), (10, 2), "negative or not finite"),
        ((10, 2), (float("nan"), 3), "negative or not finite"),
        ((10, 2), (float("inf"), 3), "negative or not finite"),
    ],
)
def test_metrics_ranges_a_figure_out_of_range_is_not_reported_with_a_note(before, after, why):
    rate, note = prefix_cache({A: before}, {A: after})
    assert rate is None
    assert note is not None and A in note and why in note
    assert hit_rate({A: before}, {A: after}) is None


def test_metrics_ranges_a_server_whose_figures_hold_still_counts():
    # A: 40 queries, 30 hits (hand-worked rate 0.75); B: hostile, left out and named.
    rate, note = prefix_cache({A: (10, 5), B: (0, 0)}, {A: (50, 35), B: (10, 900)})
    assert rate == 0.75
    assert note is not None and B in note and A not in note
    assert prefix_cache({A: (10, 5)}, {A: (50, 35)}) == (0.75, None)


def test_metrics_ranges_parsed_values_that_are_not_numbers_are_skipped():
    text = f'{QUERIES}{{model="m"}} NaN\n{HITS} +Inf\n{QUERIES}{{engine="1"}} 4\n'
    found = parse_counters(text, (QUERIES, HITS))
    assert found[HITS] == float("inf")  # read, then refused by the range check
    assert prefix_cache({A: (found[QUERIES], found[HITS])}, {A: (10.0, 1.0)})[0] is None


def _hostile_peer():
    """A chat peer whose /metrics invents hits: each read adds 10 queries and 5,000 hits."""
    from aiohttp import web

    reads = {"n": 0}

    async def chat(request):
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        answer = str(int(prompt.split()[-1].split("+")[0].removesuffix("?")) + 1)
        return web.json_response(with_n_choices(chat_reply(answer), body))

    async def metrics(request):
        reads["n"] += 1
        n = reads["n"]
        text = f'{QUERIES}{{model_name="m"}} {10 * n}\n{HITS}{{model_name="m"}} {5000 * (n - 1)}\n'
        return web.Response(text=text)

    app = chat_app(chat, max_model_len=4096)
    app.router.add_get("/metrics", metrics)
    return app, reads


@pytest.mark.parametrize("as_json", [True, False])
def test_metrics_ranges_collect_summary_and_manifest_say_not_reported(tmp_path, run_ngrp, as_json):
    app, reads = _hostile_peer()
    tasks = sum_tasks(tmp_path, 3)
    out = tmp_path / "out" / "r.jsonl"
    with serve_app(app) as url:
        got = run_ngrp("collect", "--input", str(tasks), "--output", str(out), "--base-url", url + "/v1",
                       "--model", "m", "--verifier", "exact", *(["--json"] if as_json else []))  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert reads["n"] == 2  # before and after the run
    assert "50000" not in got.stdout and "Traceback" not in got.stderr
    if as_json:
        cost = json.loads(got.stdout)["cost"]
        assert cost["prefix_cache_hit_rate"] is None
        assert "more prefix-cache hits (5000) than queries (10)" in cost["prefix_cache_note"]
    else:
        line = next(x for x in got.stdout.splitlines() if x.startswith("cost:"))
        assert line.endswith("prefix-cache hit rate not reported"), line
        assert "  prefix cache: /metrics figures out of range, left out: http://127.0.0.1:" in got.stdout
    manifest = json.loads((tmp_path / "out" / "r_run_manifest.json").read_text())
    cost = manifest["runs"][-1]["cost"]
    assert cost["prefix_cache_hit_rate"] is None and "than queries" in cost["prefix_cache_note"]


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input_tokens": 10, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 4}}, (10, 4, 5)),
        (
            {"input_tokens": 10, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 11}},
            (10, None, 5),
        ),
        (
            {"input_tokens": -1, "output_tokens": 5, "input_tokens_details": {"cached_tokens": -2}},
            (None, None, 5),
        ),
        (
            {"prompt_tokens": 3, "completion_tokens": -4, "prompt_tokens_details": {"cached_tokens": 3}},
            (3, 3, None),
        ),
    ],
)
def test_metrics_ranges_token_counts_out_of_range_are_not_reported(usage, expected):
    """The other figures a server reports, its usage counts: negative, or more cached tokens than prompt
    tokens, is not a count."""
    from ngrp_lib.artifacts.response import input_cached_output_tokens

    assert input_cached_output_tokens({"usage": usage}) == expected
