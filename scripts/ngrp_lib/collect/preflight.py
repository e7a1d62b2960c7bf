"""Pre-flight: before the first row, ask each server whether the run can work at all.

An OpenAI-compatible endpoint (vLLM) passes when `GET <base_url>/models`, sent with the run's API key,
answers 200 with a model list that holds the model. vLLM also reports each model's context
(`max_model_len`); a row whose `max_output_tokens` is larger is refused by vLLM, so the run refuses it
first, naming the row and the limit. A NeMo Gym server, or a resources server's `/verify`, passes when
it answers at all (Gym's own servers answer `GET /`).

The rule for several endpoints: the ones that fail are named and left out, and the run goes on when at
least half of them (rounded up, and at least one) pass; otherwise nothing is sent.

`check_server` (async, with the caller's aiohttp session) and `check_server_blocking` (its own session)
are the one probe every command that calls a model server uses: `collect`, `serve status`, `reverify`;
`check_verify_url` (or `blocking(check_verify_url, url)`) the one for a `--verify-url`. A check never
holds a secret: the URL is shown without credentials, and the API key and the URL's password are masked
in what the server or the HTTP client said (aiohttp quotes a URL it cannot use, credentials and all).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..artifacts.failures import server_message
from ..artifacts.redact import server_redactor
from ..errors import UsageError
from .http import AttemptFailed, get_bounded
from .routing import Endpoint, has_credentials, public_url

DEFAULT_TIMEOUT = 10.0
SKIP_HINT = "a server without GET /v1/models: pass --skip-preflight"
NO_ROUTE = (404, 405, 501)  # the probe's route is missing: the only case --skip-preflight can help
REFUSED = "no row was sent"  # the hint of every refusal; a check's own fix names --skip-preflight if it helps
EXAMPLES = 3
# The probe follows a redirect exactly when the rows would (collect --follow-redirects), so it refuses one
# only when every row would be a redirect_refused failure.
REDIRECT_FIX = "give the URL it points to as --base-url, or pass collect --follow-redirects if you trust it"


@dataclass(frozen=True)
class ServerCheck:
    """What one server said to the pre-flight probe. `problem` and `fix` are None when it passed."""

    url: str  # public: no credentials
    model: str | None = None
    problem: str | None = None
    fix: str | None = None
    models: tuple[str, ...] | None = None  # what GET /models listed, when it answered with a list
    max_model_len: int | None = None  # the model's context, when the server reports it
    status: int | None = None  # HTTP status of the probe; None: no reply
    joiner: str = field(default=": ", repr=False)  # between problem and fix in `line`

    @property
    def ok(self) -> bool:
        return self.problem is None

    def line(self) -> str:
        """One line for people: the problem and what to do."""
        if self.problem is None:
            return "ok"
        return f"{self.problem}{self.joiner}{self.fix}" if self.fix else self.problem

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["joiner"]
        out["models"] = None if self.models is None else list(self.models)
        return {**out, "ok": self.ok}


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The headers of every request of a run: JSON, and the key as a Bearer token when there is one."""
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


async def check_server(
    session: Any,
    base_url: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = DEFAULT_TIMEOUT,
    follow_redirects: bool = False,
) -> ServerCheck:
    """Probe an OpenAI-compatible base URL (`.../v1`): reachable, key accepted, `model` served (if given).
    A redirect is followed when `follow_redirects` (the run's rule for its rows), else refused.
    The caller has refused a URL with `user:pass@` and a key together (`collect.options.check_urls`,
    `credentials_clash` for `serve status`): aiohttp cannot send both."""
    check = await _check_server(session, base_url, model, api_key, api_key_env, timeout, follow_redirects)
    return masked(check, [base_url], api_key)


def credentials_clash(
    base_url: str, model: str | None, api_key: str | None, api_key_env: str
) -> ServerCheck | None:
    """The failed check of a URL with `user:pass@` credentials while an API key is set too (aiohttp refuses
    to send both: a ValueError per request), or None when they do not clash."""
    if not (api_key and has_credentials(base_url)):
        return None
    problem = f"{public_url(base_url)} holds user:password@ credentials and ${api_key_env} is set too"
    fix = f"a request can carry only one of them: unset {api_key_env} (or name another with --api-key-env)"
    return ServerCheck(public_url(base_url), model, problem, fix + ", or drop user:pass@")


def masked(check: ServerCheck, urls: list[str], api_key: str | None = None) -> ServerCheck:
    """The check with the API key and the URLs' passwords masked in its problem and fix."""
    redactor = server_redactor(urls, api_key)
    if not redactor or check.problem is None:
        return check
    fix = None if check.fix is None else redactor.text(check.fix)
    return replace(check, problem=redactor.text(check.problem), fix=fix)


