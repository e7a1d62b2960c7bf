"""The model servers of a run: an endpoint (base URL and model), and the endpoints files that list them.
Which server runs a row is `failover.FailoverRouter`'s rule (every repeat of a task to its home server)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..artifacts.urls import has_credentials, normalize_base_url, public_url, split_http_url
from ..errors import InputError

__all__ = ["Endpoint", "has_credentials", "load_endpoints", "normalize_base_url", "public_url",
           "split_http_url"]  # fmt: skip


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends with /v1
    model: str
    # the server's limit of running sequences (an endpoints file's `max_num_seqs`); not part of identity
    max_num_seqs: int | None = field(default=None, compare=False)

    @property
    def public_url(self) -> str:
        """The URL without credentials, query or fragment (safe for manifests and logs)."""
        return public_url(self.base_url)


def load_endpoints(path: Path | str, model: str | None) -> list[Endpoint]:
    """Read `ngrp serve`'s endpoints file: {"endpoints": [{"base_url": ".../v1", "model": NAME}, ...]}."""
    from ..artifacts.endpoints import read_endpoints

    endpoints = []
    for i, entry in enumerate(read_endpoints(path).entries):
        name = model or entry.model
        if not name:
            raise InputError("endpoint has no model; pass --model", path=path, pointer=f"/endpoints/{i}")
        endpoints.append(Endpoint(entry.base_url, name, entry.max_num_seqs))
    return endpoints


def load_endpoint_files(paths: Iterable[Path | str], model: str | None) -> list[Endpoint]:
    """The servers of several endpoints files (one per node, say), in order; a server listed twice is
    used once."""
    return list(dict.fromkeys(e for path in paths for e in load_endpoints(path, model)))
