"""The health checks: their registry, and how one rollout row is judged from what the row itself holds.

Gym's ids are used where the meaning is Gym's (NeMo Gym 0.7.0 `nemo_gym/health/checks.py`); Gym reads most
of them from its own trajectory capture, we read them from the row's `response` (usage, status,
incomplete_details, output items), the failures sidecar and the materialized input's `max_output_tokens`.
Our own checks have `ngrp/` ids. A check returns evidence (findings); verdicts are derived in health.py.

One root cause per rollout: the content checks (`ngrp/empty_final_answer`,
`ngrp/reasoning_without_final_answer`, `ngrp/answer_not_extracted`) are not raised when a check that
already explains the missing answer fired (a failed call, zero completion tokens, a stop at the token
cap), and `ngrp/answer_not_extracted` not when the answer is empty. A check named in --ignore-checks
does not fire, so what it would have explained is reported by the next check instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..artifacts.names import USAGE_MISSING
from ..artifacts.response import (
    FAILED_STATUSES,
    final_and_reasoning,
    has_content,
    made_tool_call,
    nested_output_problem,
    prompt_and_completion_tokens,
    stop_reason,
    stopped_at_token_cap,
)
from ..errors import UsageError
from .agent_checks import CONTEXT_FULL, agent_findings, context_overflow
from .health_text import find_loop
from .verifier_checks import CHECK as EXPECTED_IN_REPLY
from .verifier_checks import answer_fields, has_answers, stated_expected

ROLLOUT, TASK = "rollout", "task"
UNREADABLE_OUTPUT = "ngrp/output_unreadable"
# What a finding says about whose fault a rollout's zero (or missing score) is, one class per check.
# UNKNOWN: the row lacks what would tell (usage counts missing: whether the reply stopped at the cap, or
# the server failed to count, cannot be told), so the zero is nobody's for certain.
RECORD, INFRASTRUCTURE, SETTING, VERIFIER, UNKNOWN, POLICY = (
    "record",
    "infrastructure",
    "setting",
    "verifier",
    "unknown",
    "policy",
)


@dataclass(frozen=True)
class Check:
    id: str
    scope: str  # "rollout" or "task"
    reads: str  # the evidence it reads
    summary: str
    cause: str | None  # RECORD ... POLICY; None for a task check that only sums up its rollouts' verdicts

    @property
    def origin(self) -> str:
        return "ngrp" if self.id.startswith("ngrp/") else "gym"


REGISTRY: tuple[Check, ...] = (
    Check(
        "check_execution_error", ROLLOUT, "record",
        "a check raised on this row (an ngrp bug: report it)", RECORD,
    ),
    Check(
        "record_unreadable", ROLLOUT, "record",
        "the line is not a JSON object (invalid JSON, torn write)", RECORD,
    ),
    Check(
        "rollout_duplicate_identity", ROLLOUT, "record",
        "several rows hold the same identity key; every copy is flagged", RECORD,
    ),
    Check(
        "model_call_zero_completion_tokens", ROLLOUT, "response.usage",
        "the model returned 0 completion tokens", INFRASTRUCTURE,
    ),
    Check(
        "model_call_missing_token_counts", ROLLOUT, "response.usage",
        "usage lacks a prompt or completion token count (the server did not count, or the agent did not"
        " pass the counts on: no fault shown)", UNKNOWN,
    ),
    Check(
        "model_call_failed", ROLLOUT, "response.status, response.error, failures sidecar",
        "the response failed, or the key has only failed attempts (sidecar)", INFRASTRUCTURE,
    ),
    Check(
        "model_call_runaway_generation", ROLLOUT, "response, materialized max_output_tokens",
        "stopped at the token cap with no content at all", SETTING,
    ),
    Check(
        "ngrp/record_without_identity", ROLLOUT, "record",
        "no integer _ng_task_index / _ng_rollout_index: cannot be joined", RECORD,
    ),
    Check(
        UNREADABLE_OUTPUT, ROLLOUT, "response.output",
        "response.output is nested lists that are not Gym's aviary transitions: its items cannot be read",
        RECORD,
    ),
    Check(
        "ngrp/truncated_at_token_cap", ROLLOUT, "response, materialized max_output_tokens",
        "stopped at the token cap with some content (answer may be cut off)", SETTING,
    ),
    Check(
        "ngrp/empty_final_answer", ROLLOUT, "response.output",
        "no answer text, no reasoning and no tool call", POLICY,
    ),
    Check(
        "ngrp/reasoning_without_final_answer", ROLLOUT, "response.output",
        "reasoning text but no answer text and no tool call", POLICY,
    ),
    Check(
        "ngrp/repetition_loop", ROLLOUT, "response.output",
        "answer or reasoning repeats one unit back to back (--loop-min-*)", POLICY,
    ),
    Check("ngrp/reward_not_numeric", ROLLOUT, "reward", "reward is null, absent or not a number", VERIFIER),
    Check(
        "ngrp/verifier_error", ROLLOUT, "failure_kind, failure_reason, invalid_judge_response, sidecar",
        "an error the verifier recorded in the row, or verify_failed attempts", VERIFIER,
    ),
    Check(
        "ngrp/answer_not_extracted", ROLLOUT, "extracted_answer",
        "extracted_answer is null or blank (rows without it: not applicable)", VERIFIER,
    ),
    Check(
        EXPECTED_IN_REPLY, ROLLOUT, "reward, expected_answer, extracted_answer, response.output",
        "scored below 1, the answer states expected_answer as a result, the verifier took another"
        " (it takes the last match): read the reply", VERIFIER,
    ),
    Check(
        "ngrp/tool_arguments_invalid", ROLLOUT, "response.output",
        "a tool call's arguments are not a valid JSON object", POLICY,
    ),
    Check(
        "ngrp/tool_output_error", ROLLOUT, "response.output",
        "a tool output reports an error (JSON error/detail object, or Error:/Traceback text)", POLICY,
    ),
    Check(
        "ngrp/tool_call_loop", ROLLOUT, "response.output",
        "the same tool call (name and arguments) made --tool-loop-min-repeats times or more", POLICY,
    ),
    Check(
        "ngrp/ended_on_tool_call", ROLLOUT, "response.output, status, truncated, termination, max_steps",
        "ended on a tool call or its output, and the row shows the run's limit cut the agent there"
        " (truncated, incomplete, a termination naming a limit, max_steps reached)", SETTING,
    ),
    Check(
        "ngrp/ended_on_tool_call_unknown", ROLLOUT, "response.output, status, truncated, termination",
        "ended on a tool call or its output with no sign of a limit's cut or of an answer (terminated, one"
        " turn, an answer tool): whether a step limit cut the agent is unknown", UNKNOWN,
    ),
    Check(
        "ngrp/context_window_exceeded", ROLLOUT, "response.error, incomplete_details, failure_reason",
        "the server said the context window is full", SETTING,
    ),
    Check(
        "task_consistently_unhealthy", TASK, "rollout verdicts",
        "every judged repeat of the task is unhealthy (2 or more judged)", None,
    ),
    Check(
        "task_no_successful_model_calls", TASK, "rollout responses, failures sidecar",
        "no repeat of the task got a successful model call", INFRASTRUCTURE,
    ),
)  # fmt: skip
CHECK_IDS = tuple(check.id for check in REGISTRY)
ROLLOUT_IDS = tuple(check.id for check in REGISTRY if check.scope == ROLLOUT)
TASK_IDS = tuple(check.id for check in REGISTRY if check.scope == TASK)
# Checks that read the response: they cannot be judged on a row that has none.
RESPONSE_IDS = (
    "model_call_zero_completion_tokens",
    "model_call_missing_token_counts",
    "model_call_failed",
    "model_call_runaway_generation",
    "ngrp/truncated_at_token_cap",
    "ngrp/empty_final_answer",
    "ngrp/reasoning_without_final_answer",
    "ngrp/repetition_loop",
    "ngrp/tool_arguments_invalid",
    "ngrp/tool_output_error",
    "ngrp/tool_call_loop",
    "ngrp/ended_on_tool_call",
    "ngrp/ended_on_tool_call_unknown",
    UNREADABLE_OUTPUT,
    EXPECTED_IN_REPLY,
)
# Checks with a condition under which they do not apply (counted as not applicable, not unobserved).
CONDITIONAL_IDS = ("ngrp/answer_not_extracted", EXPECTED_IN_REPLY)
_NO_EXPECTED = (EXPECTED_IN_REPLY,)  # a row with an extracted answer but no expected one
VERIFIER_ERROR_FIELDS = ("failure_kind", "failure_reason", "verifier_error")
TEXT_LIMIT = 200  # characters of free text (a failure reason, a loop unit) copied into a finding


def parse_ignored(values: tuple[str, ...] | list[str] | str | None) -> frozenset[str]:
    """Gym's rule: comma-separated ids, blanks dropped, duplicates merged, an unknown id is an error."""
    if values is None:
        return frozenset()
    raw = [values] if isinstance(values, str) else list(values)
    ids = {part.strip() for value in raw for part in value.split(",") if part.strip()}
    unknown = sorted(ids - set(CHECK_IDS))
    if unknown:
        raise UsageError(
            f"unknown health check(s): {', '.join(unknown)}",
            hint=f"known checks: {', '.join(CHECK_IDS)}",
        )
    return frozenset(ids)


