"""The engines against their closed-form behaviour: DDR port, iDMA channel, core kernels."""

import math
import re

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.errors import DeadlockError
from dspsim.hw.idma import Transfer
from dspsim.kernels.shapes import SEED_SHAPES as KERNELS
from dspsim.kernels.shapes import VECEXPF_MAX, VECMAXF, VECSUM
from dspsim.platform import Platform
from dspsim.run import run_to_completion
from dspsim.ticks import cycles as tick_cycles


def make_dsp(model, fidelity="burst", **overrides):
    """A fresh platform at ``fidelity``; returns its environment and its first core's DSP."""
    env = simpy.Environment()
    model = model.with_overrides(overrides) if overrides else model
    platform = Platform(env, model, data=False, trace=True, fidelity=fidelity)
    return env, platform.dsps[0]


def run_proc(env, dsp, gen):
    out = {}

    def main():
        start = env.now
        out["value"] = yield from gen
        out["cycles"] = tick_cycles(env.now - start)

    run_to_completion(env, dsp.platform, env.process(main()))
    return out


def one_copy(dsp, nbytes):
    src = dsp.ddr.add_block(nbytes, 4096)
    dst = dsp.tm.allocate(nbytes, 0, 128)

    def gen():
        t = yield from dsp.core.idma_copy(0, src, dst, nbytes, "copy_in")
        yield from dsp.core.idma_wait(t, "wait_in")
        return t

    return gen()


def reference_copy_cycles(nbytes, burst, window, latency, cycles_per_byte, port_slots):
    """The channel + FIFO port as a max-plus recursion, written independently of the engine
    (``latency`` and ``cycles_per_byte`` the policy's, quantized to ticks, as the port runs)."""
    sizes = [min(burst, nbytes - off) for off in range(0, nbytes, burst)]
    done, path_free, slots = [], 0.0, [0.0] * port_slots
    for i, b in enumerate(sizes):
        issue = done[i - window] if i >= window else 0.0
        slot = min(slots)
        start = max(issue, slot)
        data_end = max(start, path_free) + b * cycles_per_byte
        path_free = data_end
        done.append(data_end + latency)
        slots[slots.index(slot)] = done[-1]
    return max(done) if done else 0.0


def test_single_transfer_is_setup_latency_plus_bytes_over_bandwidth(j6):
    # window never binds: (max_outstanding - 1) bursts of data cover the latency
    env, dsp = make_dsp(j6, **{"ddr.latency_cycles": 100.0, "ddr.bytes_per_cycle": 2.0,
                               "idma.max_outstanding": 16, "idma.burst_bytes": 64,
                               "idma.setup_cycles": 25.0})
    out = run_proc(env, dsp, one_copy(dsp, 32768))
    assert out["cycles"] == pytest.approx(25 + 100 + 32768 / 2.0)
    assert dsp.port.bytes_read == 32768


