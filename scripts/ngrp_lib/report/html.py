"""`build_report`: one self-contained HTML page (inline CSS and SVG, no external URLs) from a profile.

It reuses `compute_stats` and `compare_profiles`; this module only lays numbers and plots out.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts.jsonl import atomic_output, iter_rows
from ..artifacts.names import failures_path_for, manifest_path_for, rollout_key
from ..jsonvalues import jsonable
from ..numbers import num, pval
from ..stats.cost import cost_lines
from ..stats.paired import IDENTICAL
from ..stats.registry import BY_NAME, k_estimators
from ..stats.results import AtK, Estimate, ScopeStats
from ..stats.summary import StatsSettings, compute_stats
from . import plots
from .explorer import build_explorer, rollouts_beside
from .explorer import styles as explorer_styles

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1100px;color:#222;background:#fff}h1{font-size:22px}
h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}
h3{font-size:14px}th{background:#f3f5f8}td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:12px}
.grid{display:flex;flex-wrap:wrap;gap:12px}.grid>div{flex:1 1 480px}svg{max-width:100%;height:auto}
.finding{color:#a40000;font-size:14px}
"""
MAX_FLIP_ROWS = 50


@dataclass
class ReportResult:
    output: str
    profile: str
    compare: str | None
    n_tasks: int
    n_rollouts: int
    n_plots: int
    bytes: int
    explorer: dict[str, Any] | None = None  # the explorer section: its rollouts file, counts and size
    health: dict[str, Any] | None = None  # the verdicts file applied or found next to the run

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _ci(low: Any, high: Any) -> str:
    return f"[{num(low, 3)}, {num(high, 3)}]"


METHODS = {
    "korn_graubard": "Korn-Graubard",
    "one_sided_upper": "one-sided upper bound",
    "one_sided_lower": "one-sided lower bound",
    "t": "t",
}


def _headline_ci(low: Any, high: Any, method: str | None) -> str:
    return f"{_ci(low, high)} {METHODS.get(method or '', '')}".rstrip()


def _estimate_row(label: str, e: Estimate | None, n_label: str = "tasks") -> list[Any]:
    if not e:
        return [label, "n/a", "", "", "", "", ""]
    return [
        label,
        num(e.value),
        _headline_ci(e.ci_low, e.ci_high, e.ci_method),
        _ci(e.t_ci_low, e.t_ci_high),
        _ci(e.boot_ci_low, e.boot_ci_high),
        num(e.se),
        f"{e.n_tasks} {n_label}",
    ]


def _headline(o: ScopeStats) -> str:
    tw, rw = o.mean_reward.task_weighted, o.mean_reward.rollout_weighted
    rows = [
        _estimate_row("mean reward (task-weighted)", tw.estimate),
        [
            "mean reward (rollout-weighted)",
            num(rw.value),
            _headline_ci(rw.ci_low, rw.ci_high, rw.ci_method),
            "",
            "",
            f"{num(rw.se_clustered)} (clustered, CR1)",
            f"{rw.n_rollouts} rollouts, {rw.n_tasks} tasks",
        ],
        [
            "SE conditional (these tasks)",
            num(tw.se_conditional),
            "",
            "",
            "",
            "",
            f"{tw.n_tasks_conditional} tasks",
        ],
    ]
    if o.pass_rate:
        rows.append(_estimate_row("pass rate", o.pass_rate))
    for est in k_estimators():
        entry = _largest_full_k(o.curve(est.name), o.n_tasks)
        if entry:
            rows.append(_estimate_row(est.labelled(entry.k), entry.estimate))
    grpo = BY_NAME["p_informative"]
    for g in o.grpo_informative:
        rows.append(_estimate_row(grpo.labelled(g.group_size), g.estimate))
    v = o.variance
    rows.append(
        [
            "ICC / design effect / effective n",
            f"{num(v.icc, 3)} / {num(v.design_effect, 2)} / {num(v.n_effective, 1)}",
            "",
            "",
            "",
            "",
            f"{v.n_rollouts} rollouts",
        ]
    )
    table = _table(["metric", "value", "95% CI", "95% CI (t)", "95% CI (task bootstrap)", "SE", "n"], rows)
    note = (
        f"<p class='note'>{o.n_tasks} tasks, {o.n_rollouts} scored rollouts, "
        f"{o.n_null_rewards} null rewards excluded. Intervals are task-clustered. The first is the headline: "
        "for a rate in [0, 1], Korn-Graubard (Clopper-Pearson on the effective sample size), which stays in "
        "[0, 1], and a one-sided bound on the tasks behind it when the value is 0 or 1; t with n-1 df "
        "otherwise. The t interval and a percentile bootstrap resampling tasks whole are shown beside it. "
        "Task-weighted means weight every task equally.</p>"
    )
    return table + note


