"""One module per `ngrp` subcommand; each defines a click command named `command`."""
