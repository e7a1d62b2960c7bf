"""Gym-compatible reward profiling (`ngrp profile`): streaming, exact, with honest extras.

Pipeline: `reader` (one pass per file) -> `align` (Gym's key rules) -> `table` (numeric fields in key
order) -> `group_rows` / `agents` (Gym's three files) + `extras` (pass rate, pass@k, Wilson) ->
`summary` (completion accounting, warnings). `merge` combines shard states exactly.
"""

from .api import ProfileOptions, ProfileResult, run_profile
from .merge import merge_profiles

__all__ = ["ProfileOptions", "ProfileResult", "merge_profiles", "run_profile"]
