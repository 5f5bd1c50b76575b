"""Calibration builds each distinct model once (``Problem.model_with``): every measurement of a
fit point, and the closed form and the simulation of one point, share it; a model the values
make invalid is refused each time as before; and the fits are the same as building every
model afresh."""

import pytest

from dspsim.config import HardwareModel, load_model
from dspsim.errors import ConfigError
from dspsim.run import simulate
from dspsim.study.calibrate import Measurement, calibrate
from dspsim.study.calibrate.measure import as_free, int_value, is_int_key
from dspsim.study.calibrate.problem import Problem

FREE = {"ddr.latency_cycles": (20.0, 2000.0), "ddr.bytes_per_cycle": (0.05, 20.0)}


@pytest.fixture(scope="module")
def j6():
    return load_model()


def _measurements(j6, **settings):
    out = []
    for variant, n in (("pingpong", 3000), ("direct", 2000), ("direct", 1000)):
        cycles = simulate(j6, "softmax", variant, n=n, data=False, fidelity="tile").cycles
        out.append(Measurement(variant, cycles, n, dict(settings) if n == 1000 else {}))
    return out


@pytest.fixture
def builds(monkeypatch):
    """Every with_overrides call, counted."""
    calls = []
    original = HardwareModel.with_overrides

    def counted(self, overrides):
        calls.append(dict(overrides))
        return original(self, overrides)

    monkeypatch.setattr(HardwareModel, "with_overrides", counted)
    return calls


def test_one_build_per_point_for_measurements_alike(j6, builds):
    prob = Problem(j6, _measurements(j6), as_free(j6, FREE), "tile")
    builds.clear()
    values = {"ddr.latency_cycles": 150.0, "ddr.bytes_per_cycle": 0.5}
    prob.residuals(values)
    prob.surrogate_residuals(values)
    assert builds == [values]  # three measurements, a closed form and a simulation: one model
    prob.residuals({**values, "ddr.latency_cycles": 151.0})
    assert len(builds) == 2


def test_a_measurement_with_its_own_settings_gets_its_own_model(j6, builds):
    prob = Problem(j6, _measurements(j6, **{"softmax.tile_bytes": 8192}), as_free(j6, FREE),
                   "tile")
    builds.clear()
    values = {"ddr.latency_cycles": 150.0, "ddr.bytes_per_cycle": 0.5}
    prob.residuals(values)
    assert builds == [values, {"softmax.tile_bytes": 8192, **values}]
    m = prob.measurements[2]
    assert prob.model_with(values, m).softmax.tile_bytes == 8192
    assert prob.model_with(values, prob.measurements[0]).softmax.tile_bytes \
        == j6.softmax.tile_bytes


def test_an_invalid_model_is_refused_every_time(j6, builds):
    prob = Problem(j6, _measurements(j6), as_free(j6, FREE), "tile")
    m = prob.measurements[0]
    bad = {"ddr.bytes_per_cycle": -1.0}
    for _ in range(3):
        with pytest.raises(ConfigError, match="ddr.bytes_per_cycle") as e:
            prob.model_with(bad, m)
        assert "\n" not in str(e.value)
    assert len([b for b in builds if b == bad]) == 1
    assert prob.simulated(bad, 0) == float("inf")


def test_an_integer_value_and_a_float_value_are_two_models(j6):
    prob = Problem(j6, _measurements(j6), as_free(j6, {**FREE, "idma.max_outstanding": (1, 64)}),
                   "tile")
    m = prob.measurements[0]
    a = prob.model_with({"idma.max_outstanding": 4, "ddr.latency_cycles": 100.0}, m)
    b = prob.model_with({"idma.max_outstanding": 4.4, "ddr.latency_cycles": 100.0}, m)
    assert a is b  # an integer key takes its nearest value: the same model
    assert a.idma.max_outstanding == int_value("idma.max_outstanding", 4.4) == 4
    assert is_int_key("idma.max_outstanding") and not is_int_key("ddr.latency_cycles")


def test_the_fit_is_the_same_as_building_every_model_afresh(j6, monkeypatch):
    ms = _measurements(j6, **{"softmax.tile_bytes": 8192})
    cached = calibrate(j6, ms, FREE, fidelity="tile", identify=False)

    def afresh(self, values, m):
        vals = {k: (int_value(k, v) if is_int_key(k) else float(v)) for k, v in values.items()}
        return self.model.with_overrides({**m.settings, **vals})

    monkeypatch.setattr(Problem, "model_with", afresh)
    fresh = calibrate(j6, ms, FREE, fidelity="tile", identify=False)
    assert cached.values == fresh.values
    assert list(cached.best.residuals) == list(fresh.best.residuals)
    assert cached.simulations == fresh.simulations


def test_an_explore_grid_point_finds_the_same_fits(j6, monkeypatch):
    """One grid point of ``calibrate --explore`` (the J6 fit's own), its feasibility screen,
    surrogate seeds and fits: the same fits, residuals and simulations as with every model
    built afresh."""
    from dspsim.study.calibrate.explore import explore_space, fit_point
    from dspsim.study.calibrate.measure import seed_measurements

    ms = seed_measurements(j6)
    space = explore_space(j6, ms)
    point = {"softmax.tile_bytes": 32768, "idma.max_outstanding": 32, "ddr.max_outstanding": 64}
    task = (j6, ms, space, point, 0.01, "tile")
    cached = fit_point(task)
    assert cached[1]  # the J6 reading lives here

    def afresh(self, values, m):
        vals = {k: (int_value(k, v) if is_int_key(k) else float(v)) for k, v in values.items()}
        return self.model.with_overrides({**m.settings, **vals})

    monkeypatch.setattr(Problem, "model_with", afresh)
    assert fit_point(task) == cached
