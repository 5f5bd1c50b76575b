"""The platform as composition: memories routed by address, a data cache, the iDMA library's
ring mode, engines that report themselves."""

import inspect
import math
import pathlib
import re

import pytest
import simpy

from dspsim import load_model, simulate
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.hw.core import Core
from dspsim.hw.dcache import DataCache
from dspsim.hw.idma import IdmaChannel
from dspsim.hw.port import MemoryPort, transfer_cycles
from dspsim.kernels.shapes import VECMAXF
from dspsim.platform import Platform
from dspsim.run import run_to_completion
from dspsim.ticks import cycles as tick_cycles

SRAM = """base = "j6"
[sram]
base_address = 0x20000000
size_bytes = 0x00400000
latency_cycles = 20.0
bytes_per_cycle = 8.0
max_outstanding = 16
"""

CACHED = """base = "j6"
[psram]
base_address = 0x60000000
size_bytes = 0x01000000
latency_cycles = 40.0
bytes_per_cycle = 2.0
max_outstanding = 16
cached = true
[dcache]
capacity_bytes = 65536
line_bytes = 256
ways = 4
write_policy = "write_back"
prefetch_next_line = false
"""


# the rest of a data cache's table (a model with a cache gives every key of it)
SHAPE = 'ways = 4\nwrite_policy = "write_back"\nprefetch_next_line = false\n'


