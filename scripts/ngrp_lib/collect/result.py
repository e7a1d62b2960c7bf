"""What one `ngrp collect` invocation did, and what to do next (rerun with --resume only when that helps)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..artifacts.failures import TOP, FailureSummary
from ..artifacts.usage import per_second
from .options import CollectOptions

RESUME = "rerun the same command with --resume"


@dataclass
class Plan:
    rows: int
    sha256: str
    to_run: int = 0
    exhausted: int = 0
    seeded: int = 0  # rows whose request carries a seed (never sent with n > 1)
    sampling: dict | None = None  # the sampling fields the rows set, with their values (SamplingTally)
    agent_rows: list = field(default_factory=list)  # the first row naming each agent (Gym mode's check)

    def grow(self, rows: int, seeded: int) -> None:
        """Rows a follow-up added to the materialized file while the run went (`work.FollowUp`)."""
        self.rows += rows
        self.to_run += rows
        self.seeded += seeded


@dataclass
class CollectResult:
    output: str
    failures: str
    manifest: str
    materialized: str
    expected: int
    completed: int
    missing: int
    attempted: int
    succeeded: int
    failed: int
    skipped_completed: int
    exhausted: int
    failures_by_class: dict[str, int]
    elapsed_s: float
    rollouts_per_s: float
    output_tokens: int
    output_tokens_per_s: float
    mean_reward: float | None
    resumed: bool
    repaired: dict[str, str] = field(default_factory=dict)
    duplicates_found: int = 0
    stopped_early: str | None = None
    top_failures: list[FailureSummary] = field(default_factory=list)
    preflight: list[dict[str, Any]] | None = None  # preflight.ServerCheck.to_json; None: skipped
    resume_helps: bool = False
    next_step: str | None = None  # one line: "incomplete: rerun ... --resume", or "fix: ..."
    interrupted: bool = False  # Ctrl-C ended the run (exit 130); what was written stays
    cost: dict[str, Any] = field(default_factory=dict)  # `cost_block`: requests, rollouts, time, tokens
    grouping: dict[str, Any] = field(default_factory=dict)  # `grouping_block`: how rows became requests
    load: dict[str, Any] = field(default_factory=dict)  # `runner.load_block`: sequences in flight, limit
    retries: dict[str, int] = field(default_factory=dict)  # cause -> requests sent again (`http.retry_cause`)
    # the manifest's `totals`: every invocation of the run added up, killed ones included (`invocations`)
    run_totals: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return 130 if self.interrupted else 0 if self.complete else 1

    @property
    def complete(self) -> bool:
        """Every key exactly once: a duplicated key (an edit or a concatenation, never this collector)
        would be refused by the profiler, so the run is not done."""
        return self.missing == 0 and self.duplicates_found == 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete, "exit_code": self.exit_code}


def build_result(
    options: CollectOptions, plan: Plan, disk: Any, run: Any, preflight: list[dict[str, Any]] | None
) -> CollectResult:
    t = run.tally
    completed = len(disk.completed) + t.completed
    result = CollectResult(
        output=str(options.output),
        failures=str(options.failures_path),
        manifest=str(options.manifest_path),
        materialized=str(options.materialized_path),
        expected=plan.rows,
        completed=completed,
        missing=plan.rows - completed,
        attempted=t.completed + t.failed,
        succeeded=t.completed,
        failed=t.failed,
        skipped_completed=len(disk.completed),
        exhausted=plan.exhausted + t.exhausted,  # out of attempts before this run, and during it
        failures_by_class=dict(t.failure_classes),
        elapsed_s=round(t.elapsed, 3),
        rollouts_per_s=round(t.completed / t.elapsed, 3),
        output_tokens=t.output_tokens,
        output_tokens_per_s=round(t.output_tokens / t.elapsed, 1),
        mean_reward=t.mean_reward,
        resumed=options.resume,
        repaired=disk.repaired,
        duplicates_found=disk.duplicates,
        stopped_early=run.stopped_early,
        top_failures=t.digest.top(TOP, options.api_key_env, fix_mode(options)),
        preflight=preflight,
    )
    result.cost = cost_block(run, t.elapsed)
    result.grouping = grouping_block(run, plan)
    retryable = bool(t.digest.other) or any(e.failure.retry_helps for e in t.digest.entries.values())
    result.resume_helps, result.next_step = next_step(
        result, run.stop.cause, retryable, options, plan.exhausted
    )
    return result


def cost_block(run: Any, elapsed: float, prefix_cache_hit_rate: float | None = None) -> dict[str, Any]:
    """What this invocation cost: requests sent, rollouts written, wall time and tokens (None where no
    row reported a count: "not reported", never 0). Input tokens count each rollout's prompt, a grouped
    request's once per rollout (`usage.INPUT_UNIT`: what the server prefills and counts)."""
    tokens = run.cost.to_json()
    known = [v for v in (tokens["input_tokens"], tokens["output_tokens"]) if v is not None]
    return {
        "requests": run.requests,
        "rollouts": run.tally.completed,
        "wall_s": round(elapsed, 3),
        "rollouts_per_s": round(run.tally.completed / elapsed, 3),
        **tokens,
        "tokens_per_s": per_second(sum(known), elapsed) if known else None,
        "output_tokens_per_s": per_second(tokens["output_tokens"], elapsed),
        "prefix_cache_hit_rate": prefix_cache_hit_rate,
        "prefix_cache_note": None,  # why not reported, or why 0 (metrics.prefix_cache and cache_note)
        "one_request_per_rollout": one_request_per_rollout(run),
    }


