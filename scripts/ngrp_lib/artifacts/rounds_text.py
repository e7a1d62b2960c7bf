"""An adaptive run's rounds as text and as collect's options, echoed as the user gave them.

`collect --adaptive` takes the rounds as `--first-round R` or `--rounds SIZES` (or neither: the default,
rounds of min(4, N)); both spellings of one schedule are one run to `--resume` (the identity keeps the
sizes), and the manifest's progress block keeps the spelling (`rounds_option`), so that collect, stats,
curriculum and the resume command `check` prints say the option the user gave, not another one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def rounds_flag(rounds: Sequence[int]) -> str:
    """Round sizes as an option of collect: `--rounds 1,1,2,4,8`; one size is `--first-round 4` (rounds of
    4). For a run whose manifest does not say how the user gave them (`rounds_words` otherwise)."""
    sizes = ",".join(str(size) for size in rounds)
    return f"--first-round {sizes}" if len(rounds) == 1 else f"--rounds {sizes}"


NOT_RECORDED = object()  # `rounds_words`: a manifest written before `rounds_option`


def rounds_option(first_round: int | None, round_sizes: str | None) -> str | None:
    """How the user gave the rounds to collect, as the manifest's `rounds_option` keeps it: `--rounds 2`
    (the sizes as given, spaces left out), `--first-round 2`, or None (neither: the default)."""
    if round_sizes is not None:
        return "--rounds " + "".join(round_sizes.split())
    return None if first_round is None else f"--first-round {first_round}"


def rounds_args(rounds: Sequence[int], given: Any = NOT_RECORDED) -> list[str]:
    """The options that give these rounds, as the user gave them (`rounds_option`): `--rounds 2` stays
    `--rounds 2`; neither given: none (the default); a manifest that does not say, or says something that
    is not these rounds: `rounds_flag`'s."""
    if given is None and len(rounds) == 1:
        return []
    if isinstance(given, str) and _given_sizes(given) == tuple(rounds):
        return given.split(" ")
    return rounds_flag(rounds).split(" ")


def rounds_words(rounds: Sequence[int], given: Any = NOT_RECORDED) -> str:
    """`rounds_args` as text: `--rounds 2`, or `rounds of 4, the default` when neither option was given."""
    args = rounds_args(rounds, given)
    return " ".join(args) if args else f"rounds of {rounds[0]}, the default"


def _given_sizes(given: str) -> tuple[int, ...] | None:
    """The rounds an option as given sets (`--rounds 2,2` sets (2,): the last size repeats), or None."""
    option, _, value = given.partition(" ")
    try:
        sizes = [int(part) for part in value.split(",")]
    except ValueError:
        return None
    if option not in ("--rounds", "--first-round") or (option == "--first-round" and len(sizes) != 1):
        return None
    while len(sizes) > 1 and sizes[-1] == sizes[-2]:
        sizes.pop()
    return tuple(sizes)
