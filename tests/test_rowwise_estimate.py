"""The row-wise ops' ping-pong estimate against the simulation on tiny and partial-tile shapes
(LayerNorm and RMSNorm share it: dspsim.ops.rowwise and dspsim.ops.pingpong_bounds)."""

import pytest

from dspsim import simulate
from dspsim.hw.port import transfer_cycles
from dspsim.ops import get_op

OPS = ("layernorm", "rmsnorm")
# the rows fit one tile (the default 32 KiB, or the tile given): the run is serial
ONE_TILE = [((1, 1), None), ((3, 5), None), ((2, 3), None), ((5, 256), None), ((7, 200), 6500)]
# several tiles, the last one partial (or a single row each): the factor the estimate keeps
MANY_TILES = [((9, 200), 6400), ((37, 200), 6500), ((65, 256), None), ((17, 16), 128),
              ((5, 5), 40), ((3, 1000), 8000), ((2, 1), 4), ((3, 2), 16)]
OVERRIDES = [{}, {"ddr.bytes_per_cycle": 16.0}, {"ddr.latency_cycles": 1000.0},
             {"idma.max_outstanding": 2}, {"ddr.max_outstanding": 1}]
FACTOR = 1.25


def model_for(j6, op, tile, extra=None):
    return j6.with_overrides(({f"{op}.tile_bytes": tile} if tile else {}) | (extra or {}))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, tile", ONE_TILE)
def test_one_tile_is_the_serial_closed_form_and_the_run(j6, op, shape, tile):
    """One tile: setup, the input copy alone, the kernels, setup, the output copy alone (the
    estimate was sized for the rows a tile could hold: 84,921 cycles for a 439-cycle 1x1)."""
    model = model_for(j6, op, tile)
    rows, cols = shape
    core, ddr, idma = model.core, model.ddr, model.idma
    copy = transfer_cycles(4 * rows * cols, idma.burst_bytes,  # the policy's quantized values
                           min(idma.max_outstanding, ddr.max_outstanding),
                           ddr.policy.latency(False), ddr.policy.cycles_per_byte)
    kernels = rows * sum(s.tcm_cycles(cols, core) for s, _ in get_op(op).row_calls)
    serial = 2 * (idma.setup_cycles + copy) + kernels
    b = get_op(op).bounds(model, "pingpong", shape)
    assert b["tiles"] == 1 and b["rows_per_tile"] == rows
    assert b.estimate_cycles == pytest.approx(serial, rel=1e-12)
    r = simulate(model, op=op, variant="pingpong", shape=shape, data=False)
    assert abs(r.cycles - b.estimate_cycles) <= 1


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, tile", MANY_TILES)
def test_partial_tiles_are_estimated_within_a_factor(j6, op, shape, tile):
    for extra in OVERRIDES:
        model = model_for(j6, op, tile, extra)
        b = get_op(op).bounds(model, "pingpong", shape)
        r = simulate(model, op=op, variant="pingpong", shape=shape, data=False)
        assert b["tiles"] >= 2
        assert r.cycles / FACTOR <= b.estimate_cycles <= FACTOR * r.cycles, extra
