"""Keep known secrets (the API key, a URL's password) out of everything ngrp stores or prints.

A server may echo what it was sent: an error page quoting the request headers puts `Authorization: Bearer
<key>` into the failures sidecar, a toy server can put it into a completion. The collector knows the
secret values, so it masks them (`***`) wherever they appear in a stored row (keys and values, at any
depth), in a failure's message and body, and in log lines. The fast path costs one substring test per
secret on the serialized line; only a line that holds a secret is rewritten.

Every command that talks to a server builds its masker with `server_redactor(urls, api_key)` and runs
inside `masked_errors(redactor)`, so a refusal or error message that quotes a server's reply or a URL
(aiohttp names the URL it could not use) reaches the terminal masked too.

Secrets shorter than `MIN_SECRET` characters are not masked (they would mask ordinary words); the collector
warns about such a key. A string cut to a length limit may end in the first part of a secret: `text(...,
cut=True)` masks such a tail too.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

MASK = "***"
MIN_SECRET = 4
MIN_TAIL = 4  # a cut-off tail this long that starts a secret is masked


class Redactor:
    """Masks the given secret strings in text, JSON values and serialized lines."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET}
        self.secrets = tuple(sorted(unique, key=len, reverse=True))  # longest first: no partial masks
        needles = set()
        for secret in self.secrets:
            needles.add(secret.encode("utf-8", "surrogatepass"))
            needles.add(orjson.dumps(secret)[1:-1])  # as it appears inside a JSON string
        self._needles = tuple(needles)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, value: str, *, cut: bool = False) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        if cut:
            value = self._mask_tail(value)
        return value

    def _mask_tail(self, value: str) -> str:
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(value)), MIN_TAIL - 1, -1):
                if value.endswith(secret[:size]):
                    return value[: len(value) - size] + MASK
        return value

    def value(self, data: Any) -> Any:
        """A copy of a JSON value with every string (keys included) masked."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.value(item) for item in data]
        return data

    def holds_secret(self, line: bytes) -> bool:
        return any(needle in line for needle in self._needles)

    def line(self, row: Any, dumps: Any) -> bytes:
        """`dumps(row)`, re-serialized from a masked copy when the line holds a secret."""
        line = dumps(row)
        if self._needles and self.holds_secret(line):
            line = dumps(self.value(row))
        return line


def url_secrets(url: str | None) -> list[str]:
    """The password of a `user:pass@` URL, and the Basic credentials HTTP clients send for it."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    if password is None:
        return []
    user, password = unquote(user or ""), unquote(password)
    token = base64.b64encode(f"{user}:{password}".encode("latin-1", "replace")).decode()
    return [password, token, parts.password or ""]


def server_redactor(urls: Iterable[str | None], api_key: str | None = None) -> Redactor:
    """The masker of a command that talks to servers: the API key and every password in `urls`."""
    secrets = [api_key] if api_key else []
    for url in urls:
        secrets += url_secrets(url)
    return Redactor(secrets)


@contextlib.contextmanager
def masked_errors(redactor: Redactor) -> Iterator[None]:
    """Mask the known secrets in the message and hint of an ngrp error raised inside (the CLI prints them)."""
    from ..errors import NgrpError

    try:
        yield
    except NgrpError as exc:
        if redactor:
            exc.message = redactor.text(exc.message)
            exc.hint = None if exc.hint is None else redactor.text(exc.hint)
            exc.args = (exc.message,)
            if isinstance(getattr(exc, "detail", None), str):
                exc.detail = redactor.text(exc.detail)  # type: ignore[attr-defined]
        raise