def model_file(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return load_model(p)


def platform_of(model, **kw):
    env = simpy.Environment()
    return env, Platform(env, model, **kw)


def run(env, platform, gen):
    out = {}

    def main():
        start = env.now
        out["value"] = yield from gen
        out["cycles"] = tick_cycles(env.now - start)

    run_to_completion(env, platform, env.process(main()))
    return out


# ------------------------------------------------------------------ memories by address
def test_a_second_memory_from_a_model_file_holds_the_ops_buffers(tmp_path):
    """``base = "j6"`` plus one memory table: the op runs from it when the host allocates
    there, every byte goes through its port and none through DDR."""
    model = model_file(tmp_path, SRAM)
    assert list(model.memories) == ["ddr", "sram"]
    on_sram = model.with_overrides({"host.memory": "sram"})
    for variant in ("pingpong", "direct"):
        r = simulate(on_sram, variant=variant, n=20_000)
        ddr = simulate(model, variant=variant, n=20_000)
        assert r.bytes["ddr_read"] == r.bytes["ddr_write"] == 0
        assert (r.bytes["sram_read"], r.bytes["sram_write"]) == \
            (ddr.bytes["ddr_read"], ddr.bytes["ddr_write"])
        assert r.memories["sram"]["busy_cycles"] == round(
            (r.bytes["sram_read"] + r.bytes["sram_write"]) / 8.0)
        assert r.cycles < ddr.cycles  # a faster memory
        assert r.output["max_rel_err"] < 1e-5
        assert set(r.busy_cycles) == set(r.engines) and r.engines["sram"] == "ddr"
    # the J6 run itself is as it was: the second memory is idle
    assert simulate(model, variant="direct", n=5000).cycles == \
        simulate(load_model(), variant="direct", n=5000).cycles


def test_requests_are_routed_by_address(tmp_path):
    model = model_file(tmp_path, SRAM)
    env, platform = platform_of(model, data=False)
    dsp = platform.dsps[0]
    assert dsp.hb_dsp_mem_map(0x2000_0010, 4).mem.name == "sram"
    assert dsp.hb_dsp_mem_map(0x8000_0000, 4).mem.name == "ddr"
    with pytest.raises(DspsimInputError, match="in no memory of the platform"):
        dsp.hb_dsp_mem_map(0x1000_0000, 4)
    # a copy from SRAM into TCM is SRAM's port's traffic, and its closed form
    src = platform.memory("sram").add_block(8192)
    dst = dsp.tm.allocate(8192, 0, 128)

    def copy():
        t = yield from dsp.core.idma_copy(0, src, dst, 8192, "copy_in")
        yield from dsp.core.idma_wait(t, "wait_in")

    out = run(env, platform, copy())
    sram = model.sram
    assert out["cycles"] == pytest.approx(model.idma.setup_cycles + transfer_cycles(
        8192, model.idma.burst_bytes, model.idma.max_outstanding, sram.latency_cycles,
        1 / sram.bytes_per_cycle))
    assert platform.stats()["sram"]["read_bytes"] == 8192
    assert platform.stats()["ddr"]["read_bytes"] == 0


def test_memory_keys_act(tmp_path):
    """base_address places the memory, size_bytes bounds what the host may allocate,
    host.memory picks where the host allocates (each key does something)."""
    model = model_file(tmp_path, SRAM)
    moved = model.with_overrides({"sram.base_address": 0x3000_0000})
    env, platform = platform_of(moved, data=False)
    assert platform.dsps[0].hb_dsp_mem_map(0x3000_0000, 4).mem.name == "sram"
    small = model.with_overrides({"host.memory": "sram", "sram.size_bytes": 65536})
    with pytest.raises(DspsimInputError, match="does not fit sram"):
        simulate(small, variant="direct", n=20_000, data=False)
    with pytest.raises(ConfigError, match="overlap"):
        model.with_overrides({"sram.base_address": 0x8000_1000})
    with pytest.raises(ConfigError, match="DataRAMs"):
        model.with_overrides({"sram.base_address": 0x0800_0000})
    with pytest.raises(ConfigError, match="host.memory = 'flash'"):
        model.with_overrides({"host.memory": "flash"})
    with pytest.raises(ConfigError, match="no memory 'flash'"):
        model.with_overrides({"flash.latency_cycles": 3.0})


@pytest.mark.parametrize("text, message", [
    ('base = "j6"\n[ddr]\ncached = true\n', "no data cache"),
    ('base = "j6"\n[dcache]\nline_bytes = 64\n', "does nothing"),
    ('base = "j6"\n[dcache]\ncapacity_bytes = 4096\nline_bytes = 64\n' + SHAPE,
     "serves no memory"),
    ('base = "j6"\n[ddr]\ncached = true\n[dcache]\ncapacity_bytes = 4096\nline_bytes = 96\n'
     + SHAPE, "power of two"),
    ('base = "j6"\n[ddr]\ncached = true\n[dcache]\ncapacity_bytes = 1000\nline_bytes = 64\n'
     + SHAPE, "multiple of"),
])
def test_cache_settings_that_cannot_act_are_refused(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message) as e:
        model_file(tmp_path, text)
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------ the data cache
@pytest.mark.parametrize("n", [64, 4096, 64 * 300])
@pytest.mark.parametrize("fidelity", ["burst", "tile"])
def test_a_cached_kernel_pays_per_line_missed(tmp_path, n, fidelity):
    """Blocking misses on an idle port: each line the loads touch is fetched once, for
    latency + line / bandwidth; a load of a line already there costs nothing more."""
    model = model_file(tmp_path, CACHED)
    env, platform = platform_of(model, data=False, fidelity=fidelity)
    dsp = platform.dsps[0]
    x = platform.memory("psram").add_block(4 * n + 4096)
    out = run(env, platform, dsp.core.call("vecmaxf", n, x))
    c, m, line = model.core, model.psram, model.dcache.line_bytes
    main = n // (2 * c.lanes_f32)
    loads = 1 + 2 * main  # the priming load and two per iteration (n a multiple of 2 lanes)
    lines = math.ceil(loads * c.vector_bytes / line)
    stats = dsp.core.stats()["dcache"]
    assert stats["misses"] == lines and stats["hits"] == loads - lines
    miss = m.latency_cycles + line / m.bytes_per_cycle
    expected = (c.call_overhead_cycles + lines * miss + (main + 1) * VECMAXF.ii_cycles(c)
                + VECMAXF.reduction_ops(c.lanes_f32) * c.alu_latency_cycles)
    assert out["cycles"] == pytest.approx(expected, rel=1e-12)
    assert platform.stats()["psram"]["read_bytes"] == lines * line
    assert dsp.core.stats()["stall_cycles"]["psram"] == pytest.approx(lines * miss)
    if lines * line > model.dcache.capacity_bytes:
        return
    # the same kernel again finds its lines in the cache (they fit): no miss, no stall
    before = stats["misses"]
    again = run(env, platform, dsp.core.call("vecmaxf", n, x))
    assert dsp.core.stats()["dcache"]["misses"] == before
    assert again["cycles"] == pytest.approx(expected - lines * miss)


def test_prefetch_hides_the_latency_of_a_sequential_stream(tmp_path):
    model = model_file(tmp_path, CACHED)
    cycles, stats = {}, {}
    for prefetch in (False, True):
        m = model.with_overrides({"dcache.prefetch_next_line": prefetch})
        env, platform = platform_of(m, data=False)
        x = platform.memory("psram").add_block(4 * 8192 + 4096)
        cycles[prefetch] = run(env, platform,
                               platform.dsps[0].core.call("vecsum", 8192, x))["cycles"]
        stats[prefetch] = platform.dsps[0].core.stats()["dcache"]
    touched = stats[False]["misses"]  # without prefetch every line touched is a miss
    assert stats[True]["misses"] == 1  # the first; the stream prefetches the rest
    assert stats[True]["prefetches"] == touched  # each line touched fetches the next
    assert cycles[True] < cycles[False]
    # never faster than the port can deliver the lines the kernel reads
    assert cycles[True] >= touched * m.dcache.line_bytes / m.psram.bytes_per_cycle


def test_write_policies_conserve_bytes(tmp_path):
    """Write-back keeps stores in the cache until a line is evicted; write-through sends
    every stored byte to the memory; either way the stored values are right."""
    model = model_file(tmp_path, CACHED)
    n = 4096
    written = {}
    for policy in ("write_back", "write_through"):
        m = model.with_overrides({"dcache.write_policy": policy})
        env, platform = platform_of(m, data=True)
        psram = platform.memory("psram")
        x, z = psram.add_block(4 * n + 4096), psram.add_block(4 * n + 4096)
        psram.f32(x, n)[:] = 1.5
        run(env, platform, platform.dsps[0].core.call("vecmul", n, x, z, scalar=2.0))
        assert (psram.f32(z, n) == 3.0).all()
        stats = platform.dsps[0].core.stats()["dcache"]
        written[policy] = platform.stats()["psram"]["write_bytes"]
        if policy == "write_back":  # all fits: nothing evicted, every stored line dirty
            assert written[policy] == stats["writebacks"] * m.dcache.line_bytes == 0
            assert stats["dirty_lines"] == math.ceil(4 * n / m.dcache.line_bytes)
    assert written["write_through"] == 4 * n


def test_a_small_cache_writes_back_what_it_evicts(tmp_path):
    model = model_file(tmp_path, CACHED).with_overrides(
        {"dcache.capacity_bytes": 4096, "dcache.ways": 2})
    env, platform = platform_of(model, data=False)
    psram = platform.memory("psram")
    n = 16384
    x, z = psram.add_block(4 * n + 4096), psram.add_block(4 * n + 4096)
    run(env, platform, platform.dsps[0].core.call("vecmul", n, x, z, scalar=2.0))
    stats = platform.dsps[0].core.stats()["dcache"]
    line = model.dcache.line_bytes
    assert stats["writebacks"] > 0
    assert platform.stats()["psram"]["write_bytes"] == stats["writebacks"] * line
    # every line stored is either written back or still dirty in the cache
    assert stats["writebacks"] + stats["dirty_lines"] == math.ceil(4 * n / line)
    assert platform.stats()["psram"]["read_bytes"] == stats["fill_bytes"]


def test_a_cached_op_runs_and_is_right(tmp_path):
    model = model_file(tmp_path, CACHED).with_overrides({"host.memory": "psram"})
    burst = simulate(model, variant="direct", n=20_000)
    tile = simulate(model, variant="direct", n=20_000, fidelity="tile")
    assert burst.output["max_rel_err"] < 1e-5
    assert burst.dcache["misses"] > 0 and burst.dcache == tile.dcache
    assert (burst.cycles, burst.bytes) == (tile.cycles, tile.bytes)
    assert burst.stall_cycles["psram"] > 0


# ------------------------------------------------------------------ the iDMA ring mode
def test_ring_mode_copy_desc_waits_for_room_and_polling_ends_at_the_last_completion(j6):
    model = j6.with_overrides({"ddr.latency_cycles": 100.0, "ddr.bytes_per_cycle": 2.0,
                               "idma.max_outstanding": 16, "idma.setup_cycles": 25.0})
    env, platform = platform_of(model, data=True)
    dsp = platform.dsps[0]
    nbytes = 4096
    src = [platform.ddr.add_block(nbytes) for _ in range(3)]
    for k, s in enumerate(src):
        platform.ddr.f32(s, nbytes // 4)[:] = k + 1
    dst = [dsp.tm.allocate(nbytes, k % 2, 128) for k in range(2)]
    seen = []

    def program():
        ch = dsp.idma[0]
        ch.init_loop(2)
        for k in range(3):
            yield from dsp.core.idma_copy_desc(0, dst[k % 2], src[k], nbytes)
            seen.append((tick_cycles(env.now), ch.buffer_status()))
        yield from dsp.core.idma_poll(0, 0)
        seen.append((tick_cycles(env.now), ch.buffer_status()))

    out = run(env, platform, program())
    one = transfer_cycles(nbytes, model.idma.burst_bytes, 16, 100.0, 0.5)
    setup = 25.0
    # two descriptors fit the ring; the third waits for the first to finish
    assert [s for _, s in seen] == [1, 2, 2, 0]
    assert seen[2][0] == pytest.approx(setup + one + setup)
    assert out["cycles"] == pytest.approx(setup + 3 * one)
    assert (dsp.tm.banks[0].f32(dst[0], 4) == 3).all()  # the third copy landed last
    assert dsp.idma[0].stats()["descriptors"] == 3


def test_ring_mode_misuse_is_one_line(j6):
    env, platform = platform_of(j6, data=False)
    dsp = platform.dsps[0]
    src, dst = platform.ddr.add_block(64), dsp.tm.allocate(64, 0, 128)
    with pytest.raises(DspsimInputError, match="before idma_init_loop"):
        next(dsp.core.idma_copy_desc(0, dst, src, 64))
    with pytest.raises(DspsimInputError, match="at least 1"):
        dsp.idma[0].init_loop(0)


# ------------------------------------------------------------------ the shape of the code
def test_no_engine_constructor_takes_more_than_five_parameters():
    for cls in (Core, IdmaChannel, MemoryPort, DataCache):
        params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        assert len(params) <= 5, (cls.__name__, params)


def test_simpy_internals_live_in_the_clock():
    root = pathlib.Path(__file__).parents[1] / "dspsim"
    for path in root.rglob("*.py"):
        text = path.read_text()
        if path.name != "clock.py":
            assert not re.search(r"\._eid|\._queue", text), path


def test_the_run_reads_engines_only_through_stats():
    """``collect`` builds the Result from ``stats()``: no engine counter is read by name."""
    text = (pathlib.Path(__file__).parents[1] / "dspsim" / "run.py").read_text()
    for attr in ("compute_cycles", "busy_cycles", "bytes_read", "bytes_written",
                 "contention_cycles", "ddr_stall_cycles", "idma_wait_cycles", "self_cycles"):
        assert not re.search(rf"\.\s*{attr}\b", text), attr