def _largest_full_k(curve: list[AtK], n_tasks: int) -> AtK | None:
    """The largest k that every scored task supports (so the headline compares like with like)."""
    full = [e for e in curve if e.estimate.n_tasks == n_tasks]
    return full[-1] if full else curve[-1] if curve else None


def _adaptive(adaptive: dict | None) -> str:
    """An adaptive run's rounds, under the headline its note qualifies (the headline is its first round)."""
    if not adaptive:
        return ""
    rounds = ", ".join(f"round {r}: {n}" for r, n in adaptive["settled_per_round"].items())
    decisions = ", ".join(f"{k} {v}" for k, v in adaptive["decisions"].items())
    saved = adaptive.get("rollouts_saved_share")
    return (
        f"<p class='note'>Adaptive collection, rule {_esc(adaptive['rule'])} (R={adaptive['first_round']},"
        f" N={adaptive['num_repeats']}): tasks settled per round: {_esc(rounds)};"
        f" decisions: {_esc(decisions)};"
        f" rollouts {adaptive['rollouts_assigned']} of fixed N's {adaptive['rollouts_fixed_n']}"
        + ("" if saved is None else f" ({saved:.0%} saved)")
        + ".</p>"
    )


def _curves(o: ScopeStats) -> tuple[str, str]:
    """One plot of every k-estimator the registry applies to this scope."""
    shown = [e for e in k_estimators() if e.applies(o.binary, o.majority_at_k is not None)]
    curves = {e.labelled("k"): _points(o.curve(e.name)) for e in shown}
    title = "pass@k, pass^k" if o.binary else "expected best / worst of k"
    if o.majority_at_k is not None:
        title += " and maj@k"
    return title, plots.curve_plot(curves, "rate" if o.binary else "reward")


def _points(curve: list[AtK]) -> list[dict]:
    return [jsonable(e) for e in curve]


def _failures(rollouts: Path | None) -> str:
    if rollouts is None:
        return "<p class='note'>No --rollouts given, so no failures sidecar was read.</p>"
    path = failures_path_for(rollouts)
    if not path.exists():
        if manifest_path_for(rollouts).exists():  # ngrp collected it: its collector writes every failure
            return f"<p class='note'>No failed attempts: ngrp's collector wrote no {_esc(path.name)}.</p>"
        return (
            f"<p class='note'>The failures sidecar ({_esc(path.name)}) is absent, and no ngrp run manifest "
            "sits beside the rollouts: this run was collected by another tool (NeMo Gym writes no sidecar), "
            "so failed attempts are not known.</p>"
        )
    classes: Counter = Counter()
    keys: set = set()
    for row in iter_rows(path):
        classes[str(row.data.get("_ng_failure_class") or row.data.get("failure_class") or "unknown")] += 1
        key = rollout_key(row.data)  # a row without a valid key still counts as an attempt
        if key is not None:
            keys.add(key)
    rows = [[name, count] for name, count in classes.most_common()]
    return (
        _table(["failure class", "attempts"], rows)
        + f"<p class='note'>{sum(classes.values())} failed attempts on {len(keys)} rollout keys "
        f"({_esc(path.name)}).</p>"
    )


def _length_section(o: ScopeStats) -> str:
    rl = o.reward_length
    if not rl:
        return "<p class='note'>No length field in the profile's rollout_infos.</p>"
    w, fe, p = rl.within_task_correlation, rl.fixed_effects_slope, rl.pooled_correlation
    rows = [
        ["within-task correlation", num(w.value, 3), f"{w.n_tasks} tasks"],
        [
            "fixed-effects slope per 1k tokens (clustered SE)",
            f"{num(fe.slope * 1000, 4)} ({num(fe.se * 1000, 4)})",
            f"{fe.n_tasks} tasks",
        ],
        ["pooled correlation (confounded by difficulty)", num(p.value, 3), f"{p.n_rollouts} rollouts"],
    ]
    gap, tps, trunc = rl.correct_minus_incorrect_length, rl.tokens_per_success, rl.truncation
    if gap:
        gap_ci = _ci(gap.ci_low, gap.ci_high)
        rows.append(["correct - incorrect length", f"{num(gap.value, 1)} {gap_ci}", f"{gap.n} tasks"])
    if tps:
        rows.append(["tokens per success", num(tps.value, 1), f"{tps.successes} successes"])
    if trunc:
        rows.append(
            [
                "truncated share (reward truncated vs complete)",
                f"{num(trunc.rate, 3)} "
                f"({num(trunc.mean_reward_truncated, 3)} vs {num(trunc.mean_reward_complete, 3)})",
                f"{trunc.n_rollouts} rollouts",
            ]
        )
    plot = plots.length_bins([jsonable(b) for b in rl.reward_by_length_decile], rl.length_field)
    return f"<div class='grid'><div>{_table(['measure', 'value', 'n'], rows)}</div><div>{plot}</div></div>"


