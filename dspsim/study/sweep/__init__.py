"""Parameter sweeps: a grid of model keys (plus ``op``, the variant and the input size) run point
by point into a table, resumably (``dspsim sweep --help``; the table and its sidecar:
``docs/reference.md``, "Sweep tables and their sidecar"; resuming: ``docs/sweeps.md``).

Exit codes of ``dspsim sweep``: 0 every point succeeded; 1 some failed ("k of N points
failed" on stderr); 2 bad input (nothing was run); 130 interrupted (finished points are kept).

Modules: ``values`` (sweep keys, values, their canonical text), ``spec`` (``--spec FILE.toml``),
``grid`` (:class:`Sweep`, :func:`build_sweep`), ``executors`` (one point, a process pool, dask),
``files`` (paths), ``sidecar`` (``FILE.sweep.json``, a point's cache key), ``table`` (rows read
back, checked, into the cache of points or a DataFrame), ``journal`` (:func:`run_sweep`),
``same`` (values that gave identical cycles). The command line is ``dspsim.cli.sweep``; figures
are ``dspsim.study.sweep_plot``.
"""

import importlib
from typing import Any

# the names below, by the module that defines them; imported on first use, so that
# ``dspsim.cli`` can declare ``dspsim sweep`` without loading pandas, the executors or the grid
_MODULES = {
    "executors": ("EXECUTORS", "SweepAbortedError", "evaluate_point", "import_dask"),
    "files": ("EXTENSIONS", "check_out", "journal_path", "sidecar_path"),
    "grid": ("DEFAULT_FIDELITY", "DEFAULT_N", "DEFAULT_OP", "Sweep", "build_sweep"),
    "journal": ("SweepSummary", "run_sweep"),
    "spec": ("load_spec",),
    "table": ("key_columns", "ok_rows", "read_sweep"),
    "values": ("check_value", "format_value", "key_type", "parse_param", "parse_shape",
               "parse_values", "shape_text"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
