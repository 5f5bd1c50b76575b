"""Ops declared in a TOML file (docs/reference.md, "Op files"): "how many cycles will MY kernel
and tiling take?" without a Python package. :func:`load_op_file` reads and checks the file
(``spec.py``, expressions ``expr.py``), registers and checks the kernels it declares
(``kernels.py``) and its :class:`FileOp` (``op.py``; passes and 2-D blocks in ``program.py``,
closed forms in ``bounds.py``); then every command knows the op by name. Worker processes load
the files their parent loaded (``DSPSIM_OP_FILES``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path

from dspsim.errors import DspsimInputError
from dspsim.ops.fileop.op import FileOp
from dspsim.ops.fileop.spec import OpSpec, read_spec, read_text

__all__ = ["FileOp", "OpSpec", "load_op_file", "load_op_files", "loaded_op_files",
           "op_file_digest", "unload_op_file"]

# resolved path -> (the file's text, the op's name, whether python was allowed)
_LOADED: dict[str, tuple[str, str, bool]] = {}
ENV_VAR = "DSPSIM_OP_FILES"  # the files a command loaded, for the processes it starts


def load_op_file(path: str | Path, allow_python: bool = False) -> str:
    """Load and register the op of the op file at ``path``; return its name (the same again
    for the same file). ``allow_python``: let a ``[reference] python`` the file allows be
    imported. A bad file raises a one-line :class:`~dspsim.errors.DspsimInputError`."""
    from dspsim.ops.registry import OPS, register_op

    if not isinstance(path, str | Path):
        raise DspsimInputError(f"op file {path!r}: expected a path")
    text = read_text(path)  # first: a bad path (a NUL byte) is its one line
    key = os.path.realpath(path)
    seen = _LOADED.get(key)
    if seen is not None and seen[0] == text and seen[2] >= allow_python:
        return seen[1]
    taken = {n: o for n, o in OPS.items() if seen is None or n != seen[1]}
    spec = read_spec(path, taken, text)
    if seen is not None:  # the file changed since, or python is newly allowed
        raise DspsimInputError(f"op file {path}: op {seen[1]!r} is already loaded from it "
                               "in this process (a changed file needs a new process)")
    register_op(build_op(spec, allow_python))
    _LOADED[key] = (text, spec.name, allow_python)
    _publish()
    return spec.name


def build_op(spec: OpSpec, allow_python: bool = False) -> FileOp:
    """The op of a checked spec, its declared kernels registered and its values checked
    against the kernels it names (not registered itself: :func:`load_op_file` does that)."""
    from dspsim.ops.fileop.kernels import check_kernels_agree, register_pass_kernel

    op = FileOp(spec, allow_python)
    for p in spec.passes:
        if p.loop is not None:
            register_pass_kernel(spec.name, p, spec.params)
    check_kernels_agree(op)
    return op


def _publish() -> None:
    os.environ[ENV_VAR] = os.pathsep.join(("!" if allowed else "") + path
                                          for path, (_, _, allowed) in _LOADED.items())


def op_file_digest(names: Iterable[str]) -> str | None:
    """A digest of what the op files declaring any of ``names`` declare (their TOML, comments
    and layout aside); None when none is a file's op."""
    names = set(names)
    decl = sorted((name, tomllib.loads(text)) for text, name, _ in _LOADED.values()
                  if name in names)
    return (hashlib.sha256(json.dumps(decl, sort_keys=True).encode()).hexdigest()[:12]
            if decl else None)


def loaded_op_files() -> list[str]:
    """The op files this process loaded (resolved paths), in order."""
    return list(_LOADED)


def load_op_files(paths: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """Load op files (default: those a parent process listed in ``DSPSIM_OP_FILES``); return
    their ops' names."""
    if paths is None:  # "!" before a path: its python reference was allowed
        names = []
        for p in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):
            seen = _LOADED.get(os.path.realpath(p.lstrip("!")))  # a forked worker has them
            names.append(seen[1] if seen else load_op_file(p.lstrip("!"), p.startswith("!")))
        return names
    return [load_op_file(p) for p in paths]


def unload_op_file(path: str | Path) -> None:
    """Forget the op loaded from ``path`` (its op, table and kernels), if any: for tests and
    notebooks that load a file again after editing it."""
    from dspsim.kernels.registry import KERNELS
    from dspsim.ops.registry import OPS
    from dspsim.schema import OP_KEY_IDLE, OP_SCHEMAS

    seen = _LOADED.pop(os.path.realpath(path), None)
    if seen is None:
        return
    name = seen[1]
    op = OPS.pop(name, None)
    OP_SCHEMAS.pop(name, None)
    OP_KEY_IDLE.pop(name, None)
    for p in op.spec.passes if op is not None else ():
        KERNELS.pop(f"{name}.{p.name}", None)
    _publish()
