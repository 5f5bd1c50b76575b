"""2-D iDMA descriptors (``idma_copy_2d_desc``): closed forms, byte placement, fidelity and
elision equality, refusals."""

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import simulate
from dspsim.errors import AllocationError, DspsimInputError
from dspsim.hw.port import transfer_cycles
from dspsim.ops import get_op
from dspsim.platform import Platform
from dspsim.run import run_to_completion
from dspsim.ticks import cycles as tick_cycles
from tests.cli_helpers import one_line, run_cli

ROUND = {"ddr.latency_cycles": 100.0, "ddr.bytes_per_cycle": 2.0, "ddr.max_outstanding": 16,
         "idma.burst_bytes": 64, "idma.setup_cycles": 25.0}


def platform(model, fidelity="burst", elide=True, data=True, port_log=False, **overrides):
    env = simpy.Environment()
    model = model.with_overrides({**ROUND, **overrides})
    p = Platform(env, model, data=data, fidelity=fidelity, elide=elide, port_log=port_log)
    return env, p.dsps[0]


def blocks(dsp, src_bytes, dst_bytes, into_tcm=True):
    """A source and a destination block (``into_tcm``: DDR -> TCM, ``False``: TCM -> DDR,
    ``None``: DDR -> DDR), the source filled with distinct bytes, the destination with a
    sentinel."""
    size = -(-max(src_bytes, dst_bytes) // 4) * 4
    ddr = dsp.ddr.add_block(size, 4096)
    other = dsp.ddr.add_block(size, 4096) if into_tcm is None else dsp.tm.allocate(size, 0, 128)
    src, dst = (other, ddr) if into_tcm is False else (ddr, other)
    if dsp.move_data:
        src.mem.write(src.addr, (np.arange(src_bytes) * 7 % 251).astype(np.uint8))
        dst.mem.write(dst.addr, np.full(dst_bytes, 0xEE, np.uint8))
    return src, dst


def copy_cycles(env, dsp, src, dst, row, rows, sp=None, dp=None, copies=1):
    """Cycles from the first descriptor's programming to the last one's completion; the
    copies alternate between channels 0 and 1 (they share the port)."""
    out = {}
    kind = "copy_in" if not dst.external else "copy_out"

    def main():
        start = env.now
        handles = []
        for i in range(copies):
            handles.append((yield from dsp.core.idma_copy(i % 2, src, dst, row, kind,
                                                          rows=rows, src_pitch=sp,
                                                          dst_pitch=dp)))
        for t in handles:
            yield from dsp.core.idma_wait(t, "wait_in")
        out["cycles"] = tick_cycles(env.now - start)
        out["transfer"] = handles[-1]

    run_to_completion(env, dsp.platform, env.process(main()))
    return out


def test_one_row_of_one_burst_is_the_1d_figure(j6):
    env, dsp = platform(j6)
    src, dst = blocks(dsp, 48, 48)
    got = copy_cycles(env, dsp, src, dst, 48, 1)["cycles"]
    assert got == 25 + transfer_cycles(48, 64, 16, 100.0, 0.5)
    env2, dsp2 = platform(j6)
    src2, dst2 = blocks(dsp2, 48, 48)
    assert copy_cycles(env2, dsp2, src2, dst2, 48, 1, sp=200, dp=300)["cycles"] == got


@pytest.mark.parametrize("row", [64, 40])
def test_rows_of_one_burst_with_window_one_pay_latency_per_row(j6, row):
    rows = 7
    env, dsp = platform(j6, **{"idma.max_outstanding": 1})
    src, dst = blocks(dsp, rows * 100, rows * 96)
    out = copy_cycles(env, dsp, src, dst, row, rows, sp=100, dp=96)
    assert out["cycles"] == 25 + rows * (100.0 + row / 2.0)
    assert out["transfer"].nbytes == rows * row and dsp.port.bytes_read == rows * row


def test_bursts_are_cut_at_row_boundaries(j6):
    env, dsp = platform(j6, port_log=True)
    src, dst = blocks(dsp, 3 * 256, 3 * 200)
    copy_cycles(env, dsp, src, dst, 200, 3, sp=256)
    assert [entry[4] for entry in dsp.port.log] == [64, 64, 64, 8] * 3


def test_a_strided_block_lands_where_the_pitches_say_and_nowhere_else(j6):
    row, rows, sp, dp = 200, 5, 328, 264
    env, dsp = platform(j6)
    src, dst = blocks(dsp, (rows - 1) * sp + row, (rows - 1) * dp + row + 40)
    before_src = src.mem.read(src.addr, (rows - 1) * sp + row).copy()
    copy_cycles(env, dsp, src, dst, row, rows, sp=sp, dp=dp)
    got = dst.mem.read(dst.addr, (rows - 1) * dp + row + 40)
    want = np.full_like(got, 0xEE)
    for r in range(rows):
        want[r * dp:r * dp + row] = before_src[r * sp:r * sp + row]
    assert np.array_equal(got, want)
    assert np.array_equal(src.mem.read(src.addr, before_src.size), before_src)
    assert dsp.idma[0].bytes_moved == rows * row  # bytes conserved: every row, once


def run_all_ways(j6, row, rows, sp, dp, burst, window, copies, into_tcm):
    """(cycles, port bytes, contention) of the same 2-D copies at every fidelity and with the
    engine's elision on and off."""
    results = {}
    for fidelity in ("burst", "tile"):
        for elide in (True, False):
            env, dsp = platform(j6, fidelity=fidelity, elide=elide,
                                **{"idma.burst_bytes": burst, "idma.max_outstanding": window})
            src, dst = blocks(dsp, (rows - 1) * sp + row, (rows - 1) * dp + row, into_tcm)
            out = copy_cycles(env, dsp, src, dst, row, rows, sp=sp, dp=dp, copies=copies)
            port = dsp.port.stats()
            landed = dst.mem.read(dst.addr, (rows - 1) * dp + row)
            results[fidelity, elide] = (out["cycles"], port["read_bytes"],
                                        port["write_bytes"], port["contention_cycles"],
                                        landed.tobytes())
    want = np.full((rows - 1) * dp + row, 0xEE, np.uint8)
    source = (np.arange((rows - 1) * sp + row) * 7 % 251).astype(np.uint8)
    for r in range(rows):
        want[r * dp:r * dp + row] = source[r * sp:r * sp + row]
    assert all(v[4] == want.tobytes() for v in results.values())
    return results


@settings(max_examples=60, deadline=None)
@given(row=st.integers(1, 700), rows=st.integers(1, 40), pad=st.integers(0, 100),
       burst=st.sampled_from([16, 32, 64, 128]), window=st.integers(1, 16),
       copies=st.integers(1, 3), into_tcm=st.sampled_from([True, False, None]))
def test_burst_tile_and_elision_agree_on_2d_copies(j6, row, rows, pad, burst, window, copies,
                                                   into_tcm):
    results = run_all_ways(j6, row, rows, row + pad, row + 2 * pad, burst, window, copies,
                           into_tcm)
    first = results["burst", False]
    assert all(r == first for r in results.values()), results
    assert first[1:3] == (copies * rows * row * (into_tcm is not False),
                          copies * rows * row * (into_tcm is not True))


@pytest.mark.parametrize("copies", [1, 2])
def test_long_aligned_rows_take_the_closed_form_exactly(j6, copies):
    """Rows of whole bursts: tile fidelity prices the block as one transfer (cut by the
    second channel's when two overlap), the same cycles; alone, the 1-D figure."""
    results = run_all_ways(j6, 1024, 64, 2048, 1024, 64, 8, copies, True)
    assert len(set(results.values())) == 1
    if copies == 1:
        want = 25 + transfer_cycles(64 * 1024, 64, 8, 100.0, 0.5)
        assert results["tile", True][0] == want


@pytest.mark.parametrize("kwargs, text", [
    ({"rows": 0}, "rows must be an integer >= 1"),
    ({"rows": 2.0}, "rows must be an integer >= 1"),
    ({"rows": 3, "src_pitch": 100}, "src_pitch = 100 bytes is smaller than its row"),
    ({"rows": 3, "dst_pitch": 199}, "dst_pitch = 199 bytes is smaller than its row"),
])
def test_bad_shapes_are_refused_in_one_line(j6, kwargs, text):
    env, dsp = platform(j6)
    src, dst = blocks(dsp, 4096, 4096)
    with pytest.raises(DspsimInputError, match=text) as e:
        next(dsp.core.idma_copy(0, src, dst, 200, "copy_in", **kwargs))
    assert "\n" not in str(e.value)


def test_numpy_integers_are_rows_and_pitches(j6):
    env, dsp = platform(j6)
    src, dst = blocks(dsp, 3 * 256, 3 * 200)
    out = copy_cycles(env, dsp, src, dst, 200, np.int64(3), sp=np.int32(256))
    assert (out["transfer"].rows, out["transfer"].src_pitch) == (3, 256)


def test_a_block_past_its_allocation_is_refused_naming_the_2d_block(j6):
    env, dsp = platform(j6, data=False)
    src, dst = blocks(dsp, 1024, 1024)
    with pytest.raises(AllocationError, match=r"iDMA 2-D block of 4 rows x 200 bytes, "
                                              r"src_pitch 300, .* spans 1100 bytes") as e:
        next(dsp.core.idma_copy(0, src, dst, 200, "copy_in", rows=4, src_pitch=300))
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------- the copy op's 2-D keys
@pytest.mark.parametrize("fidelity", ["burst", "tile"])
@pytest.mark.parametrize("src, dst", [("host", "tcm"), ("ddr", "host"), ("tcm", "ddr"),
                                      ("host", "host")])
def test_a_2d_copy_lands_every_row_exactly(j6, src, dst, fidelity):
    """n = rows x row bytes, each end at its pitch, in descriptors of 3 rows: the rows
    gathered back are the input byte for byte, and the run reads and writes n bytes."""
    m = j6.with_overrides({"copy.src": src, "copy.dst": dst, "copy.rows": 10,
                           "copy.src_pitch_bytes": 332, "copy.dst_pitch_bytes": 260,
                           "copy.descriptor_bytes": 3 * 244})
    r = simulate(m, "copy", "idma", n=2440, fidelity=fidelity)
    assert r.output["exact"] and r.output["bytes"] == 2440
    assert sum(r.bytes.values()) == 2440 * ((src != "tcm") + (dst != "tcm"))
    assert get_op("copy").bounds(m, "idma", (2440,))["descriptors"] == 4  # 3 + 3 + 3 + 1 rows


def test_the_2d_keys_only_act_in_the_idma_variant(j6):
    # dma is the idma variant under the platform-neutral name (dspsim/ops/copy: DMA_ALIASES)
    assert get_op("copy").key_variants("copy.rows") == ("idma", "dma")
    assert get_op("copy").key_variants("copy.dst_pitch_bytes") == ("idma", "dma")


@pytest.mark.parametrize("settings, variant, n, text", [
    ({"copy.rows": 4}, "memcpy", 4096, "a 2-D block is an iDMA descriptor"),
    ({"copy.rows": 7}, "idma", 4096, "must be a whole number of rows"),
    ({"copy.rows": 4, "copy.src_pitch_bytes": 1000}, "idma", 4096,
     "copy.src_pitch_bytes = 1,000: smaller than a row of 1,024"),
    ({"copy.rows": 4, "copy.descriptor_bytes": 1536}, "idma", 4096,
     "a 2-D descriptor moves whole rows"),
    ({"copy.rows": 4, "copy.dst_pitch_bytes": 1 << 20}, "idma", 4096,
     "the 2-D block at copy.dst = tcm spans 3,146,752 bytes"),
])
def test_a_2d_copy_it_cannot_run_is_one_line(j6, capsys, settings, variant, n, text):
    with pytest.raises(DspsimInputError, match=text) as e:
        simulate(j6.with_overrides(settings), "copy", variant, n=n, data=False)
    assert "\n" not in str(e.value)
    sets = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    code, _, err = run_cli(capsys, "run", "--op", "copy", "--variant", variant, "--n", n,
                           *sets)
    assert code == 2 and one_line(err) and text in err
