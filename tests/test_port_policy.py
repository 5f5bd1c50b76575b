"""A memory's request policy (:mod:`dspsim.hw.policy`): what a request costs is asked of it by
the port, the closed forms and every op's bounds. Reads and writes with their own latencies
(``write_latency_cycles``): a lone request's time, request slots that free in any order, runs
that write a slower memory, exactness of every engine against the reference one, and the key's
absence (or its equal to ``latency_cycles``) leaving every figure as it was."""

from dataclasses import dataclass
from typing import ClassVar

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dspsim.hw.policy as policy_module
from dspsim.config import load_model
from dspsim.errors import ConfigError
from dspsim.hw.policy import OneLatency, ReadWriteLatency, quantized
from dspsim.ops import get_op, op_names
from dspsim.platform import Platform
from dspsim.run import simulate
from dspsim.ticks import cycles, ticks


@pytest.fixture(scope="module")
def j6():
    return load_model()


def _port(model, **kwargs):
    return Platform(simpy.Environment(), model, data=False, **kwargs).port


def reported(r) -> tuple:
    """What a run reports of its timing and traffic."""
    return (r.cycles, r.bytes, r.busy_cycles, r.stall_cycles, r.ddr_contention_cycles)


def small_size(op: str, rng_value: int) -> dict:
    """A small input of ``op``: n for a 1-D op, a few short rows for a 2-D one."""
    if get_op(op).ndim == 1:
        return {"n": 64 + rng_value}
    return {"shape": (2 + rng_value % 5, 8 * (1 + rng_value % 40))}


RUNS = [(op, v) for op in op_names() for v in get_op(op).variants]


# ------------------------------------------------------------------ the key and the policy
def test_the_key_is_optional_and_its_absence_is_one_latency(j6):
    assert j6.ddr.write_latency_cycles is None
    assert type(j6.ddr.policy) is OneLatency
    assert "write_latency_cycles" not in j6.as_dict()["ddr"]
    same = j6.with_overrides({"ddr.write_latency_cycles": j6.ddr.latency_cycles})
    assert same.ddr.policy == j6.ddr.policy  # equal latencies: the one-latency policy
    other = j6.with_overrides({"ddr.write_latency_cycles": 300})
    # (the policy holds the model's latencies quantized to whole ticks)
    assert other.ddr.policy == ReadWriteLatency(quantized(j6.ddr.latency_cycles),
                                                j6.ddr.bytes_per_cycle, quantized(300.0))
    assert not other.ddr.policy.uniform and j6.ddr.policy.uniform
    with pytest.raises(ConfigError, match="write_latency_cycles"):
        j6.with_overrides({"ddr.write_latency_cycles": 0})


def test_a_lone_read_and_a_lone_write_take_their_latency_and_their_bytes(j6):
    lat_r, lat_w, nbytes = 114.5, 330.25, 256
    model = j6.with_overrides({"ddr.latency_cycles": lat_r, "ddr.write_latency_cycles": lat_w,
                               "ddr.bytes_per_cycle": 0.5})
    read = cycles(_port(model).request(0, nbytes, False, "a"))
    write = cycles(_port(model).request(0, nbytes, True, "a"))
    assert read == lat_r + nbytes / 0.5 == model.ddr.policy.request_cycles(nbytes, False)
    assert write == lat_w + nbytes / 0.5 == model.ddr.policy.request_cycles(nbytes, True)
    burst, window = 64, 4
    assert model.ddr.policy.transfer_cycles(nbytes, burst, window, True) \
        - model.ddr.policy.transfer_cycles(nbytes, burst, window, False) == lat_w - lat_r


def test_a_read_takes_the_slot_that_frees_first_not_the_next_in_the_ring(j6):
    """Two slots; a write holds one until 111, a read the other until 12: a read issued at 12
    takes the free one and completes at 23 (in ring order it would wait for the write's slot
    and complete at 122)."""
    model = j6.with_overrides({"ddr.latency_cycles": 10, "ddr.write_latency_cycles": 110,
                               "ddr.bytes_per_cycle": 1.0, "ddr.max_outstanding": 2})
    port = _port(model)
    assert port.request(ticks(0.0), 1, True, "w") == ticks(111.0)
    assert port.request(ticks(0.0), 1, False, "r") == ticks(12.0)
    assert port.request(ticks(12.0), 1, False, "r") == ticks(23.0)
    assert port.contention_cycles == 1.0  # only the data path the write held at 0


def test_the_fast_paths_stay_off_a_port_whose_requests_may_complete_out_of_order(j6):
    model = j6.with_overrides({"ddr.write_latency_cycles": 500})
    port = _port(model, fidelity="tile")
    assert port.repeats is None and not port.ring
    uniform = _port(j6, fidelity="tile")
    assert uniform.repeats is not None and uniform.ring


# ------------------------------------------------------------------ runs
def test_slower_writes_slow_a_run_that_writes_and_leave_a_read_only_copy_as_it_was(j6):
    slow = j6.with_overrides({"ddr.write_latency_cycles": 20_000})
    to_ddr = {"copy.src": "tcm", "copy.dst": "ddr"}
    from_ddr = {"copy.src": "ddr", "copy.dst": "tcm"}
    n = 65536
    assert simulate(slow, "copy", "idma", n=n, data=False, params=from_ddr).cycles \
        == simulate(j6, "copy", "idma", n=n, data=False, params=from_ddr).cycles
    fast = simulate(j6, "copy", "idma", n=n, data=False, params=to_ddr).cycles
    written = simulate(slow, "copy", "idma", n=n, data=False, params=to_ddr)
    assert written.cycles > fast
    # the copy alone on the port: its closed form, from the same policy, is the run's span
    est = get_op("copy").bounds(slow.with_overrides(to_ddr), "idma", (n,))["estimate_cycles"]
    assert abs(est - written.cycles) < 1
    assert simulate(slow, "softmax", "direct", n=3000, data=False).cycles \
        > simulate(j6, "softmax", "direct", n=3000, data=False).cycles
    assert simulate(slow, "softmax", "pingpong", n=3000, data=False).cycles \
        > simulate(j6, "softmax", "pingpong", n=3000, data=False).cycles


