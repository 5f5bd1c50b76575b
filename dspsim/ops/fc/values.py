"""The fully connected op's values: weights, input and bias, packed into the host's buffer, and
read from an ``.npz`` file.

The host's input buffer (in ``host.memory``) holds, in order: a header of two little-endian
uint32 (``OUT``, ``IN``), then at byte :data:`WEIGHTS_OFFSET` the int8 weights ``[OUT, IN]``
row by row (rounded up to whole groups of four rows, the extra rows zero: the kernel reads
whole groups), then the int8 input ``[IN]`` and the int32 bias ``[OUT]``, each on a 4-byte
boundary. The output buffer holds the int8 result ``[OUT]``.

An ``.npz`` input (``--input F.npz``, ``numpy.savez(F, weights=W, input=x, bias=b)``) must hold
exactly ``weights`` (2-D int8 ``[OUT, IN]``), ``input`` (1-D int8 ``[IN]``) and ``bias`` (1-D int32
``[OUT]``). Each member's header is checked before its data is read (no pickles, no
allocation larger than the header announces and the file holds).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.arrays import read_npz_arrays
from dspsim.errors import DspsimInputError
from dspsim.kernels.fc_s8 import padded_bytes
from dspsim.ops.base import align_up

WEIGHTS_OFFSET = 128
ARRAYS = {"weights": (np.int8, 2), "input": (np.int8, 1), "bias": (np.int32, 1)}
_HINT = ("write one with numpy.savez(path, weights=W.astype(numpy.int8), "
         "input=x.astype(numpy.int8), bias=b.astype(numpy.int32))")


def layout(shape: tuple[int, int]) -> dict[str, int]:
    """Byte offsets of the packed buffer's parts, and its size."""
    out_depth, in_depth = shape
    x_off = align_up(WEIGHTS_OFFSET + padded_bytes(out_depth, in_depth), 4)
    bias_off = align_up(x_off + in_depth, 4)
    return {"weights": WEIGHTS_OFFSET, "input": x_off, "bias": bias_off,
            "bytes": bias_off + 4 * out_depth}


def pack(values: dict[str, np.ndarray]) -> np.ndarray:
    """The host buffer's bytes for checked ``values``."""
    out_depth, in_depth = values["weights"].shape
    lay = layout((out_depth, in_depth))
    buf = np.zeros(lay["bytes"], np.uint8)
    buf[:8] = np.array([out_depth, in_depth], "<u4").view(np.uint8)
    w = values["weights"].reshape(-1).view(np.uint8)
    buf[lay["weights"]:lay["weights"] + w.size] = w
    buf[lay["input"]:lay["input"] + in_depth] = values["input"].view(np.uint8)
    buf[lay["bias"]:lay["bias"] + 4 * out_depth] = values["bias"].astype("<i4").view(np.uint8)
    return buf


def unpack(buf: np.ndarray) -> dict[str, np.ndarray]:
    """Views of the weights, input and bias in a packed buffer."""
    out_depth, in_depth = (int(v) for v in np.asarray(buf[:8], np.uint8).view("<u4"))
    lay = layout((out_depth, in_depth))
    return {
        "weights": buf[lay["weights"]:lay["weights"] + out_depth * in_depth]
        .view(np.int8).reshape(out_depth, in_depth),
        "input": buf[lay["input"]:lay["input"] + in_depth].view(np.int8),
        "bias": buf[lay["bias"]:lay["bias"] + 4 * out_depth].view("<i4"),
    }


def _check_names(names: set[str], what: str) -> None:
    missing = [k for k in ARRAYS if k not in names]
    if missing:
        raise DspsimInputError(f"{what}: missing array {missing[0]!r}; expected exactly "
                               f"weights, input and bias; {_HINT}")
    extra = sorted(names - set(ARRAYS))
    if extra:
        raise DspsimInputError(f"{what}: unexpected array {extra[0]!r}; expected exactly "
                               "weights, input and bias")


def check_values(values: Any, what: str = "fc input") -> dict[str, np.ndarray]:
    """``values`` (a mapping with ``weights``, ``input``, ``bias``) checked: dtypes, dimensions
    and sizes that agree; a one-line error naming what is wrong otherwise."""
    if not hasattr(values, "keys"):
        raise DspsimInputError(f"{what}: expected arrays weights, input and bias; {_HINT}")
    _check_names(set(values.keys()), what)
    out: dict[str, np.ndarray] = {}
    for name, (dtype, ndim) in ARRAYS.items():
        a = np.asarray(values[name])
        if a.dtype != dtype:
            raise DspsimInputError(f"{what}: {name} is {a.dtype}, expected "
                                   f"{np.dtype(dtype).name}; {_HINT}")
        if a.ndim != ndim or a.size == 0:
            raise DspsimInputError(f"{what}: {name} has shape {a.shape}, expected a non-empty "
                                   f"{ndim}-D array")
        out[name] = np.ascontiguousarray(a)
    out_depth, in_depth = out["weights"].shape
    if out["input"].shape != (in_depth,):
        raise DspsimInputError(f"{what}: input has {out['input'].size} values, the weights "
                               f"{in_depth} columns; they must agree")
    if out["bias"].shape != (out_depth,):
        raise DspsimInputError(f"{what}: bias has {out['bias'].size} values, the weights "
                               f"{out_depth} rows; they must agree")
    return out


def _check_headers(headers: dict[str, Any], what: str) -> None:
    """The archive's names, dtypes and dimensions, from its members' headers alone."""
    _check_names(set(headers), what)
    for name, (dtype, ndim) in ARRAYS.items():
        shape, _, got = headers[name]
        if got != dtype or len(shape) != ndim:
            raise DspsimInputError(
                f"{what}: {name} is a {len(shape)}-D {got} array, expected {ndim}-D "
                f"{np.dtype(dtype).name}; {_HINT}")


def read_npz(path: str) -> dict[str, np.ndarray]:
    """``weights``, ``input`` and ``bias`` from an ``.npz`` file, checked (every header
    before any data is read: :func:`dspsim.arrays.read_npz_arrays`)."""
    what = f"--input {path!r}"
    values = read_npz_arrays(path, lambda headers: _check_headers(headers, what), _HINT)
    return check_values(values, what)
