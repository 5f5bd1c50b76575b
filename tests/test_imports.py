"""The package's shape: no import circles, no oversized modules, layers import downwards only."""

from __future__ import annotations

import ast
from pathlib import Path

import dspsim

PACKAGE = Path(dspsim.__file__).resolve().parent
MAX_LINES = 600


def _module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (packages as ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("dspsim",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except those under ``if TYPE_CHECKING:``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _within(name: str, modules: set[str] | dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in modules:
            return candidate
    return None


def module_imports(name: str, source: str, modules: set[str], is_package: bool = False) -> set[str]:
    """The package's modules that module ``name`` imports (``from pkg import mod`` names
    ``pkg.mod`` when that is a module, else ``pkg``), from its source."""
    out: set[str] = set()
    for node in _imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [_within(a.name, modules) for a in node.names]
        else:
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                base_parts = here[: len(here) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else _within(base, modules))
        out.update(t for t in targets if t is not None and t != name)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    files = _module_files()
    return {
        name: module_imports(
            name, path.read_text(encoding="utf-8"), set(files), path.name == "__init__.py"
        )
        for name, path in files.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> ... -> a) per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)

    circles = []
    for comp in components:
        members = set(comp)
        start = comp[0]
        # breadth-first from start back to start, inside the component: a shortest circle
        prev: dict[str, str] = {}
        frontier = [start]
        found = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found is not None:
                    break
            frontier = nxt
        path = [start]
        v = found
        while v is not None and v != start:
            path.append(v)
            v = prev.get(v)
        circles.append([start] + path[1:][::-1] + [start])
    return circles


def test_the_graph_resolves_imports_as_python_does():
    modules = {"p", "p.a", "p.b", "p.sub", "p.sub.c", "p.sub.d", "p.e"}
    source = """
from typing import TYPE_CHECKING
import os
import p.e
from p import a, CONSTANT
from . import b
from ..sub import c
from ..x import y
if TYPE_CHECKING:
    from p.sub import d
else:
    pass
def f():
    from p.sub.d import thing
"""
    got = module_imports("p.sub.mod", source, modules)
    # "from p import CONSTANT" and "from ..x import y" give p; "from . import b" is p.sub.b,
    # not a module: p.sub; the function's import counts, the TYPE_CHECKING one adds nothing new
    assert got == {"p.e", "p.a", "p", "p.sub", "p.sub.c", "p.sub.d"}
    # in a package's __init__, "." is the package itself
    assert module_imports("p.sub", "from . import c\nfrom .. import b", modules, True) == {
        "p.sub.c",
        "p.b",
    }
    # under TYPE_CHECKING only: no edge
    hidden = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import a\n"
    assert module_imports("p.b", hidden, modules) == set()
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_circles():
    circles = _circles(import_graph())
    text = "\n".join(" -> ".join(c) for c in circles)
    print(text)
    assert not circles, f"import circles:\n{text}"


def test_no_module_is_too_long():
    long = {
        name: n
        for name, path in _module_files().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    text = "\n".join(f"{name}: {n} lines" for name, n in sorted(long.items()))
    print(text)
    assert not long, f"modules over {MAX_LINES} lines:\n{text}"


def test_layers_import_downwards():
    """Saved runs sit below the analyses, the analyses below the command line."""
    graph = import_graph()
    wrong = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if (a in ("dspsim.results", "dspsim.results_check")
            and b.startswith(("dspsim.analysis", "dspsim.cli")))
        or (a.startswith("dspsim.analysis") and b.startswith("dspsim.cli"))
    )
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


# top to bottom: a module may import its own layer and those below, never one above
LAYERS = (("dspsim.cli", 8), ("dspsim.study", 7), ("dspsim.analysis", 7), ("dspsim.run", 6),
          ("dspsim.host", 5), ("dspsim.ops", 4), ("dspsim.platform", 3), ("dspsim.hw", 2),
          ("dspsim.kernels", 2), ("dspsim.schema", 1), ("dspsim.probes", 1))


def _layer(name: str) -> int | None:
    if name.endswith(".__main__"):  # an entry point (python -m ...) is a command line
        return LAYERS[0][1]
    for prefix, rank in LAYERS:
        if name == prefix or name.startswith(prefix + "."):
            return rank
    return None


def test_the_simulator_layers_point_down():
    """cli -> study -> run -> host -> ops -> platform -> hw / kernels -> schema / probes: an op
    names the platform's types only under TYPE_CHECKING, and nothing below an op knows one."""
    wrong = sorted(
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        for b in targets
        if _layer(a) is not None and _layer(b) is not None and _layer(a) < _layer(b)
    )
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)
    assert _layer("dspsim.ops.rowwise") < _layer("dspsim.run") < _layer("dspsim.cli.run")
