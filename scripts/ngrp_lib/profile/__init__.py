"""Gym-compatible reward profiling (`ngrp profile`): streaming, exact, with honest extras.

Pipeline: `reader` (one pass per file, each row reduced to numbers in `records.ResultStore` and
`dataset.InputStore`) -> `align` (Gym's key rules) -> `table` (matched measured rollouts in key order,
columns gathered on demand) -> `group_rows` (+ `infos`, `extras`) / `agents` (Gym's three files) ->
`summary` (completion accounting, warnings). `state` and `merge` combine shard profiles exactly.
"""

from .api import ProfileOptions, ProfileResult, run_profile
from .merge import merge_profiles

__all__ = ["ProfileOptions", "ProfileResult", "merge_profiles", "run_profile"]
