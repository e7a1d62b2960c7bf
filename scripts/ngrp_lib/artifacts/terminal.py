"""Text for a terminal is untrusted: run data (agent names, rollout text, ledger descriptions, a server's
error message) may hold ESC, OSC or NUL sequences that rewrite the screen, the window title or the
clipboard. `visible` is the one rendering step every human-readable line goes through (`say` prints
through it): control characters come out as their escapes (`\\x1b`, `\\x00`, `\\u202e`), the way `--json`
already writes them. Newlines and tabs stay: they are the layout."""

from __future__ import annotations

import re

import click

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and isolates that
# reorder what the eye reads (U+202A-202E, U+2066-2069), line/paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character shown as its escape (tab and newline kept)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def say(text: str, *, err: bool = False) -> None:
    """Print one human-readable message (stdout, or stderr with `err`) through `visible`."""
    click.echo(visible(text), err=err)