@dataclass(frozen=True)
class Settings:
    ignored: frozenset[str] = frozenset()
    loop_min_repeats: int = 10
    loop_min_chars: int = 200
    tool_loop_min_repeats: int = 3

    def check(self) -> None:
        if self.tool_loop_min_repeats < 2:
            raise UsageError("--tool-loop-min-repeats must be at least 2")
        if self.loop_min_repeats < 2:
            raise UsageError("--loop-min-repeats must be at least 2")
        if self.loop_min_chars < 1:
            raise UsageError("--loop-min-chars must be at least 1")


@dataclass(slots=True)
class Digest:
    """One judged rollout (a rollouts line, or a key seen only in the failures sidecar): its findings, the
    checks that could not be judged on it, and what the run-level summary needs."""

    task: Any = None
    rollout: Any = None
    rollout_id: str = ""  # an explicit _ng_rollout_id; "" means Gym's default "<task>-<rollout>"
    findings: list[dict[str, Any]] = field(default_factory=list)
    unobserved: list[str] = field(default_factory=list)
    stage: Any = None
    not_applicable: tuple[str, ...] = ()
    successful_call: bool | None = None  # None: nothing tells whether a model call succeeded
    failed_call: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    zero_reward: bool = False
    unscored: bool = False  # no numeric reward: a failure-only key, an unreadable line, a reward not numeric
    in_inputs: bool = False  # its key is one of the materialized inputs' (an expected rollout)
    from_failures: bool = False
    packed: int = -1  # pack_key of an integer identity below 2^32 rollouts with no stage (sorts fast)
    reply: int = 0  # hash of the final answer text (0: none, or blank): `identical.identical_replies`

    @property
    def verdict(self) -> str:
        return "unhealthy" if self.findings else "unobserved" if self.unobserved else "healthy"


