"""The install hint a missing optional dependency gives: from the checkout or skill folder the code runs
from when it has a pyproject.toml (the package is on no registry), else the module alone."""

from __future__ import annotations

import sys

from conftest import REPO

from ngrp_lib.errors import EXIT_USAGE, MissingDependencyError, install_command


def test_install_command_from_this_checkout_names_the_extra():
    assert install_command("report", "matplotlib") == f"{sys.executable} -m pip install '{REPO}[report]'"


def test_install_command_without_a_pyproject_installs_the_module_alone(tmp_path):
    assert (
        install_command("report", "matplotlib", root=tmp_path)
        == f"{sys.executable} -m pip install matplotlib"
    )
    (tmp_path / "pyproject.toml").mkdir()  # not a regular file: still no project here
    assert install_command("report", "matplotlib", root=tmp_path).endswith("pip install matplotlib")


def test_missing_dependency_error_says_what_needs_it_and_how_to_install():
    error = MissingDependencyError("matplotlib", "pip install matplotlib", "ngrp report (plots)")
    assert error.exit_code == EXIT_USAGE
    assert "ngrp report (plots) needs the Python package 'matplotlib'" in str(error)
    assert error.hint == "install it with: pip install matplotlib"
