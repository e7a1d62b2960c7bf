"""Only the package list lives here: found under scripts/, never listed by hand (see pyproject.toml)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages("scripts", include=["ngrp_lib", "ngrp_lib.*"]), "ngrp_lib._schemas"])
