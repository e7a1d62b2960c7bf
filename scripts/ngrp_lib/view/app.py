"""The viewer's web app (aiohttp): HTML pages, each with a `.json` twin, and the static CSS and JavaScript.

    /                      task table            /tasks.json
    /task/<index>?a=AGENT  one task's rollouts   /task/<index>.json
    /compare               pairs, flips first    /compare.json          (with --compare)
    /compare/task/<index>  A and B side by side  /compare/task/<index>.json

Every page sends a Content-Security-Policy that allows only this server's own script and style files, so
even a response that slipped past escaping could not run a script. Bad query values answer 400 with the
reason, an unknown task 404; a request for another Host 421, and any request once an indexed file has
changed 409 (`guard`), except a rollouts file that grew: its new rows are indexed first (`live`).
Queries run on one worker thread, so a slow one (a search of every row) never stops the server from
answering.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from ..errors import UsageError
from . import guard, pages
from .compare import Pairs
from .live import Live
from .markup import static_text
from .queries import Params, Views, parse_params

STATIC = {"components.css": "text/css", "view.css": "text/css", "view.js": "text/javascript"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
VIEWS: web.AppKey[Views] = web.AppKey("views", Views)
PAIRS: web.AppKey[Any] = web.AppKey("pairs", object)
WORKER: web.AppKey[Any] = web.AppKey("worker", object)


def _json(data: Any, status: int = 200) -> web.Response:
    body = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    return web.Response(body=body, status=status, content_type="application/json", headers=HEADERS)


def _html(markup: str, status: int = 200) -> web.Response:
    return web.Response(
        text=markup, status=status, content_type="text/html", charset="utf-8", headers=HEADERS
    )


def _error(request: web.Request, status: int, message: str) -> web.Response:
    if request.path.endswith(".json"):
        return _json({"error": message}, status)
    body = pages.Markup("<h1>") + message + pages.Markup("</h1><p><a href='/'>back to the tasks</a></p>")
    return _html(pages.page("error", body, name="error", run=""), status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except UsageError as exc:
        return _error(request, 400, exc.message)
    except LookupError as exc:
        return _error(request, 404, str(exc.args[0] if exc.args else exc))


def _params(request: web.Request) -> Params:
    return parse_params(request.query, request.app[VIEWS].index.threshold)


MAX_TASK = 2**63 - 1  # the index's task column is int64


def _task_key(request: web.Request) -> tuple[int, str | None]:
    task = int(request.match_info["task"])
    if task > MAX_TASK:
        raise UsageError(f"task index {request.match_info['task'][:40]} is out of range")
    return task, request.query.get("a")


async def _off_loop(request: web.Request, query: Callable[..., Any], *args: Any) -> Any:
    """Run a query on the app's one worker thread: the event loop keeps answering meanwhile, and queries
    (which share the index's caches) never run two at once."""
    return await asyncio.get_running_loop().run_in_executor(request.app[WORKER], query, *args)


async def tasks(request: web.Request) -> web.Response:
    data = await _off_loop(request, request.app[VIEWS].tasks, _params(request))
    if request.path.endswith(".json"):
        return _json(data)
    return _html(pages.tasks_page(data, compare=request.app[PAIRS] is not None))


async def task(request: web.Request) -> web.Response:
    full = request.query.get("full") in ("1", "on", "true")
    data = await _off_loop(request, request.app[VIEWS].task, *_task_key(request), _params(request), full)
    if request.path.endswith(".json"):
        return _json(data)
    return _html(pages.task_page(data, compare=request.app[PAIRS] is not None))


def _pairs(request: web.Request) -> Pairs:
    pairs = request.app[PAIRS]
    if pairs is None:
        raise LookupError("compare mode is off: start ngrp view with --compare OTHER_ROLLOUTS")
    return pairs


async def compare(request: web.Request) -> web.Response:
    flipped = request.query.get("flipped") in ("1", "on", "true")
    data = await _off_loop(request, lambda: _pairs(request).page(_params(request), flipped_only=flipped))
    if request.path.endswith(".json"):
        return _json(data)
    return _html(pages.compare_page(data, flipped, request.query.get("agent", "")))


async def compare_task(request: web.Request) -> web.Response:
    data = await _off_loop(request, _pairs(request).task, *_task_key(request), _params(request))
    if request.path.endswith(".json"):
        return _json(data)
    return _html(pages.compare_task_page(data))


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in STATIC:
        raise LookupError(f"no static file {name}")
    return web.Response(text=static_text(name), content_type=STATIC[name], headers=HEADERS)


async def no_icon(request: web.Request) -> web.Response:
    return web.Response(status=204, headers=HEADERS)


def make_app(views: Views, pairs: Pairs | None = None, bind_host: str = "127.0.0.1") -> web.Application:
    from concurrent.futures import ThreadPoolExecutor

    live = Live.of(views, pairs)

    async def catch_up(request: web.Request) -> str | None:
        return await _off_loop(request, live.catch_up)

    app = web.Application(middlewares=[guard.middleware(live.current, bind_host, _error, catch_up), errors])
    app[VIEWS] = views
    app[PAIRS] = pairs
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ngrp-view")
    app[WORKER] = worker

    async def stop_worker(app: web.Application) -> None:
        worker.shutdown(wait=False, cancel_futures=True)

    app.on_cleanup.append(stop_worker)
    app.router.add_get("/", tasks)
    app.router.add_get("/tasks.json", tasks)
    app.router.add_get(r"/task/{task:\d+}.json", task)
    app.router.add_get(r"/task/{task:\d+}", task)
    app.router.add_get("/compare", compare)
    app.router.add_get("/compare.json", compare)
    app.router.add_get(r"/compare/task/{task:\d+}.json", compare_task)
    app.router.add_get(r"/compare/task/{task:\d+}", compare_task)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/favicon.ico", no_icon)
    return app


def url_for(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


async def _serve(app: web.Application, host: str, port: int, ready: Callable[[str], None]) -> None:
    import logging

    # A malformed request gets aiohttp's own 400; its log record (with a traceback) is not for the terminal.
    logging.getLogger("aiohttp.server").addHandler(logging.NullHandler())
    logging.getLogger("aiohttp.server").propagate = False
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before the URL is printed: a stop at once is clean too
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as exc:
            raise UsageError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                hint="pass another --port (0 picks a free one)",
            ) from exc
        bound = runner.addresses[0][1] if runner.addresses else port
        ready(url_for(host, bound))
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(app: web.Application, host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve until Ctrl-C or SIGTERM, then close the listener and return."""
    asyncio.run(_serve(app, host, port, ready))
