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
