"""A memory served one transaction at a time (``protocol = "transactions"``, the HiFi5's PSRAM
behind its controller): a transaction's command, data and hold clocks, a stream of them one
after another, a page chop, every engine against the reference one, and the keys that cannot
act refused."""

import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim.config import load_model
from dspsim.errors import ConfigError
from dspsim.hw.policy import Transactions
from dspsim.ops import get_op, op_names
from dspsim.platform import Platform
from dspsim.run import simulate
from dspsim.ticks import cycles
from tests.test_port_policy import reported, small_size

# the vendor's PSRAM: T = 2 DSP cycles, CMD+ADDR 3 + LC 7 - 1 = 9 clocks, 2 bytes per clock
PSRAM = {"ddr.protocol": "transactions", "ddr.clock_cycles": 2.0, "ddr.command_clocks": 9,
         "ddr.bytes_per_clock": 2.0}


@pytest.fixture(scope="module")
def j6():
    return load_model()


@pytest.fixture(scope="module")
def psram(j6):
    return j6.with_overrides(PSRAM)


def _port(model, **kwargs):
    return Platform(simpy.Environment(), model, data=False, **kwargs).port


# ------------------------------------------------------------------ the closed forms
def test_a_lone_read_of_128_bytes_is_the_vendors_150_cycles(psram):
    policy = psram.ddr.policy
    assert type(policy) is Transactions and not policy.uniform
    assert policy.request_cycles(128, False) == (9 + 64 + 2) * 2 == 150
    assert cycles(_port(psram).request(0, 128, False, "a")) == 150.0


def test_a_write_holds_one_clock(psram):
    assert psram.ddr.policy.request_cycles(128, True) == (9 + 64 + 1) * 2
    assert cycles(_port(psram).request(0, 128, True, "a")) == 148.0
    odd = psram.with_overrides({"ddr.write_hold_clocks": 3, "ddr.read_hold_clocks": 0})
    assert cycles(_port(odd).request(0, 5, True, "a")) == (9 + 3 + 3) * 2  # data clocks round up
    assert cycles(_port(odd).request(0, 5, False, "a")) == (9 + 3 + 0) * 2


def test_a_stream_of_reads_is_one_transaction_after_another(psram):
    n = 7
    port = _port(psram)
    done = [cycles(port.request(0, 128, False, "a")) for _ in range(n)]
    assert done == [150.0 * (i + 1) for i in range(n)]
    assert done[-1] == psram.ddr.policy.stream_cycles(n, 128, False) == n * 150
    assert port.busy_cycles == n * 150
    assert psram.ddr.policy.transfer_cycles(1000, 128, 16, False) \
        == 7 * 150 + (9 + 52 + 2) * 2  # 7 bursts of 128 and one of 104, however many in flight


def test_a_page_chop_pays_the_command_again(psram):
    paged = psram.with_overrides({"ddr.page_bytes": 64})
    assert cycles(_port(paged).request(0, 128, False, "a")) == 2 * (9 + 32 + 2) * 2 == 172
    assert cycles(_port(paged).request(0, 100, False, "a")) == ((9 + 32 + 2) + (9 + 18 + 2)) * 2
    assert cycles(_port(paged).request(0, 64, False, "a")) == 150 - 64  # one page: not chopped


def test_every_transaction_key_moves_a_run(psram):
    to_ddr = {"copy.src": "tcm", "copy.dst": "ddr"}  # a copy that writes the memory
    base = simulate(psram, "copy", "idma", n=4096, data=False).cycles
    written = simulate(psram, "copy", "idma", n=4096, data=False, params=to_ddr).cycles
    for key, value in {"ddr.clock_cycles": 3.0, "ddr.command_clocks": 20,
                       "ddr.bytes_per_clock": 4.0, "ddr.read_hold_clocks": 9,
                       "ddr.page_bytes": 32}.items():
        assert simulate(psram.with_overrides({key: value}), "copy", "idma", n=4096,
                        data=False).cycles != base, key
    assert simulate(psram.with_overrides({"ddr.write_hold_clocks": 9}), "copy", "idma",
                    n=4096, data=False, params=to_ddr).cycles != written
    assert base != simulate(psram.with_overrides({"ddr.protocol": "pipelined",
                                                  "ddr.latency_cycles": 10.0,
                                                  "ddr.bytes_per_cycle": 1.0}),
                            "copy", "idma", n=4096, data=False).cycles


# ------------------------------------------------------------------ the port's fast paths
def test_the_fast_paths_stay_off_a_transactions_port(psram):
    port = _port(psram, fidelity="tile")
    assert port.repeats is None and not port.ring


