"""`ngrp compare` as text: the paired difference, its tests and the flipped tasks (--json has all)."""

from __future__ import annotations

from ..numbers import interval, num, pval
from ..stats import methods
from ..stats.compare import CompareResult
from ..stats.paired import IDENTICAL

MAX_FLIPS = 15


def render_compare(r: CompareResult) -> str:
    lines = [
        f"A: {r.path_a}",
        f"B: {r.path_b}",
        f"metric '{r.metric}', B - A over {r.n_tasks} paired tasks"
        + (
            f" ({r.n_dropped} dropped by --intersect: {r.n_only_a} only in A, {r.n_only_b} only in B)"
            if r.n_dropped
            else ""
        )
        + (f"; {r.n_undefined} tasks without a value excluded" if r.n_undefined else ""),
        f"  mean A {num(r.mean_a)}  mean B {num(r.mean_b)}  diff {num(r.mean_diff)}  se {num(r.se_diff)}",
        f"  95% paired {methods.label(r.ci_method)} {interval(r.ci_low, r.ci_high)}  p={pval(r.p_value_t)};  "
        f"95% paired {methods.label(r.boot_ci_method)} {interval(r.boot_ci_low, r.boot_ci_high)} "
        f"(B={r.n_bootstrap}, seed {r.seed})",
        f"  sign-flip permutation p={pval(r.p_value_permutation)} ({r.permutation_method}, "
        f"{r.n_permutations} sign patterns)",
        f"  minimum detectable effect (80% power, alpha {r.alpha}, from the {r.mde_basis}): "
        f"z {num(r.mde_80)}, t {num(r.mde_80_t)}; tasks needed for an effect of {num(r.effect)}: "
        f"{r.tasks_needed if r.tasks_needed is not None else 'n/a'}",
        f"  correlation of A's and B's per-task means: {num(r.correlation.value, 3)} "
        f"(n={r.correlation.n_tasks} tasks; pairing removes what they share)",
    ]
    if r.row_differences:
        lines.insert(2, f"rows: {r.row_differences['summary']}")
    if r.identical:
        lines.insert(2, f"finding: {IDENTICAL} ({r.identical.replace('_', ' ')})")
    if r.mcnemar:
        m = r.mcnemar
        lines.append(
            f"  McNemar (one rollout per task): A only {m.a_only_success}, B only {m.b_only_success},"
            f" exact p={pval(m.p_value)}"
        )
    if r.binary:
        lines.append(f"  tasks that flipped (Fisher exact per task, BH q < {r.alpha}): {r.n_flips}")
        for f in r.flips[:MAX_FLIPS]:
            agent = f" agent {f.agent}" if f.agent else ""
            lines.append(f"    task {f.task}{agent}: {f.a} -> {f.b}  q={pval(f.q_value)}")
    for name, curve in (("pass@k", r.pass_at_k), ("pass^k", r.pass_hat_k)):
        if curve:
            shown = ", ".join(
                f"k={e.k} {num(e.mean_diff, 3)} {interval(e.ci_low, e.ci_high)} (n={e.n_tasks})"
                for e in curve
            )
            lines.append(f"  {name} B - A, paired by task ({methods.tag(curve[0].ci_method)}): {shown}")
    for e in r.grpo_informative:
        lines.append(
            f"  GRPO-informative share at G={e.k} (P(a group of {e.k} holds a pass and a fail)): "
            f"A {num(e.mean_a, 3)}, B {num(e.mean_b, 3)}, B - A {num(e.mean_diff, 3)} "
            f"{interval(e.ci_low, e.ci_high)} ({methods.tag(e.ci_method)}, n={e.n_tasks} tasks)"
        )
    lines += [f"note: {n}" for n in r.notes if not n.startswith(IDENTICAL)]
    lines.append(f"answer: {r.answer['text']}")
    return "\n".join(lines)
