"""See the rollouts behind a number: selection, the join with inputs and profile rows, the rollout digest.

`ngrp inspect` (commands/inspect.py), `ngrp view` (view/) and the report's explorer all read a run through
this package: one digest of a rollout (`digest.py`), one set of per-rollout facts and per-task tallies
(`facts.py`, `tasks.py`), one selection (`select.py`). Nothing is imported here, so importing a submodule
stays cheap.
"""
