"""Getting rollouts: `materialize` (tasks to rows), `runner` (rows to rollouts against vLLM/OpenAI servers or
a Gym `/run`, resumable and fault tolerant), `shards` (split a run; `ngrp_lib.merge` joins it back).

Import the modules themselves (`from ngrp_lib.collect.runner import collect`): this file stays empty so
that `materialize` does not pull in asyncio and the HTTP client.
"""
