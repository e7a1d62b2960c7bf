"""Entry points: `python3 scripts/ngrp.py` from any cwd without installing, a clear message (exit 2) when a
dependency is missing, cheap imports, and `pip install .` shipping the schemas."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "ngrp.py"
GOLDEN = REPO / "tests" / "golden" / "gym-0.7.0" / "case_complete"


def test_help_from_another_cwd(run_ngrp_process, tmp_path):
    out = run_ngrp_process("--help", cwd=tmp_path)
    assert out.returncode == 0
    assert "validate" in out.stdout and "check" in out.stdout and "Exit codes" in out.stdout


def test_validate_from_another_cwd_finds_the_schemas(run_ngrp_process, tmp_path):
    out = run_ngrp_process("validate", GOLDEN / "rollouts.jsonl", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_no_site_packages_says_what_to_install(tmp_path):
    """`-S`: no site-packages at all, so click, orjson and jsonschema are all missing."""
    out = _run([sys.executable, "-S", str(SCRIPT), "--help"], tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "missing Python packages: click, orjson, jsonschema" in out.stderr
    assert "pip install click orjson jsonschema" in out.stderr


def test_one_missing_dependency_is_named(tmp_path):
    code = (
        "import runpy, sys; sys.modules['orjson'] = None; "
        f"sys.argv = [{str(SCRIPT)!r}, 'validate', 'x.jsonl']; "
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    )
    out = _run([sys.executable, "-c", code], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "missing Python packages: orjson;" in out.stderr and "pip install orjson" in out.stderr


def test_help_validate_and_check_do_not_import_heavy_modules(tmp_path):
    rollouts, inputs = str(GOLDEN / "rollouts.jsonl"), str(GOLDEN / "rollouts_materialized_inputs.jsonl")
    code = (
        f"import sys; sys.path.insert(0, {str(REPO / 'scripts')!r})\n"
        "from ngrp_lib.cli import main\n"
        "main(['--help'])\n"
        f"main(['validate', {rollouts!r}])\n"
        f"main(['check', '--inputs', {inputs!r}, '--rollouts', {rollouts!r}])\n"
        "heavy = ('numpy', 'aiohttp', 'matplotlib', 'scipy', 'pandas')\n"
        "print('HEAVY', sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = _run([sys.executable, "-c", code], tmp_path)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr


@pytest.mark.slow
def test_pip_install_ships_schemas(tmp_path):
    """`pip install .` into a fresh venv with --no-deps; the dependencies come from the environment running
    the tests (a .pth file), the build backend (setuptools>=68) through pip's build isolation."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    inner_site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
    )
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(inner_site.stdout.strip()) / "_outer_deps.pth").write_text("\n".join(outer) + "\n")
    build = tmp_path / "src"
    # Copy the tracked tree so the build never writes into the checkout (egg-info, build/).
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    for name in files:
        (build / name).parent.mkdir(parents=True, exist_ok=True)
        (build / name).write_bytes((REPO / name).read_bytes())
    pip = _run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(build)], tmp_path)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    site = _run(
        [str(python), "-c", "import ngrp_lib, pathlib; print(pathlib.Path(ngrp_lib.__file__).parent)"],
        tmp_path,
    )
    installed = Path(site.stdout.strip())
    assert str(installed).startswith(str(env_dir)), installed
    shipped = sorted(p.name for p in (installed / "_schemas").glob("*.schema.json"))
    assert shipped == sorted(p.name for p in (REPO / "schemas").glob("*.schema.json"))
    for folder in ("templates", "static"):  # the viewer's pages, package data too
        source = sorted(p.name for p in (REPO / "scripts" / "ngrp_lib" / "view" / folder).iterdir())
        assert sorted(p.name for p in (installed / "view" / folder).iterdir()) == source, folder
    ngrp = env_dir / "bin" / "ngrp"
    env = dict(os.environ, PATH=f"{env_dir / 'bin'}:{os.environ['PATH']}")
    out = subprocess.run(
        [str(ngrp), "validate", str(GOLDEN / "rollouts.jsonl"), str(GOLDEN / "rollouts_agent_metrics.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    where = _run(
        [str(python), "-c", "from ngrp_lib.artifacts import schemas; print(schemas.schema_dir())"], tmp_path
    )
    assert where.stdout.strip() == str(installed / "_schemas")


def test_a_package_older_than_required_is_named_with_the_upgrade(monkeypatch):
    import runpy
    from importlib import metadata

    entry = runpy.run_path(str(REPO / "scripts" / "ngrp.py"))
    assert entry["_numbers"]("3.11.7") == (3, 11, 7) and entry["_numbers"]("2.0.0rc1") == (2, 0, 0)
    # the versions read from the dist-info folders are importlib.metadata's
    for name in [*entry["MINIMUM"], "pytest"]:
        assert entry["_version"](name) == metadata.version(name), name
    assert entry["_version"]("no_such_package_here") is None
    real = entry["_version"]
    old_orjson = lambda name: "3.10.0" if name == "orjson" else real(name)  # noqa: E731
    monkeypatch.setitem(entry["_too_old"].__globals__, "_version", old_orjson)  # the script's own globals
    assert entry["_too_old"]() == ["orjson 3.10.0 (needs >= 3.11.7)"]
    # an old orjson changes only how written floats are spelled: a warning where Gym reads the files
    assert entry["_too_old"]("profile") == ["orjson 3.10.0 (needs >= 3.11.7)"]
    assert entry["_too_old"]("stats") == [] and entry["_too_old"]("check") == []
    assert entry["_command"](["--no-color", "inspect", "-x"]) == "inspect"
