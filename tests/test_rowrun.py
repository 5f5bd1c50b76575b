"""Identical rows at the price of one: a direct variant's runs of alike rows, booked in closed
form (:mod:`dspsim.hw.finder`), report exactly what the reference engine (``elide=False``:
every row simulated, event by event) does.

Random configurations (fixed seed) and round-valued ones (integer latencies, power-of-two
bandwidths: requests meet at the same instant) on every op with a direct variant, with many
short rows so that runs are booked and cross many binades of the time: the cycles, bytes,
busy and stall cycles, contention, every pass, warnings, hazards, the engines' stats and the
output values are identical.
"""

import numpy as np
import pytest

from dspsim import load_model, simulate
from dspsim.ops import get_op, op_names
from tests.test_elision import FIELDS, random_config
from tests.test_fidelity import round_config

DIRECT_OPS = [op for op in op_names() if "direct" in get_op(op).variants]


def reported(r) -> dict:
    out = {f: getattr(r, f) for f in FIELDS}
    out["passes"] = list(r.passes)
    out["output"] = repr(r.output)  # NaN sums compare by their text
    out["memories"] = r.memories
    out["dcache"] = r.dcache
    out["values"] = None if r.output_array is None else r.output_array.tobytes()
    return out


def cases(count: int, seed: int, round_values: bool):
    rng = np.random.default_rng(seed)
    for i in range(count):
        op = DIRECT_OPS[i % len(DIRECT_OPS)]
        config = round_config(rng, op) if round_values else random_config(rng)
        if round_values:
            config["core.write_buffer_entries"] = int(rng.choice([1, 2, 8]))
        rows = int(rng.integers(40, 700))
        cols = int(rng.choice([1, 2, 3, 17, 32, 64, 100, 256]))
        fidelity = "tile" if i % 4 == 3 else "burst"
        yield pytest.param(op, config, (rows, cols), bool(i % 3 == 0), fidelity,
                           id=f"{i}-{op}-{rows}x{cols}-{fidelity}")


def check_equal(op, config, shape, data, fidelity, **kwargs):
    model = load_model().with_overrides(config)
    ref = simulate(model, op, "direct", shape=shape, data=data, fidelity=fidelity, elide=False,
                   **kwargs)
    fast = simulate(model, op, "direct", shape=shape, data=data, fidelity=fidelity, **kwargs)
    assert reported(fast) == reported(ref)
    return fast, ref


@pytest.mark.parametrize("op, config, shape, data, fidelity", list(cases(36, 2112, False)))
def test_booked_rows_report_what_the_reference_does(op, config, shape, data, fidelity):
    check_equal(op, config, shape, data, fidelity)


@pytest.mark.parametrize("op, config, shape, data, fidelity", list(cases(24, 2113, True)))
def test_booked_rows_are_exact_where_requests_meet_at_one_instant(op, config, shape, data,
                                                                  fidelity):
    check_equal(op, config, shape, data, fidelity)


@pytest.mark.parametrize("op", DIRECT_OPS)
def test_a_run_of_rows_costs_a_few_rows(j6, op):
    """Twice the rows, hardly more events: the rows are booked, not simulated (the reference
    engine's events double)."""
    events = {}
    for rows in (2000, 4000):
        fast, ref = check_equal(op, {}, (rows, 8), False, "burst")
        events[rows] = (fast.events, ref.events)
    assert events[4000][1] > 1.9 * events[2000][1]
    assert events[4000][0] < 1.2 * events[2000][0] < 0.2 * events[2000][1]


def test_warnings_keep_the_order_rows_raise_them():
    """Softmax direct with data: rows with an element past the overflow guard, a few rows
    later one with a NaN, all in one run of booked rows: the batch that computes their values
    raises both codes (nan_input first, as each call checks NaN first), so it is redone in
    halves and lists them in the order the rows do (overflow_guard first), the counts
    unchanged."""
    rows, cols = 600, 4
    x = np.tile(np.linspace(-1, 1, cols, dtype=np.float32), (rows, 1))
    x[500, 1] = 100.0  # past vecexpf_max's guard of 88.72 (the seed's raw-input test)
    x[501, 2] = 100.0
    x[505, 0] = np.nan
    x[560, 3] = np.nan
    fast, ref = check_equal("softmax", {}, None, True, "burst", x=x)
    assert [w["code"] for w in fast.warnings][:2] == ["overflow_guard", "nan_input"]
    assert fast.events * 5 < ref.events


def test_a_port_log_gets_the_booked_rows_requests(j6):
    """Where every request's record is asked for, rows are still booked, each booked row's
    requests logged one by one: the log and the trace equal the reference's."""
    fast, ref = check_equal("layernorm", {}, (300, 16), False, "burst", trace=True,
                            port_log=True)
    assert fast.trace.equals(ref.trace) and fast.port_log == ref.port_log
    assert len(fast.trace) == len(ref.trace) == 3 * 300  # three kernel calls a row
    assert fast.events * 5 < ref.events


@pytest.mark.parametrize("latency", [37 + 2.0**-21, 37 + 3 * 2.0**-22, 2.0**-21, 114.006])
@pytest.mark.parametrize("op, data", [("layernorm", False), ("softmax", True)])
def test_rounding_ties_late_in_a_run(op, data, latency):
    """The op starts 5 x 10^9 cycles in (the RPC latency at 10 GHz), where the ulp is 2^-20:
    a latency with a bit at 2^-21 puts every request's completion on a rounding tie (to
    even: it depends on the parity of the time), so a row's cycles alternate unless the
    booking shifts by whole rows exactly as the rows one by one do."""
    config = {"host.rpc_latency_us": 1e6, "core.clock_mhz": 10_000.0,
              "ddr.latency_cycles": latency, "ddr.bytes_per_cycle": 0.5,
              "core.write_buffer_entries": 2}
    fast, ref = check_equal(op, config, (400, 24), data, "burst")
    assert fast.events * 5 < ref.events


@pytest.mark.parametrize("op, config, shape, data, fidelity", list(cases(8, 2114, False)))
def test_a_whole_trace_holds_the_booked_rows_trace_rows(op, config, shape, data, fidelity):
    """With a trace (no row limit) rows are still booked, their trace rows as one block: the
    trace equals the reference engine's row for row, and the stall summary with it."""
    from dspsim.analysis.stalls import stall_summary

    fast, ref = check_equal(op, config, shape, data, fidelity, trace=True)
    a, b = fast.trace_table, ref.trace_table
    assert len(a) == len(b) and all(np.array_equal(a[c], b[c]) for c in a.columns)
    assert stall_summary(fast) == stall_summary(ref)


@pytest.mark.parametrize("limit", [None, 100, 4 * 4000 - 3, 4 * 4000])
def test_rows_are_booked_with_a_trace_cut_or_whole(j6, limit):
    """A trace, whole or cut at a row limit (the cut inside a booked run, at its last row, at
    the end), gets the booked rows' trace rows: the same rows, cut and count as the
    reference's."""
    kw = dict(shape=(4000, 8), data=False, trace=True, trace_limit=limit)
    fast = simulate(j6, "softmax", "direct", **kw)
    ref = simulate(j6, "softmax", "direct", elide=False, **kw)
    assert fast.events * 10 < ref.events
    a, b = fast.trace_table, ref.trace_table
    assert len(a) == len(b) == min(limit or 4 * 4000, 4 * 4000)
    assert all(np.array_equal(a[c], b[c]) for c in a.columns)
    assert fast.trace_cut_cycle == ref.trace_cut_cycle and fast.cycles == ref.cycles
