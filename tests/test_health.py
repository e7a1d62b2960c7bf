"""`ngrp health`: planted defects (each flagged with its id, nothing else), clean runs all healthy, task
checks, --ignore-checks as Gym has it, output naming and overwrite rules, the text summary, the loop
detector against a brute-force search, and the schemas of both files and of --json."""

from __future__ import annotations

import json
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from health_data import REPEATS, clean_run, planted_run, task_level_run

from ngrp_lib.artifacts import schemas
from ngrp_lib.audit.health import run_health
from ngrp_lib.audit.health_checks import CHECK_IDS, Settings, parse_ignored
from ngrp_lib.audit.health_text import MAX_UNIT, find_loop
from ngrp_lib.errors import UsageError


def _verdicts(folder: Path, name: str = "rollout_verdicts.jsonl") -> list[dict]:
    return [json.loads(line) for line in (folder / name).read_text().splitlines()]


def _valid(name: str, value) -> None:
    errors = [e.message for e in schemas.validator(name).iter_errors(value)]
    assert errors == [], errors


def _by_key(rows: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for row in rows:
        out.setdefault((row["_ng_task_index"], row["_ng_rollout_index"]), []).append(row)
    return out


def test_planted_defects_each_flagged_with_its_id_and_nothing_else(tmp_path):
    run = planted_run()
    inputs, rollouts, _ = run.write(tmp_path)
    result = run_health(inputs, rollouts)
    rows = _verdicts(tmp_path)
    by_key = _by_key(rows)
    flagged = set()
    for name, key in run.planted.items():
        check = name.removesuffix("/sidecar")
        copies = by_key[key]
        assert len(copies) == (2 if check == "rollout_duplicate_identity" else 1), name
        for row in copies:
            assert [f["check"] for f in row["findings"]] == [check], (name, row)
            assert row["verdict"] == "unhealthy"
        flagged.add(key)
    for key, copies in by_key.items():
        if key not in flagged:
            assert [r["verdict"] for r in copies] == ["healthy"], (key, copies)
    summary = json.loads((tmp_path / "quality_summary.json").read_text())
    expected = Counter(name.removesuffix("/sidecar") for name in run.planted)
    expected["rollout_duplicate_identity"] += 1  # both copies
    assert {k: v for k, v in summary["run"]["issues"].items() if v} == dict(expected)
    assert all(t["flags"] == [] for t in summary["tasks"].values())
    assert result.exit_code == 1
    assert summary["run"]["verdicts"]["unhealthy"] == sum(expected.values())
    keys = summary["ngrp"]["keys"]
    # 15:0 lost its identity, so that key is missing
    assert (keys["failure_only"], keys["unreadable_lines"], keys["missing"]) == (2, 1, 1)
    assert rows == sorted(
        rows, key=lambda r: tuple(_part(r[k]) for k in ("_ng_task_index", "_ng_rollout_index"))
    )
    _valid("quality_summary", summary)
    for row in rows:
        _valid("rollout_verdict", row)
    _valid("health_result", json.loads(json.dumps(result.to_json())))


def _part(value):
    return (0, value) if isinstance(value, int) else (1, str(value))


@pytest.mark.parametrize("case", ["case_complete", "case_fan_out"])
def test_clean_golden_cases_are_all_healthy(golden, tmp_path, case):
    shutil.copytree(golden / case, tmp_path / case)
    folder = tmp_path / case
    result = run_health(folder / "rollouts_materialized_inputs.jsonl", folder / "rollouts.jsonl")
    assert result.exit_code == 0
    assert result.verdicts == {"healthy": 12, "unhealthy": 0, "unobserved": 0}
    assert not any(result.summary["run"]["issues"].values())


def test_clean_generated_run_is_all_healthy(tmp_path):
    inputs, rollouts, _ = clean_run(6).write(tmp_path)
    result = run_health(inputs, rollouts)
    assert result.verdicts == {"healthy": 6 * REPEATS, "unhealthy": 0, "unobserved": 0}
    coverage = result.summary["run"]["artifacts"]["coverage"]
    assert coverage["ngrp/answer_not_extracted"] == {
        "evaluated": 24,
        "unobserved": 0,
        "ignored": 0,
        "not_applicable": 0,
    }
    assert coverage["task_consistently_unhealthy"] == {"evaluated": 6, "unobserved": 0, "ignored": 0}


def test_task_level_checks(tmp_path):
    inputs, rollouts, _ = task_level_run().write(tmp_path)
    summary = run_health(inputs, rollouts).summary
    assert summary["tasks"]["0"]["flags"] == ["task_consistently_unhealthy"]
    assert summary["tasks"]["1"]["flags"] == ["task_no_successful_model_calls"]
    assert summary["tasks"]["2"]["flags"] == []
    coverage = summary["run"]["artifacts"]["coverage"]
    # task 1 has one repeat: too few to call it consistently anything (Gym needs 2 judged repeats)
    assert coverage["task_consistently_unhealthy"] == {"evaluated": 2, "unobserved": 1, "ignored": 0}
    assert coverage["task_no_successful_model_calls"] == {"evaluated": 3, "unobserved": 0, "ignored": 0}
    assert summary["run"]["issues"]["task_consistently_unhealthy"] == 1
    assert summary["run"]["stats"]["model_call_errors"]["total"] == 1


def test_a_rollout_without_response_is_unobserved_not_healthy(tmp_path):
    run = clean_run(2)
    row = json.loads(run.lines[0])
    del row["response"]
    run.lines[0] = (json.dumps(row) + "\n").encode()
    inputs, rollouts, _ = run.write(tmp_path)
    result = run_health(inputs, rollouts)
    first = _by_key(_verdicts(tmp_path))[(0, 0)][0]
    assert first["verdict"] == "unobserved"
    assert "model_call_failed" in first["unobserved"] and "ngrp/reward_not_numeric" not in first["unobserved"]
    assert result.exit_code == 1


def test_ignore_checks_as_gym(tmp_path):
    assert parse_ignored(("model_call_failed, ngrp/repetition_loop", "model_call_failed")) == {
        "model_call_failed",
        "ngrp/repetition_loop",
    }
    with pytest.raises(UsageError, match="unknown health check"):
        parse_ignored(["model_call_failed,no_such_check"])
    run = planted_run()
    inputs, rollouts, _ = run.write(tmp_path)
    ignored = parse_ignored(["model_call_runaway_generation,rollout_duplicate_identity"])
    summary = run_health(inputs, rollouts, settings=Settings(ignored)).summary
    assert summary["run"]["ignored_checks"] == ["model_call_runaway_generation", "rollout_duplicate_identity"]
    rows = _by_key(_verdicts(tmp_path))
    # what the ignored check explained is reported by the next check: the answer is empty
    assert [f["check"] for f in rows[(4, 0)][0]["findings"]] == ["ngrp/empty_final_answer"]
    assert all(r["verdict"] == "healthy" for r in rows[(14, 0)])
    coverage = summary["run"]["artifacts"]["coverage"]["model_call_runaway_generation"]
    assert coverage == {
        "evaluated": 0,
        "unobserved": 0,
        "ignored": summary["run"]["artifacts"]["records"] + 2,
    }
    assert all("model_call_runaway_generation" not in r["unobserved"] for c in rows.values() for r in c)


def test_outputs_named_by_stem_refused_without_overwrite(tmp_path, run_ngrp):
    inputs, rollouts, _ = clean_run(3).write(tmp_path)
    run_file = rollouts.rename(tmp_path / "run7.jsonl")
    args = ["health", "--inputs", inputs, "--rollouts", run_file]
    first = run_ngrp(*args)
    assert first.returncode == 0, first.stderr
    summary, verdicts = tmp_path / "run7_quality_summary.json", tmp_path / "run7_rollout_verdicts.jsonl"
    before = summary.read_bytes(), verdicts.read_bytes()
    rows = run_file.read_bytes().splitlines(keepends=True)
    edited = json.loads(rows[-1])  # the run changed, not grown: what health would write differs
    edited["reward"] = 1.0 - edited["reward"]
    run_file.write_bytes(b"".join(rows[:-1]) + json.dumps(edited).encode() + b"\n")
    again = run_ngrp(*args)
    assert again.returncode == 2 and "already exists and this judgement differs" in again.stderr
    assert (summary.read_bytes(), verdicts.read_bytes()) == before
    assert run_ngrp(*args, "--overwrite").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp files left
    assert run_ngrp(*args, "--overwrite", "--ignore-checks", "bogus").returncode == 2
    missing = run_ngrp("health", "--inputs", inputs, "--rollouts", tmp_path / "nope.jsonl", "--overwrite")
    assert missing.returncode == 3 and "nope.jsonl" in missing.stderr


def test_cli_text_and_json(tmp_path, run_ngrp):
    run = task_level_run()
    inputs, rollouts, _ = run.write(tmp_path)
    proc = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--json")
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)
    _valid("health_result", payload)
    rows = [json.loads(line) for line in run.lines]
    zero = [r for r in rows if r["reward"] == 0]
    unhealthy_zero = [r for r in zero if r["_ng_task_index"] == 1]  # the failed call (reward 0)
    assert payload["zero_rewards"]["total"] == len(zero)
    assert payload["zero_rewards"]["unhealthy"] == len(unhealthy_zero)
    assert payload["zero_rewards"]["share_unhealthy"] == pytest.approx(len(unhealthy_zero) / len(zero))
    assert payload["flagged_tasks"]["task_consistently_unhealthy"] == [0]
    text = run_ngrp("health", "--inputs", inputs, "--rollouts", rollouts, "--overwrite").stdout
    assert re.search(r"ngrp/reward_not_numeric +4 / 4 rollouts", text)
    assert "tasks where every repeat is unhealthy: 1 (task 0)" in text
    assert f"zero rewards: {len(zero)}, of which {len(unhealthy_zero)} unhealthy" in text
    assert "--exclude-unhealthy" in text


