"""The settings object for one collection, built from the CLI options and passed in."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifacts import names
from ..artifacts.opening import same_file
from ..errors import UsageError
from .http import RetryPolicy
from .materialize import MaterializeOptions
from .routing import Endpoint, has_credentials, public_url, split_http_url

if TYPE_CHECKING:
    from .shards import Shard

APIS = ("chat", "responses")
# Sequences in flight per server when neither --concurrency nor the server says (an endpoints file's
# `max_num_seqs`): vLLM's smallest default max_num_seqs (its API server on CPU); a GPU vLLM runs 256+.
DEFAULT_SEQUENCES_PER_SERVER = 128


@dataclass(frozen=True)
class CollectOptions:
    output: Path
    endpoints: tuple[Endpoint, ...]
    input: Path | None = None
    materialized: Path | None = None
    materialize: MaterializeOptions = field(default_factory=MaterializeOptions)
    api: str = "chat"
    verifier: str | None = None
    verifier_pattern: str | None = None
    answer_key: str = "expected_answer"
    verify_url: str | None = None
    verifier_fn: str | None = None
    return_token_ids: bool = False
    group_requests: bool = True  # one request per task group (grouping.py); --one-request-per-rollout
    concurrency: int | None = None  # sequences in flight; None: from the servers (`sequence_limit`)
    fill_batch: bool = False  # raise the limit while the servers have no queue (`fill.py`)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_attempts: int = 3
    abort_after: int = 16
    abort_after_same: int = 5
    api_key_env: str = "OPENAI_API_KEY"
    api_key: str | None = field(default=None, repr=False, compare=False)  # the caller reads api_key_env
    skip_preflight: bool = False
    resume: bool = False
    overwrite: bool = False
    progress: bool = False  # the redrawn bar (stderr is a terminal)
    progress_every: float | None = None  # seconds between plain progress lines on stderr (off a terminal)
    gym_url: str | None = None  # Gym /run mode (gym_run.py)
    shard: Shard | None = None  # --shard i/N (ngrp_lib/shards.py)
    endpoint_files: tuple[str, ...] = ()  # --endpoints FILE as given: the resume command names them again
    # --adaptive: the rule, the rounds and N (`adaptive/rounds.py`); `materialize` then expands round 1
    adaptive: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.gym_url is not None:
            check_gym_options(self)
        elif not self.endpoints:  # the one check for a server, for the CLI and the library alike
            raise UsageError("no server: pass --base-url URL (repeatable), --endpoints FILE or --gym-url URL")
        if (self.input is None) == (self.materialized is None):
            raise UsageError("give exactly one of --input TASKS (raw tasks) or --materialized FILE")
        if self.api not in APIS:
            raise UsageError(f"--api must be one of {', '.join(APIS)}")
        if self.return_token_ids and self.api != "chat":
            raise UsageError(
                "--return-token-ids needs --api chat (vLLM returns token ids on chat completions)"
            )
        check_urls(self)
        if self.resume and self.overwrite:
            raise UsageError("--resume and --overwrite contradict each other; choose one")
        for name in ("concurrency", "max_attempts", "abort_after", "abort_after_same"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        retry = self.retry
        if not (math.isfinite(retry.timeout) and retry.timeout > 0):
            raise UsageError(f"--timeout must be finite and > 0, not {retry.timeout}")
        if retry.max_retries < 0:
            raise UsageError(f"--max-retries must be >= 0, not {retry.max_retries}")
        if not all(math.isfinite(d) and d >= 0 for d in (retry.base_delay, retry.max_delay)):
            raise UsageError("--retry-base-delay must be a finite number >= 0")
        source = self.input if self.input is not None else self.materialized
        if source is not None and any(same_file(source, p) for p in self.outputs):
            raise UsageError(  # --overwrite would delete the very rows it is about to read
                f"{source} is both an input and an output of this run", hint="give --output another file name"
            )

    @property
    def outputs(self) -> list[Path]:
        """The files a fresh run (re)writes."""
        paths = [self.output, self.failures_path, self.manifest_path]
        return paths + [self.materialized_path] if self.input is not None else paths

    @property
    def failures_path(self) -> Path:
        return names.failures_path_for(self.output)

    @property
    def manifest_path(self) -> Path:
        return names.manifest_path_for(self.output)

    @property
    def materialized_path(self) -> Path:
        return (
            self.materialized if self.materialized is not None else names.materialized_path_for(self.output)
        )

    @property
    def model(self) -> str:
        names = sorted({e.model for e in self.endpoints})
        return names[0] if len(names) == 1 else ",".join(names)

    def identity(self, input_sha: str | None, materialized_sha: str) -> dict[str, Any]:
        """What shapes the results; --resume refuses to continue when any of it changed."""
        return {
            "input_sha256": input_sha,
            "materialized_sha256": materialized_sha,
            "materialize": self._materialize_identity(),
            "verifier": self.verifier,
            "verifier_pattern": self.verifier_pattern,
            "answer_key": self.answer_key,
            "verify_url": None if self.verify_url is None else public_url(self.verify_url),  # no credentials
            "verifier_fn": self.verifier_fn,
            "return_token_ids": self.return_token_ids,
            "model": self.model,
            "api": "gym" if self.gym_url else self.api,
            "shard": None if self.shard is None else str(self.shard),
        } | ({} if self.adaptive is None else {"adaptive": self._adaptive_identity()})

    def _materialize_identity(self) -> dict[str, Any] | None:
        """The expansion of --input; an adaptive run's runner expands the first round's repeats, while the
        run's --num-repeats (its N, the most a task gets) is what it was started with."""
        if self.input is None:
            return None
        block = self.materialize.to_json()
        return block if self.adaptive is None else block | {"num_repeats": self.adaptive["num_repeats"]}

    def _adaptive_identity(self) -> dict[str, Any]:
        assert self.adaptive is not None
        return {k: v for k, v in self.adaptive.items() if k != "num_repeats"}  # N: in `materialize`

    def runtime(self) -> dict[str, Any]:
        """Options that may change between a run and its resume (servers restart on new ports)."""
        return {
            "options": {
                "concurrency": self.concurrency,
                "timeout": self.retry.timeout,
                "max_retries": self.retry.max_retries,
                "max_attempts": self.max_attempts,
                "abort_after": self.abort_after,
                "abort_after_same": self.abort_after_same,
                "skip_preflight": self.skip_preflight,
                "api_key_env": self.api_key_env,
                "max_response_bytes": self.retry.max_response_bytes,
                "follow_redirects": self.retry.follow_redirects,
                "endpoint_files": list(self.endpoint_files),
                "one_request_per_rollout": not self.group_requests,
                "fill_batch": self.fill_batch,
            },
            "servers": [{"url": e.public_url, "model": e.model} for e in self.endpoints]
            + ([{"url": public_url(self.gym_url), "gym": True}] if self.gym_url else []),
        }