async def _check_server(
    session: Any,
    base_url: str,
    model: str | None,
    api_key: str | None,
    api_key_env: str,
    timeout: float,
    follow_redirects: bool,
) -> ServerCheck:
    import aiohttp

    url = public_url(base_url)
    headers = auth_headers(api_key)
    try:
        get = get_bounded(
            session, base_url + "/models", headers=headers, timeout=timeout, follow_redirects=follow_redirects
        )
        status, raw = await get
    except AttemptFailed as failure:  # a reply over the size limit
        problem = f"GET {url}/models: {failure.message}"
        return ServerCheck(url, model, problem, SKIP_HINT, status=failure.status)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        problem = no_reply(exc, url, timeout)
        return ServerCheck(url, model, problem, "is the server running? `ngrp serve status`")
    body = raw.decode("utf-8", errors="replace")
    if 300 <= status < 400:
        return ServerCheck(url, model, f"GET {url}/models answered HTTP {status}, a redirect", REDIRECT_FIX,
                           status=status)  # fmt: skip
    if status in (401, 403):
        return ServerCheck(url, model, *_key_problem(status, url, api_key, api_key_env), status=status)
    if status != 200:
        said = server_message(body)
        problem = f"GET {url}/models answered HTTP {status}" + (f": {said}" if said else "")
        fix = "is the base URL right (vLLM's ends in /v1)? " + SKIP_HINT if status in NO_ROUTE else None
        return ServerCheck(url, model, problem, fix or "read the server's log", status=status)
    return _judge_models(url, model, body)


def check_server_blocking(
    base_url: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = DEFAULT_TIMEOUT,
    follow_redirects: bool = False,
) -> ServerCheck:
    """`check_server` for callers without an event loop (it opens and closes its own session)."""
    return blocking(
        check_server, base_url, model=model, api_key=api_key, api_key_env=api_key_env, timeout=timeout,
        follow_redirects=follow_redirects,
    )  # fmt: skip


async def check_reachable(
    session: Any, url: str, *, what: str | None = None, fix: str, timeout: float = DEFAULT_TIMEOUT
) -> ServerCheck:
    """Any HTTP answer below 500 from `GET <url>` passes (a Gym server, a resources server). `what` names
    the server in the problem, when the URL alone does not say which it is."""
    return masked(await _check_reachable(session, url, what, fix, timeout), [url])


async def _check_reachable(session: Any, url: str, what: str | None, fix: str, timeout: float) -> ServerCheck:
    import aiohttp

    shown = public_url(url)
    about = f" ({what})" if what else ""
    try:
        status, raw = await get_bounded(session, url, timeout=timeout)  # a redirect answers; not followed
        said = server_message(raw.decode("utf-8", errors="replace"))
    except AttemptFailed as failure:  # a 200 over the size limit: it answered
        return ServerCheck(shown, status=failure.status)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return ServerCheck(shown, problem=no_reply(exc, shown, timeout) + about, fix=fix)
    if status >= 500:
        problem = f"GET {shown} answered HTTP {status}{about}" + (f": {said}" if said else "")
        return ServerCheck(shown, problem=problem, fix=fix, status=status)
    return ServerCheck(shown, status=status)


async def check_verify_url(session: Any, verify_url: str, timeout: float = DEFAULT_TIMEOUT) -> ServerCheck:
    """The server behind a `--verify-url` (a NeMo Gym resources server's `/verify`) answers at all."""
    fix = "is the resources server running? `gym env status`"
    return await check_reachable(
        session, origin(verify_url), what="the --verify-url server", fix=fix, timeout=timeout
    )


def blocking(probe: Callable[..., Any], *args: Any, **kw: Any) -> ServerCheck:
    """Run one async probe (`check_server`, `check_verify_url`, ...) with its own session, for callers
    without an event loop: `blocking(check_verify_url, url)`."""
    import aiohttp

    async def run() -> ServerCheck:
        async with aiohttp.ClientSession() as session:
            return await probe(session, *args, **kw)

    return asyncio.run(run())


def no_reply(exc: BaseException, url: str, timeout: float) -> str:
    """Why a server did not answer, in the words a user searches for."""
    import socket

    import aiohttp

    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within {timeout:g}s from {url}"
    cause = getattr(exc, "os_error", None) or exc
    dns = getattr(aiohttp, "ClientConnectorDNSError", ())  # aiohttp 3.10+
    if isinstance(exc, dns) or isinstance(cause, socket.gaierror):
        return f"cannot resolve the host of {url}"
    if isinstance(cause, ConnectionRefusedError):
        return f"connection refused at {url}"
    return f"cannot connect to {url} ({type(exc).__name__}: {exc})"


def _key_problem(status: int, url: str, api_key: str | None, env: str) -> tuple[str, str]:
    if api_key:
        return (
            f"{status}: the key in {env} was refused by {url}",
            f"put the key the server was started with in {env}, or name another variable with --api-key-env",
        )
    return (
        f"{status}: {url} wants an API key and {env} is not set",
        f"export {env}=<the server's key>, or name another variable with --api-key-env",
    )


