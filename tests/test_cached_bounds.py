"""The ops' closed forms on a platform whose host memory sits behind the data cache (the
HiFi5's PSRAM): they read the host memory (not a memory named ``ddr``), count per line, stay
below every simulated run and estimate it."""

import itertools
import json

import pytest

from dspsim.config import load_model, packaged_models
from dspsim.ops import get_op, op_names
from dspsim.run import simulate
from tests.cli_helpers import run_cli

HIFI5 = load_model("ameba_hifi5")
# (op, shape, how far the estimate may be from the run): rows of a line and more within 20 %,
# rows shorter than a line (their calls' overheads and posted stores overlap the fills in ways
# the per-call form does not follow) within 50 %
DIRECT = [("softmax", (100_000,), 0.2), ("softmax", (2_000,), 0.2),
          ("softmax", (9_000,), 0.2), ("layernorm", (64, 256), 0.2),
          ("layernorm", (4, 4096), 0.2), ("rmsnorm", (16, 1024), 0.2),
          ("layernorm", (1000, 64), 0.2), ("layernorm", (64, 5), 0.5), ("softmax", (40, 3), 0.5)]
CACHES = list(itertools.product([True, False], ["write_back", "write_through"], [32768, 4096]))


def _cache(prefetch: bool, policy: str, capacity: int):
    """The HiFi5's cache at 4 ways (the capacities these cases were chosen for) with its
    prefetcher following every stream (the closed forms' next-line prefetch; one that
    follows fewer streams than a kernel interleaves makes every line a demand miss)."""
    return HIFI5.with_overrides({"dcache.prefetch_next_line": prefetch,
                                 "dcache.write_policy": policy,
                                 "dcache.capacity_bytes": capacity, "dcache.ways": 4,
                                 "dcache.prefetch_streams": 0})


@pytest.mark.parametrize("model", packaged_models())
def test_every_op_and_variant_has_bounds_on_every_packaged_model(model, capsys):
    m = load_model(model)
    for name in op_names():
        op = get_op(name)
        for variant in op.variants:
            try:
                op.check_run(m, variant, op.default_shape)
            except ValueError:
                continue  # the platform cannot run it (one iDMA channel): refused elsewhere
            b = op.bounds(m, variant, op.default_shape)
            assert b.lower_bound_cycles <= b.estimate_cycles
    code, out, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--op", "softmax",
                             "--variant", "direct", "--n", "4096", "--no-data", "--json")
    assert code == 0, err
    assert json.loads(out)["bounds"]["binding_bound"]


@pytest.mark.parametrize("op,shape,tolerance", DIRECT)
def test_cached_direct_bounds_hold_and_the_estimate_follows(op, shape, tolerance):
    """Over write-back and write-through, with and without a next-line prefetch, in a cache
    that holds the arrays and one that does not: no run beats the lower bound, the data
    fetched covers the compulsory lines, the write-backs are estimated within 5 %, and the
    estimate is within ``tolerance``."""
    for prefetch, policy, capacity in CACHES:
        m = _cache(prefetch, policy, capacity)
        r = simulate(m, op, "direct", shape=shape, data=False)
        b = get_op(op).bounds(m, "direct", shape)
        where = f"{op} {shape} prefetch={prefetch} {policy} capacity={capacity}"
        assert b.lower_bound_cycles <= r.cycles, where
        assert r.dcache["fill_bytes"] >= b["compulsory_lines"] * m.dcache.line_bytes, where
        assert abs(b["writeback_lines"] - r.dcache["writebacks"]) <= 1 + \
            r.dcache["writebacks"] / 20, where
        assert abs(b.estimate_cycles / r.cycles - 1) < tolerance, where


def test_blocking_misses_in_a_cache_that_holds_the_arrays_cost_their_closed_form():
    """Softmax direct on 2,000 float32 (16 KB of x and y in a 32 KiB cache), blocking misses,
    write-back: each line of x and y is fetched once (the first touch, write-allocate), every
    later pass hits, and nothing is evicted: the estimate is the kernels' TCM cycles plus one
    round trip per line, the same as the simulation up to the call's rounding."""
    m = _cache(False, "write_back", 32768)
    r = simulate(m, "softmax", "direct", shape=(2_000,), data=False)
    b = get_op("softmax").bounds(m, "direct", (2_000,))
    line = m.dcache.line_bytes
    assert b["missed_lines"] == 2 * -(-8000 // line) == r.dcache["misses"]
    assert b["compulsory_lines"] == -(-16000 // line)  # x and y may share a line
    assert r.dcache["writebacks"] == b["writeback_lines"] == 0
    mem = m.host_memory
    fill = mem.policy.request_cycles(line, False) + m.dcache.miss_cycles
    assert b.estimate_cycles == pytest.approx(b.compute_bound_cycles + b["missed_lines"] * fill)
    assert b.estimate_cycles == pytest.approx(r.cycles, rel=2e-3)


def test_j6_direct_bounds_are_the_uncached_walk(j6):
    """J6's DDR is uncached: the direct bounds stay the per-vector-load walk, whose traffic is
    the simulation's to the byte."""
    r = simulate(j6, "layernorm", "direct", shape=(8, 256), data=False)
    b = get_op("layernorm").bounds(j6, "direct", (8, 256))
    assert (b.ddr_read_bytes, b.ddr_write_bytes) == (r.bytes["ddr_read"], r.bytes["ddr_write"])
    assert "missed_lines" not in dict(b)