def _difficulty(o: ScopeStats, per_task: list[dict]) -> tuple[str, int]:
    d = o.difficulty
    rates = [t.get("pass_rate", t["mean_reward"]) for t in per_task]
    hist = plots.histogram(
        [r for r in rates if r is not None], "per-task pass rate" if d else "per-task mean reward"
    )
    if not d:
        return f"<div>{hist}</div>", 1
    labels = ["all fail", "mixed", "all pass"]
    counts = [d.all_fail.n_tasks, d.mixed.n_tasks, d.all_pass.n_tasks]
    band = plots.bars(labels, counts, "tasks", ["#d62728", "#1f77b4", "#2ca02c"])
    return f"<div class='grid'><div>{hist}</div><div>{band}</div></div>", 2


def _compare_section(profile: Path, baseline: Path, settings: StatsSettings) -> str:
    """`report P --compare Q` is `ngrp compare Q P`: Q is the baseline (A), this report's profile is B,
    and every difference is B - A. Labels carry the file names, so no reader has to guess."""
    from ..stats.compare import compare_profiles

    r = compare_profiles(
        baseline,
        profile,
        intersect=True,
        seed=settings.seed,
        n_bootstrap=settings.n_bootstrap,
        pass_threshold=settings.pass_threshold,
    )
    a, b = f"A = baseline {baseline.name}", f"B = this profile {profile.name}"
    rows = [
        [
            "mean difference B - A",
            num(r.mean_diff),
            _ci(r.ci_low, r.ci_high),
            _ci(r.boot_ci_low, r.boot_ci_high),
            f"{r.n_tasks} tasks",
        ],
        ["sign-flip permutation p", pval(r.p_value_permutation), r.permutation_method, "", ""],
        [
            f"minimum detectable effect (80% power, z / t; from the {r.mde_basis})",
            f"{num(r.mde_80)} / {num(r.mde_80_t)}",
            "",
            "",
            f"tasks needed for {num(r.effect)}: {r.tasks_needed if r.tasks_needed is not None else 'n/a'}",
        ],
        [
            "correlation of per-task means (A, B)",
            num(r.correlation.value, 3),
            "",
            "",
            f"{r.correlation.n_tasks} tasks",
        ],
    ]
    for name, curve in (("pass@{k}", r.pass_at_k), ("pass^{k}", r.pass_hat_k)):
        for e in curve:
            rows.append(
                [
                    f"{name.format(k=e.k)} difference",
                    num(e.mean_diff),
                    _ci(e.ci_low, e.ci_high),
                    "",
                    f"{e.n_tasks} tasks",
                ]
            )
    table = _table(["measure", "value", "95% CI (t)", "95% CI (bootstrap)", "n"], rows)
    pairs = [(t.mean_a, t.mean_b) for t in r.per_task if t.mean_a is not None and t.mean_b is not None]
    scatter = plots.paired_scatter([x for x, _ in pairs], [y for _, y in pairs], a, b)
    flips = _table(
        ["task", "agent", "A (baseline)", "B (this)", "q (BH)", "direction"],
        [[f.task, f.agent or "", f.a, f.b, pval(f.q_value), f.direction] for f in r.flips[:MAX_FLIP_ROWS]],
    )
    dropped = f" {r.n_dropped} tasks in only one run were left out." if r.n_dropped else ""
    if not r.binary:
        flips = "<p class='note'>" + _esc("; ".join(r.notes)) + "</p>"
    finding = (
        f"<p class='finding'><b>{_esc(IDENTICAL)}</b> ({_esc(r.identical.replace('_', ' '))}): both runs "
        "hold the same outcomes, so the difference is 0 by construction</p>"
        if r.identical
        else ""
    )
    return (
        f"<h2>Comparison: B - A, with {_esc(a)} and {_esc(b)}</h2>{finding}{table}<p class='note'>Paired by "
        f"(task, agent); the same numbers as <code>ngrp compare {_esc(baseline)} {_esc(profile)}</code>."
        f"{dropped}</p><div class='grid'><div>{scatter}</div><div><h3>Tasks that flipped "
        f"({r.n_flips}, Fisher exact per task, BH q &lt; {r.alpha})</h3>{flips}</div></div>"
    )


