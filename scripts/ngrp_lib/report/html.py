"""`build_report`: one self-contained HTML page (inline CSS and SVG, no external URLs) from a profile.

It reuses `compute_stats` and `compare_profiles`; this module only lays numbers and plots out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifacts.jsonl import atomic_output, iter_rows
from ..artifacts.names import failures_path_for, manifest_path_for, rollout_key
from ..jsonvalues import jsonable
from ..numbers import interval, num, pval
from ..stats import methods
from ..stats.cost import cost_lines
from ..stats.paired import IDENTICAL
from ..stats.registry import BY_NAME, k_estimators
from ..stats.results import AtK, Estimate, ScopeStats
from ..stats.summary import StatsSettings, compute_stats
from ..view.markup import Markup, join, render
from . import plots
from .explorer import build_explorer, rollouts_beside
from .explorer import styles as explorer_styles

if TYPE_CHECKING:
    from ..stats.compare import CompareResult

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


def _table(header: list[str], rows: list[list[Any]]) -> Markup:
    head = join(Markup("<th>") + h + Markup("</th>") for h in header)
    body = join(
        Markup("<tr>") + join(Markup("<td>") + c + Markup("</td>") for c in row) + Markup("</tr>")
        for row in rows
    )
    return Markup("<table><tr>") + head + Markup("</tr>") + body + Markup("</table>")


def _note(text: str) -> Markup:
    """A note paragraph; `text` is escaped unless it is Markup (as a note with an apostrophe is, to keep
    the page's bytes)."""
    return Markup("<p class='note'>") + text + Markup("</p>")


def _headline_ci(low: Any, high: Any, method: str | None) -> str:
    return f"{interval(low, high)} {methods.label(method)}".rstrip()


def _estimate_row(label: str, e: Estimate | None, n_label: str = "tasks") -> list[Any]:
    if not e:
        return [label, "n/a", "", "", "", "", ""]
    return [
        label,
        num(e.value),
        _headline_ci(e.ci_low, e.ci_high, e.ci_method),
        interval(e.t_ci_low, e.t_ci_high),
        interval(e.boot_ci_low, e.boot_ci_high),
        num(e.se),
        f"{e.n_tasks} {n_label}",
    ]


def _headline(o: ScopeStats) -> Markup:
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
        by = " (by the adaptive run's decisions)" if g.from_decisions else ""
        rows.append(_estimate_row(grpo.labelled(g.group_size) + by, g.estimate))
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
    return render(
        "report_headline", table=table, n_tasks=o.n_tasks, n_rollouts=o.n_rollouts, n_null=o.n_null_rewards
    )


def _largest_full_k(curve: list[AtK], n_tasks: int) -> AtK | None:
    """The largest k that every scored task supports (so the headline compares like with like)."""
    full = [e for e in curve if e.estimate.n_tasks == n_tasks]
    return full[-1] if full else curve[-1] if curve else None


def _adaptive(adaptive: dict | None) -> Markup | str:
    """An adaptive run's rounds, under the headline its note qualifies (the headline is its first round)."""
    if not adaptive:
        return ""
    rounds = ", ".join(f"round {r}: {n}" for r, n in adaptive["settled_per_round"].items())
    decisions = ", ".join(f"{k} {v}" for k, v in adaptive["decisions"].items())
    saved = adaptive.get("rollouts_saved_share")
    text = (
        f"Adaptive collection, rule {adaptive['rule']} ({adaptive['schedule']},"
        f" N={adaptive['num_repeats']}):"
        f" tasks settled per round: {rounds}; decisions: {decisions};"
        f" rollouts {adaptive['rollouts_assigned']} of fixed N's {adaptive['rollouts_fixed_n']}"
        + ("" if saved is None else f" ({saved:.0%} saved)")
        + "."
    )
    return Markup("<p class='note'>") + text + Markup("</p>")


def _curves(o: ScopeStats) -> tuple[str, Markup]:
    """One plot of every k-estimator the registry applies to this scope."""
    shown = [e for e in k_estimators() if e.applies(o.binary, o.majority_at_k is not None)]
    curves = {e.labelled("k"): _points(o.curve(e.name)) for e in shown}
    title = "pass@k, pass^k" if o.binary else "expected best / worst of k"
    if o.majority_at_k is not None:
        title += " and maj@k"
    return title, Markup(plots.curve_plot(curves, "rate" if o.binary else "reward"))


def _points(curve: list[AtK]) -> list[dict]:
    return [jsonable(e) for e in curve]


def _failures(rollouts: Path | None) -> Markup:
    if rollouts is None:
        return _note("No --rollouts given, so no failures sidecar was read.")
    path = failures_path_for(rollouts)
    if not path.exists():
        if manifest_path_for(rollouts).exists():  # ngrp collected it: its collector writes every failure
            return _note(Markup("No failed attempts: ngrp's collector wrote no ") + path.name + Markup("."))
        return _note(
            f"The failures sidecar ({path.name}) is absent, and no ngrp run manifest "
            "sits beside the rollouts: this run was collected by another tool (NeMo Gym writes no sidecar), "
            "so failed attempts are not known."
        )
    classes: Counter = Counter()
    keys: set = set()
    for row in iter_rows(path):
        classes[str(row.data.get("_ng_failure_class") or row.data.get("failure_class") or "unknown")] += 1
        key = rollout_key(row.data)  # a row without a valid key still counts as an attempt
        if key is not None:
            keys.add(key)
    rows = [[name, count] for name, count in classes.most_common()]
    return render(
        "report_failures",
        table=_table(["failure class", "attempts"], rows),
        n_attempts=sum(classes.values()),
        n_keys=len(keys),
        sidecar=path.name,
    )


def _length_section(o: ScopeStats) -> Markup:
    rl = o.reward_length
    if not rl:
        return _note(Markup("No length field in the profile's rollout_infos."))
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
        gap_ci = interval(gap.ci_low, gap.ci_high)
        rows.append(["correct - incorrect length", f"{num(gap.value, 1)} {gap_ci}", f"{gap.n} tasks"])
    if tps:
        rows.append([f"{rl.length_field} per success", num(tps.value, 1), f"{tps.successes} successes"])
    if trunc:
        rows.append(
            [
                "truncated share (reward truncated vs complete)",
                f"{num(trunc.rate, 3)} "
                f"({num(trunc.mean_reward_truncated, 3)} vs {num(trunc.mean_reward_complete, 3)})",
                f"{trunc.n_rollouts} rollouts",
            ]
        )
    plot = Markup(plots.length_bins([jsonable(b) for b in rl.reward_by_length_decile], rl.length_field))
    return _grid(_table(["measure", "value", "n"], rows), plot)


def _grid(left: Markup, right: Markup) -> Markup:
    return Markup("<div class='grid'><div>") + left + Markup("</div><div>") + right + Markup("</div></div>")


def _difficulty(o: ScopeStats, per_task: list[dict]) -> tuple[Markup, int]:
    d = o.difficulty
    rates = [t.get("pass_rate", t["mean_reward"]) for t in per_task]
    hist = Markup(
        plots.histogram(
            [r for r in rates if r is not None], "per-task pass rate" if d else "per-task mean reward"
        )
    )
    if not d:
        return Markup("<div>") + hist + Markup("</div>"), 1
    labels = ["all fail", "mixed", "all pass"]
    counts = [d.all_fail.n_tasks, d.mixed.n_tasks, d.all_pass.n_tasks]
    band = Markup(plots.bars(labels, counts, "tasks", ["#d62728", "#1f77b4", "#2ca02c"]))
    return _grid(hist, band), 2


def _compare_section(profile: Path, baseline: Path, settings: StatsSettings) -> Markup:
    """`report P --compare Q` is `ngrp compare Q P`: Q is the baseline (A), this report's profile is B,
    and every difference is B - A. Labels carry the file names, so no reader has to guess."""
    from ..stats.compare import CompareOptions, compare_profiles

    r = compare_profiles(
        baseline,
        profile,
        CompareOptions(
            intersect=True,
            seed=settings.seed,
            n_bootstrap=settings.n_bootstrap,
            pass_threshold=settings.pass_threshold,
        ),
    )
    a, b = f"A = baseline {baseline.name}", f"B = this profile {profile.name}"
    table = _table(["measure", "value", "95% CI (method)", "95% CI (bootstrap)", "n"], _compare_rows(r))
    pairs = [(t.mean_a, t.mean_b) for t in r.per_task if t.mean_a is not None and t.mean_b is not None]
    scatter = Markup(plots.paired_scatter([x for x, _ in pairs], [y for _, y in pairs], a, b))
    flips = _table(
        ["task", "agent", "A (baseline)", "B (this)", "q (BH)", "direction"],
        [[f.task, f.agent or "", f.a, f.b, pval(f.q_value), f.direction] for f in r.flips[:MAX_FLIP_ROWS]],
    )
    dropped = f" {r.n_dropped} tasks in only one run were left out." if r.n_dropped else ""
    if not r.binary:
        flips = _note("; ".join(r.notes))
    finding = (
        render("report_identical", identical=IDENTICAL, how=r.identical.replace("_", " "))
        if r.identical
        else ""
    )
    return render(
        "report_compare",
        a=a,
        b=b,
        finding=finding,
        table=table,
        baseline=baseline,
        profile=profile,
        dropped=dropped,
        scatter=scatter,
        n_flips=r.n_flips,
        alpha=r.alpha,
        flips=flips,
    )


def _compare_rows(r: CompareResult) -> list[list[Any]]:
    rows = [
        [
            "mean difference B - A",
            num(r.mean_diff),
            f"{interval(r.ci_low, r.ci_high)} ({methods.tag(r.ci_method)})",
            interval(r.boot_ci_low, r.boot_ci_high),
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
                    f"{interval(e.ci_low, e.ci_high)} ({methods.tag(e.ci_method)})",
                    "",
                    f"{e.n_tasks} tasks",
                ]
            )
    return rows


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
    notes = join(Markup("<li>") + n + Markup("</li>") for n in stats.notes)  # beside the headline
    failures = _failures(Path(rollouts) if rollouts else None)
    compared = "" if compare is None else _compare_section(Path(profile), Path(compare), settings)
    found = _explorer(Path(profile), Path(rollouts) if rollouts else None, settings, examples)
    page = render(
        "report",
        css=Markup(CSS + explorer_styles()),
        profile=profile,
        rollouts=f"; rollouts {rollouts}" if rollouts else "",
        headline=_headline(o),
        notes=(Markup("<ul class='note'>") + notes + Markup("</ul>") if notes else "")
        + _adaptive(stats.adaptive),
        curve_title=title,
        curve=curve_svg,
        difficulty=difficulty_html,
        length=_length_section(o),
        cost=join(Markup("<p>") + line + Markup("</p>") for line in cost_lines(stats.cost)),
        failures=failures,
        compare=compared,
        explorer=found[0],
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
) -> tuple[Markup, dict[str, Any] | None]:
    """The explorer section and its summary, or a note saying how to get one."""
    from ..profile.extras import DEFAULT_PASS_THRESHOLD

    source = rollouts or rollouts_beside(profile)
    if source is None:
        return Markup("<h2 id='explorer'>Explorer</h2>") + _note(
            "No rollouts file (none given with --rollouts, "
            "none beside the profile): pass --rollouts to see example rollouts of each task here."
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
    return ex.html, summary
