"""A small aiohttp app run in a background thread, for tests that need a real HTTP peer."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def serve_app(app: Any) -> Iterator[str]:
    """Serve an `aiohttp.web.Application` on a free local port; yields `http://127.0.0.1:PORT`."""
    import asyncio
    import threading

    from aiohttp import web

    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


def chat_reply(content: str) -> dict:
    """A chat completion a canned peer answers with: one choice, stopped, with token counts."""
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def sum_tasks(folder: Any, n: int) -> Any:
    """`folder/tasks.jsonl`: n rows "what is i+1?" with their expected answers."""
    path = folder / "tasks.jsonl"
    rows = [
        {"responses_create_params": {"input": f"what is {i}+1?"}, "expected_answer": str(i + 1)}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def chat_app(chat: Any, max_model_len: int | None = None) -> Any:
    """An aiohttp app of a canned OpenAI-compatible peer: POST /v1/chat/completions is `chat`, and
    GET /v1/models lists model `m` (with `max_model_len` when given, as vLLM reports it)."""
    from aiohttp import web

    model: dict = {"id": "m", "object": "model"}
    if max_model_len is not None:
        model["max_model_len"] = max_model_len

    async def models(request):
        return web.json_response({"object": "list", "data": [model]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


def with_n_choices(reply: dict, body: dict) -> dict:
    """The reply with the `n` choices a grouped request asks for (one per rollout of the task's group)."""
    reply["choices"] = [{**reply["choices"][0], "index": i} for i in range(int(body.get("n") or 1))]
    return reply
