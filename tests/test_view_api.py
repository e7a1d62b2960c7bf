"""`ngrp view`: the queries behind each page (pagination, filters, sorting, the task page), compare pairing
against `ngrp compare`, the index cache, and the server itself (JSON twins, errors, headers, Ctrl-C)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from run_helpers import SCRIPT, reward_of, text_of, write_run
from view_helpers import Viewer

from ngrp_lib.inspect.join import resolve
from ngrp_lib.view.compare import Pairs
from ngrp_lib.view.index import cache_path, open_index
from ngrp_lib.view.queries import Views, parse_params

TASKS, REPEATS = 30, 8


def band_of(task: int, flip: int = 0) -> str:
    c = sum(reward_of(task, r, flip) for r in range(REPEATS))
    return "all_fail" if c == 0 else "all_pass" if c == REPEATS else "mixed"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    common = {"tasks": TASKS, "repeats": REPEATS, "flipped_task": 5, "script_task": 3, "truncate_every": 7}
    a, _ = write_run(root / "a", **common)
    b, _ = write_run(root / "b", flip=1, **common)
    return {"a": a, "b": b, "cache": root / "cache", "root": root}


@pytest.fixture(scope="module")
def views(runs) -> Views:
    return Views(open_index(resolve(runs["b"]), threshold=1.0, directory=runs["cache"]))


def page(views: Views, **query) -> dict:
    return views.tasks(parse_params({k: str(v) for k, v in query.items()}, 1.0))


def test_pagination_walks_every_task_once(views):
    first = page(views, per_page=7)
    assert (first["total"], first["pages"], first["page"]) == (TASKS, 5, 1)
    assert first["prev"] is None and first["next"] == "/?page=2&per_page=7"
    seen = []
    for number in range(1, 6):
        data = page(views, per_page=7, page=number)
        seen += [t["task"] for t in data["tasks"]]
    assert seen == list(range(TASKS))
    assert page(views, per_page=7, page=99)["page"] == 5, "a page past the end shows the last"


def test_task_rows_carry_counts_and_wilson(views):
    row = page(views, task=2)["tasks"][0]
    c = sum(reward_of(2, r, 1) for r in range(REPEATS))
    assert (row["n_rollouts"], row["n_passed"], row["expected"]) == (REPEATS, c, REPEATS)
    assert row["preview"].startswith("Question 2:") and row["url"] == "/task/2?a=policy_agent&task=2"
    from scipy.stats import binomtest

    ci = binomtest(int(c), REPEATS).proportion_ci(method="wilson")
    assert (row["wilson_low_95"], row["wilson_high_95"]) == pytest.approx((ci.low, ci.high))


@pytest.mark.parametrize("band", ["all-fail", "mixed", "all-pass"])
def test_band_filter(views, band):
    data = page(views, band=band, per_page=100)
    want = [t for t in range(TASKS) if band_of(t, 1) == band.replace("-", "_") and t != 5]
    if band == "all-pass":
        want = sorted([*want, 5])  # the planted task passes everywhere in B
    assert [t["task"] for t in data["tasks"]] == want


def test_failed_filter_lists_tasks_with_a_failed_rollout(views):
    data = page(views, outcome="failed", per_page=100)
    want = [t for t in range(TASKS) if t != 5 and any(reward_of(t, r, 1) == 0 for r in range(REPEATS))]
    assert [t["task"] for t in data["tasks"]] == want
    row = data["tasks"][0]
    assert row["n_matching"] == sum(reward_of(row["task"], r, 1) == 0 for r in range(REPEATS))


def test_reward_where_search_and_truncated_filters(views):
    assert page(views, reward_min=0.5, reward_max=0.5)["total"] == 0
    hard = page(views, where="level=hard", per_page=100)
    assert [t["task"] for t in hard["tasks"]] == [t for t in range(TASKS) if t % 3 == 2]
    by_prompt = page(views, q="question 17:")  # any case, prompts too
    assert [t["task"] for t in by_prompt["tasks"]] == [17]
    by_response = page(views, q=text_of(12, 3, 1))
    assert [t["task"] for t in by_response["tasks"]] == [12] and by_response["tasks"][0]["n_matching"] == 1
    truncated = page(views, truncated=1, per_page=100)
    assert {t["task"] for t in truncated["tasks"]} == {
        t for t in range(TASKS) if any((t * REPEATS + r) % 7 == 0 for r in range(REPEATS))
    }


def test_search_ignores_case_and_reaches_the_reasoning(views):
    assert [t["task"] for t in page(views, q="THINKING ABOUT TASK 11 ")["tasks"]] == [11]
    assert page(views, q='"quoted" \\ text')["total"] == 0, "no raw shortcut for quotes and backslashes"


def test_sort_by_pass_rate_both_ways(views):
    rates = [t["pass_rate"] for t in page(views, sort="pass_rate", per_page=100)["tasks"]]
    assert rates == sorted(rates)
    rates = [t["pass_rate"] for t in page(views, sort="pass_rate", desc=1, per_page=100)["tasks"]]
    assert rates == sorted(rates, reverse=True)


def test_bad_query_values_are_usage_errors(views):
    from ngrp_lib.errors import UsageError

    for query in (
        {"outcome": "maybe"},
        {"reward_min": "x"},
        {"sort": "nope"},
        {"where": "level"},
        {"band": "some"},
    ):
        with pytest.raises(UsageError):
            parse_params(query, 1.0)


def test_task_page_has_every_rollout_and_follows_the_table(views):
    params = parse_params({"outcome": "failed"}, 1.0)
    data = views.task(2, "policy_agent", params)
    assert [r["rollout_id"] for r in data["rollouts"]] == [f"2-{r}" for r in range(REPEATS)]
    assert [r["reward"] for r in data["rollouts"]] == [reward_of(2, r, 1) for r in range(REPEATS)]
    assert [r["matches"] for r in data["rollouts"]] == [reward_of(2, r, 1) == 0 for r in range(REPEATS)]
    assert data["rollouts"][1]["final_text"] == text_of(2, 1, 1)
    listed = [t["task"] for t in page(views, outcome="failed", per_page=100)["tasks"]]
    i = listed.index(2)
    assert data["prev"].startswith(f"/task/{listed[i - 1]}?") and data["next"].startswith(
        f"/task/{listed[i + 1]}?"
    )
    assert data["input_fields"] == {"expected_answer": "20", "level": "hard"}
    with pytest.raises(LookupError):
        views.task(999, None, params)


def test_compare_pairs_put_the_planted_flip_first_and_agree_with_ngrp_compare(runs, run_ngrp):
    a = Views(open_index(resolve(runs["a"]), threshold=1.0, directory=runs["cache"]))
    b = Views(open_index(resolve(runs["b"]), threshold=1.0, directory=runs["cache"]))
    pairs = Pairs.build(a, b)
    data = pairs.page(parse_params({}, 1.0))
    first = data["pairs"][0]
    assert (first["task"], first["flipped"], first["direction"]) == (5, True, "better_in_b")
    assert (first["a"]["n_passed"], first["b"]["n_passed"]) == (0, REPEATS)
    assert data["n_paired"] == TASKS and data["n_only_a"] == data["n_only_b"] == 0
    assert all(p["same_task"] is True for p in data["pairs"])
    # the same runs through `ngrp profile` and `ngrp compare`: the same tasks flipped, the same q-values
    profiles = []
    for run in (runs["a"], runs["b"]):
        res = run_ngrp(
            "profile", "--inputs", run.with_name("rollouts_materialized_inputs.jsonl"), "--rollouts", run
        )
        assert res.returncode == 0, res.stderr
        profiles.append(run.with_name("rollouts_reward_profiling.jsonl"))
    res = run_ngrp("compare", *profiles, "--json", "--bootstrap", "0")
    compared = json.loads(res.stdout)
    assert [(f["task"], f["q_value"]) for f in compared["flips"]] == [
        (p["task"], pytest.approx(p["q_value"])) for p in data["pairs"] if p["flipped"]
    ]
    q_by_task = {t["task"]: t["q_value"] for t in compared["per_task"]}
    assert {p["task"]: p["q_value"] for p in pairs.rows} == pytest.approx(q_by_task)
    task = pairs.task(5, "policy_agent", parse_params({}, 1.0))
    assert [r["reward"] for r in task["a"]["rollouts"]] == [0.0] * REPEATS
    assert [r["reward"] for r in task["b"]["rollouts"]] == [1.0] * REPEATS


def test_compare_counts_unpaired_tasks_and_different_task_data(tmp_path):
    a, _ = write_run(tmp_path / "a", tasks=6, repeats=2)
    b, materialized = write_run(tmp_path / "b", tasks=5, repeats=2)
    rows = [json.loads(line) for line in materialized.read_text().splitlines()]
    for row in rows:
        if row["_ng_task_index"] == 2:
            row["expected_answer"] = "something else"
    materialized.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache = tmp_path / "cache"
    pairs = Pairs.build(*(Views(open_index(resolve(p), threshold=1.0, directory=cache)) for p in (a, b)))
    data = pairs.page(parse_params({}, 1.0))
    assert (data["n_paired"], data["n_only_a"], data["n_only_b"], data["n_task_data_differs"]) == (5, 1, 0, 1)
    assert {p["task"]: p["same_task"] for p in data["pairs"]}[2] is False


def test_compare_pairs_fan_out_by_agent(tmp_path):
    a, _ = write_run(tmp_path / "a", tasks=3, repeats=2, agents=("x", "y"))
    b, _ = write_run(tmp_path / "b", tasks=3, repeats=2, agents=("y", "x"))  # other rollout numbering
    cache = tmp_path / "cache"
    pairs = Pairs.build(*(Views(open_index(resolve(p), threshold=1.0, directory=cache)) for p in (a, b)))
    assert len(pairs.rows) == 6 and {(r["task"], r["agent"]) for r in pairs.rows} == {
        (t, g) for t in range(3) for g in ("x", "y")
    }


def test_index_cache_lives_outside_the_run_and_follows_the_file(tmp_path):
    rollouts, _ = write_run(tmp_path / "run", tasks=3, repeats=2)
    cache = tmp_path / "cache"
    first = open_index(resolve(rollouts), threshold=1.0, directory=cache)
    assert not first.cached and cache_path(resolve(rollouts), cache).is_file()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "rollouts.jsonl",
        "rollouts_materialized_inputs.jsonl",
    ]
    again = open_index(resolve(rollouts), threshold=1.0, directory=cache)
    assert again.cached and len(again.facts) == 6
    assert [again.row(i) for i in range(6)] == [first.row(i) for i in range(6)]
    with open(rollouts, "a") as handle:
        handle.write(rollouts.read_text().splitlines()[0] + "\n")
    grown = open_index(resolve(rollouts), threshold=1.0, directory=cache)
    assert not grown.cached and len(grown.facts) == 7
    assert len(list(cache.iterdir())) == 1, "the stale index of the same file is removed"


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    from ngrp_lib.view.index import cache_dir

    monkeypatch.setenv("NGRP_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "view-index"
    monkeypatch.delenv("NGRP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x" / "ngrp" / "view-index"


# -- the server -------------------------------------------------------------------------------------------


def test_server_pages_json_twins_errors_and_ctrl_c(runs):
    with Viewer(runs["b"], "--compare", runs["a"], cache=runs["cache"], cwd=runs["root"]) as viewer:
        assert viewer.url.startswith("http://127.0.0.1:")
        status, headers, body = viewer.get("/tasks.json?per_page=5")
        data = json.loads(body)
        assert status == 200 and headers["Content-Type"].startswith("application/json")
        assert data["total"] == TASKS and len(data["tasks"]) == 5
        status, headers, body = viewer.get("/")
        html = body.decode()
        assert status == 200 and "script-src 'self'" in headers["Content-Security-Policy"]
        assert html.count("data-task-index=") == 30 and "&lt;script&gt;window.__pwned" in html
        assert "<script>window" not in html
        status, _, body = viewer.get("/task/3.json?a=policy_agent")
        assert status == 200 and json.loads(body)["rollouts"][0]["final_text"].endswith(SCRIPT)
        status, _, body = viewer.get("/task/3?a=policy_agent")
        assert body.decode().count('data-rollout-id="3-') == REPEATS
        assert viewer.get("/tasks.json?outcome=maybe")[0] == 400
        status, _, body = viewer.get("/task/999.json")
        assert status == 404 and "not in this run" in json.loads(body)["error"]
        assert json.loads(viewer.get("/compare.json")[2])["pairs"][0]["task"] == 5
        assert viewer.get("/compare/task/5.json?a=policy_agent")[0] == 200
        assert viewer.get("/static/view.js")[0] == 200 and viewer.get("/static/../x")[0] == 404
        code, err = viewer.stop()
    assert code == 0 and "stopped" in err


def test_port_in_use_is_a_usage_error(runs, run_ngrp):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = run_ngrp(
            "view", runs["b"], "--port", port, env={**os.environ, "NGRP_CACHE_DIR": str(runs["cache"])}
        )
    assert res.returncode == 2 and "cannot listen" in res.stderr


def test_compare_page_is_off_without_compare(runs):
    with Viewer(runs["a"], cache=runs["cache"], cwd=runs["root"]) as viewer:
        status, _, body = viewer.get("/compare.json")
        assert status == 404 and "--compare" in json.loads(body)["error"]


def test_sort_links_keep_every_filter(views):
    from urllib.parse import parse_qs, urlparse

    from ngrp_lib.view.pages import tasks_page

    params = parse_params({"where": "level=hard", "outcome": "failed"}, 1.0)
    multi = type(params)(**{**params.__dict__, "filters": (*params.filters, ("where", "expected_answer=20"))})
    html = str(tasks_page(views.tasks(multi), compare=False))
    link = html.split('<th><a href="')[4].split('"')[0].replace("&amp;", "&")
    query = parse_qs(urlparse(link).query)
    assert query["where"] == ["level=hard", "expected_answer=20"] and query["outcome"] == ["failed"]
    assert query["sort"] == ["pass_rate"]
