"""``core.write_buffer_entries`` acts where the core only stores to an uncached memory: the copy
op's memcpy from TCM to DDR. The cycles follow the recurrence of posted stores drained by the
copy's closing ``MEMW``, the bounds stay below the run, and calibrate refuses to fit a key that
changes no measurement."""

import pytest

from dspsim import DspsimInputError, simulate
from dspsim.kernels.memcpy import MEMCPY, memcpy_words
from dspsim.ops import get_op
from dspsim.study.calibrate import calibrate, parse_measurement

ENTRIES = (1, 2, 8, 32, 64, 128)
TCM_TO_DDR = {"copy.src": "tcm", "copy.dst": "ddr"}


def posted_stores_cycles(model, nbytes):
    """memcpy TCM -> DDR, the core alone on the port, then ``MEMW``: store i leaves the core at
    the end of its iteration, once the buffer has room (store i - E done); on the port it
    takes a slot (that of store i - m free), crosses the path after the store before it in
    b / B, and is done L later (L and 1 / B the port's: the policy's, quantized to ticks). The
    timer stops when the last store is done."""
    core, policy = model.core, model.ddr.policy
    slots = model.ddr.max_outstanding
    words = memcpy_words(nbytes)
    vector = core.vector_bytes
    stores = [vector] * (-(-4 * words // vector))
    stores[-1] = 4 * words - vector * (len(stores) - 1)
    ii = MEMCPY.ii_cycles(core)
    entries = core.write_buffer_entries
    done, path, posted = [], 0.0, core.call_overhead_cycles
    for i, b in enumerate(stores):
        posted += ii
        if i >= entries:
            posted = max(posted, done[i - entries])
        start = max(posted, done[i - slots]) if i >= slots else posted
        path = max(start, path) + b * policy.cycles_per_byte
        done.append(path + policy.latency(True))
    return max(posted, done[-1])


@pytest.mark.parametrize("nbytes", [8192, 65536, 1000])
@pytest.mark.parametrize("extra", [{}, {"ddr.bytes_per_cycle": 64.0},
                                   {"ddr.max_outstanding": 4}])
def test_posted_stores_follow_the_write_buffer_closed_form(j6, nbytes, extra):
    seen = []
    for entries in ENTRIES:
        model = j6.with_overrides({**TCM_TO_DDR, **extra, "core.write_buffer_entries": entries})
        runs = {fid: simulate(model, "copy", "memcpy", n=nbytes, fidelity=fid)
                for fid in ("burst", "tile")}
        cycles = runs["burst"].cycles
        assert runs["tile"].cycles == cycles and runs["burst"].output["exact"]
        expected = posted_stores_cycles(model, nbytes)
        assert cycles == pytest.approx(expected, abs=1), entries
        b = get_op("copy").bounds(model, "memcpy", (nbytes,))
        assert b.estimate_cycles == pytest.approx(expected, abs=1e-6), entries
        assert b.lower_bound_cycles <= cycles + 1e-9, entries
        seen.append(cycles)
    assert seen == sorted(seen, reverse=True) and seen[0] > seen[-1]  # the key acts


def test_the_key_acts_in_the_default_copy_of_the_store_end_only(j6):
    """From DDR each load stalls for its round trip, so the store before it has drained: the
    buffer depth changes nothing there (and calibrate refuses to fit it)."""
    def cycles(src, dst, entries):
        model = j6.with_overrides({"copy.src": src, "copy.dst": dst,
                                   "core.write_buffer_entries": entries})
        return simulate(model, "copy", "memcpy", n=8192, data=False).cycles

    assert cycles("tcm", "ddr", 1) > cycles("tcm", "ddr", 64)
    assert cycles("ddr", "tcm", 1) == cycles("ddr", "tcm", 64)


def test_calibrate_refuses_a_key_no_measurement_depends_on(j6):
    measured = [parse_measurement("layernorm:pingpong,shape=4x64=2000")]
    with pytest.raises(DspsimInputError, match="core.write_buffer_entries") as e:
        calibrate(j6, measured, ["core.write_buffer_entries=1:64", "ddr.latency_cycles"],
                  identify=False)
    assert "\n" not in str(e.value) and "changes no measurement" in str(e.value)
    stores = [parse_measurement("copy:memcpy,n=8192,copy.src=tcm,copy.dst=ddr=20000")]
    c = calibrate(j6, stores, ["core.write_buffer_entries=1:64"], identify=False)
    assert c.best.values["core.write_buffer_entries"] >= 1


def test_explore_refuses_a_key_it_was_given_that_no_measurement_depends_on(j6):
    from dspsim.study.calibrate import explore

    measured = [parse_measurement("layernorm:pingpong,shape=4x64=2000")]
    with pytest.raises(DspsimInputError, match="core.write_buffer_entries.*changes no "
                                               "measurement"):
        explore(j6, measured, ["core.write_buffer_entries=2:32"])


@pytest.mark.parametrize("entries", [1, 8])
@pytest.mark.parametrize("write_latency", [None, 1000.0, 5000.0])
def test_the_loop_estimate_counts_its_posted_stores(j6, entries, write_latency):
    """The copy loop TCM -> DDR (one byte a store) is paced by its posted stores, at most
    ``min(E, m)`` in flight, each its write's round trip: its estimate was the loop's compute
    and one store (168,960 cycles where the run takes 955,092 on J6, 40,981,155 at a write
    latency of 5,000); it is the stores' stream, to the prologue's cycles."""
    settings = {**TCM_TO_DDR, "core.write_buffer_entries": entries}
    if write_latency:
        settings["ddr.write_latency_cycles"] = write_latency
    model = j6.with_overrides(settings)
    r = simulate(model, "copy", "loop", n=16384, data=False)
    b = get_op("copy").bounds(model, "loop", (16384,))
    assert b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=1e-3)
