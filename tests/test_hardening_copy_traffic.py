"""The copy's bounds give the traffic the run counts: every memory's bytes to the byte
(``traffic_bytes``, keyed as the run's ``bytes``) and the host memory's as
``ddr_read_bytes`` / ``ddr_write_bytes`` (nothing for a copy that never touches it), for
every source and destination, both variants, through a data cache or not."""

from __future__ import annotations

import pytest

from dspsim import load_model, simulate
from dspsim.errors import DspsimInputError
from dspsim.ops import get_op

MODELS = {"j6": load_model(), "ameba_hifi5": load_model("ameba_hifi5")}
SIZES = (5, 1000, 40_000)


def _pairs():
    for name, model in MODELS.items():
        places = ["host", "tcm", *model.memories]
        for src in places:
            for dst in places:
                yield name, src, dst


def _agrees(model, variant, n):
    """The run's bytes and the bounds' traffic, equal; the run, or None if refused."""
    try:
        r = simulate(model, "copy", variant, n=n, data=False)
    except DspsimInputError:
        return None
    b = get_op("copy").bounds(model, variant, (n,))
    host = model.host.memory
    assert b["traffic_bytes"] == r.bytes
    assert (b["ddr_read_bytes"], b["ddr_write_bytes"]) == (r.bytes[f"{host}_read"],
                                                           r.bytes[f"{host}_write"])
    return r


@pytest.mark.parametrize("variant", ["idma", "memcpy"])
@pytest.mark.parametrize("model_name, src, dst", list(_pairs()))
def test_the_bounds_traffic_is_the_runs(model_name, src, dst, variant):
    m = MODELS[model_name].with_overrides({"copy.src": src, "copy.dst": dst})
    ran = [r for n in SIZES if (r := _agrees(m, variant, n)) is not None]
    refused = variant == "idma" and (src == dst == "tcm" or (
        m.idma.tcm_end_required and "tcm" not in (src, dst)))  # one line each
    assert len(ran) == (0 if refused else len(SIZES))
    if src == dst == "tcm":
        assert all(not any(r.bytes.values()) for r in ran)


def test_a_copy_that_never_touches_the_host_memory_has_no_host_traffic():
    """SRAM -> TCM on the HiFi5: the PSRAM (the host's memory) carries nothing; TCM -> TCM
    carries nothing anywhere; PSRAM -> TCM reads n and writes nothing."""
    m = MODELS["ameba_hifi5"]
    ops = get_op("copy")
    cases = {("sram", "tcm", "idma"): (0, 0), ("tcm", "tcm", "memcpy"): (0, 0),
             ("psram", "tcm", "idma"): (4096, 0), ("tcm", "psram", "idma"): (0, 4096)}
    for (src, dst, variant), want in cases.items():
        b = ops.bounds(m.with_overrides({"copy.src": src, "copy.dst": dst}), variant, (4096,))
        assert (b["ddr_read_bytes"], b["ddr_write_bytes"]) == want


@pytest.mark.parametrize("settings", [
    {"dcache.capacity_bytes": 4096, "dcache.ways": 1, "copy.descriptor_bytes": 4096},
    {"dcache.write_policy": "write_through", "copy.descriptor_bytes": 1000},
    {"dcache.prefetch_next_line": False, "dcache.line_bytes": 64, "core.lanes_f32": 8},
])
def test_the_traffic_through_any_data_cache_is_the_runs(settings):
    """Lines filled, prefetched and written back, as the run's cache moves them: a direct-mapped
    cache whose source and destination lines evict each other, write-through stores, no
    prefetch with shorter lines."""
    base = MODELS["ameba_hifi5"].with_overrides(settings)
    for src, dst in (("host", "host"), ("psram", "sram"), ("tcm", "psram"), ("sram", "tcm")):
        m = base.with_overrides({"copy.src": src, "copy.dst": dst})
        for n in (13, 9000, 70_000):
            assert _agrees(m, "memcpy", n) is not None


