"""The endpoints file (schemas/endpoints.schema.json): written by `serve`, read by `collect --endpoints`,
`serve status` and `serve stop` through the one reader here, which checks every entry.

A file `ngrp serve` wrote lists, for each server, the process group it started (`pid`) and that process's
start time (`start_time`, which guards against a recycled pid). A hand-written file needs only
`base_url`: its servers were started by someone else, so `serve status` probes their URL and `serve stop`
leaves them (and the file) alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import InputError, UsageError
from .opening import read_document
from .urls import normalize_base_url, public_url


@dataclass(frozen=True)
class EndpointEntry:
    """One checked entry of an endpoints file."""

    base_url: str  # with its /v1, and any credentials it was given
    model: str | None = None
    pid: int | None = None
    start_time: int | None = None
    host: str | None = None
    port: int | None = None
    log: str | None = None
    max_num_seqs: int | None = None  # the server's limit of running sequences (vLLM), when known

    @property
    def public_url(self) -> str:
        return public_url(self.base_url)

    @property
    def started_by_serve(self) -> bool:
        """Whether `ngrp serve` started this server: it wrote the process group and its start time."""
        return self.pid is not None and self.start_time is not None


@dataclass(frozen=True)
class EndpointsFile:
    path: Path
    data: dict[str, Any]  # the whole document, as read
    entries: tuple[EndpointEntry, ...]

    @property
    def written_by_serve(self) -> bool:
        return all(e.started_by_serve for e in self.entries)


_OPTIONAL = {"model": str, "host": str, "log": str}


def read_endpoints(path: Path | str) -> EndpointsFile:
    """The one reader of the endpoints file: every entry checked, a bad one named by its JSON pointer."""
    path = Path(path)
    if not os.path.lexists(path):
        raise InputError(
            "endpoints file not found",
            path=path,
            hint="was `ngrp serve` started with it? (`ngrp serve stop` removes it once its servers stop)",
        )
    try:
        data = orjson.loads(read_document(path, what="endpoints file"))
    except orjson.JSONDecodeError as exc:
        raise InputError(f"unreadable endpoints file: {exc}", path=path) from None
    if not isinstance(data, dict) or not isinstance(data.get("endpoints"), list):
        raise InputError('expected {"endpoints": [...]}', path=path, pointer="/endpoints")
    if not data["endpoints"]:
        raise InputError(
            "no endpoints listed", path=path, pointer="/endpoints", hint="did `ngrp serve` start?"
        )
    entries = tuple(_entry(path, i, item) for i, item in enumerate(data["endpoints"]))
    return EndpointsFile(path, data, entries)


def _entry(path: Path, i: int, item: Any) -> EndpointEntry:
    where = f"/endpoints/{i}"
    if not isinstance(item, dict):
        raise InputError(
            f'each endpoint is an object such as {{"base_url": "http://host:8000/v1"}}, not {_kind(item)}',
            path=path,
            pointer=where,
        )
    if not isinstance(item.get("base_url"), str):
        raise InputError("each endpoint needs a base_url string", path=path, pointer=where)
    try:
        base_url = normalize_base_url(item["base_url"])
    except UsageError as exc:
        message = exc.message.replace("--base-url ", "base_url ")
        raise InputError(message, path=path, pointer=f"{where}/base_url", hint=exc.hint) from None
    for key, kind in _OPTIONAL.items():
        value = item.get(key)
        if value is not None and (not isinstance(value, kind) or not value):
            raise InputError(f"{key} must be a non-empty string, not {_kind(value)}", path=path,
                             pointer=f"{where}/{key}")  # fmt: skip
    pid, start_time, port, seqs = (
        _integer(path, where, item, key) for key in ("pid", "start_time", "port", "max_num_seqs")
    )
    if seqs is not None and seqs < 1:
        raise InputError(f"max_num_seqs must be at least 1, not {seqs}", path=path,
                         pointer=f"{where}/max_num_seqs")  # fmt: skip
    if pid is not None and pid < 1:
        raise InputError(f"pid must be at least 1, not {pid}", path=path, pointer=f"{where}/pid")
    if port is not None and not 1 <= port <= 65535:
        raise InputError(f"port must be in 1..65535, not {port}", path=path, pointer=f"{where}/port")
    return EndpointEntry(
        base_url, item.get("model"), pid, start_time, item.get("host"), port, item.get("log"), seqs
    )


def _integer(path: Path, where: str, item: dict, key: str) -> int | None:
    value = item.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise InputError(f"{key} must be an integer, not {_kind(value)}", path=path, pointer=f"{where}/{key}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, str):
        text = public_url(value) if "://" in value else value
        return repr(text if len(text) <= 40 else text[:40] + "...")
    return {dict: "an object", list: "a list", bool: "a boolean"}.get(type(value), type(value).__name__)
