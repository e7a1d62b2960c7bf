"""`ngrp health`'s cause classes: each check's class, one cause per zero (or missing score) by precedence,
`ngrp/expected_answer_in_reply` on real replies (true and false cases), and the `answer:` line on
hand-built rows and on a few rows of a real run (tests/golden/real-run-c)."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path

import orjson
import pytest
from health_data import CAP, clean_run
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ngrp_lib.artifacts import answers, schemas
from ngrp_lib.audit.health import run_health
from ngrp_lib.audit.health_causes import PRECEDENCE, deciding
from ngrp_lib.audit.health_checks import REGISTRY, ROLLOUT
from ngrp_lib.audit.verifier_checks import stated_expected
from ngrp_lib.commands.health import render_text

CHECK = "ngrp/expected_answer_in_reply"
REAL_RUN = Path(__file__).resolve().parent / "golden" / "real-run-c"


def test_every_check_has_a_documented_cause():
    causes = {check.id: check.cause for check in REGISTRY}
    assert all(cause in PRECEDENCE for cid, cause in causes.items() if cid != "task_consistently_unhealthy")
    assert causes["task_consistently_unhealthy"] is None  # it sums up its rollouts' verdicts
    spot = {
        "model_call_failed": "infrastructure",
        "ngrp/truncated_at_token_cap": "setting",
        "ngrp/answer_not_extracted": "verifier",
        CHECK: "verifier",
        "ngrp/repetition_loop": "policy",
        "record_unreadable": "record",
    }
    assert {c: causes[c] for c in spot} == spot
    schema = schemas.load("health_result")["properties"]["checks"]["items"]["properties"]["cause"]["enum"]
    assert set(causes.values()) <= set(schema)


def test_the_first_cause_in_precedence_decides_for_every_pair_of_checks():
    rollout_checks = [c for c in REGISTRY if c.scope == ROLLOUT]
    for a, b in itertools.permutations(rollout_checks, 2):
        findings = [{"check": a.id, "detail": {}}, {"check": b.id, "detail": {}}]
        expected = min((a, b), key=lambda c: (PRECEDENCE.index(c.cause), REGISTRY.index(c)))
        assert deciding(findings)["check"] == expected.id, (a.id, b.id)
    assert deciding([]) is None


# Real replies of SmolLM2 scored 0 by the math verifier (runs A and B of issue 30), read by hand: each
# states the expected answer as its result, then more numbers follow and the verifier takes the last.
VERIFIER_MISSED = [
    ("One day in a week is 7 days, not 17 days.", "7", "17"),
    ("The answer is 8, but in this context, it's meant to add just the number 4 to the original", "8", "4"),
    ("9 multiplied by itself is 9*9 = 81, which is a total of 9 times itself.", "81", "9"),
    ("This riddle has a simple explanation: 3*4 = 12, which is the product of 3 and 4.", "12", "4"),
    ("The answer is 24, which is 12 hours.", "24", "12"),
    ("3*4 = 12\n\nIn this math problem, I used the concept of multiplication", "12", "4"),
    ("5*5 = 25\n\nThis is a classic example ... is represented by the number 5.", "25", "5"),
    ("13*11 = 143\n\nThis is a simple example of a multiplication of 13 and 11.", "143", "11"),
    ("So \\boxed{12}. Hmm, or maybe \\boxed{4}", "12", "4"),
    ("The answer is **1,000**. Then 3.", "1000", "3"),
    ("The capital is Paris. Or Lyon", "Paris", "Lyon"),
]
NOT_A_MISS = [
    (
        "1 day is equivalent to 7 hours and 24 minutes.",
        "7",
        "24",
    ),  # real (run A): 7 is not stated as the result
    ("1 + 1 = 3", "1", "3"),  # the operands are the question's own numbers
    ("The answer is 2*1 = 3", "2", "3"),  # the start of an expression, not a result
    ("The answer is 12.", "12", "12"),  # the verifier took the expected answer: a zero for another reason
    ("4 + 4 = 10", "8", "10"),  # the expected answer is nowhere
    ("It is 80 or 8.5", "8", "8.5"),  # 80 is not 8: numbers are compared whole
    ("The capital is Parisian. Lyon", "Paris", "Lyon"),  # not a whole token
]


@pytest.mark.parametrize(("reply", "expected", "extracted"), VERIFIER_MISSED)
def test_expected_answer_stated_as_a_result_is_found(reply, expected, extracted):
    detail = stated_expected(reply, expected, extracted)
    assert detail is not None
    assert (detail["expected_answer"], detail["extracted_answer"]) == (expected, extracted)
    assert expected.replace("1000", "1,000") in detail["context"]


@pytest.mark.parametrize(("reply", "expected", "extracted"), NOT_A_MISS)
def test_expected_answer_not_stated_as_a_result_is_not_found(reply, expected, extracted):
    assert stated_expected(reply, expected, extracted) is None


def _set_text(row: dict, text: str) -> None:
    row["response"]["output"][-1]["content"][0]["text"] = text


def _causes_run(tmp_path):
    """8 tasks x 4 repeats (health_data.clean_run: (task + rollout) odd is a clean wrong answer, reward 0),
    with one zero per cause, two zeros with findings of two causes, and three keys without a score."""
    run = clean_run(8)
    rows = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in map(orjson.loads, run.lines)}
    loop = "Let me think. " + "I add them again. " * 30
    failed = {"status": "failed", "error": {"code": "server_error"}, "output": []}
    rows[(1, 0)]["response"].update(failed)  # infrastructure
    rows[(1, 2)]["response"]["usage"]["output_tokens"] = CAP  # setting: stopped at the cap
    rows[(2, 1)]["extracted_answer"] = None  # verifier: no answer extracted
    _set_text(rows[(2, 3)], loop + "So \\boxed{5}.")  # policy: a loop
    _set_text(rows[(3, 0)], loop + "So \\boxed{7}.")  # policy and verifier: the verifier decides
    rows[(3, 0)]["failure_reason"] = "the judge timed out"
    rows[(3, 2)]["response"].update(failed)  # infrastructure and verifier: infrastructure decides
    rows[(3, 2)]["failure_reason"] = "no reply to judge"
    _set_text(rows[(4, 1)], "4 + 4 = 8. Then add 1: 9.")  # verifier: the expected answer stated, 9 taken
    rows[(4, 1)]["extracted_answer"] = "9"
    _set_text(rows[(4, 3)], "4 + 4 = 8. Then add 1: 9.")  # the same, but at the cap: the setting's
    rows[(4, 3)]["response"]["usage"]["output_tokens"] = CAP
    rows[(5, 0)]["reward"] = None  # no score: the verifier's
    del rows[(6, 1)]  # no score: only a failed attempt (infrastructure)
    del rows[(7, 3)]  # no score: never attempted
    run.lines = [orjson.dumps(r) + b"\n" for r in rows.values()]
    run.failures = [
        {"_ng_failure_class": "agent_request_failed", "_ng_failure_type": "ClientConnectorError",
         "_ng_failure_message": "refused", "_ng_failure_http_status": None, "_ng_task_index": 6,
         "_ng_rollout_index": 1, "agent_ref": {"name": "math_agent"}},
    ]  # fmt: skip
    return run.write(tmp_path)


def test_each_zero_and_missing_score_counted_once_under_its_cause(tmp_path):
    inputs, rollouts, _ = _causes_run(tmp_path)
    result = run_health(inputs, rollouts, write=False)
    causes = result.to_json()["causes"]
    zero, unscored = causes["zero_rewards"], causes["unscored"]
    # 16 odd keys are zeros; (5, 0) lost its score and (6, 1) its row ((7, 3) was a pass): 14 zeros
    assert zero["total"] == 14
    assert zero["by_cause"] == {
        "record": 0,
        "infrastructure": 2,
        "setting": 2,
        "verifier": 3,
        "unknown": 0,
        "policy": 7,
    }
    assert zero["by_check"] == {
        "model_call_failed": 2,
        "ngrp/truncated_at_token_cap": 2,
        "ngrp/verifier_error": 1,
        "ngrp/answer_not_extracted": 1,
        CHECK: 1,
        "ngrp/repetition_loop": 1,
    }
    assert (zero["clean"], zero["max_output_tokens"]) == (6, [CAP])
    assert unscored["total"] == 3
    assert unscored["by_cause"] == {
        "record": 0,
        "infrastructure": 1,
        "setting": 0,
        "verifier": 1,
        "unknown": 0,
        "policy": 0,
    }
    assert (unscored["not_judged"], unscored["not_judged_attempted"], unscored["unexplained"]) == (
        1,
        "never",
        0,
    )
    assert causes["answer"] == (
        "of 32 expected rollouts, 3 have no score: 1 infrastructure (model_call_failed 1), 1 verifier "
        "(ngrp/reward_not_numeric 1), 1 never attempted "
        "(no row, no failed attempt); of 14 zero rewards, 7 are the policy's (6 clean wrong answers, "
        "ngrp/repetition_loop 1), 2 infrastructure (model_call_failed 2), 2 setting "
        "(ngrp/truncated_at_token_cap 2; max_output_tokens 64: cut there, so whether more tokens would pass "
        "is unknown; read them: ngrp health without --no-write, then ngrp inspect "
        f"{result.rollouts} --finding ngrp/truncated_at_token_cap; to settle it, collect those tasks alone "
        "at a larger cap: ngrp health without --no-write, then ngrp inspect "
        f"{result.rollouts} --finding ngrp/truncated_at_token_cap --failed --tasks-out "
        f"{tmp_path / 'capped_tasks.jsonl'} (it prints the collect command)), 3 verifier "
        "(ngrp/answer_not_extracted 1, "
        "ngrp/expected_answer_in_reply 1, ngrp/verifier_error 1; read those replies: ngrp health without "
        f"--no-write, then ngrp inspect {result.rollouts} --finding ngrp/answer_not_extracted) (each counted "
        "once: record > infrastructure > setting > verifier > unknown > policy)"
    )  # the hint is a command to copy: this run's rollouts, after a health run that writes verdicts
    assert render_text(result).splitlines()[-1] == "answer: " + causes["answer"]
    verdicts = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in _verdicts(result, tmp_path)}
    assert [f["check"] for f in verdicts[(4, 1)]["findings"]] == [CHECK]
    assert verdicts[(4, 1)]["findings"][0]["locator"] == {"offset": 8}
    assert [f["check"] for f in verdicts[(4, 3)]["findings"]] == ["ngrp/truncated_at_token_cap"]
    _valid("health_result", json.loads(json.dumps(result.to_json())))


def _verdicts(result, tmp_path):
    run_health(result.inputs, result.rollouts, overwrite=True)
    return [json.loads(line) for line in (tmp_path / "rollout_verdicts.jsonl").read_text().splitlines()]


def _valid(name: str, value) -> None:
    errors = [e.message for e in schemas.validator(name).iter_errors(value)]
    assert errors == [], errors


def test_expected_answer_check_applies_only_with_both_answers(tmp_path):
    run = clean_run(2)
    rows = [orjson.loads(line) for line in run.lines]
    del rows[0]["expected_answer"]  # no expected answer: not applicable
    rows[1]["extracted_answer"] = None  # no extraction: not applicable (answer_not_extracted says it)
    del rows[2]["extracted_answer"]  # neither check applies
    run.lines = [orjson.dumps(r) + b"\n" for r in rows]
    inputs, rollouts, _ = run.write(tmp_path)
    coverage = run_health(inputs, rollouts, write=False).summary["run"]["artifacts"]["coverage"]
    assert coverage[CHECK] == {"evaluated": 5, "unobserved": 0, "ignored": 0, "not_applicable": 3}
    assert coverage["ngrp/answer_not_extracted"]["not_applicable"] == 1
    ignored = run_health(inputs, rollouts, write=False, settings=_ignoring(CHECK)).summary
    assert ignored["run"]["artifacts"]["coverage"][CHECK]["ignored"] == 8


def _ignoring(check: str):
    from ngrp_lib.audit.health_checks import Settings

    return Settings(frozenset({check}))


def test_answer_line_on_a_real_run_that_lost_its_server(tmp_path):
    """Task 5 of a real run (8 rows, max_output_tokens 16), tasks 8 and 9 only failed attempts (13 of
    them; 3 keys of task 9 never attempted): the line names each count and its cause."""
    shutil.copytree(REAL_RUN, tmp_path / "run")
    folder = tmp_path / "run"
    result = run_health(folder / "rollouts_materialized_inputs.jsonl", folder / "rollouts.jsonl", write=False)
    text = render_text(result)
    assert text.splitlines()[-1] == (
        "answer: of 24 expected rollouts, 16 have no score: 13 infrastructure (model_call_failed 13), "
        "3 never attempted (no row, no failed attempt); of 6 zero rewards, 3 are the policy's (3 clean wrong "
        "answers), 3 setting (ngrp/truncated_at_token_cap 3; max_output_tokens 16: cut there, so whether "
        "more tokens would pass is unknown; read them: ngrp health without --no-write, then ngrp inspect "
        f"{folder / 'rollouts.jsonl'} --finding ngrp/truncated_at_token_cap; to settle it, collect those "
        "tasks alone at a larger cap: ngrp health without --no-write, then ngrp inspect "
        f"{folder / 'rollouts.jsonl'} --finding ngrp/truncated_at_token_cap --failed --tasks-out "
        f"{folder / 'capped_tasks.jsonl'} (it prints the collect command)) (each counted once: "
        "record > infrastructure > setting > verifier > unknown > policy)"
    )
    assert "zero rewards: 6, of which 3 unhealthy (50.0%)" in text  # the earlier lines stay
    (folder / "rollouts_failures.jsonl").unlink()  # without the sidecar, "never attempted" is not known
    unknown = render_text(
        run_health(folder / "rollouts_materialized_inputs.jsonl", folder / "rollouts.jsonl", write=False)
    )
    assert "16 without a rollout (no failures file was read: whether attempted is unknown)" in unknown
    assert "never attempted" not in unknown


def test_the_fast_number_scan_finds_what_the_verifiers_regex_finds():
    """iter_numbers (the check's scan) against NUMBER.finditer (the math verifier's), on random strings of
    the characters that matter: the same matches at the same places."""
    rng = random.Random(7)
    alphabet = "ab 0123456789-\u2212.,/eE+x_"
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        slow = [(m.start(), m.group()) for m in answers.NUMBER.finditer(text)]
        assert [(m.start(), m.group()) for m in answers.iter_numbers(text)] == slow, text
    boxed = "so 3*4 = 12 and \\boxed{1,000} then -5"
    assert [a for _, _, a in answers.math_candidates(boxed)] == ["3", "4", "12", "1,000", "-5"]
    assert answers.math_matcher("8")("8.0") and not answers.math_matcher("8")("80")
    assert answers.math_matcher("1000000")("1000001")  # the verifier's relative tolerance, kept


def test_the_answer_says_why_keys_were_never_attempted_from_the_collect_manifest(tmp_path, run_ngrp):
    """Keys with no row and no failed attempt: the rows cannot say why. A collector that stopped early
    records its reason in the manifest's runs[], and health's answer quotes it (a user asked "were the
    51 missing rollouts the infrastructure's fault?" and had to infer the abort rule)."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on: every attempt is refused, a real no-reply
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {"responses_create_params": {"input": f"What is {i}+1?"}, "expected_answer": str(i + 1)}
            )
            + "\n"
            for i in range(6)
        )
    )
    out = tmp_path / "out" / "rollouts.jsonl"
    res = run_ngrp(
        "collect", "--input", str(tasks), "--output", str(out), "--num-repeats", "2", "--skip-preflight",
        "--base-url", f"http://127.0.0.1:{port}", "--model", "m", "--max-retries", "0",
        "--abort-after", "2", "--concurrency", "1", "--one-request-per-rollout", "--verifier", "math",
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    manifest = json.loads((tmp_path / "out" / "rollouts_run_manifest.json").read_text())
    last = manifest["runs"][-1]
    assert last["stopped_early"].startswith("2 attempts in a row got no reply")
    assert (last["succeeded"], last["failed_attempts"], last["interrupted"]) == (0, 2, False)
    _valid("run_manifest", manifest)
    inputs = tmp_path / "out" / "rollouts_materialized_inputs.jsonl"
    report = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", out, "--json", "--no-write").stdout
    )
    unscored = report["causes"]["unscored"]
    assert unscored["not_judged"] == 10 and unscored["collector_stopped"] == last["stopped_early"]
    said = "10 never attempted (no row, no failed attempt) because the collector stopped: "
    said += last["stopped_early"]
    assert said in report["causes"]["answer"]
    _valid("health_result", report)
    # a later collect that died before recording itself touched the files: that old reason is stale
    import os

    later = os.stat(out).st_mtime + 60
    os.utime(out, (later, later))
    stale = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", out, "--json", "--no-write").stdout
    )
    assert stale["causes"]["unscored"]["collector_stopped"] is None
    # without a manifest the answer claims no cause it cannot know
    (tmp_path / "out" / "rollouts_run_manifest.json").unlink()
    bare = json.loads(
        run_ngrp("health", "--inputs", inputs, "--rollouts", out, "--json", "--no-write").stdout
    )
    assert bare["causes"]["unscored"]["collector_stopped"] is None
    assert "because the collector stopped" not in bare["causes"]["answer"]


