"""Reading input arrays and writing output arrays for the command line (.npy, float32).

An input file is checked from its header before any of it is loaded: a regular file, a float32
array of the op's dimension, within what the DSP's DDR window holds (the host allocates the
input and an output of its size there), the file as long as the header announces. A header
claiming 10^10 elements is refused in microseconds, not by a 37 GiB allocation.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write, writable_file

if TYPE_CHECKING:
    import numpy as np

NPY_SUFFIXES = (".npy",)
_HINT = "write one with numpy.save(path, x.astype(numpy.float32))"
# the host's input and output arrays, each on a 4096-byte boundary, and its 64-byte parameter
# block, in the DSP's DDR window, as dspsim.run does
HOST_ALIGN_BYTES = 4096
_PARAM_BLOCK_BYTES = 64
# J6's 32-bit window onto DDR (hbDSPAddrMap addresses): what the host's arrays must fit
DDR_WINDOW_BYTES = 0x8000_0000
NpyHeader = tuple[tuple[int, ...], bool, "np.dtype"]  # shape, fortran_order, dtype


def ddr_window_bytes(input_bytes: int) -> int:
    """Bytes of the DSP's DDR window one run takes: its input and output arrays, each on the
    host's 4096-byte boundary, and the 64-byte parameter block."""
    return ddr_layout_bytes([input_bytes])


