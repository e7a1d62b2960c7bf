"""What a failed attempt says: the server's own message, whether retrying can help, and the fix.

One rule for `collect` (while it runs, and in its summary), `reverify`, and `check` (from the failures
sidecar). Every failure is first sorted into a kind (`Failure.kind`); the kind decides all three answers:

| kind               | what                                                       | retry helps | scope  |
|--------------------|------------------------------------------------------------|-------------|--------|
| no_reply           | connection refused or reset, timeout, no healthy server    | yes         | -      |
| overloaded         | 408, 429, 5xx (not 501/505)                                | yes         | -      |
| agent_class        | a class an agent or environment set itself (Gym)           | yes         | -      |
| verifier_transient | the verifier's URL did not answer, or was overloaded       | yes         | -      |
| unknown            | a sidecar row without a class                              | yes         | -      |
| context_length     | the prompt plus max_output_tokens exceed the context       | no          | row    |
| key                | 401, 403                                                   | no          | server |
| model              | a 404 naming the model                                     | no          | server |
| route              | 404, 405, 501, 505, a URL aiohttp refuses                  | no          | server |
| redirect           | a 3xx not followed, or a redirect that cannot be followed  | no          | server |
| odd_status         | neither a reply, an error nor a redirect (1xx, 201, 204)   | no          | server |
| too_large          | a reply over --max-response-mb, a row over the line limit  | no          | row    |
| invalid            | another 4xx (400, 413, 422...): the request is invalid     | no          | row    |
| shape              | a 200 of the wrong shape (agent_run_error, no status)      | no          | row    |
| verifier           | the verifier raised, or its URL answered an error          | no          | row    |
| no_response        | reverify: the row has no response to re-score              | no          | row    |
| terminal           | an agent marked it terminal (`skipped`, `_ng_failure_terminal`) | no     | row    |

`scope` says how far a failure retrying cannot fix reaches: "server" (every row fails: the key, the model,
the URL) or "row" (this task's prompt, parameters or reply), which decides when `collect` stops early. The
fix names the options of the command that met it (`mode`): "direct" (collect --base-url), "gym" (collect
--gym-url, or a run Gym collected), "reverify".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520})
NO_ROUTE_STATUSES = frozenset({404, 405, 501, 505})
NO_REPLY_CLASSES = ("agent_request_failed", "timeout")
TERMINAL_CLASSES = frozenset({"skipped"})  # Gym's resume never re-runs them
MODES = ("direct", "gym", "reverify")
MESSAGE_LIMIT = 500
TOP = 3
_CONTEXT = re.compile(
    r"maximum context length|max_model_len|context length|context window|prompt is too long"
    r"|too many (?:input )?tokens|exceeds? the (?:model'?s? )?(?:context|limit)",
    re.IGNORECASE,
)
_TRANSIENT_TYPES = re.compile(r"Timeout|Connect|Disconnect|ClientOSError|ClientPayloadError")
# aiohttp errors raised without a reply that the next attempt meets again: a redirect it cannot follow
_REDIRECT_TYPES = frozenset(
    {
        "RedirectRefused",
        "TooManyRedirects",
        "InvalidUrlRedirectClientError",
        "NonHttpUrlRedirectClientError",
        "RedirectClientError",
    }
)
_BAD_URL_TYPES = frozenset({"InvalidURL", "InvalidUrlClientError", "NonHttpUrlClientError"})
_TOO_LARGE_TYPES = frozenset({"ResponseTooLarge", "LineTooLong"})
# raised without a reply, yet no later attempt differs: `collect` does not retry them
REPEATING_TYPES = _REDIRECT_TYPES | _BAD_URL_TYPES | _TOO_LARGE_TYPES
_VOLATILE = re.compile(r"\b[0-9a-f]{8,}\b|\d+")  # ids and numbers: the same failure on other rows

RETRY_HELPS = {
    "no_reply": True,
    "overloaded": True,
    "agent_class": True,
    "verifier_transient": True,
    "unknown": True,
}
SERVER_WIDE = frozenset({"key", "model", "route", "redirect", "odd_status"})


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the sidecar row (or the live exception) describes it."""

    failure_class: str
    status: int | None
    message: str  # the server's message when its reply carried one, else the collector's
    failure_type: str = ""
    terminal: bool = False  # Gym's `_ng_failure_terminal`: the agent says another attempt is pointless

    @classmethod
    def from_fields(cls, row: dict[str, Any]) -> Failure:
        """From a failures-sidecar row (`_ng_failure_*` keys), as written by ngrp or by Gym."""
        klass = row.get("_ng_failure_class")
        status = row.get("_ng_failure_http_status")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        ours = row.get("_ng_failure_message")
        ours = " ".join(ours.split()) if isinstance(ours, str) else ""
        body = row.get("_ng_failure_response_body")
        said = server_message(body if isinstance(body, str) else None)
        if said and said not in ours:
            text = f"HTTP {status}: {said}" if status is not None else said
        else:
            text = ours or said or str(klass or "failed")
        kind = row.get("_ng_failure_type")
        return cls(
            klass if isinstance(klass, str) else "(no class)",
            status,
            text[:MESSAGE_LIMIT],
            kind if isinstance(kind, str) else "",
            row.get("_ng_failure_terminal") is True,
        )

    @property
    def signature(self) -> tuple[str, int | None, str]:
        """Failures that are the same problem on different rows share a signature."""
        return self.failure_class, self.status, _VOLATILE.sub("#", self.message)

    @property
    def context_length(self) -> bool:
        return bool(_CONTEXT.search(self.message))

    @property
    def no_reply(self) -> bool:
        return self.kind == "no_reply"

    @property
    def verifier(self) -> bool:
        """The verifier failed (its /verify URL, or its code), not the model server."""
        return self.failure_class == "verify_failed"

    @property
    def kind(self) -> str:
        """What sort of failure this is (the table in the module docstring)."""
        klass, status, kind = self.failure_class, self.status, self.failure_type
        if self.terminal or klass in TERMINAL_CLASSES:
            return "terminal"
        if (
            klass == "redirect_refused"
            or kind in _REDIRECT_TYPES
            or (status is not None and 300 <= status < 400)
        ):
            return "redirect"
        if klass == "response_too_large" or kind in _TOO_LARGE_TYPES:
            return "too_large"
        if klass == "no_response":
            return "no_response"
        if kind in _BAD_URL_TYPES:
            return "route"
        if status is not None:
            return self._status_kind(status)
        if self.verifier:
            return "verifier_transient" if _TRANSIENT_TYPES.search(kind) else "verifier"
        if klass in NO_REPLY_CLASSES:
            return "no_reply"
        if klass == "agent_run_error":
            return "shape"  # a 200 with something unusable
        if klass == "(no class)":
            return "unknown"
        return "agent_class"  # a class an agent set itself (timeout_exceeded, cancelled...)

    def _status_kind(self, status: int) -> str:
        if self.context_length:
            return "context_length"
        if status in RETRYABLE_STATUSES or (500 <= status < 600 and status not in NO_ROUTE_STATUSES):
            return "verifier_transient" if self.verifier else "overloaded"
        if status in (401, 403):
            return "key"
        if status == 404 and "model" in self.message.lower() and not self.verifier:
            return "model"
        if status in NO_ROUTE_STATUSES:
            return "route"
        if 400 <= status < 500:
            return "verifier" if self.verifier else "invalid"
        return "odd_status"

    @property
    def retry_helps(self) -> bool:
        return RETRY_HELPS.get(self.kind, False)

    @property
    def scope(self) -> str | None:
        """'server' or 'row' for a failure retrying cannot fix; None when retrying may help."""
        kind = self.kind
        if RETRY_HELPS.get(kind, False):
            return None
        return "server" if kind in SERVER_WIDE else "row"

    def fix(self, api_key_env: str = "OPENAI_API_KEY", mode: str = "direct") -> str:
        """What to do about it, in one line, in the options of the command that met it (`MODES`)."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {MODES}")
        return _fix(self, self.kind, api_key_env, mode)


RESUME = "then rerun the same command with --resume"
NEW_RUN = "(a changed task file is a new run: --overwrite)"


def _fix(f: Failure, kind: str, api_key_env: str, mode: str) -> str:
    if f.verifier or mode == "reverify" or kind == "no_response":
        return _verifier_fix(kind, mode)
    gym = mode == "gym"
    who, url = ("the Gym server", "--gym-url") if gym else ("the server", "--base-url")
    if kind == "no_reply" and f.failure_class == "timeout" and not gym:
        return (
            "no answer within --timeout: raise --timeout (seconds per sequence: a grouped request of n waits"
            f" n times it), or lower --concurrency if the server is overloaded; {RESUME}"
        )
    if kind == "no_reply":
        status = "`gym env status`" if gym else "`ngrp serve status`"
        return f"{who} did not answer: check it ({status}), or raise --timeout; {RESUME}"
    if kind == "overloaded":
        logs = "the Gym servers' logs" if gym else "its log"
        return f"{who} failed or was overloaded: read {logs}, maybe lower --concurrency; {RESUME}"
    if kind == "agent_class":
        return (
            "the agent or environment reported this failure itself: read its message and the Gym servers'"
            f" logs; {RESUME} to try again"
        )
    if kind == "terminal":
        return (
            "the agent marked these attempts terminal (another attempt is pointless): read its message and"
            f" fix the tasks or the environment {NEW_RUN}"
        )
    if kind == "context_length":
        where = (
            "raise the model server's max_model_len in the Gym config"
            if gym
            else ("serve it with a larger --max-model-len")
        )
        return (
            f"the rows ask for more tokens than the model's context: {where} and {RESUME}, or lower"
            f" max_output_tokens or shorten the prompts in the tasks {NEW_RUN}"
        )
    if kind == "key":
        return (
            f"put the key {who} expects in ${api_key_env} (or name another variable with --api-key-env),"
            f" {RESUME}"
        )
    if kind == "model":
        return (
            "pass a model the server serves (GET <base_url>/models lists them) as --model; a new"
            " model name is a new run: --overwrite, or a new --output"
        )
    return _reply_fix(f, kind, gym, who, url)


def _reply_fix(f: Failure, kind: str, gym: bool, who: str, url: str) -> str:
    """The fix of a failure in what the server answered: its route, status, size or shape."""
    if kind == "route" and gym:
        return (
            "the Gym server has no such route: give --gym-url the head server's URL or an agent server's"
            f" /run URL (`gym env status` lists them), {RESUME}"
        )
    if kind == "route":
        return f"the server has no such route: give --base-url ending in /v1 (vLLM), {RESUME}"
    if kind == "redirect":
        return (
            f"{who} redirects these requests (the message says where): give that URL as {url}, or pass"
            f" --follow-redirects if you trust it; {RESUME}"
        )
    if kind == "odd_status":
        return f"{who} answered a status that is neither a reply nor an error: check {url}, {RESUME}"
    if kind == "too_large" and f.failure_type == "LineTooLong":
        return (
            "the row would be longer than the line limit readers accept: lower max_output_tokens in the"
            f" tasks {NEW_RUN}, or raise NGRP_MAX_LINE_BYTES for every reader"
        )
    if kind == "too_large":
        return f"the reply is larger than --max-response-mb allows: raise it, {RESUME}"
    if kind == "invalid":
        return f"{who} refused these requests (its message is above): fix the rows or options named {NEW_RUN}"
    if kind == "shape" and gym:
        return (
            "the Gym server's /run answered something that is not a result object: check that --gym-url"
            " names a Gym head server or an agent's /run"
        )
    if kind == "shape":
        return "the reply is not what --api chat|responses expects: check --api and the base URL"
    return f"{RESUME} to retry these keys"  # unknown: a sidecar row without a class


def _verifier_fix(kind: str, mode: str) -> str:
    """The verifier's failures: --verify-url's (collect passes it its --follow-redirects and
    --max-response-mb; reverify has neither: it follows no redirect and reads 16 MiB at most)."""
    collect = mode != "reverify"
    resume = RESUME if collect else "then rerun the same reverify command with --resume"
    new_run = "a changed verifier is a new run: --overwrite"
    if kind == "no_response":
        return (
            "these rows have no response object to re-score: collect those keys again, or leave them out of"
            " --rollouts"
        )
    if kind in ("verifier_transient", "no_reply", "overloaded", "agent_class", "unknown"):
        return (
            "the verifier at --verify-url did not answer or was overloaded: check it, maybe lower"
            f" --concurrency; {resume}"
        )
    if kind == "key":
        return (
            "the verifier at --verify-url refused the request: ngrp sends it no key; give one that needs none"
        )
    if kind == "route":
        return f"the verifier URL has no such route: give --verify-url the verifier's /verify URL ({new_run})"
    if kind == "redirect":
        follow = ", or pass --follow-redirects if you trust it" if collect else ""
        return (
            f"the verifier at --verify-url redirects (the message says where): give that URL as --verify-url"
            f" ({new_run}){follow}"
        )
    if kind == "too_large" and collect:
        return f"the verifier's reply is larger than --max-response-mb allows: raise it, {resume}"
    if kind == "too_large":
        return f"the verifier's reply is over the 16 MiB reverify reads: make it answer less, {resume}"
    if kind == "odd_status":
        return "the verifier at --verify-url answered a status that is neither a reply nor an error: check it"
    return f"the verifier failed (its message is above): fix it or the rows, {resume}"


def server_message(body: str | None) -> str | None:
    """The error message a server put in its reply: OpenAI's and vLLM's `{"error": {"message"}}`, the
    older `{"message"}`, FastAPI's `{"detail"}`, `{"error": "..."}`; else a short plain-text body."""
    if not body or not body.strip():
        return None
    import orjson

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = " ".join(body.split())
        return None if text.startswith("<") else text[:MESSAGE_LIMIT]  # an HTML error page says little
    said = _message_in(data)
    return None if said is None else " ".join(said.split())[:MESSAGE_LIMIT]


