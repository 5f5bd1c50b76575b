"""Two ops on one core share its iDMA channels as firmware does: the ping-pong frame returns
without waiting for the last-but-one write-back (on the other channel), so the next op on that
core can find a descriptor still queued; a ring set-up (``idma_init_loop``) waits until the
channel's queued descriptors have completed, inside the op's timed span, and an op in the
seed's FIFO mode queues behind them. Every task completes, whatever the start offsets."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim.config import load_model
from dspsim.run import simulate
from dspsim.study.workload import parse_workload, run_workload, task_table

SOFTMAX = {"op": "softmax", "variant": "pingpong", "n": 60_000}
RESIDENT = {"op": "softmax", "variant": "resident", "n": 60_000}
COPY = {"op": "copy", "variant": "idma", "n": 32_768}
LAYERNORM = {"op": "layernorm", "variant": "pingpong", "shape": [64, 256]}
FC = {"op": "fc", "variant": "pingpong"}


def _key(spec: dict) -> str:
    return f"{spec['op']}/{spec['variant']}"


SPECS = {_key(s): s for s in (SOFTMAX, RESIDENT, COPY, LAYERNORM, FC)}


def _table(streams: list[dict], cores: int = 1):
    """The task table by stream, ``op_cycles`` as simulated (not rounded)."""
    model = load_model().with_overrides({"core.count": cores})
    run = run_workload(parse_workload({"seed": 1, "stream": streams}), model)
    table = task_table(run)
    table["op_cycles"] = run.tasks.op_cycles
    return table.set_index("stream")


def _run(first: dict, second: dict, start_us: float = 10.0, cores: int = 1,
         backend: str = "any"):
    return _table([{"name": "a", "period_us": 100_000, "count": 1, "backend": backend} | first,
                   {"name": "b", "period_us": 100_000, "count": 1, "backend": backend,
                    "start_us": start_us} | second], cores)


def _simulate(spec: dict, trace: bool = False):
    kw = {"shape": tuple(spec["shape"])} if "shape" in spec else {"n": spec.get("n")}
    return simulate(load_model(), spec["op"], spec["variant"], data=False, trace=trace,
                    fidelity="tile", **kw)


@cache
def _alone_cycles(op: str) -> float:
    """The op's cycles alone on the platform (what ``dspsim run`` gives, not rounded)."""
    spec = {"name": "a", "period_us": 100_000, "count": 1} | SPECS[op]
    return float(_table([spec]).loc["a", "op_cycles"])


@cache
def _tail_cycles(op: str) -> float:
    """How long after its timer stops the op alone leaves a descriptor moving."""
    t = _simulate(SPECS[op], trace=True).trace
    idma = t[t["engine"].str.contains("idma")]
    return max(0.0, float(idma["end_cycle"].max()) - float(t[t["engine"] == "core0"]
                                                             ["end_cycle"].max()))


def test_a_ring_set_up_waits_for_the_write_back_an_earlier_op_left():
    tail = _tail_cycles(_key(SOFTMAX))
    assert tail > 0  # the frame returns with the other channel's write-back queued
    tasks = _run(SOFTMAX, COPY)
    assert (tasks["core_end_cycle"] > 0).all()
    assert tasks.loc["b", "start_cycle"] == tasks.loc["a", "core_end_cycle"]
    # the copy's own cycles: its wait for the write-back, then exactly its cycles alone
    assert tasks.loc["b", "op_cycles"] == pytest.approx(_alone_cycles(_key(COPY)) + tail, abs=1e-6)
    assert tasks.loc["a", "op_cycles"] == _alone_cycles(_key(SOFTMAX))


def test_the_command_runs_the_two_streams(tmp_path, capsys):
    from dspsim.cli import main

    f = tmp_path / "two.toml"
    f.write_text('[[stream]]\nname = "sm"\nop = "softmax"\nvariant = "pingpong"\nn = 60000\n'
                 'period_us = 100000\ncount = 1\n\n[[stream]]\nname = "cp"\nop = "copy"\n'
                 'variant = "idma"\nn = 32768\nperiod_us = 100000\ncount = 1\nstart_us = 10\n')
    assert main(["workload", str(f), "--json"]) == 0
    assert '"tasks": 1' in capsys.readouterr().out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start_us=st.floats(0.0, 3_400.0), copy_first=st.booleans())
def test_any_start_offset_runs_every_task(start_us, copy_first):
    first, second = (COPY, SOFTMAX) if copy_first else (SOFTMAX, COPY)
    tasks = _run(first, second, start_us)
    assert (tasks["core_end_cycle"] > 0).all()
    alone = _alone_cycles(_key(COPY))
    copy = tasks.loc["a" if copy_first else "b"]
    assert alone <= copy["op_cycles"] <= alone + _tail_cycles(_key(SOFTMAX)) + 1e-6
    assert tasks.loc["b" if copy_first else "a", "op_cycles"] == _alone_cycles(_key(SOFTMAX))


PAIRS = [(COPY, LAYERNORM), (LAYERNORM, COPY), (COPY, COPY), (FC, SOFTMAX), (SOFTMAX, FC),
         (FC, COPY), (SOFTMAX, SOFTMAX), (COPY, RESIDENT), (RESIDENT, COPY)]


@pytest.mark.parametrize("cores", [1, 2, 3])
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{_key(p[0])}+{_key(p[1])}")
def test_two_ops_on_one_core_of_many_run_to_the_end(pair, cores):
    """Both streams on the last core, the second arriving while the first runs: it waits for
    the core, then for what the first left on the channels: a ring set-up waits for it to
    complete (its cycles: its own alone plus the first's tail), an op in FIFO mode queues
    behind it and shares the port with it (at least its own cycles alone). After an op that
    leaves nothing behind (a ring op polls its channel empty) the second runs as alone, a ring
    left set up or not."""
    first, second = pair
    tasks = _run(first, second, 10.0, cores, f"core{cores - 1}")
    assert (tasks["core_end_cycle"] > 0).all()
    assert (tasks["core"] == f"core{cores - 1}").all()
    assert tasks.loc["b", "start_cycle"] == tasks.loc["a", "core_end_cycle"]
    alone = _alone_cycles(_key(second))
    if _tail_cycles(_key(first)) == 0:  # nothing left on the channels: as alone
        assert tasks.loc["b", "op_cycles"] == alone
    elif second in (COPY, FC):  # a ring set-up: waits, then runs as alone
        # fc copies its input and bias on channel 0 before its timer (behind what the first
        # left there) and waits for its output's copy before it returns: no wait in a span
        left = 0.0 if FC in (first, second) else _tail_cycles(_key(first))
        assert tasks.loc["b", "op_cycles"] == pytest.approx(alone + left, abs=1e-6)
    else:
        assert tasks.loc["b", "op_cycles"] >= alone
