"""The package's shape: no import cycles, and no module reaching for another module's private names.

Every import counts, including those inside functions (a lazy import hides a cycle, it does not end it);
only `if TYPE_CHECKING:` blocks are left out, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "scripts" / "ngrp_lib"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in LIB.rglob("*.py")}


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(target module, imported names, line) for each import of an ngrp_lib module in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: list[tuple[str, list[str], int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
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
        "artifacts",
        "audit",
        "collect",
        "commands",
        "inspect",
        "ledger",
        "profile",
        "report",
        "serve",
        "stats",
        "view",
    ]