def test_the_answer_hint_quotes_a_rollouts_path_with_a_space(tmp_path):
    inputs, rollouts, _ = _causes_run(tmp_path / "my runs")
    written = run_health(inputs, rollouts).to_json()["causes"]["answer"]
    assert f"read those replies: ngrp inspect '{rollouts}' --finding ngrp/answer_not_extracted)" in written
    assert "without --no-write" not in written  # the verdicts --finding reads are written


def test_rows_that_name_no_expected_rollout_are_not_counted_as_expected_ones(tmp_path):
    """An unreadable line and a row without identity have no key of the inputs: the keys they may have
    been are counted as never judged already. Counting them too gave 'of 2 expected rollouts, 4 have no
    score'."""
    inputs, rollouts = tmp_path / "m.jsonl", tmp_path / "r.jsonl"
    rows = [{"responses_create_params": {"input": "q"}, "_ng_task_index": 0, "_ng_rollout_index": i}
            for i in range(2)]  # fmt: skip
    inputs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    rollouts.write_text(
        '{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": NaN}\n'
        '{"_ng_task_index": "a", "_ng_rollout_index": 1, "reward": "x"}\n'
        '{"_ng_task_index": 7, "_ng_rollout_index": 0, "reward": null}\n'
    )
    result = run_health(inputs, rollouts, write=False)
    unscored = result.to_json()["causes"]["unscored"]
    assert (unscored["total"], unscored["not_judged"]) == (2, 2)
    assert unscored["outside_inputs"] == {
        "total": 3,
        "by_check": {"ngrp/record_without_identity": 1, "ngrp/reward_not_numeric": 1, "record_unreadable": 1},
    }
    assert result.to_json()["causes"]["answer"] == (
        "of 2 expected rollouts, 2 have no score: 2 without a rollout (no failures file was read: whether"
        " attempted is unknown); 3 more rows without a score name no expected rollout (record 2:"
        " ngrp/record_without_identity 1, record_unreadable 1; verifier 1: ngrp/reward_not_numeric 1);"
        " no reward is 0"
    )
    _valid("health_result", json.loads(json.dumps(result.to_json())))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["\\boxed{", "\\fbox{", "{", "}", "1", "-2", " ", "x", "3.5", ","]), max_size=40)
)
def test_numbers_inside_boxes_are_left_out_as_by_a_scan_of_every_box(parts):
    """The binary search over merged box spans leaves out exactly the numbers any box covers (nested and
    unclosed boxes too); the one-pass brace matching closes each box where `_braced`, scanning from it,
    does; a box holding another box's opening is no candidate (the verifier takes the inner one)."""
    text = "".join(parts)
    got = list(answers.math_candidates(text))
    if "\\" not in text:
        return
    boxes = []
    for match in answers._BOX_OPEN.finditer(text):
        inner = answers._braced(text, match.end())
        if inner is not None:
            boxes.append((match.start(), match.end() + len(inner) + 1, inner.strip()))
    numbers = [(m.start(), m.end(), m.group()) for m in answers.iter_numbers(text)
               if not any(s <= m.start() < e for s, e, _ in boxes)]  # fmt: skip
    opened = [m.start() for m in answers._BOX_OPEN.finditer(text)]
    innermost = [b for b in boxes if not any(b[0] < o < b[1] for o in opened)]
    assert got == sorted([*innermost, *numbers])
    for _, end, answer in innermost:  # the answer the verifier takes had the reply stopped after the box
        assert answers.extract_math(text[:end]) == answer


