"""A core_local memory (the ESP32-S3's internal SRAM, on the core's own bus as a DataRAM) costs
a kernel no request, as it costs a copy loop none: its latency and bandwidth (the GDMA's path)
cannot move a kernel reading it, and the core never stalls on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dspsim import load_model
from dspsim.run import simulate

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def esp():
    return load_model(ROOT / "models" / "esp32s3.toml")


def _fc(m):
    return simulate(m, "fc", "direct", shape=(64, 768), data=False)


@pytest.mark.parametrize("latency, bandwidth", [(1.0, 2.0), (10.0, 16.0), (7.3, 3.0)])
def test_a_kernel_on_a_core_local_memory_ignores_its_port(esp, latency, bandwidth):
    base = _fc(esp)
    other = _fc(esp.with_overrides({"sram.latency_cycles": latency,
                                    "sram.bytes_per_cycle": bandwidth}))
    assert other.cycles == base.cycles
    assert base.stall_cycles.get("sram", 0.0) == 0.0


def test_the_same_memory_through_its_port_stalls(esp):
    """Control: core_local false, the kernel's loads go to the port and pay its round trips."""
    local = _fc(esp)
    ported = _fc(esp.with_overrides({"sram.core_local": False}))
    assert ported.stall_cycles["sram"] > 0
    assert ported.cycles > local.cycles


@pytest.mark.parametrize("op, variant, shape", [
    ("softmax", "direct", (1000,)), ("layernorm", "direct", (4, 24)),
    ("rmsnorm", "direct", (5, 538)), ("fc", "direct", (25, 785)),
])
def test_the_bounds_of_a_direct_run_on_a_core_local_memory_cost_no_request(esp, op, variant,
                                                                           shape):
    """The closed forms agree: no traffic on the SRAM's port beyond the run's own, the lower
    bound at most the run, the estimate the kernels' loop cycles (the run, as in TCM)."""
    from dspsim.ops import get_op

    r = simulate(esp, op, variant, shape=shape, data=False)
    b = get_op(op).bounds(esp, variant, shape)
    traffic = b.get("traffic_bytes", {"sram_read": b["ddr_read_bytes"],
                                      "sram_write": b["ddr_write_bytes"]})
    assert (traffic["sram_read"], traffic["sram_write"]) == (r.bytes["sram_read"],
                                                             r.bytes["sram_write"])
    assert b["lower_bound_cycles"] <= r.cycles == b["estimate_cycles"]
