"""Parameter sweeps: a grid of model keys (plus ``op``, the variant and the input size) run point
by point into a table.

``dspsim sweep --param KEY=V1,V2,... | KEY=START:STOP:STEP ... --out FILE.csv|.parquet`` (its
options: ``dspsim sweep --help``; the grid: :mod:`.grid`; keys and values: :mod:`.values`; the
table and its sidecar: ``docs/reference.md``, "Sweep tables and their sidecar"; resuming:
``docs/sweeps.md``).

Exit codes of ``dspsim sweep``: 0 every point succeeded; 1 some failed ("k of N points
failed" on stderr); 2 bad input (nothing was run); 130 interrupted (finished points are kept).

Modules
-------
- ``values``: sweep keys, value lists and ranges, the canonical text of a value.
- ``spec``: the ``--spec FILE.toml`` format.
- ``grid``: :class:`Sweep` (axes, points, columns) and :func:`build_sweep`.
- ``executors``: one point, the local process pool, the dask executor.
- ``files``: the table, journal and sidecar paths; atomic writes.
- ``table``: the table's columns and :func:`read_sweep`.
- ``key``: the key a point's result is stored under (everything it depends on, hashed).
- ``sidecar``: the ``FILE.sweep.json`` that records what a file's rows were computed with.
- ``resume``: reading rows back, streamed, every cell checked, into the cache of points.
- ``journal``: :func:`run_sweep`, resumable and never losing a finished point.
- ``same``: the notes on values of a key that gave identical cycles.

The names below are imported from their modules on first use (nothing heavy at import).

The command line itself is ``dspsim.cli.sweep``; figures are ``dspsim.study.sweep_plot``.
"""

import importlib
from typing import Any

# name -> the module that defines it; imported on first use, so that ``dspsim.cli`` can declare
# ``dspsim sweep`` without loading pandas, the executors or the grid
_EXPORTS = {
    "EXECUTORS": "executors",
    "SweepAbortedError": "executors",
    "evaluate_point": "executors",
    "import_dask": "executors",
    "EXTENSIONS": "files",
    "check_out": "files",
    "journal_path": "files",
    "sidecar_path": "files",
    "DEFAULT_FIDELITY": "grid",
    "DEFAULT_N": "grid",
    "DEFAULT_OP": "grid",
    "Sweep": "grid",
    "build_sweep": "grid",
    "SweepSummary": "journal",
    "run_sweep": "journal",
    "load_spec": "spec",
    "key_columns": "table",
    "read_sweep": "table",
    "check_value": "values",
    "format_value": "values",
    "key_type": "values",
    "parse_param": "values",
    "parse_shape": "values",
    "parse_values": "values",
    "shape_text": "values",
}


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
