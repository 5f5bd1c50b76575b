"""A HardwareModel built or replaced in Python is checked as its file is by every study entry
that takes one (run_workload, run_sweep, calibrate, optimize): one line naming the key."""

from __future__ import annotations

import dataclasses
import math

import pytest

from dspsim.errors import DspsimInputError


def _bad(model, section: str, **change):
    if section in model.memories:
        table = dataclasses.replace(model.memories[section], **change)
        return dataclasses.replace(model, memories={**model.memories, section: table})
    return dataclasses.replace(model, **{section: dataclasses.replace(getattr(model, section),
                                                                      **change)})


def _workload(model):
    from dspsim.study.workload import Stream, Workload, run_workload
    stream = Stream("s", "softmax", "direct", (1000,), 1000.0, 1)
    run_workload(Workload((stream,), 0, "api"), model)


def _sweep(model, tmp_path):
    from dspsim.study.sweep import Sweep, build_sweep, run_sweep
    grid = build_sweep(["idma.channels=1,2"], op="softmax", variants="pingpong", n=4096)
    run_sweep(Sweep(grid.axes, model, "tile"), tmp_path / "t.csv")


def _calibrate(model):
    from dspsim.study.calibrate import Measurement, calibrate
    calibrate(model, [Measurement("pingpong", 5e4, 4096)], ["ddr.bytes_per_cycle"],
              identify=False)


def _optimize(model):
    from dspsim.study.optimize import optimize
    optimize("softmax", n=4096, model=model, check_numerics=False)


ENTRIES = {"run_workload": _workload, "run_sweep": _sweep, "calibrate": _calibrate,
           "optimize": _optimize}


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(("change", "message"), [
    (("idma", {"channels": 0}), "model 'j6': idma.channels = 0: allowed range is 1 to 8"),
    (("ddr", {"latency_cycles": math.nan}), "model 'j6': ddr.latency_cycles = nan: expected a "),
    (("core", {"clock_mhz": -1.0}), "model 'j6': core.clock_mhz = -1.0: allowed range is"),
])
def test_a_model_replaced_in_python_is_refused_by_every_study_entry(j6, tmp_path, entry,
                                                                    change, message):
    """dataclasses.replace gives a HardwareModel no file check saw: idma.channels = 0 ran (a
    ping-pong on no channel), a NaN latency was "cannot convert float NaN to integer" and a
    negative clock simpy's "Negative delay", deep in a run."""
    model = _bad(j6, change[0], **change[1])
    run = ENTRIES[entry]
    with pytest.raises(DspsimInputError) as e:
        run(model, tmp_path) if entry == "run_sweep" else run(model)
    assert str(e.value).startswith(message) and "\n" not in str(e.value), e.value


@pytest.mark.parametrize("entry", ["run_workload", "run_sweep", "calibrate"])
def test_a_study_entry_refuses_what_is_not_a_model(tmp_path, entry):
    """None for the model was an AttributeError (optimize takes None: the default model)."""
    run = ENTRIES[entry]
    with pytest.raises(DspsimInputError, match=r"^model None: expected a HardwareModel "):
        run(None, tmp_path) if entry == "run_sweep" else run(None)