def build_report(
    profile: Path | str,
    output: Path | str,
    *,
    rollouts: Path | str | None = None,
    compare: Path | str | None = None,
    settings: StatsSettings | None = None,
    overwrite: bool = False,
    examples: int = 2,
    exclude_unhealthy: Path | str | None = None,
) -> ReportResult:
    """Render the report for a profile (and optional rollouts / second profile) into one HTML file. The
    explorer section shows up to `examples` rollouts per task from `rollouts` (else the rollouts file beside
    the profile, by stem)."""
    from ..artifacts.jsonl import refuse_existing

    settings = settings or StatsSettings()
    sidecar = failures_path_for(rollouts) if rollouts else None
    refuse_existing([Path(output)], overwrite, inputs=[profile, rollouts, compare, sidecar])
    plots.pyplot()  # fail early with the install hint when matplotlib is missing
    stats = compute_stats(profile, rollouts, settings, exclude_unhealthy)
    o = stats.overall
    title, curve_svg = _curves(o)
    difficulty_html, n_diff = _difficulty(o, jsonable(stats.per_task))
    notes = "".join(f"<li>{_esc(n)}</li>" for n in stats.notes)  # beside the headline they qualify
    notes_html = f"<ul class='note'>{notes}</ul>" if notes else ""
    parts = [
        f"<h1>Reward profile report</h1><p class='note'>profile {_esc(profile)}"
        + (f"; rollouts {_esc(rollouts)}" if rollouts else "")
        + "</p>",
        f"<h2>Headline</h2>{_headline(o)}{notes_html}{_adaptive(stats.adaptive)}",  # notes: health, adaptive
        f"<h2>{_esc(title)}</h2>{curve_svg}<p class='note'>Unbiased estimators over all k-subsets; shaded: "
        "95% task-bootstrap band. A task counts at k only if it has at least k scored rollouts.</p>",
        f"<h2>Per-task rates and difficulty bands</h2>{difficulty_html}",
        f"<h2>Reward vs length</h2>{_length_section(o)}",
        "<h2>Sampling and cost</h2>" + "".join(f"<p>{_esc(line)}</p>" for line in cost_lines(stats.cost)),
        f"<h2>Failures</h2>{_failures(Path(rollouts) if rollouts else None)}",
    ]
    if compare is not None:
        parts.append(_compare_section(Path(profile), Path(compare), settings))
    found = _explorer(Path(profile), Path(rollouts) if rollouts else None, settings, examples)
    parts.append(found[0])
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ngrp report</title>"
        f"<style>{CSS}{explorer_styles()}</style></head><body>{''.join(parts)}"
        "</body></html>"
    )
    data = page.encode()
    with atomic_output(output, overwrite=overwrite) as handle:
        handle.write(data)
    return ReportResult(
        str(output),
        str(profile),
        None if compare is None else str(compare),
        o.n_tasks,
        o.n_rollouts,
        page.count("<svg"),
        len(data),
        found[1],
        stats.inputs.get("health"),
    )


def _explorer(
    profile: Path, rollouts: Path | None, settings: StatsSettings, examples: int
) -> tuple[str, dict[str, Any] | None]:
    """The explorer section and its summary, or a note saying how to get one."""
    from ..profile.extras import DEFAULT_PASS_THRESHOLD

    source = rollouts or rollouts_beside(profile)
    if source is None:
        return (
            "<h2 id='explorer'>Explorer</h2><p class='note'>No rollouts file (none given with --rollouts, "
            "none beside the profile): pass --rollouts to see example rollouts of each task here.</p>"
        ), None
    threshold = DEFAULT_PASS_THRESHOLD if settings.pass_threshold is None else settings.pass_threshold
    ex = build_explorer(source, threshold=threshold, examples=examples)
    summary = {
        "rollouts": str(source),
        "n_tasks": ex.n_tasks,
        "n_tasks_with_examples": ex.n_tasks_with_examples,
        "n_examples": ex.n_examples,
        "chars_per_text": ex.chars_per_text,
        "bytes": ex.bytes,
    }
    return str(ex.html), summary