def test_rows_outside_the_inputs_when_every_expected_rollout_has_a_score(tmp_path):
    inputs, rollouts = tmp_path / "m.jsonl", tmp_path / "r.jsonl"
    inputs.write_text(json.dumps({"responses_create_params": {"input": "q"}, "_ng_task_index": 0,
                                  "_ng_rollout_index": 0}) + "\n")  # fmt: skip
    rollouts.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}\nnot json\n')
    answer = run_health(inputs, rollouts, write=False).to_json()["causes"]["answer"]
    assert answer == (
        "of 1 expected rollouts, none lacks a score; 1 rows without a score name no expected rollout"
        " (record 1: record_unreadable 1); no reward is 0"
    )


_PIECES = ["4", "2", "42", "0", "7", "1", ".", "e", "E", "/", ",", "-", "=", " is ", " ", "\\boxed{", "}",
           "\\frac{84}{2}", "41.9999999", "4.2e1", "1,000", "x", "\n", "**"]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@example(pieces=["=", " ", "41.9999999"], expected="42", extracted="41")  # each form without the digits
@example(pieces=[" is ", "4.2e1"], expected="42", extracted="41")
@example(pieces=["=", " ", "84", "/", "2"], expected="42", extracted="41")
@example(pieces=[" is ", "1,000"], expected="1000", extracted="1")
@example(pieces=["\\boxed{", "\\frac{84}{2}", "}", " x ", "1"], expected="42", extracted="1")
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=14),
    expected=st.sampled_from(["42", "7", "0", "1000", "5", "-5", "2.5", "abc"]),
    extracted=st.sampled_from(["1", "13", "41", "x"]),
)
def test_the_cheap_pre_test_never_changes_the_expected_answer_check(pieces, expected, extracted):
    """`_cannot_hold` skips the scan only where the scan would find nothing: same result with and without."""
    from unittest import mock

    from ngrp_lib.audit import verifier_checks

    reply = "".join(pieces)
    fast = stated_expected(reply, expected, extracted)
    with mock.patch.object(verifier_checks, "_cannot_hold", return_value=False):
        full = stated_expected(reply, expected, extracted)
    assert fast == full, reply