def finding(check: str, detail: dict[str, Any], locator: dict[str, Any] | None = None) -> dict[str, Any]:
    """A finding as Gym writes it in rollout_verdicts.jsonl (its `subject` is the row's identity)."""
    out: dict[str, Any] = {"check": check}
    if locator is not None:
        out["locator"] = locator
    out["detail"] = detail
    return out


def _clip(value: Any) -> Any:
    return value[:TEXT_LIMIT] if isinstance(value, str) else value


def judge_row(
    row: dict[str, Any], cap: int | None, settings: Settings, max_steps: int | None = None
) -> Digest:
    """Every rollout-level check but the cross-row ones (duplicates) on one parsed row; the digest's
    identity is the caller's to fill in. `max_steps`: the materialized input's, when it has one."""
    ignored = settings.ignored
    judged = Digest()
    findings = judged.findings
    response = row.get("response")
    explained, answer = False, None
    if type(response) is dict:
        explained, answer = _response_checks(response, cap, settings, judged, row.get(USAGE_MISSING))
        if isinstance(answer, str) and answer.strip():
            judged.reply = hash(answer) or 1
        agent_findings(response, settings.tool_loop_min_repeats, ignored, findings, row, max_steps)
    else:
        judged.unobserved = [c for c in RESPONSE_IDS if c not in ignored]
    if CONTEXT_FULL not in ignored:
        overflow = context_overflow(row, response if type(response) is dict else None)
        if overflow is not None:
            findings.append(finding(CONTEXT_FULL, overflow))
    reward = row.get("reward", _ABSENT)
    if type(reward) in (int, float, bool):
        judged.zero_reward = reward == 0
    else:
        judged.unscored = True
        if "ngrp/reward_not_numeric" not in ignored:
            kind = "absent" if reward is _ABSENT else "null" if reward is None else type(reward).__name__
            findings.append(finding("ngrp/reward_not_numeric", {"reward": kind}))
    if (
        row.get("failure_kind") or row.get("failure_reason") or row.get("verifier_error")
        or row.get("invalid_judge_response") is True
    ) and "ngrp/verifier_error" not in ignored:  # fmt: skip
        _verifier_error(row, findings)
    if "extracted_answer" not in row:
        judged.not_applicable = CONDITIONAL_IDS
    else:
        if not explained and "ngrp/answer_not_extracted" not in ignored:
            extracted = row["extracted_answer"]
            if extracted is None or (isinstance(extracted, str) and not extracted.strip()):
                findings.append(finding("ngrp/answer_not_extracted", {"extracted_answer": extracted}))
        _expected_check(row, answer if not explained else None, ignored, judged)
    return judged


