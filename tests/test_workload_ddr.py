"""A workload whose streams cannot fit the DSP's DDR window is refused before it runs, naming
the stream: one stream too large, or streams too large together (each stream's buffers stay
allocated for the whole run)."""

import random

import pytest
import simpy

from dspsim.arrays import DDR_WINDOW_BYTES, ddr_layout_bytes, ddr_window_bytes
from dspsim.config import load_model
from dspsim.errors import DspsimInputError
from dspsim.host.window import largest_first_dim
from dspsim.ops import get_op
from dspsim.platform import Platform
from dspsim.study.workload import load_workload, run_workload
from tests.cli_helpers import one_line, run_cli

LARGEST_N = largest_first_dim(get_op("softmax"), (1,))


def stream(name, op="softmax", size="n = 1000", variant="pingpong"):
    return (f'[[stream]]\nname = "{name}"\nop = "{op}"\nvariant = "{variant}"\n{size}\n'
            "period_us = 100\ncount = 2\n")


@pytest.mark.parametrize("text, named", [
    (stream("small") + stream("huge", size=f"n = {LARGEST_N + 1}"), "huge"),
    (stream("rows", op="layernorm", variant="direct", size="shape = [600000, 1000]"), "rows"),
    (stream("a", size="n = 150000000") + stream("b", size="n = 150000000"), "b"),
    (stream("a", size="n = 90000000") + stream("b", size="n = 90000000")
     + stream("c", size="n = 90000000"), "c"),
])
def test_streams_that_cannot_fit_are_refused_before_running_naming_the_stream(
        tmp_path, capsys, text, named):
    """Before: "b output of 600000000 bytes does not fit ddr" from inside the run, naming
    neither the workload nor the stream."""
    w = tmp_path / "w.toml"
    w.write_text(text)
    code, out, err = run_cli(capsys, "workload", w, "--set", "core.count=2")
    assert code == 2 and one_line(err) and out == "", err
    assert f"stream {named!r}" in err and "DDR" in err and str(w) in err, err
    with pytest.raises(DspsimInputError, match=f"stream {named!r}"):
        load_workload(w)


def test_the_largest_stream_that_fits_is_accepted(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text(stream("edge", size=f"n = {LARGEST_N}"))
    assert load_workload(w).streams[0].shape == (LARGEST_N,)


def test_the_layout_is_the_engines():
    """ddr_layout_bytes is where the engine's allocations end (each stream's input, output and
    parameter block in stream order, on the host's boundary), exactly, on round and odd
    sizes; one run's is ddr_window_bytes."""
    rng = random.Random(7)
    cases = [[4096], [4096, 4096], [4], [4100, 8, 65536 * 4]] + [
        [4 * rng.randint(1, 300_000) for _ in range(rng.randint(1, 6))] for _ in range(20)]
    for sizes in cases:
        ddr = Platform(simpy.Environment(), load_model(), data=False).ddr
        first = None
        for k, size in enumerate(sizes):
            for block in (size, size, 64):  # input, output, parameter block
                ptr = ddr.add_block(block, 4096, f"stream {k}")
                first = ptr.addr if first is None else first
        assert ddr._next - first == ddr_layout_bytes(sizes)
        assert ddr_layout_bytes(sizes[:1]) == ddr_window_bytes(sizes[0])


def test_a_workload_that_fits_still_runs(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text(stream("a") + stream("b", size="n = 2048"))
    run = run_workload(load_workload(w), load_model())
    assert len(run.tasks) == 4 and DDR_WINDOW_BYTES > 0


@pytest.mark.parametrize("jobs", [1, 2])
def test_port_busy_is_the_ports_own_count_on_a_transactions_memory(jobs):
    """Before: the host memory's busy cycles were its bytes at the path's rate as if one read
    (policy.data_cycles of them all); a transactions memory (ameba_hifi5's PSRAM) pays each
    request's command and hold clocks, and writes differ: a task of fc alone showed 406,323
    busy cycles where its port, as `dspsim run` reports it (`memories`), counted 474,618."""
    from dspsim import simulate
    from dspsim.study.workload import parse_workload

    model = load_model("ameba_hifi5")
    alone = simulate(model, op="fc", fidelity="tile", data=False)
    count = 40  # periods far apart: each task alone on an idle platform; 2 parts with jobs=2
    wl = parse_workload({"seed": 1, "stream": [
        {"name": "fc", "op": "fc", "period_us": 10000, "count": count}]}, "fc")
    run = run_workload(wl, model, jobs=jobs)
    port = alone.memories["psram"]["busy_cycles"]  # rounded to a cycle
    assert run.ddr_busy_cycles == pytest.approx(count * port, abs=count / 2)
    assert run.ddr_bytes["psram_read"] == count * alone.bytes["psram_read"]
