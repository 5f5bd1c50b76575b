"""Refusals name the real bound: a tile key's allowed range is the DataRAM's free space, and
``reproduce`` on a platform whose document figures it does not have says so."""

from __future__ import annotations

import pytest

from dspsim.config import load_model
from tests.cli_helpers import one_line, run_cli


@pytest.mark.parametrize("extra", [[], ["--set", "tcm.reserved_bytes=32768"]])
@pytest.mark.parametrize("key", ["softmax.tile_bytes", "layernorm.tile_bytes"])
def test_a_tile_refusal_names_the_free_space_and_its_maximum_runs(capsys, key, extra):
    model = load_model("j6")
    reserved = int(extra[1].split("=")[1]) if extra else model.tcm.reserved_bytes
    free = model.tcm.bank_bytes - reserved
    op = key.split(".")[0]
    base = ["run", "--op", op, "--no-data", *extra]
    base += ["--n", "100000"] if op == "softmax" else ["--shape", "64,256"]
    for tile in (free + 4, 250_000 // 4 * 4 + free % 4, model.tcm.bank_bytes, 300_000):
        if tile <= free:
            continue
        code, _, err = run_cli(capsys, *base, "--set", f"{key}={tile}")
        assert code == 2 and one_line(err), err
        assert f"allowed 4 to {free}" in err and f"= {free} bytes" in err, err
    code, _, err = run_cli(capsys, *base, "--set", f"{key}={free}")
    assert code == 0, err


@pytest.mark.parametrize("argv", [["--model", "ameba_hifi5"], ["--models", "j6,ameba_hifi5"],
                                  ["--model", "ameba_hifi5", "--op", "softmax"]])
def test_reproduce_on_another_platform_names_the_platform_of_the_figures(capsys, argv):
    code, out, err = run_cli(capsys, "reproduce", "--no-data", *argv)
    assert code == 2 and one_line(err) and out == "", err
    assert "measured on j6" in err and "'ameba_hifi5' is not a model of j6" in err, err
    assert "no document figures for this platform" in err and "iDMA" not in err, err


def test_reproduce_runs_on_a_model_inheriting_from_the_platform(tmp_path, capsys):
    m = tmp_path / "mine.toml"
    m.write_text('base = "j6"\n[model]\nname = "mine"\n')
    code, out, err = run_cli(capsys, "reproduce", "--no-data", "--json", "--model", m)
    assert code == 0 and err == "", err
    assert '"pingpong"' in out and '"direct"' in out


def test_reproduce_prints_a_model_name_escaped(tmp_path, capsys):
    m = tmp_path / "evil.toml"
    m.write_text('base = "j6"\n[model]\nname = "evil\\u001b[2J\\r\\nname"\n')
    code, out, err = run_cli(capsys, "reproduce", "--no-data", "--model", m)
    assert code == 0, err
    assert "\x1b" not in out and "\r" not in out
    assert out.splitlines()[0].startswith("softmax of 100,000 float32 on evil\\x1b[2J\\r\\nname")


def test_an_exception_in_a_message_is_one_line():
    """text.one_line, which every message quoting an exception (optimize's refusals, a sweep
    point's error, the dask scheduler's, a broken worker pool's) goes through."""
    from dspsim import text

    assert text.one_line(OSError("no route\n  to host\t(113)")) == "no route to host (113)"
    assert text.one_line(TimeoutError()) == "TimeoutError"
    assert text.one_line(ValueError(" \n "), "no message") == "no message"
    assert text.one_line(KeyError("a")) == "'a'"


@pytest.mark.parametrize("key, value, bound", [
    ("softmax.tile_bytes", 2**31, "allowed range is 4 to 1073741824"),
    ("ddr.latency_cycles", 2e6, "allowed range is 0 to 1000000"),
    ("ddr.latency_cycles", 0, "up to 1000000)")])
def test_an_out_of_range_override_names_its_bound_exactly(key, value, bound):
    """Before: the bound was printed to 6 digits, "4 to 1.07374e+09", which is not the bound
    (1,073,741,824 is allowed), and "up to 1e+06" where `dspsim keys` says 1000000."""
    with pytest.raises(ValueError) as e:
        load_model("j6").with_overrides({key: value})
    assert bound in str(e.value), str(e.value)
