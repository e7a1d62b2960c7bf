"""`ngrp merge`: the shards of one collected run, merged into one run (no server, no collecting)."""
