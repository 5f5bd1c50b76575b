"""``dspsim sweep``'s note on values that gave identical cycles says why when the memory port
binds: every value's DMA bound (the bytes that must cross the host memory's port over its
bandwidth) is the binding bound and the same (:meth:`dspsim.ops.base.Op.port_bound_reason`),
for any op, a file op included, from each value's model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dspsim import simulate
from dspsim.ops import get_op
from dspsim.ops.fileop import load_op_file, unload_op_file
from dspsim.study.sweep.same import identical_cycles_notes

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "ops"
SCALE_BIAS = EXAMPLES / "scale_bias.toml"
ROW_FILTER = EXAMPLES / "row_filter.toml"
N = 20_000
SLOTS = (1, 2, 4)


@pytest.fixture
def scale_bias():
    name = load_op_file(SCALE_BIAS)
    load_op_file(ROW_FILTER)
    yield name
    unload_op_file(SCALE_BIAS)
    unload_op_file(ROW_FILTER)


def _shape(op: str) -> tuple[int, ...]:
    return (N,) if get_op(op).ndim == 1 else (64, 256)


def _expected(op: str, model, variant: str) -> str:
    b = get_op(op).bounds(model, variant, _shape(op))
    bpc = model.host_memory.bytes_per_cycle
    return (f"port-bound: the DDR port moves {round(b.dma_bound_cycles * bpc):,} bytes at "
            f"{bpc:g} bytes/cycle = {b.dma_bound_cycles:,.0f} cycles either way")


@pytest.mark.parametrize("op, variant", [("scale_bias", "pingpong"), ("scale_bias", "direct"),
                                         ("row_filter", "pingpong")])
def test_a_port_bound_op_says_so(j6, scale_bias, op, variant):
    """The runs' cycles are the same (the premise); the reason is the DMA bound's bytes and
    bandwidth, the binding bound at every value."""
    models = [j6.with_overrides({"core.vector_alu_slots": v}) for v in SLOTS]
    shape = _shape(op)
    cycles = {simulate(m, op, variant, shape=shape, data=False).cycles for m in models}
    assert len(cycles) == 1
    reason = get_op(op).same_cycles_reason(variant, shape, "core.vector_alu_slots", SLOTS,
                                           models)
    assert reason == _expected(op, models[0], variant)
    b = get_op(op).bounds(models[0], variant, shape)
    assert b.lower_bound_cycles == b.dma_bound_cycles
    assert round(b.dma_bound_cycles * 0.38814) <= b.ddr_read_bytes + b.ddr_write_bytes


def test_pingpong_moves_all_but_the_last_tiles_output_before_the_timer(j6, scale_bias):
    """scale_bias pingpong: 4 N bytes in and 4 N out; the last tile's output (16 KiB, the
    op's default tile) crosses after the last kernel: the bound's bytes."""
    models = [j6.with_overrides({"core.vector_alu_slots": v}) for v in SLOTS]
    reason = get_op(scale_bias).same_cycles_reason("pingpong", (N,), "core.vector_alu_slots",
                                                   SLOTS, models)
    assert reason.startswith(f"port-bound: the DDR port moves {8 * N - 16384:,} bytes at "
                             "0.38814 bytes/cycle = ")


def test_no_port_reason_when_the_port_does_not_bind_or_its_bound_moves(j6, scale_bias):
    op = get_op(scale_bias)
    fast = [j6.with_overrides({"ddr.bytes_per_cycle": 1000.0, "core.vector_alu_slots": v})
            for v in SLOTS]  # the port's time is below the latency and compute bounds
    assert op.same_cycles_reason("pingpong", (N,), "core.vector_alu_slots", SLOTS, fast) is None
    widths = [j6.with_overrides({"ddr.bytes_per_cycle": v}) for v in (0.3, 0.4)]
    assert op.same_cycles_reason("pingpong", (N,), "ddr.bytes_per_cycle", (0.3, 0.4),
                                 widths) is None
    assert op.same_cycles_reason("pingpong", (N,), "core.vector_alu_slots", SLOTS) is None


def test_the_sweep_note_carries_the_reason_from_each_values_model(j6, scale_bias):
    models = {v: j6.with_overrides({"core.vector_alu_slots": v}) for v in SLOTS}
    rows = [{"op": scale_bias, "variant": "pingpong", "n": N, "core.vector_alu_slots": v,
             "cycles": simulate(m, scale_bias, "pingpong", n=N, data=False).cycles}
            for v, m in models.items()]
    asked = []

    def model_at(setting, key, value):
        asked.append((setting["variant"], key, value))
        return models[value]

    note = identical_cycles_notes(pd.DataFrame(rows), model_at=model_at)
    assert note == [f"note: core.vector_alu_slots = 1, 2, 4 gave identical cycles "
                    f"({rows[0]['cycles']:,} at op={scale_bias}, variant=pingpong, n={N}): "
                    + _expected(scale_bias, models[1], "pingpong")]
    assert asked == [("pingpong", "core.vector_alu_slots", v) for v in SLOTS]
    assert identical_cycles_notes(pd.DataFrame(rows))[0].endswith(f"n={N})")


def test_dspsim_sweep_prints_the_reason_from_its_sidecars_model(j6, scale_bias, tmp_path,
                                                                capsys):
    """End to end: the sweep's sidecar gives each value's model (its model file, fixed keys
    and the point's cells), for a file op named on the command line."""
    from dspsim.cli import main

    out = tmp_path / "sb.csv"
    args = ["--op-file", str(SCALE_BIAS)]
    expected = _expected(scale_bias, j6, "pingpong")
    assert main(["sweep", *args, "--variant", "pingpong", "--n", str(N), "--param",
                 "core.vector_alu_slots=1,2,4", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"n={N}): {expected}")
    assert main(["plot", "sweep", *args, str(out), "--x", "core.vector_alu_slots", "--out",
                 str(tmp_path / "sb.png")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(expected)


def test_a_group_of_several_variants_gets_each_variants_reason(j6, scale_bias):
    """Before: tile sizes identical in direct (2,420,650) and in nbuffer (2,061,484) were one
    note, direct's cycles, "and 1 other setting", and direct's reason ("does not act"), though
    the tile acts in nbuffer, whose cycles the port sets."""
    tiles = (1024, 4096, 16384)
    models = {t: j6.with_overrides({f"{scale_bias}.tile_bytes": t}) for t in tiles}
    rows = [{"op": scale_bias, "variant": v, "n": N, f"{scale_bias}.tile_bytes": t,
             "cycles": simulate(models[t], scale_bias, v, n=N, data=False).cycles}
            for v in ("direct", "nbuffer") for t in tiles]
    notes = identical_cycles_notes(pd.DataFrame(rows), model_at=lambda s, k, v: models[v])
    assert len(notes) == 2 and all("other setting" not in n for n in notes)
    assert "variant=direct" in notes[0] and notes[0].endswith("does not act in scale_bias direct")
    assert "variant=nbuffer" in notes[1] and notes[1].endswith(_expected(scale_bias, j6, "nbuffer"))
