"""The endpoints file (schemas/endpoints.schema.json), written by `serve`, read by `collect --endpoints`."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from ..errors import InputError
from .opening import read_document


def read_endpoints(path: Path | str) -> dict:
    """The one reader of the endpoints file."""
    path = Path(path)
    if not os.path.lexists(path):
        raise InputError("endpoints file not found", path=path, hint="was `ngrp serve` started with it?")
    try:
        data = orjson.loads(read_document(path, what="endpoints file"))
    except orjson.JSONDecodeError as exc:
        raise InputError(f"unreadable endpoints file: {exc}", path=path) from None
    if not isinstance(data, dict) or not isinstance(data.get("endpoints"), list):
        raise InputError('expected {"endpoints": [...]}', path=path, pointer="/endpoints")
    return data
