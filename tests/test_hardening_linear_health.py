"""Issue 38, class 1: every health check is linear in the reply's length.

Stated bound: `health` on a reply of L MiB, whatever its shape, costs at most 200 times what it costs on a
benign reply of the same length, plus 2 s (measured: up to about 26 times, 0.7 s per MiB at most, on a
loaded 2-core machine; the quadratic scans this replaced ran more than 300 s on 0.2 MiB). The bound is
generous on purpose: both times are taken in the same process under the same load, so it cannot flake,
while a quadratic scan at 2 MiB misses it by orders of magnitude (and is stopped by the alarm, not waited
for). Figures: `benchmarks/health_adversarial_bench.py`.
"""

from __future__ import annotations

import signal
from fractions import Fraction

import pytest
from adversarial_replies import BASELINE, SHAPES, time_health
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ngrp_lib.artifacts import answers

MIB = 2**20
FACTOR, SLACK = 200, 2.0


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> float:
    return time_health(tmp_path_factory.mktemp("baseline"), SHAPES[BASELINE](2 * MIB))


class _TooSlow(BaseException):  # not an Exception: health's per-row guard records those as findings
    pass


def _raise(*_):
    raise _TooSlow


@pytest.mark.parametrize("shape", sorted(set(SHAPES) - {BASELINE}))
@pytest.mark.parametrize("expected", ["7", "abc"])
def test_linear_time_health_checks_on_2_mib_adversarial_replies(tmp_path, baseline, shape, expected):
    bound = FACTOR * baseline + SLACK
    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, bound * 1.5)  # a quadratic scan is stopped, not waited for
    try:
        took = time_health(tmp_path, SHAPES[shape](2 * MIB), expected)
    except _TooSlow:
        pytest.fail(f"health on a 2 MiB {shape} reply ran past {bound * 1.5:.1f} s (benign {baseline:.2f} s)")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert took <= bound, f"{shape}: {took:.2f} s against a baseline of {baseline:.3f} s"


_NUMBERS = st.one_of(
    st.integers(-(10**8), 10**8).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(-999, 999), st.integers(-120, 120)),
    st.builds(lambda a, b: f"{a}/{b}", st.integers(-999, 999), st.integers(0, 999)),
    st.sampled_from(["0", "-0", "0.0", "1e-300", "1e300", "nan", "inf", "1_000", "\\frac{1}{3}", "abc", ""]),
)


@settings(max_examples=2000, deadline=None)
@example(got="6.9999999", expected="7")
@example(got="0.333333", expected="\\frac{1}{3}")
@example(got="1e-99", expected="0")
@given(got=_NUMBERS, expected=_NUMBERS)
def test_linear_time_float_pre_test_never_changes_an_answer_comparison(got, expected):
    """`math_matcher`'s float pre-test only ever answers 'unequal' where the exact comparison does."""
    a, b = answers.as_number(got), answers.as_number(expected)
    if a is not None and b is not None:
        exact = abs(a - b) <= Fraction(1, 10**6) * max(abs(a), abs(b))
    else:
        exact = answers.normalize_answer(got) == answers.normalize_answer(expected)
    if answers._SMALL_INT.fullmatch(expected) and answers._SMALL_INT.fullmatch(got):
        exact = int(got) == int(expected)
    assert answers.math_equal(got, expected) == exact


def test_linear_time_box_matching_closes_each_box_where_a_scan_from_it_does():
    text = "\\boxed{1{2}3} {\\boxed{4} \\boxed{\\boxed{5}} \\fbox{6 \\boxed{7"
    got = [(end, answer) for start, end, answer in answers.math_candidates(text) if text[start] == "\\"]
    assert [answer for _, answer in got] == ["1{2}3", "4", "5"]
    for end, answer in got:
        assert answers.extract_math(text[:end]) == answer
