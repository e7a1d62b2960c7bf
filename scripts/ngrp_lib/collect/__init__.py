"""`ngrp collect`: rollouts from OpenAI-compatible servers (vLLM), resumable and fault tolerant."""

from .options import CollectOptions
from .routing import Endpoint, Router, load_endpoints, normalize_base_url
from .runner import CollectResult, collect

__all__ = [
    "CollectOptions",
    "CollectResult",
    "Endpoint",
    "Router",
    "collect",
    "load_endpoints",
    "normalize_base_url",
]
