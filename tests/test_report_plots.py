"""The report's plots choose their form from the data: one bar per pass rate that occurs (few distinct
values) or fixed bins (many), and a length curve on the whole 0-1 reward scale or fitted to the data."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib")

from ngrp_lib.report import plots  # noqa: E402


def _bars(svg: str) -> int:
    return len(re.findall(r'id="patch_', svg))


def test_few_distinct_pass_rates_get_one_bar_each_many_get_fixed_bins():
    frame = _bars(plots.histogram([1.0], "pass rate")) - 1  # the patches every figure has, besides bars
    assert _bars(plots.histogram([0, 0.5, 1, 1, None], "pass rate")) - frame == 3
    distinct = [i / plots.MAX_DISTINCT_BARS for i in range(plots.MAX_DISTINCT_BARS)]
    assert _bars(plots.histogram(distinct, "pass rate")) - frame == plots.MAX_DISTINCT_BARS
    many = [i / 100 for i in range(100)]
    assert _bars(plots.histogram(many, "pass rate", bins=20)) - frame == 20


def _bin(low: float, high: float, mean: float, n: int) -> dict:
    return {"length_low": low, "length_high": high, "mean_reward": mean, "n_rollouts": n}


def test_length_curve_keeps_the_reward_scale_unless_rewards_leave_it():
    unit = plots.length_bins([_bin(0, 10, 0.2, 4), _bin(10, 20, 0.9, 5)], "output_tokens")
    assert "<!-- mean reward -->" in unit and "n=4" in unit and "n=5" in unit
    wide = plots.length_bins([_bin(0, 10, 3.0, 4), _bin(10, 20, -1.0, 5)], "output_tokens")
    assert "<!-- mean reward (axis fitted to the data) -->" in wide
    assert "<!-- mean reward -->" not in wide
    assert "output_tokens (pooled deciles; confounded by difficulty)" in wide


def test_the_k_curve_shades_the_headline_interval_not_the_bootstrap(monkeypatch):
    from matplotlib.axes import Axes

    shaded = []
    real = Axes.fill_between

    def spy(self, x, low, high, *args, **kwargs):
        shaded.append((list(low), list(high)))
        return real(self, x, low, high, *args, **kwargs)

    monkeypatch.setattr(Axes, "fill_between", spy)
    curve = [
        {"k": 1, "value": 0.5, "ci_low": 0.3, "ci_high": 0.7, "boot_ci_low": 0.45, "boot_ci_high": 0.55},
        {"k": 2, "value": 0.7, "ci_low": 0.5, "ci_high": 0.85, "boot_ci_low": 0.65, "boot_ci_high": 0.75},
    ]
    plots.curve_plot({"pass@k": curve}, "rate")
    assert shaded == [([0.3, 0.5], [0.7, 0.85])]
