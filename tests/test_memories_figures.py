"""Figures, traces and reports of a platform of several memories: a timeline panel pair and a
Perfetto counter pair per memory, named by it; stalls named by the memory they were on. J6
(one memory, ``ddr``) draws as it did: tests/test_timeline*.py hold it.
"""

from __future__ import annotations

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.analysis.engines import RunEngines
from dspsim.analysis.perfetto import trace_events
from dspsim.analysis.stalls import stall_summary
from dspsim.analysis.tiles import report_text
from dspsim.analysis.timeline import compare_figure, timeline_figure
from dspsim.analysis.timeline_memories import ddr_series
from tests import two_memories
from tests.cli_helpers import run_cli
from tests.two_memories import N  # the run the files share: the fixture two_memories_run


@pytest.fixture(scope="module")
def two(two_memories_run):
    return two_memories_run[2]


@pytest.fixture(scope="module")
def on_sram(two_memories_run):
    """The seed's ping-pong with its buffers in SRAM: DDR idle."""
    model = two_memories_run[1].with_overrides({"host.memory": "sram"})
    return simulate(model, variant="pingpong", n=N, data=False, trace=True, port_log=True)


def ylabels(fig):
    return [a.get_ylabel() for a in fig.axes if a.get_visible()]


def legend(fig):
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_the_run_uses_both_memories(two):
    """The fixture is what the tests need: traffic and stalls on both memories."""
    for m in ("ddr", "sram"):
        assert two.memories[m]["read_bytes"] > 0 and two.stall_cycles[m] > 0
        assert len(two.port_logs[m]) > 0
    assert two.port_logs["ddr"] is two.port_log


# ------------------------------------------------------------------ timeline
def test_the_timeline_has_a_panel_pair_per_memory_named_by_it(two):
    fig = timeline_figure(two)
    assert ylabels(fig)[1:] == [
        "DDR data path\n(bytes/cycle)", "DDR requests\nin flight (count)",
        "SRAM data path\n(bytes/cycle)", "SRAM requests\nin flight (count)"]
    keys = legend(fig)
    for entry in ("iDMA input copy (SRAM→TCM)", "core stalled on DDR, SRAM (hatched)",
                  "DDR port peak 0.38814 bytes/cycle", "SRAM port peak 8 bytes/cycle",
                  "read (bytes/cycle)", "requests in flight: core0.idma0"):
        assert entry in keys
    # each panel's peak is its memory's: the SRAM one is 8 bytes/cycle
    assert fig.axes[3].get_ylim() == (0.0, 8.0 * 1.25)
    # only the last panel labels the x axis
    assert [a.get_xlabel() != "" for a in fig.axes[:5]] == [False] * 4 + [True]


def test_a_kernel_names_the_memory_it_stalled_on(two):
    """The kernel that reads SRAM directly is labelled as stalled on SRAM, the one that reads
    DDR as stalled on DDR; a window of the SRAM kernel alone keys only SRAM."""
    trace = two.trace
    ddr_row, sram_row = trace[trace["kind"] == "compute"].itertuples(index=False)
    fig = timeline_figure(two, (ddr_row.start_cycle, ddr_row.end_cycle))
    assert any("stalled on DDR" in t.get_text() for t in fig.axes[0].texts)
    assert "core stalled on DDR (hatched)" in legend(fig)
    fig = timeline_figure(two, (sram_row.start_cycle, sram_row.end_cycle))
    texts = [t.get_text() for t in fig.axes[0].texts]
    share = 100 * sram_row.ddr_stall_cycles / (sram_row.end_cycle - sram_row.start_cycle)
    assert f"vecmaxf: {share:.1f}% of it stalled on SRAM" in texts
    assert "core stalled on SRAM (hatched)" in legend(fig)
    assert not any("DDR" in t for t in texts)


@pytest.mark.parametrize("bins", [1, 7, 600])
def test_each_memory_panel_conserves_its_bytes(two, bins):
    for m in ("ddr", "sram"):
        s = ddr_series(two, 0.0, float(two.cycles), bins, memory=m)
        width = np.diff(s["edges"])
        for way in ("read", "write"):
            moved = float((s[f"{way}_bytes_per_cycle"] * width).sum())
            assert moved == pytest.approx(two.memories[m][f"{way}_bytes"], rel=1e-9, abs=1e-6)
        peak = two.model.memories[m].bytes_per_cycle
        total = s["read_bytes_per_cycle"] + s["write_bytes_per_cycle"]
        assert (total <= peak * (1 + 1e-6)).all()
    assert set(ddr_series(two, 0, two.cycles, 5, "sram")["requests_in_flight"]) == \
        {"core0", "core0.idma0"}


def test_a_run_from_sram_draws_sram_and_says_ddr_was_idle(on_sram):
    fig = timeline_figure(on_sram)
    assert ylabels(fig)[1:] == ["SRAM data path\n(bytes/cycle)",
                                "SRAM requests\nin flight (count)"]
    keys = legend(fig)
    for entry in ("iDMA input copy (SRAM→TCM)", "iDMA output copy (TCM→SRAM)",
                  "SRAM read (bytes/cycle)", "SRAM requests in flight: core0.idma1"):
        assert entry in keys
    assert not any("DDR" in k for k in keys)
    notes = [t.get_text() for t in fig.texts]
    assert any("no requests on DDR (no panel)" in t for t in notes)


