"""One engine, two names; the closed forms the bounds use against the walk they stand for.

``--fidelity tile`` runs the burst engine (its repeat finders made tile fidelity's closed
forms no faster): a run asked at either fidelity reports the same, field for field. The
closed forms of a transfer and of a kernel call alone on the port
(:func:`dspsim.hw.port.transfer_cycles`, :func:`dspsim.kernels.shapes.ddr_call_sequence`),
which the ops' bounds and estimates build on, equal the burst-level walk. Runs of alike
iterations booked inside a walk (:class:`dspsim.hw.repeats.IterationRuns`) change nothing,
where requesters meet at the same instant (round values) and with two cores on one port;
every run stays above its op's lower bound on random configurations."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.config import load_model
from dspsim.hw import repeats
from dspsim.hw.port import transfer_cycles
from dspsim.kernels import get_kernel
from dspsim.kernels.shapes import SEED_SHAPES as KERNELS
from dspsim.kernels.shapes import ddr_call_sequence
from dspsim.ops import get_op, op_names
from dspsim.run import simulate
from dspsim.study.workload import parse_workload, run_workload, task_table
from tests.op_keys import tile_settings
from tests.test_engine import make_dsp, reference_copy_cycles, run_proc


def random_config(rng: np.random.Generator) -> dict:
    """The ranges a sweep explores: latency 1-2000 cycles, 0.05-64 bytes/cycle, 1-64
    outstanding requests (port and channel), tiles 256 B - 256 KiB."""
    tile = 4 * int(np.exp(rng.uniform(math.log(64), math.log(65536))))
    return {
        "ddr.latency_cycles": float(np.exp(rng.uniform(0, math.log(2000)))),
        "ddr.bytes_per_cycle": float(np.exp(rng.uniform(math.log(0.05), math.log(64)))),
        "ddr.max_outstanding": int(rng.integers(1, 65)),
        "idma.max_outstanding": int(rng.integers(1, 65)),
        **tile_settings(tile),  # every op's tile key (tests/op_keys.py)
    }


def random_size(rng: np.random.Generator, op: str) -> dict:
    """n 64 - 300,000 for a 1-D op; a 2-D op's rows x cols with up to ~300,000 elements."""
    if get_op(op).ndim == 1:
        return {"n": int(np.exp(rng.uniform(math.log(64), math.log(300_000))))}
    cols = int(np.exp(rng.uniform(math.log(8), math.log(2048))))
    return {"shape": (max(1, int(np.exp(rng.uniform(0, math.log(300_000 // cols))))), cols)}


def reported(r) -> tuple:
    """What a run reports of its timing."""
    return (r.cycles, r.bytes, r.busy_cycles, r.stall_cycles, r.ddr_contention_cycles)


def every_variant() -> list[tuple[str, str]]:
    return [(op, v) for op in op_names() for v in get_op(op).variants]


@pytest.fixture
def no_iteration_runs(monkeypatch):
    """Switch the booking of alike iterations off (every iteration walked): the reference
    the booked runs must equal."""
    def off():
        monkeypatch.setattr(repeats.IterationRuns, "applies", staticmethod(lambda *a: False))
    return off


def test_every_run_is_above_its_lower_bound_on_random_configurations(j6):
    """240 random configurations (fixed seed), every op and variant the ops register (a
    configuration the op refuses is skipped): each run at or above its op's lower bound, its
    bytes the same at both fidelity names."""
    rng = np.random.default_rng(20261130)
    runs, seen = every_variant(), set()
    for i in range(240):
        op, variant = runs[i % len(runs)]
        config, size = random_config(rng), random_size(rng, op)
        try:
            model = j6.with_overrides(config)
            r = simulate(model, op, variant, data=False, **size)
        except ValueError:
            continue
        bound = get_op(op).bounds(model, variant, r.shape)["lower_bound_cycles"]
        assert r.cycles >= bound * (1 - 1e-9), (op, variant, config, size)
        seen.add((op, variant))
    assert seen == set(runs)


def test_tile_is_a_name_for_the_one_engine(j6):
    """A run asked at tile fidelity is the burst run, field for field; the name is recorded."""
    for op, variant in every_variant():
        burst = simulate(j6, op, variant, data=False, trace=True)
        tile = simulate(j6, op, variant, data=False, trace=True, fidelity="tile")
        assert reported(tile) == reported(burst) and tile.events == burst.events
        assert tile.trace.equals(burst.trace) and tile.passes == burst.passes


def round_config(rng: np.random.Generator, op: str) -> dict:
    """Round values, where requesters meet at the same instant: integer latencies, setups and
    call overheads (0 included), power-of-two bandwidths, bursts, windows and tiles."""
    return {
        "ddr.latency_cycles": int(rng.integers(1, 9)) * int(rng.choice([1, 1, 8, 64])),
        "ddr.bytes_per_cycle": float(2.0 ** int(rng.integers(-3, 6))),
        "ddr.max_outstanding": int(2 ** int(rng.integers(0, 6))),
        "idma.max_outstanding": int(2 ** int(rng.integers(0, 6))),
        "idma.burst_bytes": int(2 ** int(rng.integers(4, 9))),
        "idma.setup_cycles": int(rng.integers(0, 5)) * int(rng.choice([1, 8])),
        "core.call_overhead_cycles": int(rng.integers(0, 4)) * int(rng.choice([1, 10])),
        **tile_settings(int(2 ** int(rng.integers(8, 13)))),  # every op's tile key
    }


def small_size(rng: np.random.Generator, op: str, elements: int = 2000) -> dict:
    if get_op(op).ndim == 1:
        return {"n": int(rng.integers(64, elements))}
    cols = int(2 ** int(rng.integers(3, 9)))
    return {"shape": (int(rng.integers(1, max(2, elements // cols))), cols)}


def test_booked_iterations_equal_walked_ones_where_requesters_meet(j6, no_iteration_runs):
    """160 round configurations (fixed seed), every op and variant, up to 6,000 elements:
    requests issued at one instant are served in the order their waits were queued, with
    alike iterations booked at once or walked one by one."""
    rng = np.random.default_rng(20)
    runs, points = every_variant(), []
    for i in range(160):
        op, variant = runs[i % len(runs)]
        config, size = round_config(rng, op), small_size(rng, op, 6000)
        try:
            model = j6.with_overrides(config)
            points.append((op, variant, model, size, simulate(model, op, variant, data=False,
                                                              **size)))
        except ValueError:  # a configuration the op refuses
            continue
    no_iteration_runs()
    for op, variant, model, size, booked in points:
        walked = simulate(model, op, variant, data=False, **size)
        assert reported(booked) == reported(walked), (op, variant, size)
    assert {p[:2] for p in points} == set(runs)


def test_booked_iterations_equal_walked_ones_with_two_cores_on_one_port(j6, no_iteration_runs):
    """Two streams of any two ops and variants on two cores, on round configurations: a core
    whose kernel reads DDR meets the other core's channels at the same instant, also as the
    task starts (the UCP starts it in a process of its own); booking its alike iterations
    must stop before the other core's next event."""
    rng = np.random.default_rng(21)
    runs, cases = every_variant(), []
    for _ in range(40):
        config = round_config(rng, "softmax") | {
            k: v for k, v in round_config(rng, "layernorm").items() if k.startswith("layernorm")}
        config |= {"core.count": 2, "host.rpc_latency_us": float(rng.integers(0, 3))}
        streams = []
        for k in range(2):
            op, variant = runs[int(rng.integers(len(runs)))] if k else \
                [("softmax", "direct"), ("layernorm", "direct")][int(rng.integers(2))]
            size = small_size(rng, op, 6000)
            if "shape" in size:
                size["shape"] = list(size["shape"])
            streams.append({"name": f"s{k}", "op": op, "variant": variant, "count": 2,
                            "period_us": float(rng.integers(1, 4)), "backend": f"core{k}"}
                           | size)
        try:
            model = j6.with_overrides(config)
            wl = parse_workload({"seed": 1, "stream": streams})
            cases.append((wl, model, task_table(run_workload(wl, model))))
        except ValueError:
            continue
    no_iteration_runs()
    for wl, model, booked in cases:
        assert task_table(run_workload(wl, model)).equals(booked)


def test_the_direct_variant_books_its_iterations(j6):
    """The reference engine walks every vector access of the direct variant; the elided engine
    books its alike iterations: the same cycles in a hundredth of the events."""
    ref = simulate(j6, variant="direct", data=False, elide=False)
    fast = simulate(j6, variant="direct", data=False)
    assert fast.cycles == ref.cycles and fast.events * 100 < ref.events


@settings(max_examples=200, deadline=None)
@given(nbytes=st.integers(1, 200_000), burst=st.sampled_from([16, 64, 128, 256, 4096]),
       window=st.integers(1, 64), latency=st.floats(1, 2000), bw=st.floats(0.01, 128))
def test_transfer_closed_form_equals_the_burst_recursion(nbytes, burst, window, latency, bw):
    expected = reference_copy_cycles(nbytes, burst, window, latency, 1 / bw, window)
    assert transfer_cycles(nbytes, burst, window, latency, 1 / bw) == pytest.approx(
        expected, rel=1e-9)


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("n", [1, 31, 64, 1000, 4097])
@pytest.mark.parametrize("rounded", [False, True], ids=["j6", "round"])
def test_direct_kernel_closed_form_equals_the_walk(j6, name, n, rounded):
    """A kernel call alone on the port: the closed form the bounds use
    (:func:`ddr_call_sequence`) against the walk, access by access; equal on round values,
    within float rounding (a sum in another order) on J6's."""
    if rounded:
        j6 = j6.with_overrides({"ddr.latency_cycles": 100, "ddr.bytes_per_cycle": 0.5})
    env, dsp = make_dsp(j6)
    x = dsp.ddr.add_block(4 * n + 256, 4096)
    z = dsp.ddr.add_block(4 * n + 256, 4096)
    if name in ("vecmaxf", "vecsum"):
        gen = dsp.core.call(name, n, x)
    elif name == "vecexpf_max":
        gen = dsp.core.call(name, n, x, z, max_value=0.0)
    else:
        gen = dsp.core.call(name, n, x, z, scalar=0.5)
    walked = run_proc(env, dsp, gen)["cycles"]
    shape = get_kernel(name).shape
    port = dsp.ddr.port
    closed = ddr_call_sequence(((shape, name not in ("vecmaxf", "vecsum")),), n,
                               shape.on(j6.core), port.policy, port.max_outstanding).cycles
    if rounded:
        assert closed == walked
    else:
        assert closed == pytest.approx(walked, rel=1e-12)


@pytest.mark.parametrize("op, variant, shape", [
    ("softmax", "direct", (20_000,)), ("softmax", "pingpong", (20_000,)),
    ("softmax", "resident", (20_000,)), ("layernorm", "direct", (16, 1024)),
])
def test_a_port_log_logs_every_request(op, variant, shape):
    """Figures and traces read the port log: every request, reads as reads, writes as writes,
    and the cycles do not change with it."""
    model = load_model()
    logged = simulate(model, op, variant, shape=shape, data=False, trace=True, port_log=True)
    read = sum(e[4] for e in logged.port_log if not e[5])
    assert read == logged.bytes["ddr_read"]
    assert simulate(model, op, variant, shape=shape, data=False).cycles == logged.cycles


def test_the_ddr_profile_changes_no_task_time(j6):
    """The DDR profile's meter watches the port's requests; the platform still restarts where
    it is idle (as many episodes), and every task's times are those of a run without it."""
    model = j6.with_overrides({"core.count": 2, "host.rpc_latency_us": 1.0})
    streams = [{"name": "a", "op": "softmax", "variant": "direct", "n": 6000, "count": 6,
                "period_us": 3000.0, "backend": "core0"},
               {"name": "b", "op": "layernorm", "variant": "direct", "shape": [2, 3000],
                "count": 6, "period_us": 4000.0, "backend": "core1"}]
    wl = parse_workload({"seed": 1, "stream": streams})
    plain, profiled = (run_workload(wl, model, ddr_profile=p) for p in (False, True))
    assert task_table(profiled).equals(task_table(plain))
    assert profiled.episodes == plain.episodes > 1