def test_single_outstanding_transfer_pays_latency_per_burst(j6):
    env, dsp = make_dsp(j6, **{"ddr.latency_cycles": 100.0, "ddr.bytes_per_cycle": 8.0,
                               "idma.max_outstanding": 1, "idma.burst_bytes": 64,
                               "idma.setup_cycles": 10.0})
    out = run_proc(env, dsp, one_copy(dsp, 4096))
    assert out["cycles"] == pytest.approx(10 + (4096 // 64) * (100 + 64 / 8.0))


@settings(max_examples=60, deadline=None)
@given(
    nbytes=st.integers(1, 20000),
    burst=st.sampled_from([16, 64, 128, 256]),
    window=st.integers(1, 40),
    latency=st.floats(1, 1000),
    bw=st.floats(0.05, 64),
    port_slots=st.integers(1, 64),
)
def test_transfer_matches_max_plus_reference(j6, nbytes, burst, window, latency, bw, port_slots):
    env, dsp = make_dsp(j6, **{"ddr.latency_cycles": latency, "ddr.bytes_per_cycle": bw,
                               "ddr.max_outstanding": port_slots, "idma.max_outstanding": window,
                               "idma.burst_bytes": burst, "idma.setup_cycles": 0.0})
    out = run_proc(env, dsp, one_copy(dsp, nbytes))
    # the model's values as the port runs them: quantized to whole ticks
    policy = dsp.platform.model.ddr.policy
    latency, cpb = policy.latency(False), policy.cycles_per_byte
    expected = reference_copy_cycles(nbytes, burst, window, latency, cpb, port_slots)
    assert out["cycles"] == pytest.approx(expected, rel=1e-9)
    # never faster than the data path, never slower than fully serial bursts
    assert out["cycles"] >= nbytes * cpb + latency - 1e-6
    nb = math.ceil(nbytes / burst)
    assert out["cycles"] <= nb * (latency + burst * cpb) + 1e-6


@pytest.mark.parametrize("n", [64, 6400, 64 * 1000])
def test_direct_vecmaxf_is_iterations_times_stall_plus_issue(j6, n):
    """n a multiple of 2 x lanes: the tail's loads are predicated off (0 bytes)."""
    env, dsp = make_dsp(j6)
    c, d = j6.core, j6.ddr
    x = dsp.ddr.add_block(4 * n, 4096)
    out = run_proc(env, dsp, dsp.core.call("vecmaxf", n, x))
    stall = d.latency_cycles + c.vector_bytes / d.bytes_per_cycle
    main = n // (2 * c.lanes_f32)
    ii = VECMAXF.ii_cycles(c)
    expected = (c.call_overhead_cycles + (1 + 2 * main) * stall + (main + 1) * ii
                + VECMAXF.reduction_ops(c.lanes_f32) * c.alu_latency_cycles)
    assert out["cycles"] == pytest.approx(expected)
    assert dsp.core.ddr_stall_cycles == pytest.approx((1 + 2 * main) * stall)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000, 4096])
def test_tcm_kernel_cost_is_closed_form(j6, n):
    env, dsp = make_dsp(j6)
    buf = dsp.tm.allocate(4 * n, 0, 128)
    for shape, gen in [(VECMAXF, dsp.core.call("vecmaxf", n, buf)),
                       (VECSUM, dsp.core.call("vecsum", n, buf)),
                       (VECEXPF_MAX, dsp.core.call("vecexpf_max", n, buf, buf, max_value=0.0))]:
        out = run_proc(env, dsp, gen)
        c = j6.core
        iters = shape.iterations(n, c.lanes_f32)
        assert out["cycles"] == c.call_overhead_cycles + iters * shape.ii_cycles(c) + \
            shape.reduction_ops(c.lanes_f32) * c.alu_latency_cycles


def test_initiation_intervals_follow_issue_slots(j6):
    c = j6.core
    assert KERNELS["vecmaxf"].ii_cycles(c) == 1  # 2 loads on 2 units, 2 max on 3 slots
    assert KERNELS["vecmul"].ii_cycles(c) == 1
    # 30 vector ops on 3 ALU slots dominate 9 loads/stores on 2 units
    assert KERNELS["vecexpf_max"].ii_cycles(c) == 10
    wider = c.__class__(**{**c.__dict__, "vector_alu_slots": 6})
    assert KERNELS["vecexpf_max"].ii_cycles(wider) == 5  # now the load/store units bind


def test_write_buffer_bounds_posted_stores(j6):
    """vecexpf DDR->DDR: with one write-buffer entry every store waits for the previous one."""
    n = 32 * 50
    cycles = {}
    for entries in (1, 64):
        env, dsp = make_dsp(j6, **{"core.write_buffer_entries": entries})
        x = dsp.ddr.add_block(4 * n, 4096)
        z = dsp.ddr.add_block(4 * n, 4096)
        gen = dsp.core.call("vecexpf_max", n, x, z, max_value=0.0)
        cycles[entries] = run_proc(env, dsp, gen)["cycles"]
        assert dsp.port.bytes_written == 4 * n
    assert cycles[1] >= cycles[64]


def test_deadlock_names_the_waiting_process(j6):
    env, dsp = make_dsp(j6)
    src = dsp.ddr.add_block(64, 4096)
    never = Transfer(1, 7, src, src, 64, env.event())  # a descriptor no channel will run

    def gen():
        yield from dsp.core.idma_wait(never, "wait_in")

    waiting = f"{dsp.core.name} (waiting for {dsp.idma[1].name} #7)"  # the core, channel 1
    with pytest.raises(DeadlockError, match=re.escape(waiting)):
        run_proc(env, dsp, gen())
