"""The package's budgets, measured: ``python -m dspsim.budgets [--json]``.

What it prints, each beside its budget:

- the lines of ``dspsim/`` (every ``.py`` file, blank lines and comments included);
- the functions longer than 50 lines (their place and length), and those of them in ``hw/``,
  ``platform.py`` or ``run.py``, where none may be;
- the import circles, once counting every import and once leaving out those under
  ``if TYPE_CHECKING:`` (a type-only import still ties two modules together for a reader);
- the modules over 600 lines.

It reads the source as text (``ast``) and runs none of it. ``--against REV`` also measures the
package at a git revision (``git archive``), printed beside today's: the release the budgets were
set against is f260e12 (27,495 lines, 58 functions over 50 lines, two type-only import circles).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
BUDGET_PACKAGE_LINES = 20_000
BUDGET_LONG_FUNCTIONS = 25
LONG_FUNCTION_LINES = 50
MAX_MODULE_LINES = 600
NO_LONG_FUNCTIONS_IN = ("dspsim.hw", "dspsim.platform", "dspsim.run")


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (packages as ``__init__``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = (package.name,) + path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(tree: ast.AST, type_only: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth; those under ``if TYPE_CHECKING:`` only when
    ``type_only``."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        # ``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``: only its else branch counts
        if not type_only and isinstance(node, ast.If) and "TYPE_CHECKING" in (
                getattr(node.test, "id", None), getattr(node.test, "attr", None)):
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


def _from_targets(name: str, node: ast.ImportFrom, modules: set[str],
                  is_package: bool) -> list[str | None]:
    if node.level:
        here = name.split(".") if is_package else name.split(".")[:-1]
        base_parts = here[: len(here) - (node.level - 1)]
        base = ".".join(base_parts + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    subs = [f"{base}.{alias.name}" for alias in node.names]
    return [sub if sub in modules else _within(base, modules) for sub in subs]


def module_imports(name: str, source: str, modules: set[str], is_package: bool = False,
                   type_only: bool = False) -> set[str]:
    """The package's modules that module ``name`` imports (``from pkg import mod`` names
    ``pkg.mod`` when that is a module, else ``pkg``), from its source; ``type_only`` counts the
    imports under ``if TYPE_CHECKING:`` too."""
    out: set[str] = set()
    for node in _imports(ast.parse(source), type_only):
        if isinstance(node, ast.Import):
            targets = [_within(a.name, modules) for a in node.names]
        else:
            targets = _from_targets(name, node, modules, is_package)
        out.update(t for t in targets if t is not None and t != name)
    return out


def import_graph(type_only: bool = False, package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    files = module_files(package)
    return {
        name: module_imports(name, path.read_text(encoding="utf-8"), set(files),
                             path.name == "__init__.py", type_only)
        for name, path in files.items()
    }


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` reaches through imports (itself only through a circle)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def _shortest_circle(graph: dict[str, set[str]], members: set[str], start: str) -> list[str]:
    """Breadth-first from ``start`` back to ``start`` inside one component."""
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]  # unreachable for a component of more than one module


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> ... -> a) per group of modules that reach each other (a strongly
    connected component), the shortest from the group's first module by name."""
    reach = {v: _reachable(graph, v) for v in graph}
    groups = {tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in graph
              if v in reach[v]}
    return [_shortest_circle(graph, set(g), g[0]) for g in sorted(groups)]


def long_functions(package: Path = PACKAGE,
                   limit: int = LONG_FUNCTION_LINES) -> list[tuple[str, str, int]]:
    """(module, function, lines) for every function or method longer than ``limit`` lines
    (decorators and docstring included), longest first."""
    out = []
    for name, path in module_files(package).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                n = node.end_lineno - first + 1
                if n > limit:
                    out.append((name, node.name, n))
    return sorted(out, key=lambda t: (-t[2], t[0], t[1]))


