"""Direct mode: each row goes to an OpenAI-compatible endpoint (vLLM's chat completions or Responses API),
then to the verifier; the written row is Gym's rollout shape."""

from __future__ import annotations

import time
from typing import Any

import orjson

from ..artifacts import jsonl
from ..artifacts.names import RCP, TASK_KEY, USAGE_MISSING
from ..artifacts.response import output_tokens_or_zero
from .convert import ConversionError, chat_request, missing_counts, response_from_chat, responses_request
from .failover import make_router
from .http import AttemptFailed, post_json
from .routing import Endpoint
from .run import IDENTITY_KEYS, Run
from .verify import score


class DirectRun(Run):
    """Rows to model endpoints (with task-affine routing and failover), verified here."""

    def __init__(self, *args: Any, endpoints: tuple[Endpoint, ...], verifier: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.verifier = verifier
        self.router = make_router(
            list(endpoints), self.options.concurrency, self.session, self.headers, log=self.log
        )

    async def run_row(self, row: dict, attempt: int) -> None:
        started = time.monotonic()
        router = self.router
        endpoint = router.endpoint_for(row[TASK_KEY])

        async def call(server: Endpoint) -> tuple[dict, list[str]]:
            nonlocal endpoint  # the server that answered (or failed last), after any failover
            endpoint = server
            return await self.call_model(row, server)

        try:
            response, missing = await router.dispatch(row[TASK_KEY], call)
            verdict = await self.verify(row, response)
            out = result_row(row, response, verdict, attempt, time.monotonic() - started)
            out["_ngrp_server"] = endpoint.public_url
            if missing:
                out[USAGE_MISSING] = missing
            self.record_result(out, out.get("reward"), output_tokens_or_zero(response))
        except AttemptFailed as failure:
            self.record_failure(row, attempt, failure, time.monotonic() - started, endpoint.public_url)
        except TypeError as exc:  # orjson: a verifier value JSON cannot hold (Decimal, an int past 64 bits)
            not_json = AttemptFailed("verify_failed", type(exc).__name__, f"result is not JSON: {exc}")
            self.record_failure(row, attempt, not_json, time.monotonic() - started, endpoint.public_url)
        except jsonl.LineTooLong as exc:  # under the reply limit, yet too long a line for any reader
            too_long = AttemptFailed("response_too_large", "LineTooLong", str(exc))
            self.record_failure(row, attempt, too_long, time.monotonic() - started, endpoint.public_url)

    async def call_model(self, row: dict, endpoint: Endpoint) -> tuple[dict, list[str]]:
        """The Responses-shaped reply, and the token counts a chat reply left out (stored as 0)."""
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
                response = response_from_chat(answer, token_ids=self.options.return_token_ids)
                return response, missing_counts(answer)
            if not isinstance(answer.get("output"), list) or not isinstance(answer.get("usage"), dict):
                raise ConversionError("a Responses reply needs an `output` list and a `usage` object")
            return answer, []
        except AttemptFailed:
            raise
        except Exception as exc:  # a reply of the wrong shape is the server's failure, not a crash of the run
            message = f"unusable reply: {exc}"[:2000]
            raise AttemptFailed("agent_run_error", type(exc).__name__, message) from exc

    async def verify(self, row: dict, response: dict) -> dict:
        return await score(self.verifier, row, response, self.session)


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
