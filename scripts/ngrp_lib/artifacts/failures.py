"""What a failed attempt says: the server's own message, whether retrying can help, and the fix.

One rule for `collect` (while it runs, and in its summary) and for `check` (from the failures sidecar):
- retrying can help when the server did not answer (connection refused, timeout), was overloaded or
  failed (429, 5xx, 408), or when an agent classed the failure itself;
- it cannot help for a refused key (401/403), an unknown model or route (404), a request the server
  calls invalid (400, 413, 422), a context-length error, a reply of the wrong shape, or a verifier that
  raised: the same row fails the same way until something is fixed.
`scope` says how far such a failure reaches: "server" (every row fails: the key, the model, the URL) or
"row" (this task's prompt or parameters), which decides when `collect` stops early.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

SERVER_WIDE = frozenset({401, 403, 404})  # other 4xx (400, 413, 422...) depend on the row
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 520})
NO_REPLY_CLASSES = ("agent_request_failed", "timeout")
MESSAGE_LIMIT = 500
TOP = 3
_CONTEXT = re.compile(
    r"maximum context length|max_model_len|context length|context window|prompt is too long"
    r"|too many (?:input )?tokens|exceeds? the (?:model'?s? )?(?:context|limit)",
    re.IGNORECASE,
)
_TRANSIENT_TYPES = re.compile(r"Timeout|Connect|Disconnect|ClientOSError|ClientPayloadError")
_VOLATILE = re.compile(r"\b[0-9a-f]{8,}\b|\d+")  # ids and numbers: the same failure on other rows


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the sidecar row (or the live exception) describes it."""

    failure_class: str
    status: int | None
    message: str  # the server's message when its reply carried one, else the collector's
    failure_type: str = ""

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
        return self.status is None and self.failure_class in NO_REPLY_CLASSES

    @property
    def retry_helps(self) -> bool:
        if self.context_length:
            return False
        if self.status is not None:  # a 4xx stays the same on the next attempt, except 408 and 429
            return self.status in RETRYABLE_STATUSES or not 400 <= self.status < 500
        if self.failure_class == "verify_failed":
            return bool(_TRANSIENT_TYPES.search(self.failure_type))
        # agent_run_error without a status: a 200 with something unusable. Anything else (no reply, a
        # class an agent set itself): another attempt may succeed.
        return self.failure_class != "agent_run_error"

    @property
    def scope(self) -> str | None:
        """'server' or 'row' for a failure retrying cannot fix; None when retrying may help."""
        if self.retry_helps:
            return None
        if self.status in SERVER_WIDE and not self.context_length:
            return "server"
        return "row"

    def fix(self, api_key_env: str = "OPENAI_API_KEY") -> str:
        """What to do about it, in one line."""
        resume = "then rerun the same command with --resume"
        if self.context_length:
            return (
                "the rows ask for more tokens than the model's context: serve it with a larger"
                f" --max-model-len and {resume}, or lower max_output_tokens or shorten the prompts in the"
                " tasks (a changed task file is a new run: --overwrite)"
            )
        if self.status in (401, 403):
            return (
                f"put the key the server expects in ${api_key_env} (or name another variable with"
                f" --api-key-env), {resume}"
            )
        if self.status == 404:
            if "model" in self.message.lower():
                return (
                    "pass a model the server serves (GET <base_url>/models lists them) as --model; a new"
                    " model name is a new run: --overwrite, or a new --output"
                )
            return f"the server has no such route: give the base URL ending in /v1 (vLLM), {resume}"
        if self.status is not None and not self.retry_helps:
            return "the server refused these requests (its message is above): fix the rows or options named"
        if self.failure_class == "verify_failed" and not self.retry_helps:
            return f"the verifier failed (its message is above): fix it or the rows, {resume}"
        if self.failure_class == "agent_run_error" and self.status is None:
            return "the reply is not what --api chat|responses expects: check --api and the base URL"
        if self.no_reply:
            return f"the server did not answer: check it (`ngrp serve status`), or raise --timeout; {resume}"
        if self.status is not None:
            return f"the server failed or was overloaded: read its log, maybe lower --concurrency; {resume}"
        return f"{resume} to retry these keys"


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

    def top(self, n: int = TOP, api_key_env: str = "OPENAI_API_KEY") -> list[FailureSummary]:
        """The `n` most common failures (first seen wins a tie)."""
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
                fix=e.failure.fix(api_key_env),
            )
            for e in ranked
        ]
