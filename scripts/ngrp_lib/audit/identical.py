"""Identical replies: how often a rollout's final answer text is one its own task already gave, and across
the run; with whether ngrp sent a seed (the run manifest's identity), which says what they mean.

Without a seed every choice is the server's own draw, so identical replies are the policy's: a peaked
distribution at the run's temperature (a GRPO group of identical replies gives no signal, but nothing is
broken). One seed for every row (`--set seed=N`) makes every repeat of a task the same draw: identical
replies are then the seed's, not the policy's. A seed per repeat (`--seed-per-repeat`) gives repeat r of
every task seed r: repeats differ by seed, and a rerun reproduces them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .health_checks import Digest

SEED_MEANING = {
    "none": "ngrp sent no seed (run manifest: seed_per_repeat false, no seed set): each reply is the"
    " server's own draw, so identical ones are the policy's (a peaked distribution at this temperature),"
    " not a seeding artefact",
    "per_repeat": "ngrp sent seed = rollout index (--seed-per-repeat, metadata.extra_body.seed): the repeats"
    " of a task have different seeds, so identical ones are the policy's",
    "fixed": "every row carries the same seed (responses_create_params.seed set for the run): every repeat"
    " of a task is the same draw, so identical replies are the seed's, not the policy's; collect again"
    " without it",
    "unknown": "no run manifest beside the rollouts says whether a seed was sent (a run ngrp did not"
    " collect): look for responses_create_params.seed or metadata.extra_body.seed in the rows",
}


def seed_sent(manifest: Any) -> str:
    """none, per_repeat, fixed or unknown: what the run manifest (as `manifest_beside` read it) says ngrp
    sent."""
    identity = manifest.get("identity") if isinstance(manifest, dict) else None
    materialize = identity.get("materialize") if isinstance(identity, dict) else None
    if not isinstance(materialize, dict):
        return "unknown"
    overrides = materialize.get("overrides")
    if isinstance(overrides, dict) and overrides.get("seed") is not None:
        return "fixed"
    return "per_repeat" if materialize.get("seed_per_repeat") else "none"


def identical_replies(digests: list[Digest], manifest: Any) -> dict[str, Any]:
    """Counts of identical final answer texts (blank ones left out), within each task and over the run,
    and whether the run's manifest says ngrp sent a seed."""
    by_task: dict[Any, Counter] = {}
    overall: Counter = Counter()
    for d in digests:
        if d.reply:
            by_task.setdefault(d.task, Counter())[d.reply] += 1
            overall[d.reply] += 1
    sizes = [(sum(c.values()), len(c)) for c in by_task.values()]
    seed = seed_sent(manifest)
    return {
        "replies": sum(overall.values()),
        "distinct": len(overall),
        "most_repeated": max(overall.values(), default=0),
        "tasks": len(by_task),
        "repeats_within_task": sum(n - distinct for n, distinct in sizes),
        "tasks_with_repeats": sum(1 for n, distinct in sizes if distinct < n),
        "tasks_all_alike": sum(1 for n, distinct in sizes if n > 1 and distinct == 1),
        "seed": seed,
        "meaning": SEED_MEANING[seed],
    }


def render(block: dict[str, Any]) -> str:
    b = block
    return (
        f"identical replies: {b['repeats_within_task']:,} of {b['replies']:,} replies repeat an earlier reply"
        f" of their own task ({b['tasks_with_repeats']:,} of {b['tasks']:,} tasks; every reply alike in"
        f" {b['tasks_all_alike']:,}); {b['distinct']:,} distinct in the run, the most repeated"
        f" {b['most_repeated']:,} times. {b['meaning']}"
    )
