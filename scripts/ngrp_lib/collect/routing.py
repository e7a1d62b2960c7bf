"""Which server runs a row. All repeats of a task go to one server (prefix cache); the rule lives here
so multi-server failover can replace it without touching the runner."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..artifacts.urls import has_credentials, normalize_base_url, public_url, split_http_url
from ..errors import InputError, UsageError

__all__ = ["Endpoint", "Router", "has_credentials", "load_endpoints", "normalize_base_url", "public_url",
           "split_http_url"]  # fmt: skip


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends with /v1
    model: str

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
        endpoints.append(Endpoint(entry.base_url, name))
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
