"""The package's shape: no import circles, no oversized modules, layers import downwards only."""

from __future__ import annotations

import pytest

from dspsim.budgets import MAX_MODULE_LINES as MAX_LINES
from dspsim.budgets import circles as _circles
from dspsim.budgets import import_graph, long_functions, module_imports
from dspsim.budgets import module_files as _module_files


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


def test_no_import_circles_counting_type_only_imports():
    """A type-only import (under ``if TYPE_CHECKING:``) still ties two modules together for a
    reader: the fast-forwards name the port and the core through the views they declare
    below them or not at all (the finder takes a core as ``Any``), not the modules above."""
    circles = _circles(import_graph(type_only=True))
    text = "\n".join(" -> ".join(c) for c in circles)
    assert not circles, f"import circles counting type-only imports:\n{text}"


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


def test_type_only_imports_count_when_asked():
    hidden = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import a\n"
    assert module_imports("p.b", hidden, {"p", "p.a", "p.b"}, type_only=True) == {"p.a"}


def test_budgets_see_a_type_only_circle_and_a_long_function(tmp_path):
    pkg = tmp_path / "pk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pk import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from pk import a\n")
    body = "\n".join(f"    x{i} = {i}" for i in range(50))
    (pkg / "c.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert _circles(import_graph(False, pkg)) == []
    assert _circles(import_graph(True, pkg)) == [["pk.a", "pk.b", "pk.a"]]
    # 1 line of def + 50 of body: 51 lines, one over the limit; the 2-line one is not counted
    assert long_functions(pkg) == [("pk.c", "long", 51)]
    assert long_functions(pkg, limit=51) == []


def test_budgets_measure_a_git_revision_beside_today(capsys):
    """``--against REV`` measures the package as git holds it at REV: the release the budgets
    were set against (f260e12) had the figures its issue gives; a name that is no revision is
    one line."""
    import subprocess

    from dspsim.budgets import PACKAGE, main, measure_revision

    has = subprocess.run(["git", "-C", str(PACKAGE.parent), "cat-file", "-e", "f260e12^{commit}"],
                         capture_output=True).returncode == 0
    if not has:
        pytest.skip("the repository's history is not here (a shallow clone or an sdist)")
    then = measure_revision("f260e12")
    assert then["package_lines"] == 27_495
    assert len(then["import_circles_with_type_only"]) == 2 and then["import_circles"] == []
    assert main(["--against", "f260e12"]) == 0
    header, lines = capsys.readouterr().out.splitlines()[:2]
    assert header.split() == ["now", "at", "f260e12"] and lines.endswith(" 27,495")
    with pytest.raises(SystemExit, match="--against 'no-such-rev': not a revision"):
        main(["--against", "no-such-rev"])


def test_the_readmes_layers_are_the_tested_ones():
    """Before: the README drew dspsim/host/ beside platform.py, below ops, where this file's
    LAYERS (which the imports are held to) has it above ops."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    arch = readme.split("## Architecture")[1].split("\n- The public API")[0]
    named = {"dspsim/cli/": "dspsim.cli", "dspsim/study/": "dspsim.study",
             "dspsim/run.py": "dspsim.run", "dspsim/analysis/": "dspsim.analysis",
             "dspsim/host/": "dspsim.host", "dspsim/ops/": "dspsim.ops",
             "dspsim/platform.py": "dspsim.platform", "dspsim/hw/": "dspsim.hw",
             "dspsim/kernels/": "dspsim.kernels", "dspsim/schema.py": "dspsim.schema",
             "dspsim/probes.py": "dspsim.probes"}
    order = sorted(named, key=lambda path: arch.index(f"`{path}`"))
    ranks = [_layer(named[path]) for path in order]
    assert ranks == sorted(ranks, reverse=True), order