def ddr_layout_bytes(input_bytes: Iterable[int]) -> int:
    """Bytes of the DSP's DDR window runs take whose buffers are allocated together (a
    workload's streams): each run's input, output and parameter block after the previous run's,
    every block on the host's 4096-byte boundary."""
    end = 0
    for size in input_bytes:
        for block in (int(size), int(size), _PARAM_BLOCK_BYTES):
            end = -(-end // HOST_ALIGN_BYTES) * HOST_ALIGN_BYTES + block
    return end


def max_input_bytes() -> int:
    """The largest float32 input (bytes) whose input and output arrays fit the DDR window."""
    per_array = (DDR_WINDOW_BYTES - _PARAM_BLOCK_BYTES) // 2
    return per_array // HOST_ALIGN_BYTES * HOST_ALIGN_BYTES


def _first_line(e: BaseException, empty: str = "") -> str:
    """An exception's message's first line (empty: ``empty``, else its type's name)."""
    return str(e).splitlines()[0] if str(e) else empty or type(e).__name__


def _npy_header(f, what: str, not_npy: str, hint: str = _HINT) -> tuple[NpyHeader, int]:
    """(shape, fortran_order, dtype) from the header of the .npy file ``f`` (at its start), and
    its data's offset; ``not_npy``: the message when ``f`` is not a .npy file at all."""
    from tokenize import TokenError  # numpy tokenizes the header: an open bracket at its end

    from numpy.lib import format as npy

    if f.read(6) != b"\x93NUMPY":
        raise DspsimInputError(not_npy)
    f.seek(0)
    try:
        version = npy.read_magic(f)
        if version in ((1, 0), (2, 0)):
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            return read(f, max_header_size=10_000), f.tell()
    except (ValueError, OSError, EOFError, SyntaxError, TokenError) as e:
        reason = _first_line(e)
        if " object at 0x" in reason or isinstance(e, TokenError):  # say what it means
            reason = "its header is not a dictionary of literals"
        raise DspsimInputError(f"{what}: not a readable .npy header ({reason}); {hint}") from None
    raise DspsimInputError(f"{what}: .npy format version {version} is not supported; {hint}")


def load_input(path: str, ndim: int | tuple[int, ...] = 1) -> np.ndarray:
    """An ``ndim``-D float32 array from a .npy file; NaN and inf are allowed (they are
    reported). The header is checked before anything is allocated."""
    import numpy as np

    what = f"--input {path!r}"
    st = _input_stat(path, what, ".npy")
    try:
        with open(path, "rb") as f:
            (shape, fortran, dtype), offset = _npy_header(f, what, f"{what}: not a .npy file; "
                                                          f"{_HINT}")
            _check_array(shape, dtype, what, ndim)
            count = math.prod(shape)
            nbytes = count * dtype.itemsize
            if nbytes > max_input_bytes():
                raise DspsimInputError(
                    f"{what}: shape {shape} is {nbytes:,} bytes; the input and output arrays "
                    f"must fit the DSP's DDR window: at most {max_input_bytes():,} bytes "
                    f"({max_input_bytes() // 4:,} float32) each")
            if st.st_size != offset + nbytes:
                raise DspsimInputError(
                    f"{what}: {'truncated' if st.st_size < offset + nbytes else 'size'}: the "
                    f"header announces {nbytes:,} bytes of data, the file holds "
                    f"{max(0, st.st_size - offset):,}; they must agree")
            data = f.read(nbytes)
        x = np.frombuffer(data, dtype=dtype, count=count)
        x = x.reshape(shape, order="F" if fortran else "C").copy()
    except DspsimInputError:
        raise
    except (OSError, ValueError, EOFError) as e:
        reason = _first_line(e)
        raise DspsimInputError(f"{what}: not a readable .npy array ({reason}); {_HINT}") from None
    return x


def _input_stat(path: str | Path, what: str, kind: str) -> os.stat_result:
    """The stat of an input file that must be a regular file (``kind``: .npy or .npz)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise DspsimInputError(f"{what}: no such file") from None
    except OSError as e:
        raise DspsimInputError(f"{what}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise DspsimInputError(f"{what}: is a directory, expected a {kind} file")
    if not stat.S_ISREG(st.st_mode):
        raise DspsimInputError(f"{what}: not a regular file (a device, FIFO or socket)")
    return st


def _check_array(shape: tuple[int, ...], dtype: Any, what: str,
                 ndim: int | tuple[int, ...]) -> None:
    """A non-empty ``ndim``-D float32 array's shape and dtype, else a one-line error."""
    import numpy as np

    dims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if dtype != np.float32:
        raise DspsimInputError(f"{what}: dtype {dtype}, expected float32 (x.astype(numpy.float32))")
    if len(shape) not in dims:
        raise DspsimInputError(f"{what}: shape {shape}, expected a "
                               f"{' or '.join(f'{d}-D' for d in dims)} array")
    if math.prod(shape) == 0:
        raise DspsimInputError(f"{what}: empty array, expected at least 1 element")


def check_input_array(x: np.ndarray, what: str, ndim: int | tuple[int, ...] = 1) -> np.ndarray:
    """``x`` if it is a non-empty ``ndim``-D float32 array, else a one-line error naming
    ``what``."""
    import numpy as np

    x = np.asarray(x)
    _check_array(x.shape, x.dtype, what, ndim)
    return x


def check_output_path(path: str) -> None:
    """Refuse, before simulating, an output path that cannot be written (``.npy`` in any
    case)."""
    writable_file(path, "--output", NPY_SUFFIXES)


def save_output(path: str, y: np.ndarray) -> None:
    """Write ``y`` as float32 (an int8 or uint8 output as it is) to exactly ``path`` (numpy
    would append ``.npy`` to a name that does not end in lower-case ``.npy``), atomically."""
    import numpy as np

    data = y if y.dtype in (np.int8, np.uint8) else y.astype(np.float32)
    # numpy writes a real file with ndarray.tofile, whose errors carry no errno ("20000 requested
    # and 224 written"): through a plain writer (an object with only ``write``, which numpy does
    # not recognise as a file) it writes in chunks and a full disk or a file-size limit is
    # reported as such
    atomic_write(path, lambda f: np.save(SimpleNamespace(write=f.write), data,
                                         allow_pickle=False), "--output")


def host_check(direct: np.ndarray, pingpong: np.ndarray, tolerance: float = 1e-6) -> dict:
    """The seed's host check: |direct - pingpong| / |direct| <= 1e-6 element by element."""
    import numpy as np

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


# ------------------------------------------------------------------ .npz archives
# an .npz is a zip archive of .npy members, as numpy.savez (stored) and numpy.savez_compressed
# (deflated) write it; every member's .npy header and zip entry are checked before any data is
# decompressed, so a small archive announcing gigabytes is refused from its directory
_NPZ_COMPRESSIONS = {0: "stored", 8: "deflated"}
_NPZ_FILE_MAX_BYTES = 1 << 31
_NPZ_CHUNK_BYTES = 1 << 24
# zipfile parses the whole central directory into objects (some 8 bytes of memory per byte):
# numpy.savez's directory of a few arrays takes a few hundred bytes
_NPZ_DIRECTORY_MAX_BYTES = 1 << 20
_ZIP_END_RECORD, _ZIP_END_MAX_BYTES = b"PK\x05\x06", 22 + 0xFFFF  # the record and its comment


def _check_npz_directory(path: str, size: int, what: str) -> None:
    """Refuse an archive whose central directory (its size in the end record, read before
    zipfile parses it) is larger than a few arrays' could be, or in the zip64 form."""
    import struct

    with open(path, "rb") as f:
        f.seek(max(0, size - _ZIP_END_MAX_BYTES))
        tail = f.read()
    at = tail.rfind(_ZIP_END_RECORD)
    if at < 0 or at + 22 > len(tail):
        return  # not a zip: zipfile says so
    entries, directory = struct.unpack_from("<HI", tail, at + 10)
    if entries == 0xFFFF or directory > _NPZ_DIRECTORY_MAX_BYTES:
        raise DspsimInputError(
            f"{what}: its zip directory holds {entries:,}{' or more' if entries == 0xFFFF else ''}"
            f" entries in {directory:,} bytes; an "
            f".npz of a few arrays holds at most {_NPZ_DIRECTORY_MAX_BYTES:,} bytes of it")


def _npz_infos(zf, what: str) -> dict:
    """The archive's members by array name (the member name without ``.npy``): refused, in one
    line, a name given twice, an encrypted member, and a compression numpy does not write."""
    infos: dict = {}
    for info in zf.infolist():
        name = info.filename.removesuffix(".npy")
        if name in infos:
            raise DspsimInputError(f"{what}: array {name!r} is in the archive twice; each array "
                                   "once")
        if info.flag_bits & 0x1:
            raise DspsimInputError(f"{what}: {name} is encrypted; expected an unencrypted "
                                   ".npz (numpy.savez or numpy.savez_compressed)")
        if info.compress_type not in _NPZ_COMPRESSIONS:
            raise DspsimInputError(
                f"{what}: {name} uses zip compression method {info.compress_type}; allowed "
                f"{' or '.join(_NPZ_COMPRESSIONS.values())} (numpy.savez or "
                "numpy.savez_compressed)")
        infos[name] = info
    return infos


def _npz_header(zf, info, what: str, hint: str) -> NpyHeader:
    """The member's .npy header, read without decompressing its data, and its zip entry's
    uncompressed size checked against the bytes the header announces."""
    name = info.filename.removesuffix(".npy")
    with zf.open(info) as f:
        (shape, fortran, dtype), offset = _npy_header(f, f"{what}: {name}",
                                                      f"{what}: {name} is not a .npy array", hint)
    nbytes = math.prod(shape) * dtype.itemsize
    if info.file_size != offset + nbytes:
        raise DspsimInputError(
            f"{what}: {name}'s zip entry holds {max(0, info.file_size - offset):,} bytes of "
            f"data, its header announces {nbytes:,} (shape {shape}, {dtype}); they must agree")
    return shape, fortran, dtype


def _npz_data(zf, info, header: NpyHeader, what: str) -> np.ndarray:
    import numpy as np

    shape, fortran, dtype = header
    nbytes = math.prod(shape) * dtype.itemsize
    out = np.empty(math.prod(shape), dtype)
    view = out.view(np.uint8)
    done = 0
    with zf.open(info) as f:  # decompressed straight into the array, a chunk at a time
        f.seek(info.file_size - nbytes)
        while done < nbytes:
            chunk = f.read(min(nbytes - done, _NPZ_CHUNK_BYTES))
            if not chunk:
                raise DspsimInputError(f"{what}: {info.filename} is truncated ({done:,} of "
                                       f"{nbytes:,} bytes)")
            view[done:done + len(chunk)] = np.frombuffer(chunk, np.uint8)
            done += len(chunk)
    return out.reshape(shape, order="F" if fortran else "C")


def read_npz_arrays(path: str, check: Callable[[dict[str, NpyHeader]], None], hint: str
                    ) -> dict[str, np.ndarray]:
    """The arrays of the .npz file ``path``. Every member's header is read first and passed to
    ``check`` (the op's names, dtypes and shapes; it raises a one-line error); the data, at most
    what the DSP's DDR window holds in all, is decompressed only then."""
    import zipfile

    what = f"--input {path!r}"
    st = _input_stat(path, what, ".npz")
    if st.st_size > _NPZ_FILE_MAX_BYTES:
        raise DspsimInputError(f"{what}: {st.st_size:,} bytes; at most {_NPZ_FILE_MAX_BYTES:,}")
    try:
        _check_npz_directory(path, st.st_size, what)
        with zipfile.ZipFile(path) as zf:
            infos = _npz_infos(zf, what)
            headers = {n: _npz_header(zf, i, what, hint) for n, i in infos.items()}
            check(headers)
            total = sum(math.prod(s) * d.itemsize for s, _, d in headers.values())
            if total > max_input_bytes():
                raise DspsimInputError(
                    f"{what}: its arrays announce {total:,} bytes; the input must fit the "
                    f"DSP's DDR window: at most {max_input_bytes():,} bytes")
            return {n: _npz_data(zf, infos[n], headers[n], what) for n in headers}
    except DspsimInputError:
        raise
    except zipfile.BadZipFile as e:
        raise DspsimInputError(f"{what}: not an .npz file ({_first_line(e, 'not a zip archive')}"
                               f"); {hint}") from None
    except (ValueError, OSError, EOFError, RuntimeError, NotImplementedError) as e:
        raise DspsimInputError(f"{what}: not a readable .npz file ({_first_line(e)}); {hint}"
                               ) from None
