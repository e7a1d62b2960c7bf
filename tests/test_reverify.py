"""`ngrp reverify` without servers: built-in and function verifiers, what a re-scored row keeps, the
failures sidecar, refusals, --inputs, manifest-checked --resume, kill -9 then --resume, and /verify
retries and timeouts against a canned-reply peer (a flaky server no real one imitates on demand)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from cli_helpers import ENTRY
from health_data import clean_run
from http_helpers import serve_app

from ngrp_lib.artifacts import schemas
from ngrp_lib.reverify.run import PREVIOUS_REWARD, REVERIFIED_WITH, reward_changes

SLOW_VERIFIER = """
import asyncio

async def slow(row, response):
    await asyncio.sleep(0.02)
    text = response["output"][-1]["content"][0]["text"]
    return {"reward": float(row["expected_answer"] in text), "checked_by": "slow"}

def picky(row, response):
    if row["_ng_task_index"] == 1:
        raise RuntimeError("cannot judge task 1")
    return {"reward": 0.5, "judge": "picky"}

def sees_inputs(row, response):
    return {"reward": float("only_in_inputs" in row), "saw_reward": "reward" in row}
"""


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture
def run_dir(tmp_path) -> Path:
    clean_run(6).write(tmp_path)
    (tmp_path / "verifiers.py").write_text(SLOW_VERIFIER)
    return tmp_path


def _reverify(run_ngrp, folder: Path, *args: str):
    return run_ngrp("reverify", "--rollouts", folder / "rollouts.jsonl", *args, cwd=folder)


def test_builtin_verifier_rescores_and_keeps_the_row(run_dir, run_ngrp):
    proc = _reverify(run_ngrp, run_dir, "--output", "exact.jsonl", "--verifier", "exact", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert schemas.validator("reverify_result").is_valid(result)
    old = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in _rows(run_dir / "rollouts.jsonl")}
    new = _rows(run_dir / "exact.jsonl")
    assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in new) == sorted(old)
    for row in new:
        before = old[(row["_ng_task_index"], row["_ng_rollout_index"])]
        text = before["response"]["output"][-1]["content"][0]["text"]
        assert row["reward"] == float(text.strip() == before["expected_answer"])  # exact: the whole text
        assert row[PREVIOUS_REWARD] == before["reward"]
        assert row[REVERIFIED_WITH] == "builtin:exact"
        assert row["extracted_answer"] == text.strip()  # verifier fields updated
        kept = {k: v for k, v in row.items() if k not in ("reward", "extracted_answer", "is_correct")}
        assert {k: v for k, v in kept.items() if k not in (PREVIOUS_REWARD, REVERIFIED_WITH)} == {
            k: v for k, v in before.items() if k not in ("reward", "extracted_answer", "is_correct")
        }
        assert list(row)[: len(before)] == list(before)  # key order kept, new keys at the end
        assert schemas.validator("rollout").is_valid(row)
    ones = sum(r["reward"] == 1.0 for r in old.values())
    assert result["changes"] == {
        "rows": 24,
        "increased": 0,
        "decreased": ones,
        "unchanged": 24 - ones,
        "newly_scored": 0,
        "no_longer_scored": 0,
        "unscored": 0,
        "mean_before": ones / 24,
        "mean_after": 0.0,
        "changed": ones,
    }
    text = _reverify(run_ngrp, run_dir, "--output", "exact2.jsonl", "--verifier", "exact").stdout
    assert f"rewards: {ones} of 24 changed (0 up, {ones} down" in text


def test_refusals(run_dir, run_ngrp):
    same = _reverify(run_ngrp, run_dir, "--output", "rollouts.jsonl", "--verifier", "math")
    assert same.returncode == 2 and "in place" in same.stderr
    assert _reverify(run_ngrp, run_dir, "--output", "out.jsonl", "--verifier", "math").returncode == 0
    again = _reverify(run_ngrp, run_dir, "--output", "out.jsonl", "--verifier", "math")
    assert again.returncode == 2 and "--resume" in again.stderr
    both = _reverify(
        run_ngrp, run_dir, "--output", "out.jsonl", "--verifier", "math", "--resume", "--overwrite"
    )
    assert both.returncode == 2
    assert (
        _reverify(run_ngrp, run_dir, "--output", "out.jsonl", "--verifier", "math", "--overwrite").returncode
        == 0
    )
    changed = _reverify(run_ngrp, run_dir, "--output", "out.jsonl", "--verifier", "exact", "--resume")
    assert changed.returncode == 2 and "verifier" in changed.stderr  # the manifest says math
    assert _reverify(run_ngrp, run_dir, "--output", "o2.jsonl").returncode == 2  # no verifier chosen
    missing = run_ngrp(
        "reverify",
        "--rollouts",
        run_dir / "nope.jsonl",
        "--output",
        run_dir / "x.jsonl",
        "--verifier",
        "math",
    )
    assert missing.returncode == 3


def test_a_refused_overwrite_keeps_the_earlier_outputs(run_dir, run_ngrp):
    """--overwrite replaces the earlier run only once the new source has been read and checked."""
    assert _reverify(run_ngrp, run_dir, "--output", "out.jsonl", "--verifier", "exact").returncode == 0
    earlier = {p.name: p.read_bytes() for p in run_dir.glob("out*") if p.suffix != ".lock"}
    assert set(earlier) == {"out.jsonl", "out_failures.jsonl", "out_reverify_manifest.json"}
    bad = run_dir / "bad.jsonl"
    lines = (run_dir / "rollouts.jsonl").read_bytes()
    bad.write_bytes(lines + b'{"_ng_task_index": "x"}\n')
    number = lines.count(b"\n") + 1
    for extra in ((), ("--inputs", str(run_dir / "nope.jsonl"))):
        proc = run_ngrp("reverify", "--rollouts", bad, "--output", "out.jsonl", "--verifier", "exact",
                        "--overwrite", *extra, cwd=run_dir)  # fmt: skip
        assert proc.returncode == 3, proc.stderr
        assert (f"bad.jsonl:{number}" if not extra else "nope.jsonl") in proc.stderr
        assert {p.name: p.read_bytes() for p in run_dir.glob("out*") if p.suffix != ".lock"} == earlier


def test_rows_that_cannot_be_rescored_go_to_the_failures_sidecar(run_dir, run_ngrp):
    rows = _rows(run_dir / "rollouts.jsonl")
    del rows[0]["response"]
    (run_dir / "rollouts.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    proc = _reverify(run_ngrp, run_dir, "--output", "p.jsonl", "--verifier-fn", "verifiers:picky", "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    failures = _rows(run_dir / "p_failures.jsonl")
    classes = Counter(f["_ng_failure_class"] for f in failures)
    first = (rows[0]["_ng_task_index"], rows[0]["_ng_rollout_index"])
    task1 = sum(
        1 for r in rows if r["_ng_task_index"] == 1 and (r["_ng_task_index"], r["_ng_rollout_index"]) != first
    )
    assert classes == {"no_response": 1, "verify_failed": task1}
    assert all(schemas.validator("failure").is_valid(f) for f in failures)
    assert result["missing"] == 1 + task1 and result["completed"] == 24 - 1 - task1
    # --resume retries only the failed rows (up to --max-attempts), and refuses nothing else
    again = _reverify(
        run_ngrp, run_dir, "--output", "p.jsonl", "--verifier-fn", "verifiers:picky", "--resume", "--json"
    )
    assert (
        json.loads(again.stdout)["rescored"] == 0
        and json.loads(again.stdout)["skipped_completed"] == 23 - task1
    )
    out = _rows(run_dir / "p.jsonl")
    assert all(r["judge"] == "picky" and r["reward"] == 0.5 for r in out)


def test_rows_that_use_up_max_attempts_get_the_max_attempts_advice(run_dir, run_ngrp):
    """A plain --resume skips rows out of attempts: the run whose attempt was their last says so."""
    argv = ("--output", "m.jsonl", "--verifier-fn", "verifiers:picky", "--max-attempts", "2")
    first = _reverify(run_ngrp, run_dir, *argv)
    assert first.returncode == 1 and "--resume to retry the rows that failed" in first.stderr
    assert "0 out of attempts" in first.stdout
    second = _reverify(run_ngrp, run_dir, *argv, "--resume", "--json")
    failed = json.loads(second.stdout)
    assert failed["failed"] == failed["missing"] == failed["exhausted"] > 0
    n = failed["missing"]
    advice = (
        f"incomplete: {n} rows reached --max-attempts 2;"
        " rerun the same command with --resume --max-attempts N (N > 2) to retry them"
    )
    assert second.stderr.strip().endswith(advice)
    again = _reverify(run_ngrp, run_dir, *argv, "--resume")
    assert f"{n} out of attempts" in again.stdout and "0 re-scored, 0 failed" in again.stdout
    assert again.stderr.strip().endswith(advice)


def test_inputs_give_the_verifier_the_materialized_row(run_dir, run_ngrp):
    inputs = _rows(run_dir / "rollouts_materialized_inputs.jsonl")
    (run_dir / "m.jsonl").write_bytes(
        b"".join(orjson.dumps({**r, "only_in_inputs": 1}) + b"\n" for r in inputs)
    )
    proc = _reverify(
        run_ngrp,
        run_dir,
        "--output",
        "i.jsonl",
        "--inputs",
        "m.jsonl",
        "--verifier-fn",
        "verifiers:sees_inputs",
    )
    assert proc.returncode == 0, proc.stderr
    assert all(r["reward"] == 1.0 and r["saw_reward"] is False for r in _rows(run_dir / "i.jsonl"))
    plain = _reverify(run_ngrp, run_dir, "--output", "j.jsonl", "--verifier-fn", "verifiers:sees_inputs")
    assert plain.returncode == 0
    # without --inputs the rollout row is the verifier's input, minus its old reward
    assert all(r["reward"] == 0.0 and r["saw_reward"] is False for r in _rows(run_dir / "j.jsonl"))
    (run_dir / "short.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in inputs[1:]))
    gap = _reverify(run_ngrp, run_dir, "--output", "k.jsonl", "--inputs", "short.jsonl", "--verifier", "math")
    assert gap.returncode == 3 and "no row in --inputs" in gap.stderr
    no_answer = b"".join(
        orjson.dumps({k: v for k, v in r.items() if k != "expected_answer"}) + b"\n" for r in inputs
    )
    (run_dir / "na.jsonl").write_bytes(no_answer)
    refused = _reverify(
        run_ngrp, run_dir, "--output", "l.jsonl", "--inputs", "na.jsonl", "--verifier", "math"
    )
    assert refused.returncode == 3 and "expected_answer" in refused.stderr
    assert not (run_dir / "l.jsonl").exists() or not (run_dir / "l.jsonl").read_text()


def test_duplicate_source_keys_are_refused(run_dir, run_ngrp):
    path = run_dir / "rollouts.jsonl"
    path.write_bytes(path.read_bytes() + path.read_bytes().splitlines(keepends=True)[0])
    proc = _reverify(run_ngrp, run_dir, "--output", "d.jsonl", "--verifier", "math")
    assert proc.returncode == 1 and "ngrp merge" in proc.stderr


def test_kill_9_mid_run_then_resume_each_key_exactly_once(tmp_path):
    run = clean_run(100)  # 400 rows, 20 ms each, 8 in flight: about a second
    run.write(tmp_path)
    (tmp_path / "verifiers.py").write_text(SLOW_VERIFIER)
    args = [
        *ENTRY,
        "reverify",
        "--rollouts",
        "rollouts.jsonl",
        "--output",
        "slow.jsonl",
        "--verifier-fn",
        "verifiers:slow",
        "--concurrency",
        "8",
    ]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out = tmp_path / "slow.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not out.exists() or out.read_bytes().count(b"\n") < 60):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    first = out.read_bytes().count(b"\n")
    assert 60 <= first < 400, "the kill came too late to test anything"
    resumed = subprocess.run(
        [*args, "--resume", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["resumed"] and result["skipped_completed"] >= first - 1  # a torn last row is re-run
    keys = Counter((r["_ng_task_index"], r["_ng_rollout_index"]) for r in _rows(out))
    assert len(keys) == 400 and set(keys.values()) == {1}
    assert all(r["checked_by"] == "slow" for r in _rows(out))
    assert result["changes"]["rows"] == 400


def test_reward_changes_counts_every_direction(tmp_path):
    rows = [(0.0, 1.0), (1.0, 0.0), (1.0, 1.0), (None, 1.0), (0.5, None), (None, None), (True, 0.25)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"reward": new, PREVIOUS_REWARD: old}) + "\n" for old, new in rows))
    c = reward_changes(path)
    assert (c.increased, c.decreased, c.unchanged, c.newly_scored, c.no_longer_scored, c.unscored) == (
        1,
        2,
        1,
        1,
        1,
        1,
    )
    assert c.mean_before == pytest.approx((0 + 1 + 1 + 1) / 4) and c.mean_after == pytest.approx(2.25 / 4)


# ---- /verify: concurrency, bounded retries, timeouts ------------------------------------------


def _verify_app(first_status: int = 503, sleep: float = 0.0):
    from aiohttp import web

    seen: Counter = Counter()
    state = {"in_flight": 0, "max_in_flight": 0}
    lock = threading.Lock()

    async def verify(request):
        import asyncio

        body = await request.json()
        key = (body["_ng_task_index"], body["_ng_rollout_index"])
        with lock:
            seen[key] += 1
            state["in_flight"] += 1
            state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
            attempt = seen[key]
        try:
            await asyncio.sleep(sleep or 0.01)
            if attempt == 1 and first_status != 200:
                return web.Response(status=first_status, text="busy")
            text = body["response"]["output"][-1]["content"][0]["text"]
            return web.json_response(
                {**body, "reward": float(body["expected_answer"] in text), "judged": True}
            )
        finally:
            with lock:
                state["in_flight"] -= 1

    app = web.Application()
    app.router.add_post("/verify", verify)
    return app, seen, state


def test_verify_url_retries_transient_errors_concurrently(run_dir, run_ngrp):
    app, seen, state = _verify_app(503)
    with serve_app(app) as url:
        proc = _reverify(
            run_ngrp,
            run_dir,
            "--output",
            "u.jsonl",
            "--verify-url",
            url + "/verify",
            "--concurrency",
            "4",
            "--max-retries",
            "2",
            "--json",
        )
    assert proc.returncode == 0, proc.stderr
    assert set(seen.values()) == {2} and len(seen) == 24  # each row: one 503, then the answer
    assert 2 <= state["max_in_flight"] <= 4
    out = _rows(run_dir / "u.jsonl")
    assert all(r["judged"] is True and "response" in r for r in out)
    assert {r[REVERIFIED_WITH] for r in out} == {f"url:{url}/verify"}


def test_verify_url_timeouts_are_bounded_and_recorded(run_dir, run_ngrp):
    app, seen, _state = _verify_app(200, sleep=2.0)
    with serve_app(app) as url:
        proc = _reverify(
            run_ngrp,
            run_dir,
            "--output",
            "t.jsonl",
            "--verify-url",
            url + "/verify",
            "--timeout",
            "0.2",
            "--max-retries",
            "1",
            "--concurrency",
            "24",
        )
    assert proc.returncode == 1
    # the first try and one retry, no more (on a loaded machine a try can time out before it lands)
    assert max(seen.values()) <= 2
    failures = _rows(run_dir / "t_failures.jsonl")
    assert len(failures) == 24
    assert {(f["_ng_failure_class"], f["_ng_failure_type"]) for f in failures} == {
        ("verify_failed", "TimeoutError")
    }
    assert all(f["_ngrp_retries"] == 1 for f in failures)


def test_a_dead_verify_url_is_named_before_anything_is_written(run_dir, run_ngrp):
    from vllm_fixture import free_port

    port = free_port()
    proc = _reverify(
        run_ngrp, run_dir, "--output", "d.jsonl", "--verify-url", f"http://127.0.0.1:{port}/verify"
    )
    assert proc.returncode == 2
    assert f"connection refused at http://127.0.0.1:{port}/ (the --verify-url server)" in proc.stderr
    assert not list(run_dir.glob("d*"))  # no output, sidecar, manifest or lock


def test_verify_url_client_error_is_not_retried(run_dir, run_ngrp):
    app, seen, _state = _verify_app(422)
    with serve_app(app) as url:
        proc = _reverify(
            run_ngrp, run_dir, "--output", "c.jsonl", "--verify-url", url + "/verify", "--max-retries", "3"
        )
    assert proc.returncode == 1
    assert set(seen.values()) == {1}
    failures = _rows(run_dir / "c_failures.jsonl")
    assert {f["_ng_failure_http_status"] for f in failures} == {422}


def test_no_verifier_and_no_run_manifest_is_a_usage_error_naming_both(run_dir, run_ngrp):
    """Without a verifier option, reverify uses the run's own from the manifest beside --rollouts; a run
    ngrp did not collect has none: refused, naming the manifest it looked for and the options."""
    proc = _reverify(run_ngrp, run_dir, "--output", "same.jsonl")
    assert proc.returncode == 2
    assert f"no run manifest beside {run_dir / 'rollouts.jsonl'} names the run's" in proc.stderr
    assert "--verifier exact|math|mcq|regex" in proc.stderr
    assert not (run_dir / "same.jsonl").exists()


def test_the_documented_components_verifier_runs_as_written(run_dir, run_ngrp):
    """W7: references/collection.md's `--verifier-fn` block that returns `reward_components`, written to
    the file it names and run as the text says: reverify stores the components on every row and stats
    reports each."""
    import re

    doc = (Path(__file__).resolve().parents[1] / "references" / "collection.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(# mycomponents\.py.*?)```", doc, re.S)
    (run_dir / "mycomponents.py").write_text(block)
    proc = _reverify(
        run_ngrp, run_dir, "--output", "comp/rollouts.jsonl", "--verifier-fn", "mycomponents:score"
    )
    assert proc.returncode == 0, proc.stderr
    rows = _rows(run_dir / "comp" / "rollouts.jsonl")
    assert rows and all(set(r["reward_components"]) == {"correct", "only_number"} for r in rows)
    assert all(r["reward"] == r["reward_components"]["correct"] for r in rows)
    inputs = run_dir / "rollouts_materialized_inputs.jsonl"
    profiled = run_ngrp("profile", "--inputs", inputs, "--rollouts", "comp/rollouts.jsonl", cwd=run_dir)
    assert profiled.returncode == 0, profiled.stderr
    stats = run_ngrp("stats", "comp/rollouts_reward_profiling.jsonl", "--rollouts", "comp/rollouts.jsonl",
                     cwd=run_dir)  # fmt: skip
    assert stats.returncode == 0, stats.stderr
    assert "  correct: " in stats.stdout and "  only_number: " in stats.stdout


def test_naming_the_runs_own_verifier_is_the_same_audit(run_dir, run_ngrp):
    """`--verifier exact` on a run the manifest says was scored with exact (same answer key, no pattern)
    is the audit, as with no verifier option: a stored reward that differs exits 1 and the answer line
    says so (hostile pass 6: it exited 0 and spoke of 'the tasks the verifier change flipped'). Another
    verifier, or the same one on another answer key, is a re-score: exit 0."""
    assert _reverify(run_ngrp, run_dir, "--output", "exact.jsonl", "--verifier", "exact").returncode == 0
    scored = [
        {k: v for k, v in r.items() if not k.startswith("ngrp/")} for r in _rows(run_dir / "exact.jsonl")
    ]
    (run_dir / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scored))  # exact's rewards
    manifest = run_dir / "rollouts_run_manifest.json"
    manifest.write_text(json.dumps({"identity": {"verifier": "exact", "answer_key": "expected_answer"}}))
    clean = _reverify(run_ngrp, run_dir, "--output", "clean.jsonl", "--verifier", "exact", "--json")
    assert clean.returncode == 0 and json.loads(clean.stdout)["verifier_from"] == str(manifest)
    rows = _rows(run_dir / "rollouts.jsonl")
    rows[0]["reward"] = 1.0 - rows[0]["reward"]
    (run_dir / "rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for args in ((), ("--verifier", "exact")):
        proc = _reverify(run_ngrp, run_dir, "--output", "audit.jsonl", *args, "--overwrite")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"the run's own verifier from {manifest}" in proc.stdout
        assert f"answer: 1 of {len(rows)} stored rewards differ" in proc.stdout
    manifest.write_text(json.dumps({"identity": {"verifier": "exact", "answer_key": "answer"}}))
    for args in (("--verifier", "math"), ("--verifier", "exact")):  # another verifier; another answer key
        proc = _reverify(run_ngrp, run_dir, "--output", "other.jsonl", *args, "--overwrite", "--json")
        result = json.loads(proc.stdout)
        assert result["verifier_from"] is None and result["exit_code"] == 0 == proc.returncode, proc.stderr
