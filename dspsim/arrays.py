"""Reading input arrays and writing output arrays for the command line (.npy, float32)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.paths import writable_file


def load_input(path: str, ndim: int = 1) -> np.ndarray:
    """An ``ndim``-D float32 array from a .npy file; NaN and inf are allowed (they are
    reported)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise DspsimInputError(
                    f"--input {path!r}: not a .npy file; write one with "
                    "numpy.save(path, x.astype(numpy.float32))"
                )
        x = np.load(p, allow_pickle=False)
    except DspsimInputError:
        raise
    except FileNotFoundError:
        raise DspsimInputError(f"--input {path!r}: no such file") from None
    except IsADirectoryError:
        raise DspsimInputError(f"--input {path!r}: is a directory, expected a .npy file") from None
    except (OSError, ValueError, EOFError) as e:
        reason = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        raise DspsimInputError(
            f"--input {path!r}: not a readable .npy array ({reason}); "
            "write one with numpy.save(path, x.astype(numpy.float32))"
        ) from None
    if not isinstance(x, np.ndarray):
        raise DspsimInputError(f"--input {path!r}: holds several arrays; expected one .npy array")
    return check_input_array(x, f"--input {path!r}", ndim)


def check_input_array(x: np.ndarray, what: str, ndim: int = 1) -> np.ndarray:
    """``x`` if it is a non-empty ``ndim``-D float32 array, else a one-line error naming
    ``what``."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise DspsimInputError(
            f"{what}: dtype {x.dtype}, expected float32 (x.astype(numpy.float32))"
        )
    if x.ndim != ndim:
        raise DspsimInputError(f"{what}: shape {x.shape}, expected a {ndim}-D array")
    if x.size == 0:
        raise DspsimInputError(f"{what}: empty array, expected at least 1 element")
    return x


def check_output_path(path: str) -> None:
    """Refuse, before simulating, an output path that cannot be written."""
    writable_file(path, "--output", (".npy",))


def save_output(path: str, y: np.ndarray) -> None:
    try:
        np.save(path, y.astype(np.float32))
    except OSError as e:
        raise DspsimInputError(f"--output {path!r}: cannot write ({e.strerror})") from None


def host_check(direct: np.ndarray, pingpong: np.ndarray, tolerance: float = 1e-6) -> dict:
    """The seed's host check: |direct - pingpong| / |direct| <= 1e-6 element by element."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(direct.astype(np.float64) - pingpong) / np.abs(direct.astype(np.float64))
    rel = np.where(np.isnan(rel), np.inf, rel)  # NaN compares false in C: count it as failing
    worst = float(rel.max()) if rel.size else 0.0
    first_bad = int(np.argmax(rel > tolerance)) if (rel > tolerance).any() else None
    return {
        "max_rel_diff": worst if np.isfinite(worst) else None,
        "passed": first_bad is None,
        "first_mismatch_index": first_bad,
        "tolerance": tolerance,
    }
