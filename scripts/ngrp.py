#!/usr/bin/env python3
"""Run `ngrp` from a checkout or an installed skill folder, without installing the package.

Works from any working directory: the package is found next to this file.
"""

import importlib.util
import os
import sys

REQUIRED = {"click": "click", "orjson": "orjson", "jsonschema": "jsonschema"}


def _missing() -> list[str]:
    return [pip_name for module, pip_name in REQUIRED.items() if importlib.util.find_spec(module) is None]


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    missing = _missing()
    if missing:
        sys.stderr.write(
            f"ngrp: missing Python packages: {', '.join(missing)}\n"
            f"install them with: {sys.executable} -m pip install {' '.join(missing)}\n"
            "(or install the whole toolkit: pip install <path to this skill folder>)\n"
        )
        sys.exit(2)
    from ngrp_lib.cli import main

    sys.exit(main())
