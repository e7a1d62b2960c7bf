"""Running totals for one collection and a plain-text progress line on stderr (no dependency)."""

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