def test_gibberish_cut_at_the_cap_is_not_called_nobodys_but_the_caps(tmp_path):
    """Issue 36, wrong turn 11: on a tiny model's gibberish cut at a cap of 20 tokens (Gym's own run), the
    answer said "0 are the policy's, 2 setting": as if a larger cap would have passed them. It says no
    zero is shown to be the policy's, that whether more tokens would pass is unknown, and how to read them."""
    stack = REAL_RUN.parent / "gym-stack"
    shutil.copy(stack / "rollouts_2rows.jsonl", tmp_path / "rollouts.jsonl")
    shutil.copy(stack / "rollouts_materialized_inputs.jsonl", tmp_path)
    result = run_health(tmp_path / "rollouts_materialized_inputs.jsonl", tmp_path / "rollouts.jsonl")
    answer = result.summary["ngrp"]["causes"]["answer"]
    assert "0 are the policy's" not in answer
    assert (
        "of 2 zero rewards, none is shown to be the policy's, 2 setting (ngrp/truncated_at_token_cap 2; "
        in answer
    )
    assert (
        "max_output_tokens 20: cut there, so whether more tokens would pass is unknown; read them: " in answer
    )
    assert f"ngrp inspect {tmp_path / 'rollouts.jsonl'} --finding ngrp/truncated_at_token_cap" in answer


def test_the_settle_route_selects_every_cap_check_that_decided_a_zero():
    """A zero cut at the cap with some content and one with none (a runaway): both are the cap's, so the
    route that writes their task lines selects both findings (inspect's --finding is repeatable)."""
    from collections import Counter

    from ngrp_lib.audit.health_causes import CauseTally, answer_text, causes_block

    tally = CauseTally(zero=Counter({"ngrp/truncated_at_token_cap": 3, "model_call_runaway_generation": 1}))
    tally.caps.add(48)
    answer = answer_text(causes_block(tally, 8, 0, True), "ngrp inspect r.jsonl", "runs/B")
    assert (
        "to settle it, collect those tasks alone at a larger cap: ngrp inspect r.jsonl --finding "
        "ngrp/truncated_at_token_cap --finding model_call_runaway_generation --failed --tasks-out "
        "runs/B/capped_tasks.jsonl (it prints the collect command)"
    ) in answer
    assert "; read them: ngrp inspect r.jsonl --finding ngrp/truncated_at_token_cap;" in answer