RUNS = [(op, v) for op in op_names() for v in get_op(op).variants]
configs = st.fixed_dictionaries({
    "ddr.clock_cycles": st.sampled_from([1.0, 2.0, 2.5]),
    "ddr.command_clocks": st.sampled_from([0, 9, 17]),
    "ddr.bytes_per_clock": st.sampled_from([1.0, 2.0, 3.0, 8.0]),
    "ddr.read_hold_clocks": st.sampled_from([0, 2]),
    "ddr.write_hold_clocks": st.sampled_from([1, 4]),
    "ddr.page_bytes": st.sampled_from([0, 48, 1024]),
    "idma.max_outstanding": st.sampled_from([1, 2, 16]),
    "idma.burst_bytes": st.sampled_from([32, 64, 128]),
})


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(config=configs, run=st.sampled_from(RUNS), size=st.integers(0, 400))
def test_burst_tile_and_elision_agree_on_a_transactions_port(psram, config, run, size):
    """Every engine books a transactions port's requests one by one: the same figures as the
    reference engine (burst fidelity, no elision)."""
    op, variant = run
    model = psram.with_overrides(config)
    kw = {"data": False, **small_size(op, size)}
    engines = (("burst", False), ("burst", True), ("tile", True))
    try:
        figures = [reported(simulate(model, op, variant, fidelity=fidelity, elide=elide, **kw))
                   for fidelity, elide in engines]
    except ValueError:
        return  # a configuration the op refuses
    assert figures[1:] == figures[:1] * 2


# ------------------------------------------------------------------ keys that cannot act
@pytest.mark.parametrize("key,value", [("ddr.clock_cycles", 2.0), ("ddr.command_clocks", 9),
                                       ("ddr.bytes_per_clock", 2.0), ("ddr.page_bytes", 0),
                                       ("ddr.read_hold_clocks", 2)])
def test_a_transaction_key_on_a_pipelined_memory_is_refused(j6, key, value):
    with pytest.raises(ConfigError, match=r"cannot act on a pipelined memory") as e:
        j6.with_overrides({key: value})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("key,value", [("ddr.latency_cycles", 10.0),
                                       ("ddr.bytes_per_cycle", 1.0),
                                       ("ddr.write_latency_cycles", 10.0)])
def test_a_pipelined_key_on_a_transactions_memory_is_refused(psram, key, value):
    with pytest.raises(ConfigError, match=r"cannot act on a transactions memory"):
        psram.with_overrides({key: value})


def test_a_transactions_memory_does_not_take_latency_or_bandwidth(psram):
    assert psram.ddr.latency_cycles is None and psram.ddr.bytes_per_cycle is None
    assert "latency_cycles" not in psram.as_dict()["ddr"]


def test_a_model_file_gives_each_protocol_its_own_keys(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "j6"\n[ddr]\npage_bytes = 0\n')
    with pytest.raises(ConfigError, match="ddr.page_bytes cannot act on a pipelined memory"):
        load_model(bad)
    missing = tmp_path / "missing.toml"
    missing.write_text('base = "j6"\n[ddr]\nprotocol = "transactions"\nclock_cycles = 2.0\n')
    with pytest.raises(ConfigError, match="missing key ddr.command_clocks"):
        load_model(missing)  # the base's latency and bandwidth go with its protocol
    switched = tmp_path / "switched.toml"
    switched.write_text('base = "j6"\n[ddr]\nprotocol = "transactions"\nclock_cycles = 2.0\n'
                        'command_clocks = 9\nbytes_per_clock = 2.0\n')
    assert load_model(switched).ddr.policy == load_model().with_overrides(PSRAM).ddr.policy
    again = tmp_path / "again.toml"
    again.write_text('base = "j6"\n[ddr]\nprotocol = "transactions"\nclock_cycles = 2.0\n'
                     'command_clocks = 9\nbytes_per_clock = 2.0\nlatency_cycles = 5.0\n')
    with pytest.raises(ConfigError, match="latency_cycles cannot act on a transactions"):
        load_model(again)
    j6 = load_model()
    with pytest.raises(ConfigError, match="missing key ddr.command_clocks"):
        j6.with_overrides({"ddr.protocol": "transactions", "ddr.clock_cycles": 2.0})
    with pytest.raises(ConfigError, match="missing key ddr.latency_cycles"):
        j6.with_overrides(PSRAM).with_overrides({"ddr.protocol": "pipelined"})


def test_max_outstanding_other_than_one_is_refused_on_a_transactions_memory(j6):
    """A transactions memory serves one transaction at a time: its request slots never held
    more than one (1 and 16 gave the same cycles and request logs), so a value set other than
    1 is refused in one line; 1, and a value inherited from a pipelined base, are taken."""
    from dspsim.config import load_model

    esp = load_model("esp32s3")
    with pytest.raises(ConfigError, match="psram.max_outstanding = 4 cannot act on a "
                                          "transactions memory.*allowed: 1"):
        esp.with_overrides({"psram.max_outstanding": 4})
    assert esp.with_overrides({"psram.max_outstanding": 1}).memories["psram"].max_outstanding == 1
    assert j6.with_overrides(PSRAM).memories["ddr"].protocol == "transactions"  # 64 inherited
    with pytest.raises(ConfigError, match="cannot act on a transactions memory"):
        j6.with_overrides({**PSRAM, "ddr.max_outstanding": 64})
