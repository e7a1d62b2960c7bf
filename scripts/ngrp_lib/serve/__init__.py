"""`ngrp serve`: `plan` (what to start, pure) and `run` (start, wait for health, supervise, stop)."""