def sequence_limit(options: CollectOptions, endpoints: tuple[Endpoint, ...]) -> tuple[int, str]:
    """The most sequences (rollouts being generated) in flight at once, and where the number comes from:
    --concurrency; else the sum of the servers' `max_num_seqs` (an endpoints file `ngrp serve` wrote)
    when every server gives one; else DEFAULT_SEQUENCES_PER_SERVER per server."""
    if options.concurrency is not None:
        return options.concurrency, "--concurrency"
    known = [e.max_num_seqs for e in endpoints]
    if endpoints and all(k is not None for k in known):
        return sum(k for k in known if k is not None), "the servers' max_num_seqs"
    servers = max(1, len(endpoints))
    return DEFAULT_SEQUENCES_PER_SERVER * servers, f"default ({DEFAULT_SEQUENCES_PER_SERVER} per server)"


def check_urls(options: CollectOptions) -> None:
    """Every URL parses, and none carries `user:pass@` when an API key is set too: aiohttp cannot send both
    (it fails every request, which would read as a broken server), so this is a usage error up front."""
    for flag, url in (("--verify-url", options.verify_url), ("--gym-url", options.gym_url)):
        if url is not None:
            split_http_url(url, flag)
    if not options.api_key:
        return
    keyed = [e.public_url for e in options.endpoints if has_credentials(e.base_url)]
    if options.gym_url is not None and has_credentials(options.gym_url):
        keyed.append(public_url(options.gym_url))
    if keyed:
        raise UsageError(
            f"{keyed[0]} holds user:password@ credentials and ${options.api_key_env} is set too; "
            "a request can carry only one of them",
            hint=f"unset {options.api_key_env} (or name another with --api-key-env), or drop user:pass@",
        )


def check_gym_options(options: CollectOptions) -> None:
    """Options that mean nothing in Gym mode: the Gym stack has its own model and verifier."""
    clashes = [
        flag
        for flag, value in (
            ("--base-url/--endpoints", options.endpoints),
            ("--verifier", options.verifier),
            ("--verify-url", options.verify_url),
            ("--verifier-fn", options.verifier_fn),
            ("--return-token-ids", options.return_token_ids),
        )
        if value
    ]
    if clashes:
        raise UsageError(
            f"--gym-url cannot be combined with {', '.join(clashes)}",
            hint="the Gym stack's own model server and resources server (verifier) are used in Gym mode",
        )
