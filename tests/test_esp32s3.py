"""The ESP32-S3 platform (models/esp32s3.toml): its new mechanisms against closed forms, its
calibration rows, the run commands the platform promises, and the published predictions."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from dspsim import load_model
from dspsim.run import simulate
from tests.cli_helpers import one_line, run_cli

ROOT = Path(__file__).resolve().parents[1]
N = 102_400


@pytest.fixture(scope="module")
def esp():
    return load_model(ROOT / "models" / "esp32s3.toml")


def _cycles(m, variant, **settings):
    return simulate(m.with_overrides(settings) if settings else m, "copy", variant, n=N,
                    data=False).cycles


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("k, c", [(1, 5.0), (2, 4.0), (4, 4.0), (8, 6.0), (32, 4.0), (4, 3.7)])
def test_a_loop_between_core_local_ends_is_its_iterations_alone(esp, k, c):
    """SRAM is core_local: no access crosses the port, the loop is P + O + (n / K) C."""
    p = esp.copy.prologue_cycles + esp.core.call_overhead_cycles
    got = _cycles(esp, "loop", **{"copy.access_bytes": k, "copy.loop_cycles_per_iteration": c})
    assert got == round(p + N // k * c)


def test_a_memory_not_core_local_costs_its_requests(esp):
    """The same SRAM reached through its port (core_local false): each iteration's load
    blocks for its round trip L + K / B (stores are posted)."""
    m = esp.with_overrides({"sram.core_local": False, "copy.access_bytes": 4,
                            "copy.loop_cycles_per_iteration": 4.0})
    local = _cycles(esp, "loop", **{"copy.access_bytes": 4, "copy.loop_cycles_per_iteration": 4.0})
    s = m.memories["sram"]
    assert _cycles(m, "loop") >= local + N // 4 * (s.latency_cycles + 4 / s.bytes_per_cycle) - 1


@pytest.mark.parametrize("op, shape", [("softmax", (3, 4096)), ("layernorm", (4, 768)),
                                       ("rmsnorm", (16, 1000)), ("fc", (16, 256))])
def test_a_direct_kernel_on_a_core_local_memory_is_bounded_by_its_kernels(esp, op, shape):
    """The host's SRAM is core_local: a direct variant's loads and stores cross no port, so
    its bounds charge no port traffic and its estimate is the kernels' cycles, as simulated
    (they charged the port's data path: a lower bound up to 4x the run's cycles)."""
    from dspsim.ops import get_op
    r = simulate(esp, op, "direct", shape=shape, data=False)
    b = get_op(op).bounds(esp, "direct", shape)
    assert b.lower_bound_cycles <= r.cycles == b.estimate_cycles
    assert b.details.get("traffic_bytes", r.bytes) == r.bytes


@pytest.mark.parametrize("src, dst", [("sram", "sram"), ("tcm", "tcm"), ("tcm", "sram")])
@pytest.mark.parametrize("settings", [{}, {"sram.write_latency_cycles": 400.0}])
def test_a_memcpy_with_no_port_between_its_ends_is_its_word_loop(esp, src, dst, settings):
    """memcpy between TCM and core_local SRAM is the library's word loop alone
    (copy.memcpy_access_bytes): its bounds were the vector kernel's (TCM to TCM: 8,206 where
    the run takes 40,974) or priced on the SRAM's port (3,088 for 2,574, and 26,270 with a
    write latency the run never meets); now every bound and the estimate are the run's."""
    from dspsim.ops import get_op
    m = esp.with_overrides({"copy.src": src, "copy.dst": dst, **settings})
    r = simulate(m, "copy", "memcpy", n=65536, data=False)
    b = get_op("copy").bounds(m, "memcpy", (65536,))
    assert b["lower_bound_cycles"] == b["estimate_cycles"] == r.cycles


