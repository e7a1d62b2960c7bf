"""`ngrp stats` as text: compact, bounded tables (the JSON has everything)."""

from __future__ import annotations

from typing import Any

from ..numbers import interval, num, pct
from ..stats import methods
from ..stats.cost import cost_lines
from ..stats.registry import k_estimators
from ..stats.results import AtK, Estimate, RewardLength, ScopeStats
from .stats_grpo_text import grpo_task_lines, lowest_task_lines

MAX_K_ROWS = 8
MAX_GROUPS = 20
LEGEND = (methods.KORN_GRAUBARD, methods.UPPER_BOUND, methods.LOWER_BOUND, methods.T, methods.BOOTSTRAP)


def shown_ks(curve: list[AtK]) -> list[AtK]:
    """At most MAX_K_ROWS rows: powers of two and the largest k."""
    if len(curve) <= MAX_K_ROWS:
        return curve
    picked = [e for e in curve if e.k & (e.k - 1) == 0][: MAX_K_ROWS - 1]
    return picked + [curve[-1]] if curve[-1] not in picked else picked


def tagged(low: Any, high: Any, method: str | None, digits: int = 3) -> str:
    """An interval with its method's tag in front: 'KG [0.412, 0.588]' (the tag from stats.methods)."""
    return f"{methods.tag(method)} {interval(low, high, digits)}".lstrip()


def _row(label: str, e: Estimate | None) -> str:
    if not e:
        return f"  {label:<28} n/a"
    tag = methods.tag(e.ci_method)
    return (
        f"  {label:<28} {num(e.value):>8}  {tag:>5} {interval(e.ci_low, e.ci_high):<17} "
        f"{methods.tag(methods.BOOTSTRAP)} {interval(e.boot_ci_low, e.boot_ci_high):<17}"
        f" se {num(e.se, 4):>7}  n={e.n_tasks} tasks"
    )


def render_scope(scope: ScopeStats) -> list[str]:
    lines = []
    tw, rw = scope.mean_reward.task_weighted, scope.mean_reward.rollout_weighted
    per = scope.rollouts_per_task
    lines.append(
        f"[{scope.scope}] {scope.n_tasks} tasks, {scope.n_rollouts} scored rollouts "
        f"({num(per.min)}-{per.max} per task), {scope.n_null_rewards} null rewards excluded"
    )
    lines.append(_row("mean reward (task-weighted)", tw.estimate))
    tag, rw_ci = methods.tag(rw.ci_method), interval(rw.ci_low, rw.ci_high)
    lines.append(
        f"  {'mean reward (rollout-wtd)':<28} {num(rw.value):>8}  {tag:>5} {rw_ci:<17} "
        f"clustered (CR1) se {num(rw.se_clustered)}, naive iid se {num(rw.se_naive_iid)}  "
        f"n={rw.n_rollouts} rollouts, {rw.n_tasks} tasks"
    )
    lines.append(
        f"  {'SE population (new tasks)':<28} {num(tw.se_population):>8}  n={tw.estimate.n_tasks} tasks; "
        f"SE conditional (these tasks) {num(tw.se_conditional)}  n={tw.n_tasks_conditional}"
    )
    if scope.pass_rate:
        lines.append(_row("pass rate", scope.pass_rate))
    for est in k_estimators():
        for entry in shown_ks(scope.curve(est.name)):
            lines.append(_row(est.labelled(entry.k), entry.estimate))
    lines.extend(_variance_lines(scope))
    lines.extend(_difficulty_lines(scope))
    lines.extend(_length_lines(scope.reward_length))
    return lines


def _variance_lines(scope: ScopeStats) -> list[str]:
    v, need = scope.variance, scope.repeats_needed
    return [
        f"  variance: within {num(v.sigma2_within)} (n={v.n_tasks_within} tasks), between "
        f"{num(v.sigma2_between)}, ICC {num(v.icc, 3)}, design effect {num(v.design_effect, 2)}, "
        f"effective n {num(v.n_effective, 1)} of {v.n_rollouts} rollouts",
        f"  repeats per task for a {num(need.target_width, 2)}-wide {int(need.level * 100)}% per-task "
        f"interval: {need.typical or 'n/a'} (pooled within-task variance), "
        f"{need.worst_case_binary} (p=0.5)",
    ]


