"""Adaptive rounds at full batch: while some tasks are in later rounds, further tasks' first rounds fill
the sequences the limit allows. The collector's own queue (`collect.work.WorkQueue`, sequences in flight
as its unit) and the adaptive layer's own follow-up (`adaptive.rounds.NextRounds`, which answers a task's
next round the moment its round is written), driven as the runner drives them: a request is handled,
its rollouts are told to the follow-up, the rows it answers are queued (`Run.extend`), then the request
is done. Every request takes the same time, as a generation on a batching server does whatever its n."""

from __future__ import annotations

import asyncio

import pytest

from ngrp_lib.adaptive.rounds import AdaptiveSettings, NextRounds, task_states
from ngrp_lib.artifacts.names import ROLLOUT_KEY, TASK_KEY
from ngrp_lib.collect.work import WorkQueue, run_workers
from ngrp_lib.stats.adaptive import Rule, Schedule, play

TASKS, N, LIMIT = 30, 16, 8


def outcome(task: int, rollout: int) -> bool:
    """task % 3: 0 never passes (runs all N), 1 passes from its 6th repeat on, 2 alternates."""
    kind = task % 3
    return kind == 2 and rollout % 2 == 0 or kind == 1 and rollout >= 5


def _drive(
    schedule: Schedule, limit: int = LIMIT
) -> tuple[dict[int, int], list[tuple[bool, int]], list[str]]:
    """Run every task's rounds through the queue in steps: in each, the queue admits what fits, then every
    request in flight completes (one generation, whatever its n). Returns each task's repeats, per step
    (first rounds still queued?, sequences in flight), and the order requests were admitted."""
    settings = AdaptiveSettings(Rule("learnable"), schedule)
    plan = [{TASK_KEY: t, ROLLOUT_KEY: r} for t in range(TASKS) for r in range(N)]
    follow_up = NextRounds.start(plan, settings, task_states(plan, settings, {}, {}), {}, {})
    first = [[(row, 0) for row in plan if row[TASK_KEY] == t and row[ROLLOUT_KEY] < schedule.first_round]
             for t in range(TASKS)]  # fmt: skip
    queue = WorkQueue(iter(first), grows=True, limit=limit)
    repeats = {t: 0 for t in range(TASKS)}
    first_left = [len(first)]
    steps: list[tuple[bool, int]] = []
    admitted: list[str] = []
    step = [asyncio.Event()]

    async def worker() -> None:
        while (group := await queue.take()) is not None:
            is_first = group[0][0][ROLLOUT_KEY] < schedule.first_round
            first_left[0] -= is_first
            admitted.append("first" if is_first else "later")
            await step[0].wait()
            for row, _ in group:
                repeats[row[TASK_KEY]] += 1
                rows = follow_up(row, 1.0 if outcome(row[TASK_KEY], row[ROLLOUT_KEY]) else 0.0)
                if rows:  # a round is one request, as the grouper makes it (n = the round's repeats)
                    queue.add([[(r, 0) for r in rows]])
            queue.done(len(group))

    async def run() -> None:
        workers = asyncio.ensure_future(run_workers(worker() for _ in range(limit)))
        while not workers.done():
            for _ in range(200):  # every worker that can be admitted is
                await asyncio.sleep(0)
            if workers.done():
                break
            steps.append((first_left[0] > 0, queue.load.sequences))
            current, step[0] = step[0], asyncio.Event()
            current.set()
        await workers

    asyncio.run(run())
    return repeats, steps, admitted


@pytest.mark.parametrize(
    ("rounds", "limit"),
    [((4,), LIMIT), ((2,), LIMIT), ((2, 1, 1, 2, 2, 4), LIMIT), ((1, 1, 2, 4, 8), 7), ((4,), 6)],
    ids=["4", "2", "2,1,1,2,2,4", "1,1,2,4,8-limit-7", "4-limit-6"],
)
def test_first_rounds_fill_the_batch_while_other_tasks_are_in_later_rounds(rounds, limit):
    schedule = Schedule(rounds[0], N, rounds[1:])
    repeats, steps, admitted = _drive(schedule, limit)
    # each task ran the repeats its rule gives it on its own draws (play: fixed N's decision, curtailed)
    assert repeats == {t: play(Rule("learnable"), schedule, [outcome(t, r) for r in range(N)]).size
                       for t in range(TASKS)}  # fmt: skip
    # pipelined: later rounds were admitted while first rounds were still queued
    assert admitted.index("later") < len(admitted) - admitted[::-1].index("first") - 1
    # full: in every step with first rounds still queued, the batch held the limit exactly, whatever the
    # rounds' sizes (a round that did not fit went in parts: growing rounds once left up to 3 of 8 free
    # while a round of 4 waited whole)
    filling = [in_flight for first_queued, in_flight in steps if first_queued]
    assert filling and min(filling) == limit, steps
    assert max(in_flight for _, in_flight in steps) <= limit