def test_verdict_files_validate_with_ngrp_validate(tmp_path, run_ngrp):
    inputs, rollouts, _ = planted_run().write(tmp_path)
    run_health(inputs, rollouts)
    proc = run_ngrp("validate", tmp_path / "rollout_verdicts.jsonl", tmp_path / "quality_summary.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_gym_written_health_files_validate(golden):
    stack = golden.parent / "gym-stack"
    _valid("quality_summary", json.loads((stack / "quality_summary.json").read_text()))
    for line in (stack / "rollout_verdicts_2rows.jsonl").read_text().splitlines():
        _valid("rollout_verdict", json.loads(line))


def test_gym_stack_rows_stopped_at_the_cap(golden, tmp_path):
    """Real Gym rollouts (tiny model, max_output_tokens 20): every one stopped at the cap with text."""
    stack = golden.parent / "gym-stack"
    shutil.copy(stack / "rollouts_2rows.jsonl", tmp_path / "rollouts.jsonl")
    shutil.copy(stack / "rollouts_materialized_inputs.jsonl", tmp_path)
    result = run_health(tmp_path / "rollouts_materialized_inputs.jsonl", tmp_path / "rollouts.jsonl")
    assert result.affected["ngrp/truncated_at_token_cap"] == 2
    tokens = {"prompt": 84, "completion": 40, "capture_prompt": 0, "capture_completion": 0}  # 2 x (42 + 20)
    assert result.summary["run"]["stats"]["tokens"] == tokens


def test_check_names_health_for_capped_rollouts(golden, tmp_path, run_ngrp):
    stack = golden.parent / "gym-stack"
    proc = run_ngrp(
        "check",
        "--inputs",
        stack / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        stack / "rollouts_2rows.jsonl",
        "--json",
    )
    finding = next(
        f for f in json.loads(proc.stdout)["findings"] if f["code"] == "zero_token_or_capped_rollouts"
    )
    assert finding["count"] == 2 and finding["fix"].startswith("ngrp health --inputs")
    clean = run_ngrp(
        "check",
        "--json",
        "--inputs",
        golden / "case_complete" / "rollouts_materialized_inputs.jsonl",
        "--rollouts",
        golden / "case_complete" / "rollouts.jsonl",
    )
    assert all(f["code"] != "zero_token_or_capped_rollouts" for f in json.loads(clean.stdout)["findings"])


def test_loop_threshold_options(tmp_path, run_ngrp):
    inputs, rollouts, _ = planted_run().write(tmp_path)
    base = ["health", "--inputs", inputs, "--rollouts", rollouts, "--json", "--overwrite"]
    loops = {
        n: next(
            c
            for c in json.loads(run_ngrp(*base, *extra).stdout)["checks"]
            if c["id"] == "ngrp/repetition_loop"
        )
        for n, extra in (
            (30, ["--loop-min-repeats", "30"]),
            (31, ["--loop-min-repeats", "31"]),
            (0, ["--loop-min-chars", "600"]),
        )
    }
    # the planted loop: 30 copies over 540 characters
    assert (loops[30]["findings"], loops[31]["findings"], loops[0]["findings"]) == (1, 0, 0)
    assert run_ngrp(*base, "--loop-min-repeats", "1").returncode == 2


# ---- the loop detector against a brute-force search --------------------------------------------


def brute_force_loop(text: str, repeats: int, chars: int) -> bool:
    """Any stretch with period p <= MAX_UNIT holding >= repeats whole copies over >= chars characters."""
    n = len(text)
    for p in range(1, min(MAX_UNIT, n) + 1):
        run = 0
        for i in range(n - p):
            run = run + 1 if text[i] == text[i + p] else 0
            copies = (run + p) // p
            if run and copies >= repeats and copies * p >= chars:
                return True
    return False


def test_find_loop_equals_brute_force_on_random_texts():
    rng = random.Random(11)
    for _ in range(400):
        alphabet = rng.choice(["ab", "abc", "abcdefgh ", "xy z"])
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        if rng.random() < 0.5:
            unit = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
            at = rng.randint(0, len(text))
            text = text[:at] + unit * rng.randint(2, 12) + unit[: rng.randint(0, len(unit))] + text[at:]
        repeats, chars = rng.randint(2, 12), rng.randint(1, 100)
        assert (find_loop(text, repeats, chars) is not None) == brute_force_loop(text, repeats, chars), (
            text,
            repeats,
            chars,
        )


def brute_force_loop_numpy(text: str, repeats: int, chars: int) -> bool:
    """The same search, one vectorised pass per period: the longest run of text[i] == text[i + p]."""
    import numpy as np

    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    n = codes.size
    for p in range(1, min(MAX_UNIT, n) + 1):
        equal = np.concatenate(([False], codes[:-p] == codes[p:], [False]))
        edges = np.flatnonzero(np.diff(equal.astype(np.int8)))
        for run in (edges[1::2] - edges[::2]).tolist():
            copies = (run + p) // p
            if copies >= repeats and copies * p >= chars:
                return True
    return False


def test_the_two_brute_force_searches_agree():
    rng = random.Random(5)
    for _ in range(60):
        text = "".join(rng.choice("abc ") for _ in range(rng.randint(0, 200)))
        unit = "".join(rng.choice("abc ") for _ in range(rng.randint(1, 30)))
        text = text[: len(text) // 2] + unit * rng.randint(1, 8) + text[len(text) // 2 :]
        repeats, chars = rng.randint(2, 9), rng.randint(1, 80)
        assert brute_force_loop(text, repeats, chars) == brute_force_loop_numpy(text, repeats, chars)


def test_find_loop_equals_brute_force_for_long_units_and_long_texts():
    """Periods up to MAX_UNIT, where only every 2^k-th anchor looks back far enough: loops just long enough
    (repeats copies, or min_chars) at every offset from the end, among natural-looking text."""
    rng = random.Random(23)
    words = "the step so then check sum of first box next compute therefore below get".split()  # noqa: SIM905

    def prose(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    for case in range(120):
        unit_len = rng.choice([1, 7, 39, 41, 80, 81, 160, 161, 320, 321, 499, 500, rng.randint(1, 500)])
        unit = (prose(unit_len) + " ")[:unit_len]
        repeats = rng.choice([2, 3, 10, 10, 12])
        chars = rng.choice([1, 50, 200, 200, 1000])
        copies = max(repeats, -(-chars // unit_len)) - rng.choice([0, 0, 1])  # at, or just under, the bar
        before, after = prose(rng.randint(0, 300)), prose(rng.randint(0, 300))
        text = f"{before} {unit * max(copies, 1)}{unit[: rng.randint(0, unit_len - 1)]} {after}"
        expected = brute_force_loop_numpy(text, repeats, chars)
        assert (find_loop(text, repeats, chars) is not None) == expected, (case, unit_len, repeats, chars)


def test_find_loop_reports_unit_copies_and_start():
    text = "Intro. " + "ab cd " * 50 + "end"
    unit, copies, start = find_loop(text, 10, 200)
    assert (unit, copies, start) == (" ab cd", 50, 6)  # the maximal stretch: the space before it repeats too
    assert find_loop("The quick brown fox jumps over the lazy dog. " * 3, 10, 100) is None
    prose = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert find_loop(prose, 10, 200) is None


def test_every_check_id_is_documented_in_the_schema_and_skill():
    ids = set(schemas.load("health_result")["properties"]["checks"]["items"]["properties"]["id"]["enum"])
    assert ids == set(CHECK_IDS)
    docs = (Path(__file__).resolve().parents[1] / "references" / "health.md").read_text()
    assert all(f"`{check}`" in docs for check in CHECK_IDS)


def test_healthy_row_shortcut_writes_what_orjson_writes():
    import orjson

    from ngrp_lib.audit.health import _HEALTHY_ROW, Digest, verdict_row

    for task, rollout in ((0, 0), (7, 12), (2**40, 3)):
        digest = Digest(task, rollout)
        expected = orjson.dumps(verdict_row(digest), option=orjson.OPT_APPEND_NEWLINE)
        assert _HEALTHY_ROW % (task, rollout, task, rollout) == expected


def test_an_inline_think_block_with_nothing_after_it_is_reasoning_without_answer(tmp_path):
    """inspect's reading of a message: a model served without a reasoning parser writes its thoughts
    inline; what follows `</think>` is the final answer."""
    run = clean_run(2)
    rows = [json.loads(line) for line in run.lines]
    rows[0]["response"]["output"][-1]["content"][0]["text"] = "<think>add 0 and 0, carefully</think>  "
    rows[1]["response"]["output"][-1]["content"][0]["text"] = "<think>add 0 and 1</think>\\boxed{1}"
    run.lines = [(json.dumps(r) + "\n").encode() for r in rows]
    inputs, rollouts, _ = run.write(tmp_path)
    run_health(inputs, rollouts)
    verdicts = _by_key(_verdicts(tmp_path))
    first, second = ((rows[i]["_ng_task_index"], rows[i]["_ng_rollout_index"]) for i in (0, 1))
    assert [f["check"] for f in verdicts[first][0]["findings"]] == ["ngrp/reasoning_without_final_answer"]
    assert verdicts[second][0]["verdict"] == "healthy"
