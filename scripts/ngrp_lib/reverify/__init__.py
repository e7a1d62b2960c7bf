"""`ngrp reverify`: rescore rollouts with a verifier (collect's verifiers and HTTP client; no model)."""
