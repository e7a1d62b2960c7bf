"""`ngrp/expected_answer_in_reply`: a wrong-scored reply that states the expected answer as its result,
while the verifier took another answer (the `math` verifier takes the last number or boxed answer, so a
reply that gives the right answer and then says more numbers is scored 0).

The reply is read the way the `math` verifier reads it (`artifacts.answers`): every boxed answer and every
number, compared as numbers with its tolerance; an expected answer that is not a number is looked for as
a whole token, compared as the verifier normalises it. An occurrence counts only when the reply states it
as a result: inside `\\boxed{}`, or right after `=`, `:` or "is", "are", "was", "equals", "gives", "get"
(markup such as `**` or `$` between is allowed), and not followed by an operator and another number (the
start of an expression). So "9 - 4 = 5" counts for 5, while the operands of "1 + 1 = 3" and "7 hours"
do not count for 1 or 7. It is a hint to read the reply, not a proof: a policy that states the right
answer and then takes it back is flagged too (`ngrp inspect --finding` shows them).
"""

from __future__ import annotations

import re
from typing import Any

from ..artifacts.answers import as_number, math_candidates, math_equal, normalize_answer

CHECK = "ngrp/expected_answer_in_reply"
ANSWER_KEY = "expected_answer"
CONTEXT_CHARS = 40  # characters either side of the stated answer copied into the finding
_STATED = re.compile(
    r"(?:=|:|\\(?:boxed|fbox)\{|\b(?:is|are|was|were|equals?|gives?|get|got))$", re.IGNORECASE
)
_MARKUP = " \t\n*$_(\\["
_EXPRESSION = re.compile(r"\s*[-+*/^\u00d7\u00f7\u2212]\s*\d")


def answer_fields(row: dict[str, Any]) -> tuple[str, str] | None:
    """(expected, extracted) as text when the row holds both, non-blank; None when the check does not
    apply (a row without an expected or an extracted answer)."""
    expected, extracted = row.get(ANSWER_KEY), row.get("extracted_answer")
    if not (_answer_like(expected) and _answer_like(extracted)):
        return None
    return str(expected).strip(), str(extracted).strip()


def _answer_like(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value.strip())
    return type(value) in (int, float)


def stated_expected(reply: str, expected: str, extracted: str) -> dict[str, Any] | None:
    """The finding's detail when `reply` states `expected` as a result and `extracted` is not it."""
    if math_equal(extracted, expected):
        return None  # the verifier took the expected answer: this zero has another reason
    for start, end in _occurrences(reply, expected):
        if _stated_as_result(reply, start, end):
            context = reply[max(0, start - CONTEXT_CHARS) : end + CONTEXT_CHARS]
            return {
                "expected_answer": expected[:200],
                "extracted_answer": extracted[:200],
                "offset": start,
                "context": context,
            }
    return None


def _occurrences(reply: str, expected: str) -> list[tuple[int, int]]:
    if as_number(expected) is not None:
        return [(s, e) for s, e, answer in math_candidates(reply) if math_equal(answer, expected)]
    want = normalize_answer(expected)
    if not want:
        return []
    token = re.compile(r"(?<!\w)" + re.escape(expected) + r"(?!\w)")
    return [(m.start(), m.end()) for m in token.finditer(reply) if normalize_answer(m.group()) == want]


def _stated_as_result(reply: str, start: int, end: int) -> bool:
    before = reply[max(0, start - 40) : start].rstrip(_MARKUP)
    if reply.startswith(("\\boxed{", "\\fbox{"), start):
        return True
    return bool(_STATED.search(before)) and not _EXPRESSION.match(reply, end)
