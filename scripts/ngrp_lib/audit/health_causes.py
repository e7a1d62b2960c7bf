"""Whose fault is a zero, or a missing score? Each check has a cause class (`Check.cause`); a rollout with
several findings is counted once, under the first class in PRECEDENCE (then the first check in registry
order): what lies outside the policy explains a zero before the policy's own behaviour does, and a zero
with no finding at all is a clean wrong answer, the policy's.

The tally reads the digests `health_summary.one_pass` walks; `causes_block` gives what the summary's
`ngrp.causes` and `--json`'s `causes` hold, with the one-line answer `ngrp health` prints last.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .health_checks import INFRASTRUCTURE, POLICY, RECORD, REGISTRY, SETTING, UNKNOWN, VERIFIER

if TYPE_CHECKING:
    from .health_checks import Digest

PRECEDENCE = (RECORD, INFRASTRUCTURE, SETTING, VERIFIER, UNKNOWN, POLICY)
CAUSE_OF = {check.id: check.cause for check in REGISTRY}
CLEAN = "clean"  # a zero with no finding: a wrong answer, the policy's
UNEXPLAINED = "unexplained"  # no score and no finding (the check that would say why was ignored)
_RANK = {c.id: (PRECEDENCE.index(c.cause), i) for i, c in enumerate(REGISTRY) if c.cause is not None}
_CAP_CHECKS = ("ngrp/truncated_at_token_cap", "model_call_runaway_generation")


def deciding(findings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The finding that gives the rollout its cause: the first by PRECEDENCE, then registry order."""
    ranked = [f for f in findings if f["check"] in _RANK]
    return min(ranked, key=lambda f: _RANK[f["check"]]) if ranked else None


@dataclass
class CauseTally:
    zero: Counter = field(default_factory=Counter)  # deciding check (or CLEAN) -> zero-reward rollouts
    unscored: Counter = field(default_factory=Counter)  # deciding check (or UNEXPLAINED) -> rollouts
    # the same for rows with no score and no key of the inputs (unreadable, without identity, a stray key):
    # not expected rollouts, whose keys are counted as never judged already
    outside: Counter = field(default_factory=Counter)
    caps: set = field(default_factory=set)  # max_output_tokens of the zeros a token-cap check decided

    def add(self, digest: Digest) -> None:
        """Count one rollout with a zero reward or no score (the caller calls it for those only)."""
        first = deciding(digest.findings)
        if digest.zero_reward:
            self.zero[CLEAN if first is None else first["check"]] += 1
            if first is not None and first["check"] in _CAP_CHECKS:
                cap = first["detail"].get("max_output_tokens")
                if type(cap) is int:
                    self.caps.add(cap)
        else:
            counts = self.unscored if digest.in_inputs else self.outside
            counts[UNEXPLAINED if first is None else first["check"]] += 1


def _by_cause(counts: Counter) -> dict[str, int]:
    out = dict.fromkeys(PRECEDENCE, 0)
    for check, n in counts.items():
        cause = POLICY if check == CLEAN else CAUSE_OF.get(check)
        if cause is not None:
            out[cause] += n
    return out


def _by_check(counts: Counter) -> dict[str, int]:
    return {c: n for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c in CAUSE_OF}


def causes_block(tally: CauseTally, expected: int, missing: int, failures_read: bool) -> dict[str, Any]:
    """`ngrp.causes`: counts per cause and per deciding check, for zero rewards and for missing scores."""
    zero_total, unscored_total = sum(tally.zero.values()), sum(tally.unscored.values())
    block = {
        "precedence": list(PRECEDENCE),
        "expected": expected,
        "unscored": {
            "total": unscored_total + missing,
            "by_cause": _by_cause(tally.unscored),
            "by_check": _by_check(tally.unscored),
            "unexplained": tally.unscored[UNEXPLAINED],
            "not_judged": missing,
            "not_judged_attempted": ("never" if failures_read else "unknown") if missing else None,
            "collector_stopped": None,  # run_health fills it from the run manifest
            "in_progress": None,  # run_health: `live.LiveRun.to_json()` while a collector holds the lock
            "outside_inputs": {"total": sum(tally.outside.values()), "by_check": _by_check(tally.outside)},
        },
        "zero_rewards": {
            "total": zero_total,
            "by_cause": _by_cause(tally.zero),
            "by_check": _by_check(tally.zero),
            "clean": tally.zero[CLEAN],
            "max_output_tokens": sorted(tally.caps),
        },
    }
    return block  # its `answer` is written by run_health, once every fact (the stop reason) is in


def _checks(by_check: dict[str, int], cause: str) -> str:
    return ", ".join(f"{c} {n}" for c, n in by_check.items() if CAUSE_OF[c] == cause)


# A setting's zero is the limit's only if the task would pass with the limit raised: unknown, and settled
# by collecting those tasks alone with it raised (`inspect --finding CHECK --failed --tasks-out FILE` writes
# their task lines and prints the collect command). check -> (what more, the file's name, how to raise it)
SETTLE = {
    "ngrp/context_window_exceeded": ("a longer context", "context_tasks.jsonl",
                                     "collect them from a server with a longer context (--max-model-len)"),
    "ngrp/ended_on_tool_call": ("more steps", "cut_tasks.jsonl", "collect them with a larger max_steps"),
}  # fmt: skip
CAP_TASKS = "capped_tasks.jsonl"