def _difficulty_lines(scope: ScopeStats) -> list[str]:
    d = scope.difficulty
    if not d:
        return []
    bands = ", ".join(
        f"{name} {s.n_tasks} ({pct(s.share)} {tagged(s.ci_low, s.ci_high, s.ci_method, 2)})"
        for name, s in (("all fail", d.all_fail), ("mixed", d.mixed), ("all pass", d.all_pass))
    )
    lines = [f"  difficulty: {bands} of {d.n_tasks} tasks"]
    if d.all_fail.n_tasks:
        lines.append(
            f"  0 of n solved is not unsolvable: 95% upper bound on those tasks' pass rate 1-0.05^(1/n) = "
            f"{num(d.all_fail_upper_bound_95_median, 3)} (median; ~3/n for large n)"
        )
    grpo = ", ".join(
        f"G={g.group_size}: {num(g.estimate.value, 3)} (n={g.estimate.n_tasks}"
        + (", by the adaptive run's decisions)" if g.from_decisions else ")")
        for g in scope.grpo_informative
    )
    if grpo:
        lines.append(f"  P(GRPO group informative): {grpo}")
    return lines


def _length_lines(rl: RewardLength | None) -> list[str]:
    if not rl:
        return []
    w, p, fe = rl.within_task_correlation, rl.pooled_correlation, rl.fixed_effects_slope
    lines = [
        f"  reward vs {rl.length_field}: within-task r {num(w.value, 3)} (n={w.n_tasks} tasks), "
        f"pooled r {num(p.value, 3)} (n={p.n_rollouts}; confounded by difficulty)",
        f"    fixed-effects slope per 1k tokens {num(fe.slope * 1000, 4)} "
        f"(clustered se {num(fe.se * 1000, 4)}, n={fe.n_tasks} tasks)",
    ]
    gap, trunc, tps = rl.correct_minus_incorrect_length, rl.truncation, rl.tokens_per_success
    extra = []
    if gap:
        gap_ci = tagged(gap.ci_low, gap.ci_high, gap.ci_method)
        extra.append(f"correct - incorrect length {num(gap.value, 1)} {gap_ci} (n={gap.n} tasks)")
    if tps:
        extra.append(f"{rl.length_field} per success {num(tps.value, 1)} (n={tps.successes} successes)")
    if trunc:
        extra.append(
            f"truncated {pct(trunc.rate)} of "
            f"{trunc.n_rollouts} (mean reward {num(trunc.mean_reward_truncated, 3)} vs "
            f"{num(trunc.mean_reward_complete, 3)})"
        )
    if extra:
        lines.extend("    " + item for item in extra)
    return lines


def render_stats(result: Any) -> str:
    lines = [f"profile: {result.profile}" + (f"  rollouts: {result.rollouts}" if result.rollouts else "")]
    lines += render_scope(result.overall)
    groups: list[ScopeStats] = result.groups
    if groups:
        lines.append(
            f"by {result.settings['group_by']} ({len(groups)} groups"
            + (f", first {MAX_GROUPS} shown" if len(groups) > MAX_GROUPS else "")
            + "):"
        )
        for g in groups[:MAX_GROUPS]:
            tw = g.mean_reward.task_weighted.estimate
            pass1 = g.pass_at_k[0].estimate.value if g.pass_at_k else None
            lines.append(
                f"  {str(g.scope)[:24]:<24} mean {num(tw.value)} "
                f"{tagged(tw.ci_low, tw.ci_high, tw.ci_method)} "
                f"pass@1 {num(pass1)} n={g.n_tasks} tasks / {g.n_rollouts} rollouts"
            )
    lines += lowest_task_lines(result)
    lines += grpo_task_lines(result)
    lines += adaptive_lines(result.adaptive)
    lines += cost_lines(result.cost)
    lines += [f"note: {n}" for n in result.notes]
    lines.append(
        f"(95% intervals, task-clustered: {methods.legend(LEGEND)}; rates get the bounded ones, t with "
        "--interval t or for unbounded rewards. --json for every k, every group and the per-task table)"
    )
    return "\n".join(lines)


def adaptive_lines(adaptive: dict | None) -> list[str]:
    """An adaptive run's rounds: tasks settled per round, stop reasons, rollouts saved against fixed N."""
    if not adaptive:
        return []
    saved = adaptive.get("rollouts_saved_share")
    per_round = ", ".join(f"{r}: {n}" for r, n in adaptive["settled_per_round"].items())
    reasons = ", ".join(f"{k} {v}" for k, v in adaptive["tasks_by_reason"].items())
    decisions = ", ".join(f"{k} {v}" for k, v in adaptive["decisions"].items())
    return [
        f"adaptive run: rule {adaptive['rule']}, {adaptive['schedule']}, N={adaptive['num_repeats']};"
        f" estimates above from the {adaptive['estimates_from']}",
        f"  tasks settled per round: {per_round}; stop reasons: {reasons}; decisions: {decisions}",
        f"  rollouts: {adaptive['rollouts_assigned']} of fixed N's {adaptive['rollouts_fixed_n']}"
        + ("" if saved is None else f" ({saved:.0%} saved)"),
    ]
