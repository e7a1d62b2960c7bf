"""How the `math` verifier reads an answer: extraction (last `\\boxed{}`, else the last number), the
normalisation and the comparison. One module, below both the verifier (`collect.verify` scores with it)
and the health checks (`audit`, which look for the expected answer earlier in a reply with the same
reading), so the two never disagree on what a number is or when two answers are equal.

Pure functions; they never raise on any string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from fractions import Fraction


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`), with nested braces balanced."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    return _braced(text, text.index("{", start) + 1)


def _braced(text: str, begin: int) -> str | None:
    """The text from `begin` to the brace that closes the one just before it, or None when none does."""
    depth, i = 1, begin
    while i < len(text):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
        i += 1
    return None


# A minus sign counts only where no letter or digit stands right before it: "base-2" and "3-2" end in 2.
_SIGN = r"(?:(?<!\w)[-\u2212])?"
# A comma belongs to a number only between digits ("1,000"): "the answer is 4, so" extracts 4, not "4,".
NUMBER = re.compile(_SIGN + r"\d+(?:,\d+)*(?:\.\d+)?(?:[eE][-+]?\d+|/\d+)?|" + _SIGN + r"\.\d+")
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\{")
_BRACE = re.compile(r"[{}]")
# The characters a NUMBER match can start with: a scan for them skips plain text fast, unlike NUMBER
# itself, whose optional sign and look-behind are tried at every position.
_NUMBER_START = re.compile(r"[\d.\-\u2212]")


def iter_numbers(text: str) -> Iterator[re.Match[str]]:
    """The matches of NUMBER.finditer(text), the same ones in the same order (tested), found faster:
    NUMBER is tried only where a number can start."""
    search, match, pos = _NUMBER_START.search, NUMBER.match, 0
    while True:
        start = search(text, pos)
        if start is None:
            return
        found = match(text, start.start())
        if found is None:  # a point ending a sentence, or a sign right after a letter or digit
            pos = start.start() + 1
            continue
        yield found
        pos = found.end()


def extract_math(text: str) -> str | None:
    """What the `math` verifier takes: the last boxed answer, else the last number, else None."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    numbers = NUMBER.findall(text)
    return numbers[-1] if numbers else None


def math_candidates(text: str) -> Iterator[tuple[int, int, str]]:
    """Every answer the `math` verifier could have taken from `text` had it stopped there, as (start,
    end, answer) in text order: each innermost boxed answer, and each number outside a box.

    A box holding another box's opening is never taken (the verifier takes the box opened last, the
    inner one), so its content is not read: the innermost boxes' contents do not overlap, and the work
    stays linear in the text, nested boxes included."""
    if "\\" not in text:  # no box: the numbers alone
        return ((m.start(), m.end(), m.group()) for m in iter_numbers(text))
    opens = {match.end(): match.start() for match in _BOX_OPEN.finditer(text)}
    closing = _closing_braces(text, opens)
    starts = [*opens.values(), len(text)]  # in text order: each box's next opening is the next start
    spans, boxes = [], []
    for i, (begin, start) in enumerate(opens.items()):
        if begin in closing:
            spans.append((start, closing[begin] + 1))
            if starts[i + 1] > closing[begin]:  # no box opens inside this one
                boxes.append((start, closing[begin] + 1, text[begin : closing[begin]].strip()))
    boxed = _covered(spans)
    numbers = [(m.start(), m.end(), m.group()) for m in iter_numbers(text) if not boxed(m.start())]
    return iter(sorted([*boxes, *numbers]))


def _closing_braces(text: str, opens: dict[int, int]) -> dict[int, int]:
    """For each position in `opens` (just after a `{`), the index of the `}` that closes that brace (the
    first one where the depth counted from it comes back to zero, as `_braced` reads it), when one does.
    One pass with a stack over the braces, linear in the text: `_braced` from every box, its quadratic
    equivalent, took minutes on a reply of thousands of unclosed or nested boxes."""
    stack: list[int] = []
    closing: dict[int, int] = {}
    for match in _BRACE.finditer(text):
        if match.group() == "{":
            stack.append(match.end())
        elif stack:
            begin = stack.pop()
            if begin in opens:
                closing[begin] = match.start()
    return closing


