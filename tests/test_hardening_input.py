"""Hostile input files: .npz archives and .npy arrays are refused from their headers and zip
directories, in one line, before any data is decompressed or allocated."""

from __future__ import annotations

import struct
import warnings
import zipfile

import numpy as np
import pytest

import dspsim.arrays as arrays
from tests.cli_helpers import one_line, run_cli

_LOCAL_USIZE, _CENTRAL_USIZE = 22, 24  # uncompressed-size fields of the zip headers
_LOCAL_FLAGS, _CENTRAL_FLAGS = 6, 8
_LOCAL_METHOD, _CENTRAL_METHOD = 8, 10


def _values() -> dict[str, np.ndarray]:
    """fc's arrays, the weights longer than zipfile reads ahead (the header is read alone)."""
    return {"weights": np.ones((64, 128), np.int8), "input": np.ones(128, np.int8),
            "bias": np.zeros(64, np.int32)}


def _npy(shape: tuple[int, ...], dtype: str) -> bytes:
    """A .npy header announcing ``shape``, without its data."""
    head = repr({"descr": dtype, "fortran_order": False, "shape": shape})
    pad = 64 - (10 + len(head) + 1) % 64
    text = (head + " " * pad + "\n").encode()
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def _archive(path, members: list[tuple[str, bytes]], method=zipfile.ZIP_STORED):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a duplicate name is what some tests build
        with zipfile.ZipFile(path, "w", compression=method) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


def _patch(path, member: str, local: int, central: int, fmt: str, value: int) -> None:
    """Write ``value`` into a field of ``member``'s local and central zip headers."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        start = zf.start_dir
        struct.pack_into(fmt, data, zf.getinfo(member).header_offset + local, value)
    at = start
    while data[at:at + 4] == b"PK\x01\x02":
        nlen, elen, clen = struct.unpack_from("<HHH", data, at + 28)
        if data[at + 46:at + 46 + nlen].decode() == member:
            struct.pack_into(fmt, data, at + central, value)
        at += 46 + nlen + elen + clen
    path.write_bytes(bytes(data))


def _fc(capsys, path) -> str:
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", path)
    assert code == 2 and one_line(err), err
    return err


def _members(weights: bytes | None = None) -> list[tuple[str, bytes]]:
    out = []
    for name, a in _values().items():
        head = _npy(a.shape, a.dtype.str)
        out.append((f"{name}.npy", head + a.tobytes()))
    if weights is not None:
        out[0] = ("weights.npy", weights)
    return out


def test_a_zip_bomb_is_refused_from_its_headers_before_any_data_is_read(tmp_path, capsys,
                                                                         monkeypatch):
    """40,000 x 40,000 int8 weights (1.6 GB, with the input and bias 1,600,000,384 bytes)
    announced by the header and by the zip entry alike,
    held in a few bytes: refused by the DDR window's size, nothing decompressed."""
    head = _npy((40_000, 40_000), "|i1")
    p = _archive(tmp_path / "bomb.npz", _members(head + b"\0" * 16), zipfile.ZIP_DEFLATED)
    _patch(p, "weights.npy", _LOCAL_USIZE, _CENTRAL_USIZE, "<I", len(head) + 40_000 ** 2)

    def never(*_):
        raise AssertionError("member data read")

    monkeypatch.setattr(arrays, "_npz_data", never)
    err = _fc(capsys, p)
    assert "announce 1,600,000,384 bytes" in err and f"{arrays.max_input_bytes():,}" in err, err


@pytest.mark.parametrize("size_change", [-1, 1, 1 << 30])
def test_a_member_whose_zip_size_disagrees_with_its_header_is_refused(tmp_path, capsys,
                                                                      size_change):
    p = _archive(tmp_path / "x.npz", _members())
    info = zipfile.ZipFile(p).getinfo("weights.npy")
    _patch(p, "weights.npy", _LOCAL_USIZE, _CENTRAL_USIZE, "<I", info.file_size + size_change)
    assert "weights's zip entry holds" in _fc(capsys, p)


def test_an_array_given_twice_is_refused(tmp_path, capsys):
    members = _members()
    p = _archive(tmp_path / "x.npz", [*members, members[1]])
    assert "array 'input' is in the archive twice" in _fc(capsys, p)


def test_an_encrypted_member_is_one_line(tmp_path, capsys):
    p = _archive(tmp_path / "x.npz", _members())
    _patch(p, "bias.npy", _LOCAL_FLAGS, _CENTRAL_FLAGS, "<H", 0x1)
    assert "bias is encrypted" in _fc(capsys, p)


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, 99])
def test_a_compression_numpy_does_not_write_is_one_line(tmp_path, capsys, method):
    p = _archive(tmp_path / "x.npz", _members())
    _patch(p, "input.npy", _LOCAL_METHOD, _CENTRAL_METHOD, "<H", method)
    assert f"compression method {method}; allowed stored or deflated" in _fc(capsys, p)


def test_a_compressed_npz_still_runs(tmp_path, capsys):
    p = tmp_path / "ok.npz"
    np.savez_compressed(p, **_values())
    code, _, err = run_cli(capsys, "run", "--op", "fc", "--input", p)
    assert code == 0, err


def test_an_npy_longer_than_its_header_announces_is_refused(tmp_path, capsys):
    p = tmp_path / "x.npy"
    p.write_bytes(_npy((16,), "<f4") + b"\0" * (4 * 16 + 4))
    code, _, err = run_cli(capsys, "run", "--input", p)
    assert code == 2 and one_line(err) and "announces 64 bytes" in err, err
    assert "holds 68; they must agree" in err, err
