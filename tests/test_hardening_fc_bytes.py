"""The fully connected op counts every array that crosses a memory: the weights as the variant
reads them, the input and the bias read from the host's buffer, the output written back; its
bounds give the same traffic, memory by memory, to the byte."""

from __future__ import annotations

import pytest

from dspsim import load_model, simulate
from dspsim.ops.registry import get_op

SHAPES = [(64, 96), (130, 300), (7, 33), (1, 1), (33, 17)]


def _traffic_agrees(model, variant, shape):
    r = simulate(model, "fc", variant, shape=shape, data=False)
    b = get_op("fc").bounds(model, variant, shape)
    assert b["traffic_bytes"] == r.bytes
    assert b["ddr_read_bytes"] == sum(v for k, v in r.bytes.items() if k.endswith("_read"))
    assert b["ddr_write_bytes"] == sum(v for k, v in r.bytes.items() if k.endswith("_write"))
    return r


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("variant", ["pingpong", "direct"])
@pytest.mark.parametrize("model_name", ["j6", "ameba_hifi5"])
def test_bounds_traffic_is_the_simulated_traffic(model_name, variant, shape):
    r = _traffic_agrees(load_model(model_name), variant, shape)
    host = "ddr" if model_name == "j6" else "psram"
    out_depth, in_depth = shape
    # the input and the bias are read, the output written, besides the weights
    assert r.bytes[f"{host}_read"] >= out_depth * in_depth + in_depth + 4 * out_depth
    assert r.bytes[f"{host}_write"] == out_depth


@pytest.mark.parametrize("variant, where, prefetch", [
    ("pingpong", "sram", True), ("direct", "sram", True), ("direct", "sram", False),
    ("direct", "host", False), ("direct", "tcm", True)])
def test_weights_elsewhere_are_counted_in_their_memory(variant, where, prefetch):
    model = load_model("ameba_hifi5").with_overrides(
        {"fc.weights": where, "dcache.prefetch_next_line": prefetch})
    for shape in SHAPES:
        r = _traffic_agrees(model, variant, shape)
        out_depth, in_depth = shape
        if where != "host":  # the host's memory carries the input, bias and output only
            assert r.bytes["psram_read"] == in_depth + 4 * out_depth
        assert r.bytes["sram_read"] >= (out_depth * in_depth if where == "sram" else 0)


def test_the_copies_outside_the_span_leave_its_figures_alone():
    """The set-up and write-back copies are outside the timed span: the span and the engines'
    busy cycles within it are those of the loop alone (the port carries the weights' bytes
    only, one 128-byte iDMA burst per transaction), the copies' time is the RPC's."""
    m = load_model("ameba_hifi5")
    r = simulate(m, "fc", "pingpong", shape=(512, 768), data=False)
    assert r.cycles == 475_915  # the model's prediction (the example measured 478,885)
    psram = m.memories["psram"]
    assert m.idma.burst_bytes == 128
    assert r.busy_cycles["psram"] == pytest.approx(
        512 * 768 // 128 * psram.policy.request_cycles(128, False))
    for engine, busy in r.busy_cycles.items():
        assert busy <= r.cycles, engine
    assert r.bytes["psram_read"] == 512 * 768 + 768 + 4 * 512