def measure(package: Path = PACKAGE) -> dict:
    """Every budget's figure and whether it is met."""
    files = module_files(package)
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in files.items()}
    long = long_functions(package)
    forbidden = [f for f in long if f[0].startswith(NO_LONG_FUNCTIONS_IN)]
    runtime = circles(import_graph(False, package))
    typed = circles(import_graph(True, package))
    big = {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES}
    return {
        "package_lines": sum(sizes.values()), "package_lines_budget": BUDGET_PACKAGE_LINES,
        "long_functions": len(long), "long_functions_budget": BUDGET_LONG_FUNCTIONS,
        "long_functions_list": [f"{m}.{f}: {n} lines" for m, f, n in long],
        "long_functions_where_none_may_be": [f"{m}.{f}: {n} lines" for m, f, n in forbidden],
        "import_circles": [" -> ".join(c) for c in runtime],
        "import_circles_with_type_only": [" -> ".join(c) for c in typed],
        "modules_over_600_lines": [f"{m}: {n} lines" for m, n in sorted(big.items())],
    }


def _verdicts(m: dict) -> list[tuple[str, str, bool]]:
    return [
        ("lines in dspsim/", f"{m['package_lines']:,} (budget {m['package_lines_budget']:,})",
         m["package_lines"] <= m["package_lines_budget"]),
        (f"functions over {LONG_FUNCTION_LINES} lines",
         f"{m['long_functions']} (budget {m['long_functions_budget']})",
         m["long_functions"] <= m["long_functions_budget"]),
        ("long functions in hw/, platform.py, run.py",
         f"{len(m['long_functions_where_none_may_be'])} (budget 0)",
         not m["long_functions_where_none_may_be"]),
        ("import circles", f"{len(m['import_circles'])} (budget 0)", not m["import_circles"]),
        ("import circles counting type-only imports",
         f"{len(m['import_circles_with_type_only'])} (budget 0)",
         not m["import_circles_with_type_only"]),
        (f"modules over {MAX_MODULE_LINES} lines",
         f"{len(m['modules_over_600_lines'])} (budget 0)", not m["modules_over_600_lines"]),
    ]


def measure_revision(rev: str, package: Path = PACKAGE) -> dict:
    """:func:`measure` of the package as it was at git revision ``rev`` of its repository."""
    try:
        tar = subprocess.run(["git", "-C", str(package.parent), "archive", rev, package.name],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise SystemExit(f"python -m dspsim.budgets: --against {rev!r}: not a revision of the "
                         f"package's git repository ({err.decode(errors='replace').strip() or e})"
                         ) from None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(tar)) as t:
            t.extractall(tmp, filter="data")
        return measure(Path(tmp) / package.name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dspsim.budgets",
                                description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--against", metavar="REV",
                   help="also measure the package at this git revision (the release: f260e12)")
    args = p.parse_args(argv)
    m, old = measure(), measure_revision(args.against) if args.against else None
    verdicts = _verdicts(m)
    if args.json:
        extra = {"against": {"revision": args.against, **old}} if old else {}
        print(json.dumps({**m, "met": {k: ok for k, _, ok in verdicts}, **extra}, indent=2))
        return 0
    then = _verdicts(old) if old else None
    width = max(len(k) for k, _, _ in verdicts)
    if then:
        print(f"{'':<{width}}  {'now':<24} {'':<7} {'at ' + args.against}")
    for i, (k, figure, ok) in enumerate(verdicts):
        old = f" {then[i][1].split(' (')[0]}" if then else ""
        print(f"{k:<{width}}  {figure:<24} {'met' if ok else 'NOT MET':<7}{old}".rstrip())
    for title, key in (("functions over the line budget", "long_functions_list"),
                       ("import circles", "import_circles"),
                       ("import circles counting type-only imports",
                        "import_circles_with_type_only"),
                       ("modules over the line budget", "modules_over_600_lines")):
        if m[key]:
            print(f"\n{title}:")
            print("\n".join(f"  {line}" for line in m[key]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