def test_compare_draws_each_runs_memories(two, on_sram):
    fig = compare_figure([on_sram, two])
    labels = ylabels(fig)
    assert labels.count("SRAM data path\n(bytes/cycle)") == 2
    assert labels.count("DDR data path\n(bytes/cycle)") == 1
    texts = [t.get_text() for a in fig.axes for t in a.texts]
    assert any(t.startswith("stalled on DDR, SRAM") for t in texts)
    keys = legend(fig)
    assert [k for k in keys if k.startswith("core stalled")] == [
        "core stalled on DDR, SRAM (hatched)"]


# ------------------------------------------------------------------ Perfetto
def test_the_trace_has_a_counter_pair_per_memory(two):
    obj = trace_events(two)
    counters = {}
    for e in obj["traceEvents"]:
        if e["ph"] == "C":
            counters.setdefault(e["name"], []).append(e["args"])
    assert set(counters) == {"DDR bytes in flight", "DDR requests in flight",
                             "SRAM bytes in flight", "SRAM requests in flight",
                             "TCM occupancy (bytes)"}
    engines = RunEngines.of(two)
    for m, label in (("ddr", "DDR"), ("sram", "SRAM")):
        who = {engines.label(w) for w in two.port_logs[m].columns()["requester"]}
        assert set(counters[f"{label} requests in flight"][0]) == who
        assert counters[f"{label} bytes in flight"][-1] == {"bytes": 0.0}  # all done
        assert obj["otherData"][f"{m}_bytes_in_flight"] == "exact: one sample per change"
    sram_bytes = max(a["bytes"] for a in counters["SRAM bytes in flight"])
    assert 0 < sram_bytes <= two.memories["sram"]["read_bytes"]


def test_a_trace_limit_is_shared_by_the_memories(two):
    limit = 400
    obj = trace_events(two, limit)
    assert len(obj["traceEvents"]) <= limit
    names = {e["name"] for e in obj["traceEvents"] if e["ph"] == "C"}
    assert {"DDR bytes in flight", "SRAM bytes in flight"} <= names
    assert any("resampled" in obj["otherData"][f"{m}_requests_in_flight"]
               for m in ("ddr", "sram"))


# ------------------------------------------------------------------ stalls and reports
def test_stalls_are_named_by_the_memory_from_the_runs_counts(two):
    s = stall_summary(two)
    assert s["on_memory"] == {"ddr": two.stall_cycles["ddr"], "sram": two.stall_cycles["sram"]}
    assert s["total"]["wait_ddr_cycles"] == pytest.approx(sum(s["on_memory"].values()), abs=2)
    for m in ("ddr", "sram"):  # each port's own bytes, not every memory's
        moved = two.bytes[f"{m}_read"] + two.bytes[f"{m}_write"]
        assert s["engines"][m]["achieved_bytes_per_cycle"] == pytest.approx(moved / two.cycles)
    text = report_text(two)
    assert (f"the core stalled on ddr {two.stall_cycles['ddr']:,} cycles" in text
            and f"sram {two.stall_cycles['sram']:,} cycles" in text)
    assert "SRAM achieved" in text and "DDR achieved" in text


def test_run_prints_each_memorys_bytes_and_stalls(two_memories_run, capsys):
    path, _, r = two_memories_run
    with two_memories.registered():
        code, out, _ = run_cli(capsys, "run", "--model", path, "--op", two_memories.NAME,
                               "--variant", "direct", "--n", N, "--no-data")
    assert code == 0
    assert f"DDR bytes read {r.bytes['ddr_read']:,}, written 0" in out
    assert f"SRAM bytes read {r.bytes['sram_read']:,}, written 0" in out
    assert (f"core stall cycles: on ddr {r.stall_cycles['ddr']:,}, on sram "
            f"{r.stall_cycles['sram']:,}; idma_in 0, idma_out 0") in out


def test_run_models_prints_a_byte_column_pair_per_memory(two_memories_run, capsys):
    path, model, _ = two_memories_run
    code, out, _ = run_cli(capsys, "run", "--models", f"j6,{path}", "--n", 2000, "--no-data",
                           "--set", "host.memory=ddr")
    assert code == 0
    head, j6_row, sram_row = out.splitlines()[1:4]
    assert head.split()[3:] == ["ddr_read_bytes", "ddr_write_bytes", "sram_read_bytes",
                                "sram_write_bytes", "warnings"]
    want = simulate(model, variant="pingpong", n=2000, data=False)
    assert j6_row.split()[3:] == [f"{want.bytes['ddr_read']:,}",
                                  f"{want.bytes['ddr_write']:,}", "-", "-", "-"]
    assert sram_row.split()[5:7] == ["0", "0"]


def test_requests_waiting_for_a_port_slot_are_shown_as_such(on_sram):
    """Before: ping-pong from an SRAM of 16 request slots drew 64 "SRAM requests in flight"
    (its two channels' 32 each, issued and not done) with nothing saying the port holds 16:
    a dashed line at the slots now, and its key, where the requests exceed them."""
    fig = timeline_figure(on_sram)
    assert "SRAM port slots: 16 (the requests above wait for one)" in legend(fig)
    ax = next(a for a in fig.axes if a.get_ylabel() == "SRAM requests\nin flight (count)")
    level = [y0 for y0, y1 in (line.get_ydata() for line in ax.get_lines()) if y0 == y1]
    assert level == [16]  # the one horizontal line (the others: pass boundaries)
    j6 = simulate(load_model(), n=N, data=False, trace=True, port_log=True)
    assert not any("slots" in k for k in legend(timeline_figure(j6)))  # 64 slots, 64 requests
    assert not any("slots" in k for k in legend(compare_figure([on_sram, j6])))  # no requests
