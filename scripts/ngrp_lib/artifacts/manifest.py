"""The run manifest beside a rollouts file, read by the commands that only consult it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import NgrpError
from . import jsonl
from .names import manifest_path_for


def manifest_beside(rollouts: Path | str) -> dict[str, Any] | None:
    """The run manifest of `rollouts` as a JSON object; None when there is none, or it cannot be read, or
    it is not an object. For readers whose answer only gains from a manifest (a run ngrp did not collect
    has none); `collect` itself reads its own manifest strictly."""
    path = manifest_path_for(rollouts)
    if not path.is_file():
        return None
    try:
        manifest = jsonl.read_json(path)
    except (NgrpError, OSError):
        return None
    return manifest if isinstance(manifest, dict) else None