def _expected_check(row: dict[str, Any], answer: str | None, ignored: frozenset[str], judged: Digest) -> None:
    """ngrp/expected_answer_in_reply on a row that holds an extracted answer: not applicable without an
    expected one (or with a blank extraction); judged only below a reward of 1 and when nothing already
    explains the answer (`answer` None: a failed call or a stop at the cap, whose cut reply says little)."""
    if not has_answers(row):
        judged.not_applicable = _NO_EXPECTED
        return
    reward = row.get("reward")
    below_pass = isinstance(reward, (int, float)) and reward < 1  # the built-in verifiers score 1 or 0
    if answer is None or not below_pass or EXPECTED_IN_REPLY in ignored:
        return
    detail = stated_expected(answer, *answer_fields(row))
    if detail is not None:
        offset = detail.pop("offset")
        judged.findings.append(finding(EXPECTED_IN_REPLY, detail, {"offset": offset}))


_ABSENT = object()


def _response_checks(
    response: dict[str, Any], cap: int | None, settings: Settings, judged: Digest, not_given: Any = None
) -> tuple[bool, str]:
    """The checks that read the response: (True when one that explains a missing answer fired, the final
    answer text). The common
    case (a completed call with counts, an answer, no cap) takes the straight path; anything odd goes to
    the helpers that build findings. `not_given`: the counts ngrp's collector stored as 0 because the
    server gave none (the row's USAGE_MISSING); they are judged missing, not zero."""
    ignored = settings.ignored
    prompt, completion = prompt_and_completion_tokens(response, not_given)
    judged.prompt_tokens, judged.completion_tokens = prompt or 0, completion or 0
    error = response.get("error")
    failed = bool(error) or response.get("status") in FAILED_STATUSES
    judged.failed_call, judged.successful_call = failed, not failed
    explained = False
    if failed or prompt is None or completion is None or completion == 0:
        explained = _call_problems(response, failed, prompt, completion, ignored, judged.findings)
    unreadable = nested_output_problem(response)  # said, never read as an empty answer
    if unreadable is not None and UNREADABLE_OUTPUT not in ignored:
        judged.findings.append(finding(UNREADABLE_OUTPUT, {"problem": unreadable}))
        explained = True
    answer, reasoning = final_and_reasoning(response)  # the one reading of both every command shares
    if not explained and stopped_at_token_cap(response, cap, completion):  # the one rule, as check's
        explained = _cap_checks(response, completion, cap, ignored, judged.findings)
    if not explained and (not answer or answer.isspace()) and not made_tool_call(response):
        explained = _answer_checks(answer, reasoning, ignored, judged.findings)
    chars = settings.loop_min_chars
    if (len(answer) >= chars or len(reasoning) >= chars) and "ngrp/repetition_loop" not in ignored:
        _loop_check(answer, reasoning, settings, judged.findings)
    return explained, answer