def _covered(boxes: list[tuple[int, int]]) -> Callable[[int], bool]:
    """Whether a position lies in one of the boxes (in start order; nested ones too), by a binary search
    over their merged spans: a reply looping on thousands of boxes is not read in quadratic time."""
    from bisect import bisect_right

    spans: list[list[int]] = []
    for start, end in boxes:
        if spans and start < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    starts = [start for start, _ in spans]

    def inside(position: int) -> bool:
        i = bisect_right(starts, position) - 1
        return i >= 0 and position < spans[i][1]

    return inside


def normalize_answer(answer: str) -> str:
    """The verifier's normalisation: `$`, `\\text{}`/`\\mathrm{}`, `\\!`, `\\,` and spaces removed, the
    minus sign `−` read as `-`, a trailing `.` dropped."""
    answer = answer.strip().strip("$").strip()
    for wrapper in ("\\text{", "\\mathrm{"):
        if answer.startswith(wrapper) and answer.endswith("}"):
            answer = answer[len(wrapper) : -1]
    answer = answer.replace("\\!", "").replace("\\,", "").replace(" ", "").replace("\u2212", "-")
    return answer.rstrip(".")


_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # 1,000,000.5; not 1,2
_HUGE_EXPONENT = re.compile(r"[eE][-+]?0*\d{3,}")  # Fraction would build 10**exponent: compare as text


def as_number(answer: str) -> Fraction | None:
    text = normalize_answer(answer)
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    if _HUGE_EXPONENT.search(text):
        return None
    frac = re.fullmatch(r"(-?)\\[dt]?frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}", text)
    try:
        if frac:
            value = Fraction(frac.group(2)) / Fraction(frac.group(3))
            return -value if frac.group(1) else value
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def math_equal(got: str, expected: str) -> bool:
    return math_matcher(expected)(got)


_TOLERANCE = Fraction(1, 10**6)
_SMALL_INT = re.compile(r"\d{1,6}")


def math_matcher(expected: str) -> Callable[[str], bool]:
    """`math_equal(got, expected)` as a function of `got`, with `expected` read once, and only when
    needed (for many answers: two integers below 10**6 are compared as integers, with the same result)."""
    small = int(expected) if _SMALL_INT.fullmatch(expected) else None
    read: list = []  # [as_number(expected), normalize_answer(expected)], once asked

    def equal(got: str) -> bool:
        if small is not None and _SMALL_INT.fullmatch(got):
            return int(got) == small  # below 10**6 the relative tolerance cannot join two integers
        if not read:
            read.extend((as_number(expected), normalize_answer(expected)))
            read.append(_plain_float(read[0]))
        if read[2] is not None and _far_apart(got, read[2]):
            return False  # the floats already differ by far more than the tolerance: no Fraction built
        a, b = as_number(got), read[0]
        if a is not None and b is not None:
            return abs(a - b) <= _TOLERANCE * max(abs(a), abs(b))  # relative: 0 is not 1e-7
        return normalize_answer(got) == read[1]

    return equal


def _plain_float(value: Fraction | None) -> float | None:
    """`value` as a float when that float is far from overflow and underflow (so its relative error is
    that of a double), else None."""
    if value is None:
        return None
    number = float(value)
    return number if number == 0 or 1e-280 < abs(number) < 1e280 else None


def _far_apart(got: str, expected: float) -> bool:
    """True only when `got` reads as a float whose value differs from `expected` by more than ten times
    the tolerance (so the exact comparison must say unequal: each float is within 1e-15 of its value).
    A cheap test before `as_number`, whose Fraction costs about 20 us: a reply stating thousands of
    numbers is compared in linear time with a small constant."""
    try:
        number = float(normalize_answer(got))
    except ValueError:
        return False
    if not (number == 0 or 1e-290 < abs(number) < 1e290):
        return False  # near overflow or underflow (or inf, nan): the exact comparison decides
    return abs(number - expected) > 1e-5 * max(abs(number), abs(expected))