def one_request_per_rollout(run: Any) -> dict[str, Any]:
    """What this invocation would have sent with every rollout as its own request
    (`CostTally.one_request_per_rollout`): more requests, the same tokens; the extra requests are counted
    against the requests this invocation really sent (retries included)."""
    single = run.cost.one_request_per_rollout()
    single["extra_requests"] = max(single["requests"] - run.requests, 0)
    return single


def grouping_block(run: Any, plan: Plan) -> dict[str, Any]:
    """How rows became requests: grouped (with the cap) or not (the whole run's reason), the rows sent
    alone per reason, and how seeds were handled."""
    grouper = run.grouper
    return {
        "grouped": grouper is not None,
        "cap": grouper.cap if grouper is not None else None,
        "fallback": run.fallback,
        "alone": dict(grouper.fallbacks) if grouper is not None else {},
        "seeded_rows": plan.seeded,
        "seeds": seeds_handling(plan.seeded, grouper is not None),
    }


def seeds_handling(seeded: int, grouped: bool) -> str:
    if not seeded:
        return "no row carries a seed"
    if grouped:
        return f"{seeded} rows carry a seed: each sent alone (n = 1), never a seed with n > 1"
    return f"{seeded} rows carry a seed: each sent alone, as every row of this run"


def fix_mode(options: CollectOptions) -> str:
    """Which options a failure's fix names (`failures.MODES`)."""
    return "gym" if options.gym_url else "direct"


def next_step(
    result: CollectResult, cause: Any, retryable: bool, options: CollectOptions, exhausted_before: int = 0
) -> tuple[bool, str | None]:
    """(whether --resume can help, the line to print). Resuming helps keys that were never tried (the
    run stopped early or was cut short) and failures another attempt may cure (no reply, 429, 5xx) while
    the key has attempts left; a key that used up --max-attempts, before this run or during it, is skipped
    by a plain --resume. For a failure that repeats until something is fixed, the line is that fix.
    `result.exhausted` counts both; `exhausted_before` only the keys this run already skipped."""
    if result.missing == 0:
        if not result.duplicates_found:
            return False, None
        return False, (
            f"not consistent: {result.duplicates_found} rows of {result.output} repeat a key (this collector"
            " never writes a key twice: was the file edited or concatenated?); deduplicate with `ngrp merge`"
        )
    more = f"{RESUME} --max-attempts N (N > {options.max_attempts})"
    exhausted = (
        f"; {result.exhausted} keys reached --max-attempts {options.max_attempts}: {more} retries them"
        if result.exhausted
        else ""
    )
    if cause is not None and not cause.retry_helps:  # stopped early on a failure that repeats
        return False, f"fix: {cause.fix(options.api_key_env, fix_mode(options))}{exhausted}"
    untried = result.missing - result.failed - exhausted_before  # not attempted by this run
    retry_left = result.failed - (result.exhausted - exhausted_before)  # failed now, attempts left
    if cause is not None and untried + retry_left > 0:
        status = "`gym env status`" if options.gym_url else "`ngrp serve status`"
        return (
            True,
            f"incomplete: the server stopped answering: check it ({status}), then {RESUME}{exhausted}",
        )
    if result.failed and not retryable and untried == 0:
        return False, f"fix: {result.top_failures[0].fix}{exhausted}"
    if untried + retry_left > 0:
        return True, f"incomplete: {RESUME} to retry missing and failed keys{exhausted}"
    return False, (
        f"incomplete: {result.exhausted} keys reached --max-attempts {options.max_attempts};"
        f" {more} to retry them"
    )
