"""Sweeps and workloads on a platform of several memories: a column set per memory, named by
it (J6's columns as they were), and the workload summary keyed by the host memory.
"""

from __future__ import annotations

import pytest

from dspsim import simulate
from dspsim.errors import DspsimInputError
from dspsim.study.sweep import build_sweep, read_sweep, run_sweep
from tests.cli_helpers import run_cli

# ------------------------------------------------------------------ sweeps
J6_COLUMNS = [
    "op", "variant", "n", "ddr.latency_cycles", "cycles", "time_us", "ddr_read_bytes",
    "ddr_write_bytes", "core_busy_cycles", "idma0_busy_cycles", "idma1_busy_cycles",
    "ddr_busy_cycles", "ddr_stall_cycles", "idma_in_stall_cycles", "idma_out_stall_cycles",
    "warnings", "hazards", "wall_s", "error",
]


def test_j6_sweep_columns_are_as_they_were():
    assert build_sweep({"ddr.latency_cycles": [50]}, n=4096).columns == J6_COLUMNS


def test_a_sweep_has_the_columns_of_every_memory_and_resumes(two_memories_run, tmp_path):
    path, model, _ = two_memories_run
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


# ------------------------------------------------------------------ workloads
def test_a_workload_from_sram_reports_the_sram_port(two_memories_run, tmp_path, capsys):
    from dspsim.analysis.workload_plots import workload_figure, workload_trace
    from dspsim.study.workload import parse_workload, run_workload, summarise, task_table

    path, model, _ = two_memories_run
    wl = parse_workload({"seed": 1, "stream": [
        {"name": "a", "op": "softmax", "variant": "pingpong", "n": 4096, "period_us": 1000,
         "count": 2}]})
    run = run_workload(wl, model.with_overrides({"host.memory": "sram"}), ddr_profile=True)
    s = summarise(run)
    assert s["ddr"]["memory"] == "sram" and set(s["ddr"]["bytes"]) == {"sram_read",
                                                                       "sram_write"}
    assert s["ddr"]["bytes"]["sram_read"] > 0
    fig = workload_figure(run, task_table(run))
    assert "SRAM path\n(% busy)" in [a.get_ylabel() for a in fig.axes]
    names = {e["name"] for e in workload_trace(run, task_table(run))["traceEvents"]}
    assert "SRAM data path (%)" in names
    spec = tmp_path / "w.toml"
    spec.write_text('seed = 1\n[[stream]]\nname = "a"\nop = "softmax"\nvariant = "pingpong"\n'
                    'n = 4096\nperiod_us = 1000\ncount = 2\n')
    code, out, err = run_cli(capsys, "workload", spec, "--model", path, "--set",
                             "host.memory=sram")
    assert code == 0, err
    mb = s["ddr"]["bytes"]["sram_read"] / 1e6  # 0.0983: three significant digits
    assert f"SRAM port {100 * s['ddr']['utilisation']:.1f} % busy (data path; {mb:.4f} MB read" \
        in out
