"""Gym-compatible reward profiling (`ngrp profile`): streaming, exact, with honest extras.

Pipeline: `reader` (one pass per file, each row reduced to numbers in `records.ResultStore` and
`dataset.InputStore`) -> `align` (Gym's key rules) -> `table` (matched measured rollouts in key order,
columns gathered on demand) -> `group_rows` (+ `infos`, `extras`) / `agents` (Gym's three files) ->
`summary` (completion accounting, warnings). `state` and `merge` combine shard profiles exactly.
"""

from typing import TYPE_CHECKING, Any

from .api import ProfileOptions, ProfileResult, run_profile

if TYPE_CHECKING:
    from .merge import merge_profiles

__all__ = ["ProfileOptions", "ProfileResult", "merge_profiles", "run_profile"]


def __getattr__(name: str) -> Any:
    """`merge_profiles` is imported when asked for: profiling one run does not load the merge."""
    if name == "merge_profiles":
        from .merge import merge_profiles

        return merge_profiles
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
