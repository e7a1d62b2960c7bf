"""Degenerate loops in a response's text: the runaway-generation check's detector. (What a response says,
its texts, tool calls, finish and token counts, is `artifacts.response`'s, the one reading every command
shares.)

Pure functions over text; they never raise.
"""

from __future__ import annotations

MAX_UNIT = 500  # longest repeated unit (characters) the loop detector looks for
_WINDOW = 32  # characters matched at each anchor to find a candidate period


def find_loop(text: str, min_repeats: int, min_chars: int) -> tuple[str, int, int] | None:
    """The first degenerate loop found: (unit, copies, start) where `unit` (1 to MAX_UNIT characters)
    repeats at least `min_repeats` times back to back over at least `min_chars` characters.

    A loop is a stretch of text with period p (text[i] == text[i + p] throughout) holding
    `copies = len // p` whole copies. Anchors spaced about min_chars * (1 - 1/min_repeats) apart look
    for an earlier copy of the 32 characters before them within MAX_UNIT characters; each candidate
    period is then grown into its maximal stretch. Every loop of at least `min_chars` characters holds
    an anchor (tested against a brute-force search); normal text costs one `rfind` per anchor.
    """
    n = len(text)
    if n < min_chars or n < 2:
        return None
    # A loop of L >= min_chars characters has period p <= L / min_repeats, so the stretch where an anchor
    # finds it (the window and its copy p earlier, inside the loop) is L - window - p long, at least
    # min_chars * (1 - 1 / min_repeats) - window: anchors that far apart cannot all miss it.
    window = max(1, min(_WINDOW, min_chars // 4))
    stride = max(1, int(min_chars * (1 - 1 / min_repeats)) - window)
    # The usual text: no window has an earlier copy nearby. All anchors are searched through map (one C
    # call each, no Python step between them), then the few hits are tried in order from the end.
    anchors = range(n, window, -stride)
    reach = window + MAX_UNIT
    probes = [text[a - window : a] for a in anchors]
    starts = [a - reach if a > reach else 0 for a in anchors]
    hits = list(map(text.rfind, probes, starts, range(n - 1, window - 1, -stride)))
    if not hits or max(hits) < 0:
        return None
    for a, j in zip(anchors, hits, strict=True):
        if j >= 0:
            found = _loop_at(text, a, window, j, min_repeats, min_chars)
            if found is not None:
                return found
    return None


def _loop_at(
    text: str, a: int, w: int, j: int, min_repeats: int, min_chars: int
) -> tuple[str, int, int] | None:
    """Try each earlier copy of the window before `a` (the nearest, at j, first) as the loop's period."""
    probe = text[a - w : a]
    lo = max(0, a - w - MAX_UNIT)
    while True:
        if j < 0:
            return None
        p = a - w - j
        start, stop = _stretch(text, j, a, p)
        copies = (stop - start) // p
        if copies >= min_repeats and copies * p >= min_chars:
            return text[start : start + p], copies, start
        j = text.rfind(probe, lo, j + w - 1)


def _stretch(text: str, left: int, right: int, p: int) -> tuple[int, int]:
    """Grow [left, right), where text[i] == text[i + p] for left <= i < right - p, to its maximal extent."""
    while left >= p and text[left - p : left] == text[left : left + p]:
        left -= p
    while left > 0 and text[left - 1] == text[left - 1 + p]:
        left -= 1
    n = len(text)
    while right + p <= n and text[right : right + p] == text[right - p : right]:
        right += p
    while right < n and text[right] == text[right - p]:
        right += 1
    return left, right
