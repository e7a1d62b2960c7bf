"""The run manifest beside a rollouts file, read by the commands that only consult it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InputError, NgrpError
from . import jsonl
from .names import manifest_path_for


def manifest_beside(rollouts: Path | str) -> dict[str, Any] | None:
    """The run manifest of `rollouts` as a JSON object; None when there is none, or it cannot be read, or
    it is not an object. For readers whose answer only gains from a manifest (a run ngrp did not collect
    has none); `collect` itself reads its own manifest strictly."""
    return manifest_and_problem(rollouts)[0]


def manifest_and_problem(rollouts: Path | str) -> tuple[dict[str, Any] | None, str | None]:
    """`manifest_beside`, and why a manifest that is there gives nothing (not a regular file, unreadable,
    not JSON, not an object): None when there is none or it reads. A reader whose answer changes with
    the manifest (an adaptive run's estimates use its first round alone) must not take one it cannot
    read for no manifest."""
    path = manifest_path_for(rollouts)
    if not path.is_file():
        return None, ("not a regular file" if os.path.lexists(path) else None)
    try:
        manifest = jsonl.read_json(path)
    except InputError as exc:
        return None, exc.detail
    except (NgrpError, OSError) as exc:
        return None, getattr(exc, "strerror", None) or str(exc)
    if not isinstance(manifest, dict):
        return None, f"a JSON {type(manifest).__name__}, not an object"
    return manifest, None