@pytest.mark.parametrize("latency", [7.0, 13.5])
def test_a_wide_scalar_access_is_several_requests(j6, latency):
    """From an uncached memory with core.scalar_access_bytes = 4, K = 8 is two blocking
    4-byte loads: each iteration pays one more round trip than one 8-byte load, and the
    4-byte halves cross the path in the same bytes: the difference is iterations x L."""
    base = j6.with_overrides({"ddr.latency_cycles": latency, "ddr.bytes_per_cycle": 8.0,
                              "copy.src": "ddr", "copy.dst": "tcm", "copy.access_bytes": 8,
                              "copy.loop_cycles_per_iteration": 3.0})
    n = 8192
    one = simulate(base, "copy", "loop", n=n, data=False).cycles
    two = simulate(base.with_overrides({"core.scalar_access_bytes": 4}), "copy", "loop", n=n,
                   data=False).cycles
    assert two - one == pytest.approx(n // 8 * latency, abs=1)


@pytest.mark.parametrize("rate, fetch", [(0.25, 0.0), (0.5, 20.0), (0.125, 7.0)])
def test_a_paced_engine_moves_a_descriptor_at_its_own_rate(esp, rate, fetch):
    """GDMA SRAM -> SRAM, one descriptor of d bytes in 32-byte bursts, one in flight: the
    engine fetches the descriptor (D), issues a burst every 32 / r cycles (slower than the
    port's read-then-write round trip), and the last burst's read and write take
    2 (L + 32 / B): busy = D + (d / 32 - 1) 32 / r + 2 (L + 32 / B)."""
    d = 4096
    m = esp.with_overrides({"idma.engine_bytes_per_cycle": rate, "idma.descriptor_cycles": fetch,
                            "copy.descriptor_bytes": d})
    r = simulate(m, "copy", "dma", n=d, data=False)
    s = m.memories["sram"]
    want = fetch + (d // 32 - 1) * 32 / rate + 2 * (s.latency_cycles + 32 / s.bytes_per_cycle)
    assert r.busy_cycles["core0.idma0"] == pytest.approx(want)


@pytest.mark.parametrize("per_line", [0.0, 10.9, 3.25])
def test_the_dma_drivers_cache_sync_costs_each_cached_ends_lines(esp, per_line):
    """GDMA PSRAM -> SRAM: the source's 3,200 lines synced at c cycles each, in the span."""
    m = esp.with_overrides({"copy.src": "psram"})
    none = _cycles(m, "dma", **{"copy.dma_cache_sync_cycles_per_line": 0.0})
    got = _cycles(m, "dma", **{"copy.dma_cache_sync_cycles_per_line": per_line})
    assert got - none == pytest.approx(N // 32 * per_line, abs=1)
    both = _cycles(m, "dma", **{"copy.dst": "psram", "copy.dma_cache_sync_cycles_per_line": 0.0})
    synced = _cycles(m, "dma", **{"copy.dst": "psram",
                                  "copy.dma_cache_sync_cycles_per_line": per_line})
    assert synced - both == pytest.approx(2 * N // 32 * per_line, abs=1)


def test_memcpy_is_a_word_loop_of_known_cost(esp):
    """memcpy_access_bytes = 4: memcpy SRAM -> SRAM is P + O + (n / 4) x its cycles."""
    p = esp.copy.prologue_cycles + esp.core.call_overhead_cycles
    for c in (2.5, 3.0):
        got = _cycles(esp, "memcpy", **{"copy.memcpy_cycles_per_iteration": c})
        assert got == round(p + N // 4 * c)


def test_a_psram_read_miss_costs_one_transaction(esp):
    """memcpy PSRAM -> SRAM, blocking misses, no prefetch: per 32-byte line one read
    transaction (command + 32 / bytes_per_clock + read hold + refresh) x T and the line's 8
    words."""
    m = esp.with_overrides({"copy.src": "psram"})
    ps = m.memories["psram"]
    fill = (ps.command_clocks + 32 / ps.bytes_per_clock + ps.read_hold_clocks
            + ps.refresh_clocks) * ps.clock_cycles
    per_line = fill + 8 * m.copy.memcpy_cycles_per_iteration
    assert _cycles(m, "memcpy") == round(m.copy.prologue_cycles + N // 32 * per_line)


def test_dma_is_idma_under_another_name(esp, j6):
    for m, s in ((esp, {"copy.src": "psram"}), (esp, {}),
                 (j6, {"copy.src": "ddr", "copy.dst": "tcm"})):
        assert _cycles(m, "dma", **s) == _cycles(m, "idma", **s)


# ------------------------------------------------------------------ the calibration rows
def test_every_calibration_row_is_within_1_pct(capsys):
    code, out, err = run_cli(capsys, "validate", "--model", ROOT / "models" / "esp32s3.toml")
    assert code == 0, err
    assert "every one within 1 %" in out and out.count("calibration") >= 10


# ------------------------------------------------------------------ the promised commands
ENDS = [("sram", "sram"), ("sram", "psram"), ("psram", "sram"), ("psram", "psram")]


@pytest.mark.parametrize("src, dst", ENDS)
@pytest.mark.parametrize("variant, extra", [
    ("loop", ["--set", "copy.access_bytes=1", "--set", "copy.loop_cycles_per_iteration=5"]),
    ("memcpy", []), ("idma", []), ("dma", []),
])
def test_each_method_runs_between_any_two_memories_with_its_interval(capsys, src, dst,
                                                                     variant, extra):
    code, out, err = run_cli(capsys, "run", "--model", ROOT / "models" / "esp32s3.toml",
                             "--op", "copy", "--variant", variant, "--n", "102400",
                             "--set", f"copy.src={src}", "--set", f"copy.dst={dst}", *extra,
                             "--interval")
    assert code == 0, err
    assert re.search(r"cycles \[[0-9,]+, [0-9,]+\] over the model.s ranges", out)


@pytest.mark.parametrize("setting, text", [
    ("copy.src=ddr", "no such memory"),
    ("copy.access_bytes=3", "copy.access_bytes"),
])
def test_what_the_platform_cannot_do_is_one_line(capsys, setting, text):
    code, _, err = run_cli(capsys, "run", "--model", ROOT / "models" / "esp32s3.toml",
                           "--op", "copy", "--variant", "loop", "--n", "102400",
                           "--set", setting)
    assert code == 2 and one_line(err) and text in err


# ------------------------------------------------------------------ the predictions
def test_the_published_predictions_are_the_scripts_output():
    spec = importlib.util.spec_from_file_location(
        "esp32s3_predictions", ROOT / "experiments" / "esp32s3_predictions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = mod.table()
    assert table in (ROOT / "docs" / "esp32s3-predictions.md").read_text()
    assert table in (ROOT / "README.md").read_text()  # "How far to trust it" publishes it too


def test_a_memory_cached_and_core_local_is_refused(capsys):
    code, _, err = run_cli(capsys, "run", "--model", ROOT / "models" / "esp32s3.toml",
                           "--op", "copy", "--variant", "memcpy", "--n", "1024",
                           "--set", "sram.cached=true")
    assert code == 2 and one_line(err) and "sram.cached and sram.core_local" in err


@pytest.mark.parametrize("variant, settings", [
    ("memcpy", {}), ("memcpy", {"copy.src": "psram"}),
    ("memcpy", {"copy.dst": "psram", "copy.flush_destination": True}),
    ("loop", {"copy.src": "psram", "copy.dst": "psram", "copy.access_bytes": 8,
              "copy.loop_cycles_per_iteration": 6.0, "copy.flush_destination": True}),
    ("dma", {"copy.src": "psram"}),
])
def test_the_bounds_traffic_is_the_runs(esp, variant, settings):
    """Core-local SRAM carries none of a core copy's accesses; the GDMA's go through it."""
    from dspsim.ops import get_op

    m = esp.with_overrides(settings) if settings else esp
    n = 8192
    r = simulate(m, "copy", variant, n=n, data=False)
    assert get_op("copy").bounds(m, variant, (n,))["traffic_bytes"] == r.bytes
    assert r.cycles >= get_op("copy").bounds(m, variant, (n,))["lower_bound_cycles"]


@pytest.mark.parametrize("src, dst", [("sram", "sram"), ("psram", "sram"), ("sram", "psram"),
                                      ("psram", "psram")])
@pytest.mark.parametrize("n", [4, 4093, N])
def test_the_gdmas_bounds_know_its_pace_and_its_cache_sync(esp, src, dst, n):
    """The engine's own rate and descriptor fetch and the driver's cache sync are in the
    closed forms: the estimate within 1 % of the run (it was 84 % low for SRAM -> SRAM, where
    the engine's 0.25 bytes a cycle binds), the lower bound below it."""
    from dspsim.ops import get_op

    m = esp.with_overrides({"copy.src": src, "copy.dst": dst})
    r = simulate(m, "copy", "dma", n=n, data=False)
    b = get_op("copy").bounds(m, "dma", (n,))
    assert b["lower_bound_cycles"] <= r.cycles
    assert b["estimate_cycles"] == pytest.approx(r.cycles, rel=0.01)


def test_the_cores_whole_priced_work_is_in_the_trace():
    """The DMA driver's cache sync of each PSRAM end and the interrupt handler are the core's
    compute in the trace (the timeline draws them), not idle time: per end, its lines x
    copy.dma_cache_sync_cycles_per_line."""
    m = load_model("esp32s3").with_overrides({"copy.src": "psram", "copy.dst": "psram",
                                               "copy.completion_interrupt": True})
    r = simulate(m, "copy", "dma", n=8184, data=False, trace=True)
    t = r.trace
    core = t[(t["engine"] == "core0") & (t["kind"] == "compute")]
    sync = core[core["what"] == "cache sync"]
    lines = 8184 // m.dcache.line_bytes + (8184 % m.dcache.line_bytes > 0)
    assert len(sync) == 2
    assert (sync["end_cycle"] - sync["start_cycle"]).sum() == pytest.approx(
        2 * lines * m.copy.dma_cache_sync_cycles_per_line)
    handler = core[core["what"] == "interrupt handler"]
    assert (handler["end_cycle"] - handler["start_cycle"]).sum() == pytest.approx(
        m.copy.interrupt_handler_cycles)


def test_a_memcpy_of_part_of_a_word_names_the_memcpy(capsys):
    """The library memcpy is a word loop (copy.memcpy_access_bytes = 4): 33 bytes is refused
    naming the variant asked for, not the loop variant."""
    code, _, err = run_cli(capsys, "run", "--model", "esp32s3", "--op", "copy", "--variant",
                           "memcpy", "--n", "33")
    assert code == 2 and one_line(err)
    assert "copy memcpy of 33 bytes with copy.memcpy_access_bytes = 4" in err