configs = st.fixed_dictionaries({
    "ddr.latency_cycles": st.sampled_from([1, 8, 64, 114.006, 300.5]),
    "ddr.bytes_per_cycle": st.sampled_from([0.25, 0.38814, 1.0, 4.0]),
    "ddr.max_outstanding": st.sampled_from([1, 2, 3, 8, 16]),
    "idma.max_outstanding": st.sampled_from([1, 2, 4, 16]),
    "idma.burst_bytes": st.sampled_from([32, 64, 128]),
})


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(config=configs, run=st.sampled_from(RUNS), size=st.integers(0, 400))
def test_write_latency_equal_to_latency_changes_no_figure(j6, config, run, size):
    """With ``write_latency_cycles`` = ``latency_cycles``, every figure is the default's; and
    the out-of-order port itself (forced with equal latencies: no ring, no fast path) gives
    them too, at both fidelities, with and without elision."""
    op, variant = run
    base = j6.with_overrides(config)
    same = base.with_overrides({"ddr.write_latency_cycles": config["ddr.latency_cycles"]})
    kw = {"data": False, **small_size(op, size)}
    try:
        want = reported(simulate(base, op, variant, **kw))
    except ValueError:
        return  # a configuration the op refuses
    assert reported(simulate(same, op, variant, fidelity="tile", **kw)) == want
    latency = quantized(base.ddr.latency_cycles)  # as request_policy builds it: whole ticks
    forced = ReadWriteLatency(latency, base.ddr.bytes_per_cycle, latency)
    original = policy_module.request_policy
    policy_module.request_policy = lambda cfg: forced if cfg == base.ddr else original(cfg)
    try:
        for fidelity, elide in (("burst", True), ("burst", False), ("tile", True)):
            got = simulate(base, op, variant, fidelity=fidelity, elide=elide, **kw)
            assert reported(got) == want, (fidelity, elide)
    finally:
        policy_module.request_policy = original


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(config=configs, write=st.sampled_from([0.5, 3, 64, 250.25, 2000]),
       run=st.sampled_from(RUNS), size=st.integers(0, 400))
def test_burst_tile_and_elision_agree_with_unequal_latencies(j6, config, write, run, size):
    op, variant = run
    model = j6.with_overrides({**config, "ddr.write_latency_cycles": write})
    kw = {"data": False, **small_size(op, size)}
    try:
        ref = simulate(model, op, variant, elide=False, **kw)
    except ValueError:
        return
    assert reported(simulate(model, op, variant, **kw)) == reported(ref)
    assert reported(simulate(model, op, variant, fidelity="tile", **kw)) == reported(ref)


# ------------------------------------------------------------------ a new policy parameter
@dataclass(frozen=True)
class WriteSurcharge(OneLatency):
    """A policy that is not in dspsim: every write takes ``surcharge_cycles`` more."""

    surcharge_cycles: float = 0.0
    uniform: ClassVar[bool] = False

    def latency(self, write: bool) -> float:
        return self.latency_cycles + (self.surcharge_cycles if write else 0.0)


SURCHARGE_SIZES = {"softmax": {"n": 3000}, "layernorm": {"shape": (8, 256)},
                   "rmsnorm": {"shape": (8, 256)}, "fc": {"shape": (64, 256)},
                   "copy": {"n": 16384}, "kernel": {}}


@pytest.mark.parametrize("run", RUNS, ids=[f"{op}-{v}" for op, v in RUNS])
@pytest.mark.parametrize("where", ["ddr", "tcm"])
def test_a_new_policy_parameter_moves_every_estimate_that_depends_on_it(j6, monkeypatch, run,
                                                                         where):
    """A policy defined here, nowhere in dspsim: the simulation and every op's bounds take it
    from the memory's table with no other edit. Where the run's cycles move, the estimate
    moves the same way; a run that writes nothing to the memory moves neither."""
    op, variant = run
    model = j6.with_overrides({"copy.src": "tcm" if where == "ddr" else "ddr",
                               "copy.dst": where})
    kw = {"data": False, **SURCHARGE_SIZES[op]}
    before = simulate(model, op, variant, **kw)
    bounds_before = dict(get_op(op).bounds(model, variant, before.shape))
    # built as request_policy builds one: on the table's latency quantized to whole ticks
    monkeypatch.setattr(policy_module, "request_policy", lambda cfg: WriteSurcharge(
        quantized(cfg.latency_cycles), cfg.bytes_per_cycle, 20_000.0))
    after = simulate(model, op, variant, **kw)
    bounds_after = dict(get_op(op).bounds(model, variant, after.shape))
    assert after.bytes == before.bytes
    if not sum(v for k, v in before.bytes.items() if k.endswith("_write")):
        assert after.cycles == before.cycles and bounds_after == bounds_before
    elif after.cycles != before.cycles:
        assert after.cycles > before.cycles
        assert bounds_after["estimate_cycles"] > bounds_before["estimate_cycles"]