def _locator(response: dict[str, Any]) -> dict[str, str]:
    return {"call_id": str(response.get("id") or 0)}


def _call_problems(
    response: dict[str, Any],
    failed: bool,
    prompt: int | None,
    completion: int | None,
    ignored: frozenset[str],
    findings: list[dict[str, Any]],
) -> bool:
    """A failed call, missing token counts, zero completion tokens; True when one explains no answer."""
    explained = False
    if failed and "model_call_failed" not in ignored:
        error = response.get("error")
        code = error.get("code") if isinstance(error, dict) else error
        detail = {"status": response.get("status"), "error": _clip(code)}
        findings.append(finding("model_call_failed", detail, _locator(response)))
        explained = True
    if (prompt is None or completion is None) and "model_call_missing_token_counts" not in ignored:
        missing = [
            name for name, v in (("prompt_tokens", prompt), ("completion_tokens", completion)) if v is None
        ]
        findings.append(finding("model_call_missing_token_counts", {"missing": missing}, _locator(response)))
    if completion == 0 and not explained and "model_call_zero_completion_tokens" not in ignored:
        findings.append(
            finding("model_call_zero_completion_tokens", {"completion_tokens": 0}, _locator(response))
        )
        explained = True
    return explained


def _cap_checks(
    response: dict[str, Any],
    completion: int | None,
    cap: int | None,
    ignored: frozenset[str],
    findings: list[dict[str, Any]],
) -> bool:
    reason = stop_reason(response)
    if not stopped_at_token_cap(response, cap, completion):  # the one "truncated" (artifacts/response.py)
        return False
    detail = {"finish_reason": reason, "completion_tokens": completion, "max_output_tokens": cap}
    check = "ngrp/truncated_at_token_cap" if has_content(response) else "model_call_runaway_generation"
    if check in ignored:
        return False
    findings.append(finding(check, detail, _locator(response)))
    return True


def _answer_checks(
    answer: str, reasoning: str, ignored: frozenset[str], findings: list[dict[str, Any]]
) -> bool:
    """No answer text (and no tool call): reasoning only, or nothing at all."""
    if reasoning and not reasoning.isspace():
        check, detail = "ngrp/reasoning_without_final_answer", {"reasoning_chars": len(reasoning)}
    else:
        check, detail = "ngrp/empty_final_answer", {"answer_chars": len(answer)}
    if check in ignored:
        return False
    findings.append(finding(check, detail))
    return True


def _loop_check(answer: str, reasoning: str, settings: Settings, findings: list[dict[str, Any]]) -> None:
    for where, text in (("answer", answer), ("reasoning", reasoning)):
        if len(text) < settings.loop_min_chars:
            continue
        loop = find_loop(text, settings.loop_min_repeats, settings.loop_min_chars)
        if loop is not None:
            unit, copies, start = loop
            detail = {"where": where, "unit": unit[:TEXT_LIMIT], "unit_chars": len(unit), "copies": copies}
            findings.append(finding("ngrp/repetition_loop", detail, {"offset": start}))
            return


def _verifier_error(row: dict[str, Any], findings: list[dict[str, Any]]) -> None:
    recorded = {k: _clip(row[k]) for k in VERIFIER_ERROR_FIELDS if row.get(k) not in (None, "")}
    if row.get("invalid_judge_response") is True:
        recorded["invalid_judge_response"] = True
    if recorded:
        findings.append(finding("ngrp/verifier_error", recorded))
