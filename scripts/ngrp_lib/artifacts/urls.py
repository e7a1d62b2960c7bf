"""Server URLs: parse and check them, and show them without credentials (routing, preflight, the endpoints
file and `serve` all use these)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

from ..errors import UsageError


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