def _judge_models(url: str, model: str | None, body: str) -> ServerCheck:
    import orjson

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        problem = f"GET {url}/models answered 200 but not an OpenAI model list"
        return ServerCheck(
            url, model, problem, "is this an OpenAI-compatible server? " + SKIP_HINT, status=200
        )
    listed = {
        item["id"]: item for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)
    }
    served = tuple(listed)
    if model is not None and model not in listed:
        problem = f"model {model!r} is not served at {url}; it serves: {', '.join(served) or 'nothing'}"
        fix = "pass one of those as --model"
        return ServerCheck(url, model, problem, fix, served, status=200, joiner="; ")
    context = listed[model].get("max_model_len") if model is not None else None
    context = context if isinstance(context, int) and not isinstance(context, bool) and context > 0 else None
    return ServerCheck(url, model, models=served, max_model_len=context, status=200)


# ---- a run's endpoints ---------------------------------------------------------------------------


@dataclass
class Preflight:
    """The checks of one run, and the endpoints that passed them."""

    checks: list[ServerCheck] = field(default_factory=list)
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def context(self) -> tuple[int, ServerCheck] | None:
        """The smallest context any used endpoint reports (a row may fail over to any of them)."""
        known = [c for c in self.checks if c.ok and c.max_model_len is not None]
        if not known:
            return None
        smallest = min(known, key=lambda c: c.max_model_len or 0)
        return smallest.max_model_len or 0, smallest


def needed(n: int) -> int:
    """How many of `n` endpoints must pass for a run to start: half, rounded up, and at least one."""
    return max(1, math.ceil(n / 2))


async def check_endpoints(
    endpoints: Iterable[Endpoint],
    session: Any,
    *,
    api_key: str | None,
    api_key_env: str,
    timeout: float = DEFAULT_TIMEOUT,
    log: Callable[[str], None] = lambda text: None,
    follow_redirects: bool = False,
) -> Preflight:
    """Probe every endpoint at once; leave out the ones that fail; refuse when too few pass. A redirect
    is followed when `follow_redirects` (pass the run's `RetryPolicy.follow_redirects`: the rows' rule)."""
    given = list(dict.fromkeys(endpoints))
    checks = await asyncio.gather(
        *(
            check_server(session, e.base_url, model=e.model, api_key=api_key, api_key_env=api_key_env,
                         timeout=timeout, follow_redirects=follow_redirects)
            for e in given
        )
    )  # fmt: skip
    good = [e for e, c in zip(given, checks, strict=True) if c.ok]
    bad = [c for c in checks if not c.ok]
    if len(good) < needed(len(given)):
        raise _refusal(bad, len(given))
    if bad:
        log(
            f"left out {len(bad)} of {len(given)} servers that failed the pre-flight check; going on with "
            f"{len(good)}:\n  " + "\n  ".join(c.line() for c in bad)
        )
    return Preflight(list(checks), tuple(good))


def _refusal(bad: list[ServerCheck], total: int) -> UsageError:
    hint = REFUSED
    if total == 1:
        return UsageError(bad[0].line(), hint=hint)
    lines = "\n  ".join(c.line() for c in bad)
    return UsageError(
        f"{len(bad)} of {total} servers failed the pre-flight check (at least {needed(total)} must pass):\n"
        f"  {lines}",
        hint=hint,
    )


def origin(url: str) -> str:
    """`scheme://host:port/` of a URL (where Gym and resources servers answer a liveness GET)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/", "", ""))


# ---- rows against the model's context -----------------------------------------------------------


@dataclass
class OutputBudget:
    """The `max_output_tokens` the rows ask for, gathered while they are read (before the servers are
    asked), then held against the served model's context: vLLM refuses a request for more (HTTP 400)."""

    asked: dict[int, list] = field(default_factory=dict)  # value -> [ordinal, first row asking it, rows]
    rows: int = 0

    def see(self, row_name: str, params: dict) -> None:
        value = params.get("max_output_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            entry = self.asked.get(value)
            if entry is None:
                self.asked[value] = [self.rows, row_name, 1]
            else:
                entry[2] += 1
        self.rows += 1

    def check(self, context: tuple[int, ServerCheck] | None) -> None:
        """Refuse the run when a row asks for more than the context (`Preflight.context`) allows."""
        if context is None:
            return
        limit, server = context
        over = {value: entry for value, entry in self.asked.items() if value > limit}
        if not over:
            return
        value, (_, first, _) = min(over.items(), key=lambda item: item[1][0])  # the first row in the file
        count = sum(entry[2] for entry in over.values())
        others = count - 1
        more = "; 1 more row does too" if others == 1 else f"; {others} more rows do too" if others else ""
        raise UsageError(
            f"{first} asks for max_output_tokens {value}, more than the {limit}-token context of model"
            f" {server.model!r} at {server.url} (vLLM refuses such a request){more}",
            hint="lower max_output_tokens in the tasks, or serve the model with a larger --max-model-len;"
            " no row was sent",
        )
