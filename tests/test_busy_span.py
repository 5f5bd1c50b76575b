"""Busy cycles count what happened within the op's timer span (PROF), not traffic that
crosses after the op stopped its timer (a copy it never waited for)."""

import pytest

from dspsim import simulate


@pytest.mark.parametrize("tile_bytes", [131072, 65536, 32768])
@pytest.mark.parametrize("fidelity", ["burst", "tile"])
def test_busy_is_clipped_to_the_ops_span(j6, tile_bytes, fidelity):
    r = simulate(j6, n=100_000, data=False, fidelity=fidelity,
                 params={"tile_bytes": tile_bytes})
    for engine, busy in r.busy_cycles.items():
        assert 0 <= busy <= r.cycles, engine
    port = r.engines_of("ddr")[0]
    # the port cannot have moved more than its bandwidth allows within the span
    assert r.busy_cycles[port] <= r.memories[port]["busy_cycles"]
    moved = r.memories[port]["read_bytes"] + r.memories[port]["write_bytes"]
    assert r.memories[port]["busy_cycles"] == round(moved / j6.ddr.bytes_per_cycle)
    reference = simulate(j6, n=100_000, data=False, elide=False, fidelity="burst",
                         params={"tile_bytes": tile_bytes})
    assert r.busy_cycles == reference.busy_cycles


def test_an_unwaited_copy_is_busy_only_until_the_timer_stops(j6):
    """With 128 KiB tiles the last output copy is still moving when the op stops its timer:
    its channel and the port were busy longer than the run, which they no longer report."""
    r = simulate(j6, n=100_000, data=False, params={"tile_bytes": 131072})
    assert "unwaited_copy" in {w["code"] for w in r.warnings}
    port = r.engines_of("ddr")[0]
    assert r.memories[port]["busy_cycles"] > r.cycles  # the whole traffic: after the stop too
    assert r.busy_cycles[port] < r.cycles
