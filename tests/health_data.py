"""Runs for the health tests: a clean run in Gym's rollout shape, and the same run with one planted defect
per check (each on its own task, so no task-level check fires by accident)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

CAP = 64  # max_output_tokens of every materialized row
REPEATS = 4


def _input(task: int, rollout: int) -> dict:
    return {
        "responses_create_params": {
            "input": [{"role": "user", "content": f"What is {task}+{task}? Box it."}],
            "max_output_tokens": CAP,
            "temperature": 1.0,
        },
        "expected_answer": str(2 * task),
        "agent_ref": {"name": "math_agent"},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


def _rollout(row: dict) -> dict:
    task, rollout = row["_ng_task_index"], row["_ng_rollout_index"]
    correct = (task + rollout) % 2 == 0
    answer = str(2 * task) if correct else str(2 * task + 1)
    text = f"Adding {task} and {task} gives \\boxed{{{answer}}}."
    return {
        "responses_create_params": row["responses_create_params"],
        "response": {
            "id": f"resp_{task}_{rollout}",
            "object": "response",
            "model": "policy",
            "output": [
                {"id": f"rs_{task}_{rollout}", "type": "reasoning",
                 "summary": [{"type": "summary_text", "text": "add the two numbers"}]},
                {"id": f"msg_{task}_{rollout}", "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": text, "annotations": []}]},
            ],
            "status": "completed",
            "incomplete_details": None,
            "error": None,
            "usage": {"input_tokens": 30, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 20,
                      "output_tokens_details": {"reasoning_tokens": 5}, "total_tokens": 50},
        },
        "reward": 1.0 if correct else 0.0,
        "mask_sample": False,
        "failure_kind": None,
        "failure_reason": None,
        "expected_answer": row["expected_answer"],
        "extracted_answer": answer,
        "is_correct": correct,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": row["agent_ref"],
    }  # fmt: skip


@dataclass
class Run:
    inputs: list[dict]
    lines: list[bytes]  # rollouts file lines (a planted defect may not be JSON)
    failures: list[dict] = field(default_factory=list)
    # planted check id -> the (task, rollout) identity its finding must carry (verdict-file spelling)
    planted: dict[str, tuple] = field(default_factory=dict)

    def write(self, folder: Path) -> tuple[Path, Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        inputs = folder / "rollouts_materialized_inputs.jsonl"
        inputs.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in self.inputs))
        rollouts = folder / "rollouts.jsonl"
        rollouts.write_bytes(b"".join(self.lines))
        failures = folder / "rollouts_failures.jsonl"
        if self.failures:
            failures.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in self.failures))
        return inputs, rollouts, failures


def clean_run(tasks: int = 20) -> Run:
    inputs = [_input(t, r) for t in range(tasks) for r in range(REPEATS)]
    return Run(inputs, [orjson.dumps(_rollout(row)) + b"\n" for row in inputs])


def _text(row: dict, text: str) -> None:
    row["response"]["output"][-1]["content"][0]["text"] = text


def planted_run(identityless: bool = True) -> Run:
    """Clean run of 20 tasks x 4 repeats; rollout 0 of task k carries defect k (one per check; task 17:
    ngrp/expected_answer_in_reply).
    `identityless=False` leaves out the row without identity (where Gym and ngrp name the row differently)."""
    run = clean_run(20)
    rows = [orjson.loads(line) for line in run.lines]
    at = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in rows}
    planted: dict[str, tuple] = {}

    def plant(check: str, task: int, change) -> None:
        change(at[(task, 0)])
        planted[check] = (task, 0)

    def zero_tokens(r):
        r["response"]["usage"]["output_tokens"] = 0
        _text(r, "")
        r["extracted_answer"] = None  # explained by the zero tokens: not reported again

    def missing_counts(r):
        del r["response"]["usage"]

    def failed(r):
        r["response"].update(status="failed", error={"code": "server_error", "message": "boom"}, output=[])
        r["extracted_answer"] = None

    def runaway(r):
        r["response"].update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        r["response"]["output"] = r["response"]["output"][1:]
        _text(r, "   ")
        r["response"]["usage"]["output_tokens"] = CAP
        r["extracted_answer"] = None

    def truncated(r):  # only the materialized cap says it: usage reached max_output_tokens
        r["response"]["usage"]["output_tokens"] = CAP
        _text(r, "Adding the numbers step by step, first")
        r["extracted_answer"] = None

    def empty(r):
        r["response"]["output"] = r["response"]["output"][1:]
        _text(r, " \n")
        r["extracted_answer"] = None

    def reasoning_only(r):
        _text(r, "")
        r["extracted_answer"] = None

    def loop(r):
        _text(r, "Let me think. " + "I add them again. " * 30 + "So \\boxed{12}.")

    def reward_null(r):
        r["reward"] = None

    def verifier_error(r):
        r["failure_kind"], r["failure_reason"] = "judge_failed", "the judge timed out"

    def not_extracted(r):
        r["extracted_answer"] = None

    def stated_not_taken(r):  # the right answer stated, then more numbers: the last one is taken
        _text(r, "17 + 17 = 34. Check: 34 - 17 = 17.")
        r["extracted_answer"] = "17"

    plant("model_call_zero_completion_tokens", 1, zero_tokens)
    plant("model_call_missing_token_counts", 2, missing_counts)
    plant("model_call_failed", 3, failed)
    plant("model_call_runaway_generation", 4, runaway)
    plant("ngrp/truncated_at_token_cap", 5, truncated)
    plant("ngrp/empty_final_answer", 6, empty)
    plant("ngrp/reasoning_without_final_answer", 7, reasoning_only)
    plant("ngrp/repetition_loop", 8, loop)
    plant("ngrp/reward_not_numeric", 9, reward_null)
    plant("ngrp/verifier_error", 10, verifier_error)
    plant("ngrp/answer_not_extracted", 11, not_extracted)
    plant("ngrp/expected_answer_in_reply", 17, stated_not_taken)
    lines = [orjson.dumps(r) + b"\n" for r in rows]
    # keys only in the failures sidecar: task 12 rollout 0 (transport), task 13 rollout 0 (verifier)
    for key in ((12, 0), (13, 0)):
        lines.remove(orjson.dumps(at[key]) + b"\n")
    failures = [
        {"_ng_failure_class": "agent_request_failed", "_ng_failure_type": "ClientConnectorError",
         "_ng_failure_message": "refused", "_ng_failure_http_status": None, "_ng_task_index": 12,
         "_ng_rollout_index": 0, "agent_ref": {"name": "math_agent"}},
        {"_ng_failure_class": "verify_failed", "_ng_failure_type": "VerifyError", "_ng_failure_message": "x",
         "_ng_failure_http_status": 500, "_ng_task_index": 13, "_ng_rollout_index": 0,
         "agent_ref": {"name": "math_agent"}},
    ]  # fmt: skip
    planted["model_call_failed/sidecar"] = (12, 0)
    planted["ngrp/verifier_error/sidecar"] = (13, 0)
    # a duplicated row (task 14), an identity-less row (task 15's rollout 0), a broken line
    dup = orjson.dumps(at[(14, 0)]) + b"\n"
    lines.insert(7, dup)
    planted["rollout_duplicate_identity"] = (14, 0)
    index = lines.index(orjson.dumps(at[(15, 0)]) + b"\n")
    if identityless:
        no_id = dict(at[(15, 0)])
        del no_id["_ng_rollout_index"]
        lines[index] = orjson.dumps(no_id) + b"\n"
        # its line number once the broken line below is in
        planted["ngrp/record_without_identity"] = (f"__no_identity__:line-{index + 1 + (index >= 30)}", 0)
    lines.insert(30, b'{"_ng_task_index": 16, "_ng_rollout_index": \n')
    planted["record_unreadable"] = ("__unreadable_record__:input-0:line-31", 0)
    return Run(run.inputs, lines, failures, planted)


def task_level_run() -> Run:
    """Task 0: every repeat's reward null (task_consistently_unhealthy). Task 1, one repeat: its only
    model call failed (task_no_successful_model_calls; too few repeats for the other). Task 2: clean."""
    inputs = [_input(0, r) for r in range(REPEATS)] + [_input(1, 0)] + [_input(2, r) for r in range(REPEATS)]
    rows = [_rollout(row) for row in inputs]
    for r in rows[:REPEATS]:
        r["reward"] = None
    rows[REPEATS]["response"].update(status="failed", error={"code": "server_error"}, output=[])
    rows[REPEATS]["extracted_answer"] = None
    return Run(inputs, [orjson.dumps(r) + b"\n" for r in rows])
