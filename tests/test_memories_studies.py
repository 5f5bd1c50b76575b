"""Sweeps on a platform of several memories: a column set per memory, named by it (J6's
columns as they were).
"""

from __future__ import annotations

import pytest

from dspsim import simulate
from dspsim.errors import DspsimInputError
from dspsim.study.sweep import build_sweep, read_sweep, run_sweep
from tests import two_memories

N = 20_000


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(model file, model, the two-memory run) with the two-memory op registered."""
    d = tmp_path_factory.mktemp("two")
    with two_memories.registered():
        model = two_memories.model(d)
        r = simulate(model, op=two_memories.NAME, variant="direct", n=N, data=False,
                     trace=True, port_log=True)
        yield d / "j6_sram.toml", model, r


# ------------------------------------------------------------------ sweeps
J6_COLUMNS = [
    "op", "variant", "n", "ddr.latency_cycles", "cycles", "time_us", "ddr_read_bytes",
    "ddr_write_bytes", "core_busy_cycles", "idma0_busy_cycles", "idma1_busy_cycles",
    "ddr_busy_cycles", "ddr_stall_cycles", "idma_in_stall_cycles", "idma_out_stall_cycles",
    "warnings", "hazards", "wall_s", "error",
]


def test_j6_sweep_columns_are_as_they_were():
    assert build_sweep({"ddr.latency_cycles": [50]}, n=4096).columns == J6_COLUMNS


def test_a_sweep_has_the_columns_of_every_memory_and_resumes(setup, tmp_path):
    path, model, _ = setup
    s = build_sweep({"host.memory": ["ddr", "sram"]}, n=4096, model=path, fidelity="tile")
    memory = [c for c in s.columns if c.startswith(("ddr_", "sram_"))]
    assert memory == ["ddr_read_bytes", "ddr_write_bytes", "sram_read_bytes",
                      "sram_write_bytes", "ddr_busy_cycles", "sram_busy_cycles",
                      "ddr_stall_cycles", "sram_stall_cycles"]
    out = tmp_path / "s.csv"
    assert run_sweep(s, out).computed == 4
    again = run_sweep(s, out)  # the sidecar of a model with an SRAM reads back
    assert (again.computed, again.resumed) == (0, 4)
    df = read_sweep(out)
    assert list(df.columns) == s.columns
    for row in df.to_dict("records"):
        r = simulate(model.with_overrides({"host.memory": row["host.memory"]}), "softmax",
                     row["variant"], 4096, data=False, fidelity="tile")
        for m in ("ddr", "sram"):
            assert row[f"{m}_read_bytes"] == r.memories[m]["read_bytes"]
            assert row[f"{m}_write_bytes"] == r.memories[m]["write_bytes"]
            assert row[f"{m}_busy_cycles"] == r.memories[m]["busy_cycles"]  # its own port's
            assert row[f"{m}_stall_cycles"] == r.stall_cycles[m]
        idle = "ddr" if row["host.memory"] == "sram" else "sram"
        assert row[f"{idle}_busy_cycles"] == row[f"{idle}_read_bytes"] == 0


def test_a_table_column_that_names_no_memory_is_refused(tmp_path):
    s = build_sweep({"ddr.latency_cycles": [50]}, n=64)
    out = tmp_path / "s.csv"
    run_sweep(s, out)
    text = out.read_text().replace("ddr_stall_cycles", "core_stall_cycles", 1)
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(DspsimInputError, match="'core_stall_cycles' after cycles is not a"):
        read_sweep(tmp_path / "bad.csv")
