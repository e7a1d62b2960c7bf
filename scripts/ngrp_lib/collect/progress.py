"""Running totals for one collection and its progress on stderr (no dependency): a redrawn bar on a
terminal, else one plain line every `--progress-every` seconds (`progress_line`), printed by a ticker
whatever the requests do, so a run whose requests all hang still says so."""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from ..artifacts.failures import Failure, FailureDigest


@dataclass
class Tally:
    total: int  # keys this run will attempt
    done_before: int = 0
    completed: int = 0
    failed: int = 0
    reward_sum: float = 0.0
    reward_n: int = 0
    output_tokens: int = 0
    exhausted: int = 0  # keys whose failed attempt of this run was their last one (--max-attempts)
    retries: int = 0  # requests sent again (timeouts, 429, 5xx, connection errors)
    failure_classes: Counter = field(default_factory=Counter)
    digest: FailureDigest = field(default_factory=FailureDigest)  # the messages, for the summary
    started: float = field(default_factory=time.monotonic)

    def add_result(self, reward: object, output_tokens: int) -> None:
        self.completed += 1
        self.output_tokens += output_tokens
        if isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward):
            self.reward_sum += reward
            self.reward_n += 1

    def add_failure(self, failure: Failure, key: tuple[int, int] | None, *, last: bool = False) -> None:
        """A failed attempt; `last`: the key has now used up --max-attempts (a plain --resume skips it)."""
        self.failed += 1
        self.exhausted += last
        self.failure_classes[failure.failure_class] += 1
        self.digest.add(failure, key)

    @property
    def elapsed(self) -> float:
        return max(time.monotonic() - self.started, 1e-9)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.reward_n if self.reward_n else None


def progress_line(tally: Tally, retries: dict[str, int], load: dict[str, int] | None = None) -> str:
    """`progress: 120/752 done, 3 failed attempts, 5 retries (timeout 5), 1.2 rollouts/s, ETA 527s,
    sequences in flight 64 of 64`."""
    finished = tally.completed + tally.failed
    rate = tally.completed / tally.elapsed
    left = tally.total - finished
    eta = f"{left / rate:,.0f}s" if rate > 0 else "?"
    causes = ", ".join(f"{cause} {n}" for cause, n in sorted(retries.items()))
    line = (
        f"progress: {tally.completed}/{tally.total} done, {tally.failed} failed attempts,"
        f" {sum(retries.values())} retries"
        + (f" ({causes})" if causes else "")
        + f", {rate:.2f} rollouts/s, ETA {eta}, {tally.elapsed:,.0f}s so far"
    )
    if load is not None:
        line += f", sequences in flight {load['sequences']} of {load['limit']}"
    return line


class ProgressBar:
    """Redraws one line at most every `interval` seconds; silent when disabled."""

    def __init__(self, tally: Tally, enabled: bool, interval: float = 0.5) -> None:
        self.tally, self.enabled, self.interval = tally, enabled, interval
        self._last = 0.0

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < self.interval):
            return
        self._last = now
        sys.stderr.write("\r" + self.line() + "\x1b[K")
        sys.stderr.flush()

    def line(self) -> str:
        t = self.tally
        finished = t.completed + t.failed
        rate = finished / t.elapsed
        left = t.total - finished
        eta = f"{left / rate:,.0f}s" if rate > 0 else "?"
        width = 20
        filled = int(width * finished / t.total) if t.total else width
        mean = "-" if t.mean_reward is None else f"{t.mean_reward:.3f}"
        errors = " ".join(f"{k}={v}" for k, v in sorted(t.failure_classes.items())) or "0"
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {finished}/{t.total} "
            f"{t.completed / t.elapsed:.1f} rollouts/s {t.output_tokens / t.elapsed:,.0f} tok/s ETA {eta} "
            f"reward {mean} errors {errors}"
        )

    def close(self) -> None:
        if self.enabled:
            self.update(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()
