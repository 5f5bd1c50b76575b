"""Output paths the command line writes: checked before any simulation runs."""

from __future__ import annotations

import os
from pathlib import Path

from dspsim.errors import DspsimInputError


def suffix_of(p: Path, suffixes: tuple[str, ...]) -> str:
    """The longest of ``suffixes`` that ``p`` ends with (``.json.gz`` before ``.gz``), else
    its plain suffix."""
    name = p.name.lower()
    matches = [s for s in suffixes if name.endswith(s)]
    return max(matches, key=len) if matches else p.suffix.lower()


def writable_file(path: str | Path, what: str, suffixes: tuple[str, ...]) -> Path:
    """``path`` if it has one of ``suffixes`` and can be written, else a one-line error."""
    p = Path(path)
    if suffix_of(p, suffixes) not in suffixes:
        raise DspsimInputError(
            f"{what} {str(p)!r}: unknown extension {suffix_of(p, suffixes) or '(none)'!r}; "
            f"allowed {', '.join(suffixes)}"
        )
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise DspsimInputError(f"{what} {str(p)!r}: directory {str(parent)!r} does not exist")
    if p.is_dir():
        raise DspsimInputError(f"{what} {str(p)!r}: is a directory, expected a file name")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise DspsimInputError(f"{what} {str(p)!r}: not writable")
    return p