@pytest.mark.parametrize("model_name, src, dst", list(_pairs()))
def test_a_2d_copys_traffic_is_the_runs(model_name, src, dst):
    """copy.rows: every byte of every row read and written once, whatever the pitches and
    however the rows are cut into descriptors."""
    m = MODELS[model_name].with_overrides({
        "copy.src": src, "copy.dst": dst, "copy.rows": 9, "copy.src_pitch_bytes": 300,
        "copy.dst_pitch_bytes": 0, "copy.descriptor_bytes": 4 * 260})
    r = _agrees(m, "idma", 9 * 260)
    refused = src == dst == "tcm" or (m.idma.tcm_end_required and "tcm" not in (src, dst))
    assert (r is None) == refused
    if r is not None:
        assert sum(r.bytes.values()) == 9 * 260 * ((src != "tcm") + (dst != "tcm"))


@pytest.mark.parametrize("settings", [
    {"copy.access_bytes": 4},
    {"copy.access_bytes": 32, "copy.flush_destination": True},
    {"copy.access_bytes": 1, "copy.descriptor_bytes": 1024},
])
@pytest.mark.parametrize("model_name, src, dst", list(_pairs()))
def test_a_copy_loops_traffic_is_the_runs(model_name, src, dst, settings):
    """The loop variant: K-byte loads and stores, whole lines through a cache (with a flush,
    the destination's dirty lines too)."""
    m = MODELS[model_name].with_overrides({"copy.src": src, "copy.dst": dst, **settings})
    for n in (32, 1024, 40_000):
        assert _agrees(m, "loop", n) is not None


@pytest.mark.parametrize("settings", [
    {"dcache.write_allocate": False, "copy.flush_destination": True},
    {"dcache.capacity_bytes": 4096, "dcache.ways": 1, "copy.flush_destination": True},
    {"dcache.prefetch_next_line": False, "dcache.line_bytes": 16, "copy.access_bytes": 32},
])
@pytest.mark.parametrize("variant", ["memcpy", "loop"])
def test_a_loops_traffic_through_any_data_cache_is_the_runs(settings, variant):
    """No write-allocate, a direct-mapped cache whose lines evict each other, lines shorter
    than an access: the loop's (and with a flush the memcpy's) traffic is the run's."""
    if variant == "memcpy" and "copy.access_bytes" in settings:
        settings = {k: v for k, v in settings.items() if k != "copy.access_bytes"}
    base = MODELS["ameba_hifi5"].with_overrides(settings)
    for src, dst in (("host", "host"), ("psram", "sram"), ("tcm", "psram"), ("sram", "tcm")):
        m = base.with_overrides({"copy.src": src, "copy.dst": dst})
        for n in (64, 9024, 70_016):
            assert _agrees(m, variant, n) is not None


ESP32S3 = load_model("esp32s3")


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("variant", ["memcpy", "loop"])
@pytest.mark.parametrize("n", [4096, 102_400])
def test_a_write_allocate_destinations_fills_are_in_the_bounds(variant, flush, n):
    """ESP32-S3 SRAM -> PSRAM through its write-back, write-allocate cache: every line a store
    misses is read first, and the dirty lines evicted (and flushed) are written back. The
    traffic is the run's; the bandwidth bound is those reads' and writes' line transactions
    (the last eviction, posted, left out without a flush), below the run; the estimate within
    1 % of it."""
    m = ESP32S3.with_overrides({"copy.src": "sram", "copy.dst": "psram",
                                "copy.flush_destination": flush})
    r = _agrees(m, variant, n)
    line = m.dcache.line_bytes
    read, write = r.bytes["psram_read"], r.bytes["psram_write"]
    assert read == n  # every destination line filled once, none from the source (SRAM)
    assert write == (n if flush else max(0, n - m.dcache.capacity_bytes))
    b = get_op("copy").bounds(m, variant, (n,))
    pol = m.memories["psram"].policy
    want = (pol.stream_path_cycles(read, line, False)
            + pol.stream_path_cycles(max(0, write - (0 if flush else line)), line, True))
    assert b["bandwidth_bound_cycles"] == pytest.approx(want, rel=1e-12)
    assert b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.01)
