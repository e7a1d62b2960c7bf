"""Direct mode: each row goes to an OpenAI-compatible endpoint (vLLM's chat completions or Responses API),
then to the verifier; the written row is Gym's rollout shape."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ..artifacts import jsonl
from ..artifacts.names import RCP, SHARED_PREFILL, TASK_KEY, USAGE_MISSING
from ..artifacts.response import output_tokens_or_zero
from .convert import ConversionError, chat_request, missing_counts, response_from_chat, responses_request
from .failover import make_router
from .grouping import GROUP_CAP, Grouper, Item, split_choices, whole_run_fallback
from .http import AttemptFailed, post_json
from .routing import Endpoint
from .run import IDENTITY_KEYS, Run
from .verify import score


class DirectRun(Run):
    """Rows to model endpoints (with task-affine routing and failover), verified here; the repeats of a
    task go as one request with `n` choices where that is safe (`grouping.py`)."""

    def __init__(self, *args: Any, endpoints: tuple[Endpoint, ...], verifier: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.verifier = verifier
        self.router = make_router(list(endpoints), self.limit, self.session, self.headers, log=self.log)
        self.fallback = whole_run_fallback(
            enabled=self.options.group_requests, api=self.options.api, gym=False
        )
        if self.fallback is None:
            self.grouper = Grouper(log=self.log, cap=min(GROUP_CAP, self.limit))  # n fits the limit
        elif self.options.group_requests:  # not asked for: say why, once
            self.log(f"one request per rollout: {self.fallback}")

    async def run_row(self, row: dict, attempt: int) -> None:
        started = time.monotonic()
        endpoint = self.router.endpoint_for(row[TASK_KEY])

        async def call(server: Endpoint) -> tuple[dict, list[str]]:
            nonlocal endpoint  # the server that answered (or failed last), after any failover
            endpoint = server
            return await self.call_model(row, server)

        try:
            response, missing = await self.router.dispatch(row[TASK_KEY], call)
        except AttemptFailed as failure:
            self.record_failure(row, attempt, failure, time.monotonic() - started, endpoint.public_url)
            return
        await self.finish(row, attempt, (response, missing), started, endpoint.public_url)

    async def run_group(self, group: list[Item]) -> None:
        """One request with n = len(group) choices to the task's home server; choice i becomes the row of
        group[i]. A failed request is a failed attempt of every row in it (counted once for stopping)."""
        started = time.monotonic()
        first = group[0][0]
        endpoint = self.router.endpoint_for(first[TASK_KEY])

        async def call(server: Endpoint) -> tuple[str, list[tuple[dict, list[str]]]]:
            nonlocal endpoint
            endpoint = server
            return await self.call_model_n(first, server, len(group))

        try:
            request_id, replies = await self.router.dispatch(first[TASK_KEY], call, weight=len(group))
        except AttemptFailed as failure:
            elapsed = time.monotonic() - started
            for i, (row, attempt) in enumerate(group):
                self.record_failure(row, attempt, failure, elapsed, endpoint.public_url, stops=i == 0)
            return
        shared = {"request": request_id, "rows": len(group)}
        for (row, attempt), reply in zip(group, replies, strict=True):
            await self.finish(row, attempt, reply, started, endpoint.public_url, shared=shared)

    async def finish(
        self,
        row: dict,
        attempt: int,
        reply: tuple[dict, list[str]],
        started: float,
        server: str,
        *,
        shared: dict | None = None,
    ) -> bool:
        """Verify one reply and write its rollout (or its failed attempt); True when a rollout was written."""
        response, missing = reply
        cached_reported = CACHED not in missing  # vLLM leaves prompt_tokens_details out unless asked
        missing = [name for name in missing if name != CACHED]
        try:
            verdict = await self.verify(row, response)
            out = result_row(row, response, verdict, attempt, time.monotonic() - started)
            out["_ngrp_server"] = server
            if missing:
                out[USAGE_MISSING] = missing
            if shared is not None:
                out[SHARED_PREFILL] = shared
            self.record_result(
                out,
                out.get("reward"),
                output_tokens_or_zero(response),
                cached_reported=cached_reported,
            )
            return True
        except AttemptFailed as failure:
            self.record_failure(row, attempt, failure, time.monotonic() - started, server)
        except TypeError as exc:  # orjson: a verifier value JSON cannot hold (Decimal, an int past 64 bits)
            not_json = AttemptFailed("verify_failed", type(exc).__name__, f"result is not JSON: {exc}")
            self.record_failure(row, attempt, not_json, time.monotonic() - started, server)
        except jsonl.LineTooLong as exc:  # under the reply limit, yet too long a line for any reader
            too_long = AttemptFailed("response_too_large", "LineTooLong", str(exc))
            self.record_failure(row, attempt, too_long, time.monotonic() - started, server)
        return False

    async def call_model(self, row: dict, endpoint: Endpoint) -> tuple[dict, list[str]]:
        """The Responses-shaped reply, and the token counts a chat reply left out (stored as 0)."""
        params = row[RCP]
        try:
            if self.options.api == "chat":
                body = chat_request(params, endpoint.model, token_ids=self.options.return_token_ids)
                answer = await self._post(body, endpoint.base_url + "/chat/completions")
                response = response_from_chat(answer, token_ids=self.options.return_token_ids)
                return response, missing_counts(answer) + _cached_missing(answer)
            answer = await self._post(
                responses_request(params, endpoint.model), endpoint.base_url + "/responses"
            )
            if not isinstance(answer.get("output"), list) or not isinstance(answer.get("usage"), dict):
                raise ConversionError("a Responses reply needs an `output` list and a `usage` object")
            return answer, []
        except AttemptFailed:
            raise
        except Exception as exc:  # a reply of the wrong shape is the server's failure, not a crash of the run
            raise _unusable(exc) from exc

    async def call_model_n(
        self, row: dict, endpoint: Endpoint, n: int
    ) -> tuple[str, list[tuple[dict, list[str]]]]:
        """One chat request with `n` choices (never with a seed: `grouping.has_seed`); the request's id and
        one Responses-shaped reply per choice. Token ids are asked for to count each choice's own tokens;
        they are stored only with --return-token-ids."""
        try:
            body = chat_request(row[RCP], endpoint.model, token_ids=self.options.return_token_ids)
            body.update({"n": n, "return_token_ids": True})
            answer = await self._post(body, endpoint.base_url + "/chat/completions", sequences=n)
            replies = []
            for chat in split_choices(answer, n):
                response = response_from_chat(chat, token_ids=self.options.return_token_ids)
                replies.append((response, missing_counts(chat) + _cached_missing(chat)))
            return str(answer.get("id", "")), replies
        except AttemptFailed:
            raise
        except Exception as exc:
            raise _unusable(exc) from exc

    async def _post(self, body: dict, url: str, *, sequences: int = 1) -> dict:
        payload = await post_json(
            self.session,
            url,
            orjson.dumps(body),
            self.headers,
            self.options.retry,
            sequences=sequences,
            on_retry=self.note_retry,
        )
        answer = jsonl.loads(payload)  # a lone surrogate escape reads as U+FFFD, as every row does
        if not isinstance(answer, dict):
            raise ConversionError(f"the server answered a JSON {type(answer).__name__}, not an object")
        return answer

    async def verify(self, row: dict, response: dict) -> dict:
        return await score(self.verifier, row, response, self.session)


CACHED = "cached_tokens"  # in a reply's missing counts only: never written to _ngrp_usage_missing


def _cached_missing(chat: dict) -> list[str]:
    """[CACHED] when the chat reply gave no cached-token count (the converted usage then holds 0)."""
    usage = chat.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    return [] if isinstance(details, dict) and details.get(CACHED) is not None else [CACHED]


def _unusable(exc: Exception) -> AttemptFailed:
    return AttemptFailed("agent_run_error", type(exc).__name__, f"unusable reply: {exc}"[:2000])


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
