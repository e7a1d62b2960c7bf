"""One collection run in direct mode: admission, workers, retries, verification and the two output files.

Gym mode (`gym_backend.GymRun`) subclasses it and changes only how a row is run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from ..artifacts import jsonl
from ..artifacts.names import RCP, ROLLOUT_KEY, TASK_KEY
from ..artifacts.redact import MIN_SECRET, Redactor, url_secrets
from .convert import ConversionError, chat_request, response_from_chat, responses_request
from .failover import make_router
from .http import AttemptFailed, post_json
from .options import CollectOptions
from .progress import ProgressBar, Tally
from .routing import Endpoint
from .verify import score

IDENTITY_KEYS = (TASK_KEY, ROLLOUT_KEY, "agent_ref")
# Transport failures with no reply: many in a row mean the server is gone, so stop admitting rows.
NO_REPLY = ("agent_request_failed", "timeout")


@dataclass
class Plan:
    rows: int
    sha256: str
    to_run: int = 0
    exhausted: int = 0


class DirectRun:
    """State shared by the workers of one run."""

    def __init__(self, options: CollectOptions, verifier: Any, plan: Plan, disk: Any, session: Any) -> None:
        self.options, self.verifier, self.disk, self.session = options, verifier, disk, session
        self.headers = {"content-type": "application/json"}
        key = os.environ.get(options.api_key_env)
        if key:
            self.headers["authorization"] = f"Bearer {key}"
        self.redactor = run_redactor(options, key)  # a server may echo the key: it is masked everywhere
        self.router = make_router(
            list(options.endpoints), options.concurrency, session, self.headers, log=self.log
        )
        self.tally = Tally(total=plan.to_run, done_before=len(disk.completed))
        self.bar = ProgressBar(self.tally, options.progress)
        self.results = jsonl.Appender(options.output, redact=self.redactor)
        self.failures = jsonl.Appender(options.failures_path, redact=self.redactor)
        self.no_reply_streak = 0
        self.stopped_early: str | None = None

    def log(self, text: str) -> None:
        print(f"ngrp collect: {self.redactor.text(text)}", file=sys.stderr, flush=True)

    def pending(self) -> Iterator[tuple[dict, int]]:
        """Rows still to run, streamed from the materialized file, with their attempt index."""
        for row in jsonl.iter_rows(self.options.materialized_path):
            key = (row.data[TASK_KEY], row.data[ROLLOUT_KEY])
            if key in self.disk.completed or self.disk.attempts[key] >= self.options.max_attempts:
                continue
            if self.options.shard is not None and not self.options.shard.owns(key[0]):
                continue
            yield row.data, self.disk.attempts[key]

    async def worker(self, rows: Iterator[tuple[dict, int]]) -> None:
        for row, attempt in rows:  # one shared generator: a row is admitted only when a worker is free
            if self.stopped_early:
                return
            await self.run_row(row, attempt)
            self.bar.update()

    async def run_row(self, row: dict, attempt: int) -> None:
        started = time.monotonic()
        router = self.router
        assert router is not None  # direct mode always has model endpoints
        endpoint = router.endpoint_for(row[TASK_KEY])

        async def call(server: Endpoint) -> dict:
            nonlocal endpoint  # the server that answered (or failed last), after any failover
            endpoint = server
            return await self.call_model(row, server)

        try:
            response = await router.dispatch(row[TASK_KEY], call)
            verdict = await self.verify(row, response)
            out = result_row(row, response, verdict, attempt, time.monotonic() - started)
            out["_ngrp_server"] = endpoint.public_url
            self.results.write(out)  # serialized whole first: a failure here writes no byte
        except AttemptFailed as failure:
            self.record_failure(row, attempt, failure, time.monotonic() - started, endpoint)
            return
        except TypeError as exc:  # orjson: a verifier value JSON cannot hold (Decimal, an int past 64 bits)
            not_json = AttemptFailed("verify_failed", type(exc).__name__, f"result is not JSON: {exc}")
            self.record_failure(row, attempt, not_json, time.monotonic() - started, endpoint)
            return
        except jsonl.LineTooLong as exc:  # under the reply limit, yet too long a line for any reader
            too_long = AttemptFailed("response_too_large", "LineTooLong", str(exc))
            self.record_failure(row, attempt, too_long, time.monotonic() - started, endpoint)
            return
        self.no_reply_streak = 0
        self.tally.add_result(out.get("reward"), output_tokens(response))

    async def call_model(self, row: dict, endpoint: Endpoint) -> dict:
        params = row[RCP]
        try:
            if self.options.api == "chat":
                body = chat_request(params, endpoint.model, token_ids=self.options.return_token_ids)
                url = endpoint.base_url + "/chat/completions"
            else:
                body, url = responses_request(params, endpoint.model), endpoint.base_url + "/responses"
            payload = await post_json(self.session, url, orjson.dumps(body), self.headers, self.options.retry)
            answer = orjson.loads(payload)
            if not isinstance(answer, dict):
                raise ConversionError(f"the server answered a JSON {type(answer).__name__}, not an object")
            if self.options.api == "chat":
                return response_from_chat(answer, token_ids=self.options.return_token_ids)
            if not isinstance(answer.get("output"), list) or not isinstance(answer.get("usage"), dict):
                raise ConversionError("a Responses reply needs an `output` list and a `usage` object")
            return answer
        except AttemptFailed:
            raise
        except Exception as exc:  # a reply of the wrong shape is the server's failure, not a crash of the run
            message = f"unusable reply: {exc}"[:2000]
            raise AttemptFailed("agent_run_error", type(exc).__name__, message) from exc

    async def verify(self, row: dict, response: dict) -> dict:
        return await score(self.verifier, row, response, self.session)

    def record_failure(
        self, row: dict, attempt: int, failure: AttemptFailed, elapsed: float, endpoint: Endpoint
    ) -> None:
        failure.message = self.redactor.text(failure.message, cut=True)  # cut to a length: mask a tail too
        if failure.body is not None:
            failure.body = self.redactor.text(failure.body, cut=True)
        out = {
            **failure.fields(),
            **{k: row[k] for k in IDENTITY_KEYS if k in row},
            "_ng_attempt_index": attempt,
            "_ngrp_elapsed_s": round(elapsed, 4),
            "_ngrp_retries": failure.retries,
            "_ngrp_server": endpoint.public_url,
        }
        self.failures.write(out)
        self.tally.add_failure(failure.failure_class)
        if failure.failure_class in NO_REPLY and failure.status is None:
            self.no_reply_streak += 1
            if self.no_reply_streak >= self.options.abort_after and not self.stopped_early:
                self.stopped_early = (
                    f"{self.no_reply_streak} attempts in a row got no reply "
                    f"(last: {failure.message}); is the server down?"
                )
        else:
            self.no_reply_streak = 0

    def close(self) -> None:
        self.bar.close()
        self.results.close()
        self.failures.close()


def run_redactor(options: CollectOptions, key: str | None) -> Redactor:
    """The secrets of this run: the API key and any password in a server URL."""
    secrets = [key] if key else []
    for url in [e.base_url for e in options.endpoints] + [options.gym_url, options.verify_url]:
        secrets += url_secrets(url)
    if key and len(key) < MIN_SECRET:
        print(
            f"ngrp collect: warning: ${options.api_key_env} is shorter than {MIN_SECRET} characters: too"
            " short to mask in stored text without masking ordinary words",
            file=sys.stderr,
        )
    return Redactor(secrets)


def output_tokens(response: dict) -> int:
    usage = response.get("usage")
    tokens = usage.get("output_tokens") if isinstance(usage, dict) else None
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0


def result_row(row: dict, response: dict, verdict: dict, attempt: int, elapsed: float) -> dict:
    """Gym's rollout shape: params, response, reward and verifier fields, dataset fields, identity stamps."""
    out: dict[str, Any] = {RCP: row[RCP], "response": response}
    out.update({k: v for k, v in verdict.items() if k not in IDENTITY_KEYS})
    for key, value in row.items():
        if key not in out and key not in IDENTITY_KEYS:
            out[key] = value
    for key in IDENTITY_KEYS:
        if key in row:
            out[key] = row[key]
    if attempt:
        out["_ng_attempt_index"] = attempt
    out["_ngrp_elapsed_s"] = round(elapsed, 4)
    return out
