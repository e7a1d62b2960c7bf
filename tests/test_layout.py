"""The package's shape: packages in one order (each imports only those on lower layers), no import cycles
between files, and no module reaching for another module's private names.

Every import counts, including those inside functions (a lazy import hides a cycle, it does not end it)
and those under `if TYPE_CHECKING:` (a type one module takes from another is a dependency too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "scripts" / "ngrp_lib"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in LIB.rglob("*.py")}


# The package order, lowest first: a package imports only packages on a lower layer (never one on its own
# layer or above). README.md's layout section shows the same layers (test_readme_shows_the_layers).
LAYERS: list[list[str]] = [
    ["__init__", "errors", "jsonvalues", "numbers"],
    ["artifacts"],
    ["collect", "merge"],
    ["reverify", "serve", "stats"],
    ["adaptive", "audit", "ledger", "profile"],  # audit replays the adaptive rule (stats) in check
    ["inspect"],
    ["view"],
    ["report"],
    ["commands"],
    ["cli"],
]
LAYER = {package: i for i, layer in enumerate(LAYERS) for package in layer}


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(target module, imported names, line) for each import of an ngrp_lib module in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.startswith("ngrp_lib"):
                    names = [a.name for a in child.names]
                    found.append((base, names, child.lineno))
            elif isinstance(child, ast.Import):
                found.extend((a.name, [], child.lineno) for a in child.names if a.name.startswith("ngrp_lib"))
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for target, names, _line in _imports(path):
            for name in names or [""]:
                sub = f"{target}.{name}"
                dep = sub if sub in MODULES else target
                if dep in MODULES and dep != module:
                    graph[module].add(dep)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None (iterative depth-first search with colours)."""
    colour: dict[str, int] = {}
    for start in sorted(graph):
        if colour.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        colour[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not colour.get(child):
                colour[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph[child]))))
    return None


def _package_imports_itself(module: str, dep: str) -> bool:
    # A package's __init__ importing its own submodules (and those importing siblings) is not a cycle
    # between concerns; ngrp_lib's top-level __init__ holds only the version.
    return dep.startswith(module + ".") or module.startswith(dep + ".") and MODULES[dep].name == "__init__.py"


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _up_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} -> {dep}"
        for module, deps in graph.items()
        for dep in deps
        if _package(module) != _package(dep) and LAYER[_package(dep)] >= LAYER[_package(module)]
    )


def test_every_package_has_a_layer():
    assert sorted({_package(m) for m in MODULES}) == sorted(LAYER)


def test_no_import_runs_up_the_package_order():
    assert _up_imports(_edges()) == []


def test_the_order_check_sees_an_up_import_and_a_type_checking_import(tmp_path, monkeypatch):
    graph = {"ngrp_lib.artifacts.x": {"ngrp_lib.stats.y"}, "ngrp_lib.stats.y": {"ngrp_lib.artifacts.x"}}
    assert _up_imports(graph) == ["ngrp_lib.artifacts.x -> ngrp_lib.stats.y"]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..stats.load import Loaded\n"
    module = tmp_path / "ngrp_lib" / "artifacts" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text(source)
    monkeypatch.setitem(globals(), "LIB", tmp_path / "ngrp_lib")
    assert _imports(module) == [("ngrp_lib.stats.load", ["Loaded"], 3)]


def test_readme_shows_the_layers():
    readme = (LIB.parents[1] / "README.md").read_text()
    shown = [
        [name.removesuffix("/").removesuffix(".py") for name in re.findall(r"`([^`]+)`", line.split("|")[2])]
        for line in readme.splitlines()
        if line.startswith("| ") and line.split("|")[1].strip().isdigit()
    ]
    assert [sorted(layer) for layer in shown] == [sorted(layer) for layer in LAYERS]


def test_no_import_cycle():
    graph = {m: {d for d in deps if not _package_imports_itself(m, d)} for m, deps in _edges().items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_private_name_imported_from_another_module():
    offenders = [
        f"{path.relative_to(LIB)}:{line}: {name} from {target}"
        for path in MODULES.values()
        for target, names, line in _imports(path)
        for name in names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert offenders == []


def test_top_level_holds_only_the_shell_and_shared_basics():
    top = sorted(p.name for p in LIB.glob("*.py"))
    assert top == ["__init__.py", "cli.py", "errors.py", "jsonvalues.py", "numbers.py"]
    packages = sorted(p.name for p in LIB.iterdir() if (p / "__init__.py").is_file())
    assert packages == [
        "adaptive",
        "artifacts",
        "audit",
        "collect",
        "commands",
        "inspect",
        "ledger",
        "merge",
        "profile",
        "report",
        "reverify",
        "serve",
        "stats",
        "view",
    ]
