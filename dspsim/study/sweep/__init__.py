"""Parameter sweeps: a grid of model keys (plus ``op``, the variant and the input size) run point
by point into a table.

Command line
------------
``dspsim sweep --param KEY=V1,V2,... --param KEY=START:STOP:STEP [--op OP] [--variant V1,V2]
[--n N | --shape R,C] [--model PATH | --models A,B] [--set KEY=VALUE] [--spec FILE.toml] --out
FILE.csv|FILE.parquet [--jobs N] [--fidelity tile|burst] [--executor local|dask]
[--scheduler ADDRESS] [--retry-failed]``

- ``KEY`` is any model key (``dspsim.config.all_keys()``) or a special key: ``op`` (registered
  ops), ``variant`` (or ``mode``, its older name: a sweep uses one or the other and its table
  keeps the name used), ``n`` (a 1-D op's float32 elements) or ``shape`` (a 2-D op's input,
  ``ROWSxCOLS``: ``--param shape=1024x256,512x512``).
- ``V1,V2,...`` lists values; ``START:STOP:STEP`` (numeric keys only, STEP > 0, START <= STOP)
  gives ``START, START+STEP, ...`` up to and including STOP when STOP lands on the grid
  (``1:10:4`` is 1, 5, 9; ``0.1:0.5:0.1`` is 0.1 ... 0.5). Values are checked against the key's
  type and range before anything runs; variants and shapes against the swept op(s).
- The grid is the cartesian product of all keys, the first key outermost. ``--op`` (default the
  op a run is of), ``--variant`` (default every variant of the op), ``--n`` / ``--shape``
  (default the op's default shape) are the same as ``--param op=...`` and so on. Ops of
  different input dimension cannot be swept together. ``--set`` fixes a model key for every
  point.
- The table's columns are ``op``, the variant column, the size column, the other swept keys,
  then the results (``dspsim.study.sweep.table``). ``--models A,B`` sweeps several models into
  one table whose first column is ``model`` (each model's name, or its path as given when two
  share a name; entries checked as ``run --models`` checks them).
- ``--fidelity`` defaults to ``tile`` (one event per transfer or kernel call).

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
