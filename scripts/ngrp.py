#!/usr/bin/env python3
"""Run `ngrp` from a checkout or an installed skill folder, without installing the package.

Works from any working directory: the package is found next to this file.
"""

import importlib.util
import os
import re
import sys

REQUIRED = {"click": "click", "orjson": "orjson", "jsonschema": "jsonschema"}
# The lowest versions pyproject.toml asks for; pip enforces them for an installed ngrp, this file for a
# checkout or skill folder run in place. orjson's matters most: from 3.11.7 floats are written as Gym's are.
MINIMUM = {"click": "8.1", "orjson": "3.11.7", "jsonschema": "4.18", "numpy": "1.24", "aiohttp": "3.9"}
# An old orjson only changes how floats are spelled in written files, so it is worth a warning only for
# the commands that write files Gym reads; analysis that prints (check, stats, compare, inspect...) is
# the same with it, and a warning on every call is noise an agent learns to ignore.
WRITES_GYM_FILES = {"collect", "materialize", "profile", "reverify", "merge", "curriculum", "health"}


def _missing() -> list[str]:
    return [pip_name for module, pip_name in REQUIRED.items() if importlib.util.find_spec(module) is None]


def _numbers(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: '3.11.7' -> (3, 11, 7), '2.0.0rc1' -> (2, 0, 0)."""
    parts = []
    for piece in version.split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def _command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _version(name: str) -> str | None:
    """The installed version of package `name` (None when it is not installed), read from the one
    `name-VERSION.dist-info` folder beside it, as pip installs it: importing importlib.metadata to ask
    would cost ~20 ms on every call. Other layouts (conda, eggs, several such folders) ask it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a broken or blocked package: its metadata still gives the version
        return _metadata_version(name)
    if spec is None:
        return None
    if spec.origin and spec.submodule_search_locations:  # a package: <site>/<name>/__init__.py
        site = os.path.dirname(os.path.dirname(spec.origin))
        prefix, suffix = name + "-", ".dist-info"
        try:
            found = [e for e in os.listdir(site) if e.startswith(prefix) and e.endswith(suffix)]
        except OSError:
            found = []
        if len(found) == 1:
            return found[0][len(prefix) : -len(suffix)]
    return _metadata_version(name)


def _metadata_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _too_old(command: str | None = None) -> list[str]:
    """Packages older than MINIMUM; orjson only when `command` writes files Gym reads (or is unknown)."""
    old = []
    for name, minimum in MINIMUM.items():
        if name == "orjson" and command is not None and command not in WRITES_GYM_FILES:
            continue
        have = _version(name)
        if have is None:
            continue  # numpy and aiohttp are needed only by some commands, which say so
        if _numbers(have) < _numbers(minimum):
            old.append(f"{name} {have} (needs >= {minimum})")
    return old


def _run() -> int:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    missing = _missing()
    if missing:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sys.stderr.write(
            f"ngrp: missing Python packages: {', '.join(missing)}; install them with: "
            f"{sys.executable} -m pip install {' '.join(missing)}\n"
            "(or set up every command once, in a venv outside this folder: python3 -m venv ~/.venvs/ngrp && "
            f"~/.venvs/ngrp/bin/pip install '{here}[report]', then run ~/.venvs/ngrp/bin/ngrp)\n"
        )
        return 2
    old = _too_old(_command(sys.argv[1:]))
    if old:
        sys.stderr.write(
            f"ngrp: warning: older packages than this toolkit needs: {', '.join(old)}; outputs may differ "
            "from NeMo Gym's (orjson writes floats differently before 3.11.7). Upgrade: "
            f"{sys.executable} -m pip install -U "
            + " ".join(f"'{o.split()[0]}>={MINIMUM[o.split()[0]]}'" for o in old)
            + "\n"
        )
    from ngrp_lib.cli import main

    return main()


if __name__ == "__main__":
    try:
        code = _run()
    except KeyboardInterrupt:  # Ctrl-C while the toolkit is still loading: as after it, no traceback
        sys.stderr.write("interrupted\n")
        code = 130
    sys.exit(code)
