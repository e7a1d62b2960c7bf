"""The stopping rules of `collect --adaptive` against sequences worked out by hand, and learnable's promise
(fixed N's keep/drop decision on any draws) as a property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngrp_lib.errors import UsageError
from ngrp_lib.stats.adaptive import (
    FAILED,
    PENDING,
    REACHED_N,
    SETTLED,
    Rule,
    Schedule,
    decide,
    decide_at_end,
    parse_rule,
    play,
    replay,
)

T, F = True, False
LEARNABLE = Rule("learnable")
BAND = Rule("band", low=0.2, high=0.8)


def test_rules_parse_and_refuse():
    assert parse_rule("learnable") == LEARNABLE
    assert parse_rule("band:0.2,0.8") == BAND
    assert parse_rule("width:0.3") == Rule("width", width=0.3)
    assert parse_rule("band:0.2,0.8").spec == "band:0.2,0.8"
    assert parse_rule("learnable").interval is None and parse_rule("width:0.3").interval == "wilson_95"
    for bad in ("", "learnable:1", "band:0.8,0.2", "band:0.2", "band:a,b", "width:0", "width:1.5", "mixed"):
        with pytest.raises(UsageError, match="not a rule"):
            parse_rule(bad)


def test_schedule_rounds():
    s = Schedule(first_round=4, num_repeats=16)
    assert [s.round_of(i) for i in range(16)] == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    assert (s.next_size(4), s.next_size(12), s.max_rounds) == (8, 16, 4)
    odd = Schedule(first_round=3, num_repeats=8)  # sizes 3, 6, 8: the last round is short
    assert [odd.round_of(i) for i in range(8)] == [1, 1, 1, 2, 2, 2, 3, 3]
    assert (odd.next_size(6), odd.max_rounds) == (8, 3)
    with pytest.raises(UsageError, match="--first-round"):
        Schedule(first_round=5, num_repeats=4)


def test_learnable_by_hand():
    s = Schedule(4, 16)
    state = play(LEARNABLE, s, [T, F] + [T] * 14)
    assert (state.size, state.reason, state.decision, state.rounds) == (4, SETTLED, "mixed", 1)
    state = play(LEARNABLE, s, [T] * 5 + [F] + [T] * 10)  # mixed in round 2
    assert (state.size, state.reason, state.decision, state.rounds) == (8, SETTLED, "mixed", 2)
    state = play(LEARNABLE, s, [F] * 15 + [T])  # the pass in the last round
    assert (state.size, state.reason, state.decision) == (16, SETTLED, "mixed")
    state = play(LEARNABLE, s, [T] * 16)
    assert (state.size, state.reason, state.decision, state.rounds) == (16, REACHED_N, "all_pass", 4)
    assert play(LEARNABLE, s, [F] * 16).decision == "all_fail"


def test_band_by_hand():
    # Wilson 95% (z = 1.95996): 2/4 -> [0.150, 0.850] straddles 0.2; 4/8 -> [0.215, 0.785] inside;
    # 0/8 -> upper 3.8415/11.8415 = 0.324; 0/16 -> upper 3.8415/19.8415 = 0.194 < 0.2: below.
    assert decide(BAND, [T, F, T, F]) is None
    assert decide(BAND, [T, F] * 4) == "inside"
    assert decide(BAND, [F] * 8) is None and decide(BAND, [F] * 16) == "below"
    assert decide(BAND, [T] * 16) == "above"
    state = play(BAND, Schedule(4, 16), [T, F] * 8)
    assert (state.size, state.decision) == (8, "inside")
    state = play(BAND, Schedule(8, 32), [F] * 32)
    assert (state.size, state.reason, state.decision) == (16, SETTLED, "below")
    # unsettled at N: the pass rate decides, as fixed N does (3/4: 0.75 is inside; Wilson is not)
    state = play(BAND, Schedule(4, 4), [T, T, T, F])
    assert (state.reason, state.decision) == (REACHED_N, "inside")
    assert decide_at_end(BAND, [T] * 4) == "above" and decide_at_end(BAND, [F] * 4) == "below"


def test_width_by_hand():
    rule = Rule("width", width=0.6)  # widths: 0/4 -> 0.490, 2/4 -> 0.700, 4/8 -> 0.570
    assert play(rule, Schedule(4, 16), [F] * 16).size == 4
    state = play(rule, Schedule(4, 16), [T, F] * 8)
    assert (state.size, state.decision) == (8, "narrow")
    state = play(Rule("width", width=0.1), Schedule(4, 8), [T, F] * 4)
    assert (state.size, state.reason, state.decision) == (8, REACHED_N, "wide")


def test_replay_on_partial_files():
    s = Schedule(4, 16)
    # round 1 not finished: pending at 4
    assert replay(LEARNABLE, s, {0: T, 1: T, 3: T}).reason == PENDING
    state = replay(LEARNABLE, s, {0: T, 1: T, 2: T, 3: T})  # round 1 all pass: round 2 assigned
    assert (state.size, state.reason) == (8, PENDING)
    state = replay(LEARNABLE, s, {0: T, 1: T, 2: T, 3: T}, exhausted={5})
    assert (state.size, state.reason, state.decision) == (8, FAILED, None)
    # a reward that is missing is no outcome: T, None, T, T is not yet mixed
    assert replay(LEARNABLE, s, {0: T, 1: None, 2: T, 3: T}).size == 8
    assert replay(LEARNABLE, s, {0: T, 1: None, 2: F, 3: T}).decision == "mixed"


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_learnable_always_gives_fixed_n_decision(data):
    n = data.draw(st.integers(1, 24), label="N")
    r = data.draw(st.integers(1, n), label="R")
    draws = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="draws")
    state = play(LEARNABLE, Schedule(r, n), draws)
    assert state.decision == decide_at_end(LEARNABLE, draws)
    assert r <= state.size <= n
    assert state.size == n or state.decision == "mixed"  # only a mixed task stops early


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_decision_reads_only_the_repeats_it_was_given(data):
    n = data.draw(st.integers(2, 20))
    r = data.draw(st.integers(1, n))
    rule = data.draw(st.sampled_from([LEARNABLE, BAND, Rule("width", width=0.5)]))
    draws = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    state = play(rule, Schedule(r, n), draws)
    tail = [not d for d in draws[state.size :]]  # other draws after the stop change nothing
    assert play(rule, Schedule(r, n), draws[: state.size] + tail) == state
