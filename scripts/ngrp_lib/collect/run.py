"""What the workers of one collection share: the pending rows, the output files, the running totals and
the rules for stopping early. A backend (`direct.DirectRun`, `gym_run.GymRun`) adds `run_row`, and
`run_group` when it sends one request per task group (`grouping.py`).

Workers pull requests (a row, or a task group of rows) from one shared queue (`work.WorkQueue`) that
streams the materialized file, so at most `limit` sequences (rollouts being generated: a grouped request
carries its `n`) are in flight and memory does not grow with the number of rows. Every result and every
failed attempt is appended and flushed as it completes.
A follow-up (`work.FollowUp`, given by `collect --adaptive`) may answer a written rollout with more rows:
they are appended to the materialized file in one write, then queued (`Run.extend`).

Stopping early (admission stops; requests in flight finish, so up to `limit - 1` more are sent):
- `abort_after` requests in a row got no reply: the server is gone;
- the same failure that retrying cannot fix (`failures.Failure.scope`) hit `abort_after_same` rows in a
  row ("server": a refused key, an unknown model or route, a redirect not followed), or rows of that many
  different tasks in a row ("row": a context-length error, a 400/413/422, a reply over the size limit, a
  verifier that raises). All repeats of one task share a prompt, so one bad task does not stop a run.
  A failed grouped request is one failed attempt for each of its rows, and counts once for these rules.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..artifacts import jsonl
from ..artifacts.failures import Failure
from ..artifacts.names import RCP, ROLLOUT_KEY, TASK_KEY
from ..artifacts.redact import MIN_SECRET, Redactor, server_redactor
from ..artifacts.terminal import visible
from ..artifacts.usage import CostTally
from .grouping import Grouper, Item, has_seed
from .http import AttemptFailed, retry_cause
from .options import CollectOptions
from .progress import ProgressBar, Tally
from .work import FollowUp, WorkQueue

IDENTITY_KEYS = (TASK_KEY, ROLLOUT_KEY, "agent_ref")


def stderr_log(text: str) -> None:
    print(f"ngrp collect: {visible(text)}", file=sys.stderr, flush=True)  # a server said part of it


def run_redactor(options: CollectOptions) -> Redactor:
    """The secrets of this run: the API key and any password in a server URL."""
    key = options.api_key
    urls = [e.base_url for e in options.endpoints] + [options.gym_url, options.verify_url]
    if key and len(key) < MIN_SECRET:
        print(
            f"ngrp collect: warning: ${options.api_key_env} is shorter than {MIN_SECRET} characters: too"
            " short to mask in stored text without masking ordinary words",
            file=sys.stderr,
        )
    return server_redactor(urls, key)


@dataclass
class EarlyStop:
    """The two stop rules, fed every outcome in completion order."""

    no_reply_after: int
    same_after: int
    no_reply_streak: int = 0
    same: tuple | None = None
    same_rows: int = 0
    same_tasks: set[int | None] = field(default_factory=set)
    reason: str | None = None
    cause: Failure | None = None  # the failure that stopped the run

    def success(self) -> None:
        self.no_reply_streak = 0
        self.same, self.same_rows, self.same_tasks = None, 0, set()

    def failure(self, failure: Failure, task: int | None, *, replied: bool = False) -> str | None:
        """Count one failure; the reason to stop when this one trips a rule (only the first time).
        `replied`: the server answered, though the failure class alone would not say so."""
        self.no_reply_streak = self.no_reply_streak + 1 if failure.no_reply and not replied else 0
        scope = failure.scope
        if scope is None:
            self.same, self.same_rows, self.same_tasks = None, 0, set()
        elif failure.signature != self.same:
            self.same, self.same_rows, self.same_tasks = failure.signature, 1, {task}
        else:
            self.same_rows += 1
            self.same_tasks.add(task)
        if self.reason is not None:
            return None
        if self.no_reply_streak >= self.no_reply_after:
            self.reason = (
                f"{self.no_reply_streak} attempts in a row got no reply (last: {failure.message});"
                " is the server down?"
            )
        elif scope == "server" and self.same_rows >= self.same_after:
            self.reason = f"{self.same_rows} rows in a row failed the same way: {failure.message}"
        elif scope == "row" and len(self.same_tasks) >= self.same_after:
            self.reason = (
                f"{self.same_rows} rows of {len(self.same_tasks)} different tasks in a row failed the same"
                f" way: {failure.message}"
            )
        else:
            return None
        self.cause = failure
        return self.reason


class Run:
    """State shared by the workers of one run; subclasses implement `run_row`."""

    def __init__(
        self,
        options: CollectOptions,
        disk: Any,
        session: Any,
        *,
        to_run: int,
        headers: dict[str, str],
        log: Callable[[str], None] = stderr_log,
        redactor: Redactor | None = None,
        limit: int | None = None,
    ) -> None:
        self.options, self.disk, self.session, self.headers = options, disk, session, headers
        self.follow_up: FollowUp | None = None  # set by the caller before `work`
        # a server may echo the key: masked everywhere. An empty redactor is falsy: test for None, or the
        # caller's would be rebuilt (and the short-key warning printed twice)
        self.redactor = redactor if redactor is not None else run_redactor(options)
        self._log = log
        self.tally = Tally(total=to_run, done_before=len(disk.completed))
        self.bar = ProgressBar(self.tally, options.progress)
        self.results = jsonl.Appender(options.output, redact=self.redactor)
        self.failures = jsonl.Appender(options.failures_path, redact=self.redactor)
        self.stop = EarlyStop(options.abort_after, options.abort_after_same)
        self.cost = CostTally()
        self.requests = 0  # requests sent: one per group of rows (a grouped request carries several)
        self.grouper: Grouper | None = None  # set by a backend that sends one request per task group
        self.fallback: str | None = None  # why the whole run sends one request per rollout
        self.queue: WorkQueue | None = None  # set by `work`
        # sequences in flight at most (`options.sequence_limit`, resolved by the runner)
        self.limit = limit or options.concurrency or 1 << 30
        self.limit_source = "--concurrency"
        self.fill: Any = None  # the --fill-batch rule (`fill.FillRule`), set by the runner
        self.added: set[tuple[int, int]] = set()  # keys a follow-up added to the materialized file
        self.added_seeded = 0  # of them, rows whose request carries a seed
        self._materialized: jsonl.Appender | None = None  # opened by the first `extend`
        self.retries: Counter[str] = Counter()  # cause -> retries sent (`http.retry_cause`)

    def log(self, text: str) -> None:
        self._log(self.redactor.text(text))

    def note_retry(self, failure: AttemptFailed) -> None:
        """A request is about to be sent again: counted by cause (the summary, the manifest, `check` and
        `health` show them), and said on stderr: every timeout, and the first retry of each other cause."""
        cause = retry_cause(failure)
        self.retries[cause] += 1
        self.tally.retries = sum(self.retries.values())
        if cause == "timeout" or self.retries[cause] == 1:
            message = self.redactor.text(failure.message, cut=True)
            self.log(f"retrying ({cause}, {self.retries[cause]} so far): {message}")

    @property
    def stopped_early(self) -> str | None:
        return self.stop.reason

    def pending(self) -> Iterator[tuple[dict, int]]:
        """Rows still to run, streamed from the materialized file, with their attempt index."""
        for row in jsonl.iter_rows(self.options.materialized_path):
            key = (row.data[TASK_KEY], row.data[ROLLOUT_KEY])
            if key in self.disk.completed or self.disk.attempts[key] >= self.options.max_attempts:
                continue
            if key in self.added:  # appended while this stream reads the file: queued by `extend`
                continue
            if self.options.shard is not None and not self.options.shard.owns(key[0]):
                continue
            yield row.data, self.disk.attempts[key]

    def work(self) -> WorkQueue:
        """The pending rows cut into requests: task groups when the backend groups, else one row each."""
        pending = self.pending()
        groups = ([item] for item in pending) if self.grouper is None else self.grouper.groups(pending)
        self.queue = WorkQueue(groups, grows=self.follow_up is not None, limit=self.limit)
        return self.queue

    async def worker(self, queue: WorkQueue) -> None:
        while (group := await queue.take()) is not None:  # a request is admitted only when a worker is free
            try:
                if self.stop.reason:
                    return
                self.requests += 1
                if len(group) == 1:
                    await self.run_row(*group[0])
                else:
                    await self.run_group(group)
                self.bar.update()
            finally:
                queue.done(len(group))

    def extend(self, rows: list[dict]) -> None:
        """Rows a follow-up added: appended to the materialized file in one write (so a kill leaves whole
        lines; `--resume` cuts a torn one), then queued as requests, grouped as the file's rows are."""
        if not rows:
            return
        if self._materialized is None:
            self._materialized = jsonl.Appender(self.options.materialized_path)
        self._materialized.write_many(rows)
        items = [(row, self.disk.attempts[(row[TASK_KEY], row[ROLLOUT_KEY])]) for row in rows]
        self.added.update((row[TASK_KEY], row[ROLLOUT_KEY]) for row in rows)
        self.added_seeded += sum(has_seed(row.get(RCP)) for row in rows)
        self.tally.total += len(rows)
        groups = [[item] for item in items] if self.grouper is None else self.grouper.batch(items)
        assert self.queue is not None
        self.queue.add(groups)

    async def run_row(self, row: dict, attempt: int) -> None:
        raise NotImplementedError

    async def run_group(self, group: list[Item]) -> None:
        raise NotImplementedError

    def record_result(
        self,
        out: dict,
        reward: Any,
        tokens: int,
        *,
        cached_reported: bool = True,
    ) -> None:
        """Write a rollout; `cached_reported` False when the server gave no cached-token count (the row
        holds 0)."""
        self.results.write(out)  # serialized whole first: a failure here writes no byte
        self.stop.success()
        self.tally.add_result(reward, tokens)
        self.cost.add(out, cached_reported=cached_reported)
        if self.follow_up is not None:  # after the write: a kill between leaves what --resume redoes
            self.extend(self.follow_up(out, reward))

    def record_failure(
        self,
        row: dict,
        attempt: int,
        failure: AttemptFailed,
        elapsed: float,
        server: str,
        *,
        stops: bool = True,
    ) -> None:
        """Write a failed attempt; `stops` False for the other rows of a failed grouped request, whose
        one request counts once towards the stop rules."""
        failure.message = self.redactor.text(failure.message, cut=True)  # cut to a length: mask a tail too
        if failure.body is not None:
            failure.body = self.redactor.text(failure.body, cut=True)
        out = {
            **failure.fields(),
            **{k: row[k] for k in IDENTITY_KEYS if k in row},
            "_ng_attempt_index": attempt,
            "_ngrp_elapsed_s": round(elapsed, 4),
            "_ngrp_retries": failure.retries,
            "_ngrp_server": server,
        }
        self.failures.write(out)
        self.count_failure(Failure.from_fields(out), row, attempt=attempt, stops=stops)

    def count_failure(
        self,
        failure: Failure,
        row: dict,
        *,
        replied: bool = False,
        attempt: int | None = None,
        stops: bool = True,
    ) -> None:
        """Tally a failed attempt (already written, or written nowhere) and apply the stop rules.
        `attempt`: its index, when it was written to the failures sidecar (so it counts towards
        --max-attempts); None for one written nowhere."""
        failure = replace(
            failure,
            failure_class=self.redactor.text(failure.failure_class),
            message=self.redactor.text(failure.message, cut=True),
        )
        task, index = row.get(TASK_KEY), row.get(ROLLOUT_KEY)
        last = attempt is not None and attempt + 1 >= self.options.max_attempts
        self.tally.add_failure(
            failure, (task, index) if task is not None and index is not None else None, last=last
        )
        reason = self.stop.failure(failure, task, replied=replied) if stops else None
        if reason:
            self.log(f"stopping: {reason}")

    def close(self) -> None:
        self.bar.close()
        self.results.close()
        self.failures.close()
        if self._materialized is not None:
            self._materialized.close()