def _message_in(data: Any) -> str | None:
    if isinstance(data, str):
        return data or None
    if not isinstance(data, dict):
        return None
    for key in ("error", "message", "detail"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict):
            return _message_in(value)
        if isinstance(value, list) and value:  # FastAPI validation errors: [{"loc": [...], "msg": ...}]
            first = value[0]
            if isinstance(first, dict) and isinstance(first.get("msg"), str):
                where = ".".join(str(p) for p in first.get("loc") or [])
                return f"{where}: {first['msg']}" if where else first["msg"]
    return None


@dataclass
class FailureSummary:
    """One line of "the most common failures": how often, one example, and what to do."""

    count: int
    still_missing: int  # of those attempts, the ones whose key is still missing
    failure_class: str
    http_status: int | None
    message: str
    example_key: list[int] | None  # [_ng_task_index, _ng_rollout_index]
    retry_helps: bool
    fix: str


@dataclass
class _Entry:
    failure: Failure
    example_key: tuple[int, int] | None
    count: int = 0
    still_missing: int = 0


@dataclass
class FailureDigest:
    """Failed attempts counted by signature, with one example key each; at most `limit` signatures are
    kept (a stream of unique messages cannot grow it), the rest are counted as `other`."""

    limit: int = 256
    entries: dict[tuple, _Entry] = field(default_factory=dict)
    other: int = 0

    def add(self, failure: Failure, key: tuple[int, int] | None, *, still_missing: bool = True) -> None:
        entry = self.entries.get(failure.signature)
        if entry is None:
            if len(self.entries) >= self.limit:
                self.other += 1
                return
            entry = self.entries[failure.signature] = _Entry(failure, key)
        entry.count += 1
        entry.still_missing += still_missing

    def top(
        self, n: int = TOP, api_key_env: str = "OPENAI_API_KEY", mode: str = "direct"
    ) -> list[FailureSummary]:
        """The `n` most common failures (first seen wins a tie); fixes in the options of `mode`."""
        ranked = sorted(self.entries.values(), key=lambda e: -e.count)[:n]
        return [
            FailureSummary(
                count=e.count,
                still_missing=e.still_missing,
                failure_class=e.failure.failure_class,
                http_status=e.failure.status,
                message=e.failure.message,
                example_key=None if e.example_key is None else list(e.example_key),
                retry_helps=e.failure.retry_helps,
                fix=e.failure.fix(api_key_env, mode),
            )
            for e in ranked
        ]
