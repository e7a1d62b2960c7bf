"""Which server runs a row. All repeats of a task go to one server (prefix cache); the rule lives here
so multi-server failover can replace it without touching the runner."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit, urlunsplit

from ..errors import InputError, UsageError


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends with /v1
    model: str

    @property
    def public_url(self) -> str:
        """The URL without credentials, query or fragment (safe for manifests and logs)."""
        return public_url(self.base_url)


def split_http_url(url: str, flag: str = "--base-url") -> SplitResult:
    """Parse an http(s) URL, refusing what aiohttp would only fail on at the first request (an unclosed
    `[` of an IPv6 host, a port that is not a number in 1..65535, no host): a usage error, exit 2."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises on a port that is not a number or out of range
    except ValueError as exc:
        raise UsageError(f"{flag} {public_url(url)!r} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag} {public_url(url)!r} is not an http(s) URL with a host")
    if port == 0:
        raise UsageError(f"{flag} {public_url(url)!r}: port 0 is not a server's port")
    return parts


def has_credentials(url: str) -> bool:
    """Whether the URL carries `user[:password]@`."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def normalize_base_url(url: str) -> str:
    """Accept `http://host:port` or `http://host:port/v1`; always return the `/v1` form."""
    parts = split_http_url(url)
    if parts.query or parts.fragment:  # the request path is appended to the URL: a query would swallow it
        raise UsageError(
            f"a base URL takes no ?query or #fragment: {public_url(url)!r}...",
            hint="put the API key in an environment variable (--api-key-env), not in the URL",
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def public_url(url: str) -> str:
    """The URL without credentials, query or fragment; never raises (it is used in error messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        head, sep, rest = url.partition("://")
        return head + sep + rest.rsplit("@", 1)[-1].split("/", 1)[0] if sep else "<unparsable URL>"
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def load_endpoints(path: Path | str, model: str | None) -> list[Endpoint]:
    """Read `ngrp serve`'s endpoints file: {"endpoints": [{"base_url": ".../v1", "model": NAME}, ...]}."""
    from ..artifacts.endpoints import read_endpoints

    items = read_endpoints(path)["endpoints"]
    if not items:
        raise InputError(
            "no endpoints listed", path=path, pointer="/endpoints", hint="did `ngrp serve` start?"
        )
    endpoints = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("base_url"), str):
            raise InputError("each endpoint needs a base_url string", path=path, pointer=f"/endpoints/{i}")
        name = model or item.get("model")
        if not isinstance(name, str) or not name:
            raise InputError("endpoint has no model; pass --model", path=path, pointer=f"/endpoints/{i}")
        try:
            base_url = normalize_base_url(item["base_url"])
        except UsageError as exc:
            raise InputError(
                exc.message.replace("--base-url ", "base_url "), path=path, pointer=f"/endpoints/{i}"
            ) from None
        endpoints.append(Endpoint(base_url, name))
    return endpoints


def load_endpoint_files(paths: Iterable[Path | str], model: str | None) -> list[Endpoint]:
    """The servers of several endpoints files (one per node, say), in order; a server listed twice is
    used once."""
    return list(dict.fromkeys(e for path in paths for e in load_endpoints(path, model)))


class Router:
    """Task-affine routing: every repeat of task t goes to endpoint hash(t) % n."""

    def __init__(self, endpoints: list[Endpoint]) -> None:
        if not endpoints:
            raise UsageError("no server: pass --base-url URL (repeatable) or --endpoints FILE")
        self.endpoints = endpoints

    def endpoint_for(self, task_index: int) -> Endpoint:
        return self.endpoints[hash(task_index) % len(self.endpoints)]
