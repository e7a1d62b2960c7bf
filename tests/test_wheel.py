"""What users install is what is tested: the wheel and the sdist hold the whole package, and every import a
command makes is satisfied by the install the docs give, or guarded with a message naming what to install.

The wheel is built as `python -m build` builds it, from a clean copy of the tracked files: the sdist first,
then the wheel from the unpacked sdist (so a file the sdist leaves out is missing from the wheel too).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "scripts" / "ngrp_lib"

# The installs the docs give for the commands: README's "Plain installation" is `pip install .` (add
# `[report]` for HTML reports); SKILL.md's set-up block runs `pip install -q '.[report]'` in the skill folder.
DOCUMENTED_EXTRAS = ("report",)


def tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", *paths], cwd=REPO, capture_output=True, text=True)
    return [p for p in out.stdout.split("\0") if p and (REPO / p).is_file()]


def clean_copy(dest: Path) -> Path:
    """The tracked files as they are in the working tree, in dest (no build/, egg-info or caches)."""
    for rel in tracked():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes((REPO / rel).read_bytes())
    return dest


def expected_in_wheel() -> set[str]:
    """Each tracked file of the package, as its path inside the wheel: scripts/ngrp_lib/** (code,
    templates, static files) and schemas/*.json, which install as ngrp_lib/_schemas/."""
    files = {rel.removeprefix("scripts/") for rel in tracked("scripts/ngrp_lib")}
    files |= {"ngrp_lib/_schemas/" + Path(rel).name for rel in tracked("schemas") if rel.endswith(".json")}
    return files


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    if not (REPO / ".git").exists():
        pytest.skip("needs the git checkout (the tracked files)")
    root = tmp_path_factory.mktemp("wheel")
    source = clean_copy(root / "src")
    dist = root / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        cwd=root,  # not the checkout: a build/ folder there would shadow the build package
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist, "source": source}


def test_tree_has_the_package_files():
    """The comparison below would pass vacuously on an empty listing."""
    files = expected_in_wheel()
    for rel in ("ngrp_lib/cli.py", "ngrp_lib/merge/__init__.py", "ngrp_lib/view/templates/base.html"):
        assert rel in files
    assert "ngrp_lib/_schemas/rollout.schema.json" in files


def test_wheel_holds_every_package_module_and_data_file(built):
    names = set(zipfile.ZipFile(built["wheel"]).namelist())
    missing = sorted(expected_in_wheel() - names)
    assert not missing, f"the wheel lacks {len(missing)} file(s) of the tree: {missing}"
    packages = {str(p.parent.relative_to(LIB.parent)) for p in LIB.rglob("__init__.py")}
    in_wheel = {str(Path(n).parent) for n in names if n.endswith("/__init__.py")}
    assert packages - {"ngrp_lib/_schemas"} <= in_wheel, sorted(packages - in_wheel)
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".orig", ".rej"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "ngrp = ngrp_lib.cli:run" in zipfile.ZipFile(built["wheel"]).read(entry_points).decode()


def test_wheel_holds_no_file_outside_the_package(built):
    names = zipfile.ZipFile(built["wheel"]).namelist()
    stray = [n for n in names if not n.startswith("ngrp_lib/") and ".dist-info/" not in n]
    assert not stray, stray


def test_sdist_holds_the_tracked_package_and_schemas(built):
    with tarfile.open(built["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    wanted = set(tracked("scripts/ngrp_lib", "schemas")) | {"pyproject.toml", "setup.py", "README.md"}
    missing = sorted(wanted - names)
    assert not missing, f"the sdist lacks {missing}"


# -- optional imports ---------------------------------------------------------------------------------------


def core_import_names() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    block = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    names = set()
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip().strip(",").strip('"')
        if line:
            names.add(line.split(">")[0].split("=")[0].split("<")[0].split("[")[0].split(";")[0].strip())
    return {n.replace("-", "_").lower() for n in names}


def extra_import_names(extra: str) -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith(f"{extra} = ["))
    return {
        part.split('"')[1].split(">")[0].split("=")[0].split(";")[0].strip().replace("-", "_").lower()
        for part in line.split(",")
        if '"' in part
    }


IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside a `try:` body whose handlers catch ImportError (or ModuleNotFoundError)."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                caught = handler.type
                names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
                if any(isinstance(n, ast.Name) and n.id in IMPORT_ERRORS for n in names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def third_party_imports() -> list[tuple[str, int, str, bool]]:
    """(file, line, top-level module, guarded) for every import of a module outside the standard library
    and ngrp_lib, in every module of scripts/ngrp_lib."""
    found = []
    for path in sorted(LIB.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in sys.stdlib_module_names or top == "ngrp_lib" or top == "__future__":
                    continue
                rel = str(path.relative_to(REPO))
                found.append((rel, node.lineno, top, _guarded(node, parents)))
    return found


def test_the_import_scan_sees_the_known_optional_imports():
    """The scan finds the optional imports we know of, guarded: it is not vacuous."""
    seen = {(top, guarded) for _, _, top, guarded in third_party_imports()}
    assert ("matplotlib", True) in seen and ("yaml", True) in seen and ("scipy", True) in seen
    assert ("aiohttp", False) in seen and ("numpy", False) in seen


def test_every_import_is_in_the_documented_install_or_guarded():
    """An unguarded import of a package the documented install lacks crashes a command with a traceback
    (scipy in `stats` was one): each must be a core dependency, in a documented extra, or guarded."""
    allowed = core_import_names()
    for extra in DOCUMENTED_EXTRAS:
        allowed |= extra_import_names(extra)
    assert {"click", "jsonschema", "orjson", "numpy", "aiohttp", "matplotlib"} <= allowed
    bad = [f"{f}:{line}: import {top}" for f, line, top, guarded in third_party_imports()
           if not guarded and top.lower() not in allowed]  # fmt: skip
    assert not bad, "not in the documented install and not guarded:\n" + "\n".join(bad)


def test_guarded_imports_outside_the_install_fall_back_or_name_the_install():
    """A guarded import of a package outside the documented install either falls back (returns None, uses
    ngrp's own code) or raises MissingDependencyError, whose message names the command that installs it."""
    allowed = core_import_names()
    for extra in DOCUMENTED_EXTRAS:
        allowed |= extra_import_names(extra)
    for f, line, top, guarded in third_party_imports():
        if not guarded or top.lower() in allowed:
            continue
        source = (REPO / f).read_text().splitlines()
        handler = "\n".join(source[line : line + 4])
        assert "return None" in handler or "MissingDependencyError" in handler, (f, line, handler)
