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

from ..artifacts.answers import as_number, math_candidates, math_equal, math_matcher, normalize_answer

CHECK = "ngrp/expected_answer_in_reply"
ANSWER_KEY = "expected_answer"
CONTEXT_CHARS = 40  # characters either side of the stated answer copied into the finding
_STATED = re.compile(
    r"(?:=|:|\\(?:boxed|fbox)\{|\b(?:is|are|was|were|equals?|gives?|get|got))$", re.IGNORECASE
)
_PLAIN_NUMBER = re.compile(r"-?\d+")  # the usual expected answer: a number without asking Fraction
_MARKUP = " \t\n*$_(\\["
_EXPRESSION = re.compile(r"\s*[-+*/^\u00d7\u00f7\u2212]\s*\d")
_SMALL_INT = re.compile(r"\d{1,6}")  # math_matcher compares these as integers
# Every way a reply can hold a number equal to a small integer N without N's digits in it: a decimal
# (41.9999999 is within the tolerance), an exponent, a fraction, thousands commas, or a box (\frac{}{}).
_OTHER_FORMS = re.compile(r"\\|\.\d|\d[eE][-+]?\d|\d/|\d,\d")


def has_answers(row: dict[str, Any]) -> bool:
    """The check applies: the row holds a non-blank expected answer and a non-blank extracted one."""
    return _answer_like(row.get(ANSWER_KEY)) and _answer_like(row.get("extracted_answer"))


def answer_fields(row: dict[str, Any]) -> tuple[str, str]:
    """(expected, extracted) as text, on a row where `has_answers`."""
    return str(row[ANSWER_KEY]).strip(), str(row["extracted_answer"]).strip()


def _answer_like(value: Any) -> bool:
    if type(value) is str:
        return not value.isspace() and value != ""
    return type(value) in (int, float)


def stated_expected(reply: str, expected: str, extracted: str) -> dict[str, Any] | None:
    """The finding's detail when `reply` states `expected` as a result and `extracted` is not it."""
    if _cannot_hold(reply, expected):
        return None  # most wrong replies: no candidate to read, the same answer as the full scan gives
    if _PLAIN_NUMBER.fullmatch(expected) or as_number(expected) is not None:
        spans = (
            (start, end, answer)
            for start, end, answer in math_candidates(reply)
            if _stated_as_result(reply, start, end)  # cheap text test first: most numbers are not results
        )
        equal = math_matcher(expected)
        found = next(((start, end) for start, end, answer in spans if equal(answer)), None)
    else:
        found = _text_occurrence(reply, expected)
    if found is None or math_equal(extracted, expected):
        return None  # not stated; or the verifier took the expected answer, and this zero has another reason
    start, end = found
    return {
        "expected_answer": expected[:200],
        "extracted_answer": extracted[:200],
        "offset": start,
        "context": reply[max(0, start - CONTEXT_CHARS) : end + CONTEXT_CHARS],
    }


def _cannot_hold(reply: str, expected: str) -> bool:
    """True when no number in `reply` can equal the small integer `expected`: its digits are nowhere in
    the reply, and the reply holds none of the other forms (_OTHER_FORMS). A cheap test before the scan."""
    if not _SMALL_INT.fullmatch(expected):
        return False
    return str(int(expected)) not in reply and _OTHER_FORMS.search(reply) is None


def _text_occurrence(reply: str, expected: str) -> tuple[int, int] | None:
    """An expected answer that is not a number: the first whole-token occurrence stated as a result."""
    want = normalize_answer(expected)
    if not want or expected not in reply:
        return None
    token = re.compile(r"(?<!\w)" + re.escape(expected) + r"(?!\w)")
    for m in token.finditer(reply):
        if normalize_answer(m.group()) == want and _stated_as_result(reply, m.start(), m.end()):
            return m.start(), m.end()
    return None


def _stated_as_result(reply: str, start: int, end: int) -> bool:
    if reply.startswith(("\\boxed{", "\\fbox{"), start):
        return True
    before = reply[max(0, start - 40) : start].rstrip(_MARKUP)
    return bool(_STATED.search(before)) and not _EXPRESSION.match(reply, end)