def settle_route(inspect: str, checks: list[str], folder: str | None, name: str) -> str:
    """`ngrp inspect R --finding CHECK... --failed --tasks-out FOLDER/NAME`: the tasks of those zeros."""
    import os
    import shlex

    path = name if folder is None else os.path.join(folder, name)
    findings = " ".join(f"--finding {check}" for check in checks)
    return f"{inspect} {findings} --failed --tasks-out {shlex.quote(path)}"


def _others(
    part: dict[str, Any], skip: tuple[str, ...] = (), inspect: str | None = None, folder: str | None = None
) -> list[str]:
    """'16 setting (ngrp/truncated_at_token_cap 16)' for each cause with a count, in PRECEDENCE order.
    `folder`: where the settle route writes its task lines (the rollouts' folder)."""
    out = []
    for cause in PRECEDENCE:
        n = part["by_cause"][cause]
        if n and cause not in skip:
            extra = _checks(part["by_check"], cause)
            caps = part.get("max_output_tokens")
            capped = [c for c in part["by_check"] if c in _CAP_CHECKS]
            if cause == SETTING and capped:  # a cut reply's zero: the cap's only if more tokens would pass
                at = f"max_output_tokens {', '.join(map(str, caps))}" if caps else "the token cap"
                extra += f"; {at}: cut there, so whether more tokens would pass is unknown"
                if inspect:
                    first = capped[0]
                    extra += (
                        f"; read them: {inspect} --finding {first}; to settle it, collect those tasks alone"
                        f" at a larger cap: {settle_route(inspect, capped, folder, CAP_TASKS)} (it prints"
                        " the collect command)"
                    )
            for check, (more, name, how) in SETTLE.items():
                if cause == SETTING and inspect and part["by_check"].get(check):
                    extra += (
                        f"; {check}: whether {more} would pass is unknown; to settle it: "
                        f"{settle_route(inspect, [check], folder, name)}, then {how}"
                    )
            if cause == VERIFIER and inspect:  # a verifier's zero is a hint: a reply may hold no answer
                first = next(c for c in part["by_check"] if CAUSE_OF[c] == VERIFIER)
                extra += f"; read those replies: {inspect} --finding {first}"
            out.append(f"{n} {cause} ({extra})")
    return out


def _outside(part: dict[str, Any], more: bool) -> str:
    """'; 3 more rows without a score name no expected rollout (record 2: ...)', or nothing."""
    if not part["total"]:
        return ""
    causes = [(cause, _checks(part["by_check"], cause)) for cause in PRECEDENCE]
    named = [f"{cause} {sum(part['by_check'][c] for c in part['by_check'] if CAUSE_OF[c] == cause)}: {checks}"
             for cause, checks in causes if checks]  # fmt: skip
    why = f" ({'; '.join(named)})" if named else ""
    return f"; {part['total']}{' more' if more else ''} rows without a score name no expected rollout{why}"


def answer_text(
    block: dict[str, Any], inspect: str = "ngrp inspect ROLLOUTS", folder: str | None = None
) -> str:
    """Infrastructure or policy? One sentence: who lacks a score and why, then whose each zero is.
    `inspect`: the command that shows the verifier's zeros (before `--finding CHECK`); `folder`: the
    rollouts' folder, where the route that settles a setting's zeros writes their task lines."""
    unscored, zero = block["unscored"], block["zero_rewards"]
    if unscored["total"]:
        parts = _others(unscored)
        if unscored["unexplained"]:
            parts.append(f"{unscored['unexplained']} unexplained (the check was ignored)")
        if unscored["not_judged"]:
            words = (
                "never attempted (no row, no failed attempt)"
                if unscored["not_judged_attempted"] == "never"
                else "without a rollout (no failures file was read: whether attempted is unknown)"
            )
            live = unscored.get("in_progress")
            if live:
                words = (
                    f"not written yet: the run is in progress (a collector, pid {live['pid']}, holds "
                    f"{live['lock']} since {live['since']}); ask again when it has finished"
                )
            elif unscored.get("collector_stopped"):
                words += f" because the collector stopped: {unscored['collector_stopped']}"
            parts.append(f"{unscored['not_judged']} {words}")
        head = (
            f"of {block['expected']} expected rollouts, {unscored['total']} have no score: {', '.join(parts)}"
        )
    else:
        head = f"of {block['expected']} expected rollouts, none lacks a score"
    head += _outside(unscored["outside_inputs"], more=bool(unscored["total"]))
    if not zero["total"]:
        return f"{head}; no reward is 0"
    policy = zero["by_cause"][POLICY]
    own = [f"{zero['clean']} clean wrong answers"] if zero["clean"] else []
    if _checks(zero["by_check"], POLICY):
        own.append(_checks(zero["by_check"], POLICY))
    said = f"{policy} are the policy's" if policy else "none is shown to be the policy's"
    parts = [said + (f" ({', '.join(own)})" if own else "")]
    parts += _others(zero, skip=(POLICY,), inspect=inspect, folder=folder)
    order = " > ".join(PRECEDENCE)
    return f"{head}; of {zero['total']} zero rewards, {', '.join(parts)} (each counted once: {order})"
