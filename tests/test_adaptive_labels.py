"""Replay 2026-12-05 W3: the adaptive collect summary said "the last round's figures above" over figures
that cover every round (the rounds run in one runner call), and echoed `--rounds 2` as `--first-round 2`
(collect, stats) or `R=2` (curriculum). The labels now say what the figures cover, and the rounds are
given back as the user gave them (tests/test_adaptive_stats.py and tests/test_resume_command.py check
stats, curriculum and the resume command on runs)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ngrp_lib.artifacts.rounds_text import NOT_RECORDED, rounds_args, rounds_option, rounds_words
from ngrp_lib.commands.collect import _passes_line


@pytest.mark.parametrize(
    ("first_round", "sizes", "rounds", "words"),
    [
        (None, "2", (2,), "--rounds 2"),
        (2, None, (2,), "--first-round 2"),
        (None, "2, 2", (2,), "--rounds 2,2"),  # spaces left out; the last size repeats: the same rounds
        (None, "1,1,2,4", (1, 1, 2, 4), "--rounds 1,1,2,4"),
        (None, None, (4,), "rounds of 4, the default"),
    ],
)
def test_the_rounds_are_given_back_as_the_user_gave_them(first_round, sizes, rounds, words):
    given = rounds_option(first_round, sizes)
    assert rounds_words(rounds, given) == words
    assert rounds_args(rounds, given) == ([] if given is None else words.split(" "))


def test_an_older_or_inconsistent_record_falls_back_to_the_option_that_sets_the_rounds():
    assert rounds_words((2,), NOT_RECORDED) == "--first-round 2"  # a manifest written before the key
    assert rounds_words((1, 2), NOT_RECORDED) == "--rounds 1,2"
    assert rounds_words((1, 2), "--rounds 1,3") == "--rounds 1,2"  # not these rounds: never echoed
    assert rounds_words((2,), "--first-round 2,2") == "--first-round 2"
    assert rounds_words((2,), "--temperature 2") == "--first-round 2"
    assert rounds_words((1, 2), None) == "--rounds 1,2"  # "default" only fits one size


def _adaptive(runner_calls: int) -> SimpleNamespace:
    cost = {"requests": 76, "rollouts": 152}
    return SimpleNamespace(runner_calls=runner_calls, succeeded=152, failed=1, elapsed_s=43.6, cost=cost)


def test_the_passes_line_says_what_the_figures_above_cover():
    one = _passes_line(_adaptive(1))
    assert one == "figures above: every round of this invocation (the rounds run in one pass)"
    assert "last round" not in one
    two = _passes_line(_adaptive(2))
    assert two.startswith("figures above: the last of 2 passes (a later pass retries the tasks a failed")
    assert two.endswith("every pass of this invocation: 152 ok, 1 failed attempts over 43.6s, 76 requests for"
                        " 152 rollouts")  # fmt: skip
