"""Calibration: measurement syntax, fitting, identifiability, model-file output, CLI."""

import io
import json
import tomllib
from contextlib import redirect_stderr, redirect_stdout
from datetime import date
from types import MappingProxyType

import pytest
import simpy

import dspsim.study.calibrate.problem
from dspsim.cli import main
from dspsim.config import key_sources, load_model
from dspsim.errors import DspsimInputError
from dspsim.host.ucp import Ucp
from dspsim.ops.registry import firmware_registry
from dspsim.platform import Platform
from dspsim.run import simulate
from dspsim.schema import OP_SCHEMAS
from dspsim.study.calibrate import (
    MAX_N,
    SEED_FREE,
    SEED_MEASUREMENTS_CYCLES,
    Measurement,
    calibrate,
    fit,
    fit_seed,
    parse_free,
    parse_measurement,
    read_measurements_csv,
    write_model_file,
)

LB = ["ddr.latency_cycles=20:2000", "ddr.bytes_per_cycle=0.05:20"]


def measured(truth, mode, n, **settings):
    cycles = simulate(truth.with_overrides(settings), mode=mode, n=n, data=False).cycles
    return Measurement(mode, cycles, n, settings)


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------- syntax
@pytest.mark.parametrize(
    "text, mode, n, settings, cycles",
    [
        ("pingpong=5154293", "pingpong", 100_000, {}, 5_154_293),
        ("direct=7_648_254", "direct", 100_000, {}, 7_648_254),
        (
            "pingpong,n=50000,softmax.tile_bytes=8192=2600000",
            "pingpong",
            50_000,
            {"softmax.tile_bytes": 8192},
            2_600_000,
        ),
        (
            "pingpong,softmax.schedule=split,n=10=123",
            "pingpong",
            10,
            {"softmax.schedule": "split"},
            123,
        ),
    ],
)
def test_measurement_syntax(text, mode, n, settings, cycles):
    m = parse_measurement(text)
    assert (m.mode, m.n, m.settings, m.cycles) == (mode, n, settings, cycles)
    assert parse_measurement(m.spec()) == m  # the spec round-trips


@pytest.mark.parametrize(
    "text, match",
    [
        ("pingpong", "expected MODE"),
        ("=5", "expected MODE"),
        ("pingpong=5,154,293", "no commas"),
        ("pingpong=-3", "positive number"),
        ("turbo=5", "version 'turbo' unknown"),
        ("pingpong,n=0=5", "n = '0'"),
        ("pingpong,tile=5=5", "not KEY=VALUE|unknown model key"),
        ("pingpong,ddr.latency=3=5", "unknown model key"),
        ("pingpong,ddr.latency_cycles=fast=5", "expected a"),
    ],
)
def test_bad_measurements_are_named(text, match):
    with pytest.raises(DspsimInputError, match=match):
        parse_measurement(text)


def test_measurements_csv(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text(
        "mode,n,cycles,softmax.tile_bytes\npingpong,50000,2600000,8192\ndirect,,7648254,\n"
    )
    a, b = read_measurements_csv(p)
    assert a == Measurement("pingpong", 2_600_000, 50_000, {"softmax.tile_bytes": 8192})
    assert b == Measurement("direct", 7_648_254, 100_000, {})


@pytest.mark.parametrize(
    "body, match",
    [
        ("mode,n\npingpong,5\n", "missing column 'cycles'"),
        ("mode,cycles,ddr.latency\npingpong,5,3\n", "unknown model key"),
        ("mode,cycles\npingpong,abc\n", "line 2"),
        ("mode,cycles\n", "no measurements"),
    ],
)
def test_bad_csv_is_named(tmp_path, body, match):
    p = tmp_path / "m.csv"
    p.write_text(body)
    with pytest.raises(DspsimInputError, match=match):
        read_measurements_csv(p)


def test_free_ranges(j6):
    p = parse_free("ddr.latency_cycles", j6)
    assert p.lo == pytest.approx(j6.ddr.latency_cycles / 100)
    assert p.hi == pytest.approx(j6.ddr.latency_cycles * 100)
    k = parse_free("idma.max_outstanding=1:64", j6)
    assert (k.lo, k.hi, k.integer) == (1, 64, True)
    for text, match in [
        ("ddr.latency", "unknown model key"),
        ("softmax.schedule", "text values"),
        ("softmax.guard_shifted_input", "true/false values; only numeric keys can be fitted"),
        ("ddr.latency_cycles=5", "LO:HI"),
        ("ddr.latency_cycles=9:3", "LO < HI"),
        ("ddr.latency_cycles=0:3", "greater than 0"),
        ("idma.max_outstanding=1:5000", "allows 1 to 1024"),
    ]:
        with pytest.raises(DspsimInputError, match=match):
            parse_free(text, j6)


def host_allocates(model, n):
    """Whether the host's buffers for one run on ``n`` elements fit DDR, allocated as
    ``dspsim.sim.simulate`` does (input and output arrays, parameter block), without running."""
    ucp = Ucp(Platform(simpy.Environment(), model, data=False), firmware_registry())
    try:
        ucp.malloc(4 * n, "input array")
        ucp.malloc(4 * n, "output array")
        ucp.malloc(64, "parameter block")
    except DspsimInputError:
        return False
    return True


def test_a_measurement_must_fit_the_dsps_ddr_window(j6, tmp_path):
    """Rejected when parsed, at exactly the length where the simulator's host runs out of DDR."""
    assert host_allocates(j6, MAX_N) and not host_allocates(j6, MAX_N + 1)
    assert parse_measurement(f"pingpong,n={MAX_N}=5").n == MAX_N
    for text in (f"pingpong,n={MAX_N + 1}=5", "direct,n=1000000000=5"):
        with pytest.raises(DspsimInputError, match=f"DDR.*allowed n up to {MAX_N:,}"):
            parse_measurement(text)
    p = tmp_path / "m.csv"
    p.write_text(f"mode,n,cycles\npingpong,{MAX_N + 1},5\n")
    with pytest.raises(DspsimInputError, match="line 2: n = .*DDR"):
        read_measurements_csv(p)


def test_the_seed_constants_are_read_only_and_their_ranges_are_used(j6):
    with pytest.raises(TypeError):
        SEED_MEASUREMENTS_CYCLES["pingpong"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        SEED_FREE["ddr.latency_cycles"] = (1.0, 2.0)  # type: ignore[index]
    c = calibrate(j6, [measured(j6, "direct", 500)], SEED_FREE, identify=False)
    assert {p.key: (p.lo, p.hi) for p in c.free} == dict(SEED_FREE)
    ranges = MappingProxyType({"ddr.latency_cycles": (50.0, 400.0)})
    assert [(p.lo, p.hi) for p in calibrate(j6, c.measurements, ranges, identify=False).free] == [
        (50.0, 400.0)
    ]


def test_a_free_key_cannot_also_be_set_by_a_measurement(j6):
    m = Measurement("pingpong", 1e6, 1000, {"ddr.latency_cycles": 100.0})
    with pytest.raises(DspsimInputError, match="which is free"):
        calibrate(j6, [m], ["ddr.latency_cycles"])


# ------------------------------------------------------------------------- fitting
def test_recovers_latency_and_bandwidth_from_a_perturbed_start(j6):
    truth = j6.with_overrides({"ddr.latency_cycles": 150.0, "ddr.bytes_per_cycle": 0.6})
    ms = [
        measured(truth, "pingpong", 20_000),
        measured(truth, "direct", 4_000),
        measured(truth, "pingpong", 2_048, **{"softmax.tile_bytes": 8192}),
    ]
    start = j6.with_overrides({"ddr.latency_cycles": 200.0, "ddr.bytes_per_cycle": 0.45})
    f = fit(start, ms, {"ddr.latency_cycles": (20, 2000), "ddr.bytes_per_cycle": (0.05, 20)})
    assert f.values["ddr.latency_cycles"] == pytest.approx(150.0, rel=0.02)
    assert f.values["ddr.bytes_per_cycle"] == pytest.approx(0.6, rel=0.02)
    assert max(abs(r) for r in f.residuals_pct) < 0.1


def test_recovers_an_integer_key_with_the_continuous_ones(j6):
    truth = j6.with_overrides(
        {"ddr.latency_cycles": 400.0, "ddr.bytes_per_cycle": 2.0, "idma.max_outstanding": 2}
    )
    ms = [
        measured(truth, "pingpong", 20_000),
        measured(truth, "direct", 4_000),
        measured(truth, "pingpong", 2_048, **{"softmax.tile_bytes": 8192}),
    ]
    start = j6.with_overrides(
        {"ddr.latency_cycles": 300.0, "ddr.bytes_per_cycle": 3.0, "idma.max_outstanding": 5}
    )
    c = calibrate(start, ms, LB + ["idma.max_outstanding=1:6"], identify=False)
    assert c.values["idma.max_outstanding"] == 2
    assert c.values["ddr.latency_cycles"] == pytest.approx(400.0, rel=0.02)
    assert c.values["ddr.bytes_per_cycle"] == pytest.approx(2.0, rel=0.02)


def test_the_documents_two_figures_are_met_from_a_perturbed_start():
    start = load_model(overrides={"ddr.latency_cycles": 250.0, "ddr.bytes_per_cycle": 0.2})
    f = fit_seed(start)
    assert all(abs(r) <= 0.5 for r in f.residuals_pct)
    # and the fitted model really simulates those figures
    for mode, target in SEED_MEASUREMENTS_CYCLES.items():
        assert simulate(f.model, mode=mode, n=100_000, data=False).cycles == pytest.approx(
            target, rel=0.005
        )


# ------------------------------------------------------------------ identifiability
def test_one_measurement_does_not_determine_latency_and_the_proposal_settles_it(j6):
    """A bandwidth-bound ping-pong figure pins bandwidth, not latency; the proposed measurement,
    taken on the 'board' (the truth), then determines both."""
    truth = j6.with_overrides({"ddr.latency_cycles": 150.0, "ddr.bytes_per_cycle": 0.6})
    start = j6.with_overrides({"ddr.latency_cycles": 300.0, "ddr.bytes_per_cycle": 3.0})
    one = [measured(truth, "pingpong", 20_000)]
    c = calibrate(start, one, LB)
    iv = {i.key: i for i in c.intervals}
    assert not c.determined
    assert not iv["ddr.latency_cycles"].determined
    assert iv["ddr.latency_cycles"].reaches_search_bound
    assert iv["ddr.bytes_per_cycle"].determined
    assert iv["ddr.bytes_per_cycle"].lo <= 0.6 <= iv["ddr.bytes_per_cycle"].hi
    # every reported equally good fit really is within 1 % of the measurement
    for g in c.good:
        model = start.with_overrides(g.values)
        assert simulate(model, mode="pingpong", n=20_000, data=False).cycles == pytest.approx(
            one[0].cycles, rel=0.01
        )
    # the proposal's predictions are what the simulation gives for those fits
    pr = c.proposal
    assert pr is not None and pr.spread_pct > 10
    for values, cycles in pr.predictions[:2]:
        model = start.with_overrides({**pr.measurement.settings, **values})
        pm = pr.measurement
        assert simulate(model, pm.op, pm.variant, shape=pm.shape, data=False).cycles == cycles
    # take it on the board: now both keys are determined, around the truth
    pm = pr.measurement
    two = one + [measured(truth, pm.mode, pm.n, **pm.settings)]
    c2 = calibrate(start, two, LB)
    assert c2.determined
    iv2 = {i.key: i for i in c2.intervals}
    assert iv2["ddr.latency_cycles"].lo <= 150.0 <= iv2["ddr.latency_cycles"].hi
    assert iv2["ddr.latency_cycles"].hi / iv2["ddr.latency_cycles"].lo < 1.2


def test_an_unreachable_measurement_is_reported_as_such(j6):
    """No latency makes a 1000-element ping-pong run take 100 cycles: say so, no fits table."""
    c = calibrate(j6, [Measurement("pingpong", 100, 1000)], ["ddr.latency_cycles"])
    assert not c.fitted_within_tolerance
    assert c.best.worst > 0.01 and not c.good and not c.intervals and c.proposal is None
    text = c.text()
    assert (
        "no values of ddr.latency_cycles in the search ranges reproduce the measurements "
        "within 1 %; the best fit reached residuals of +" in text
    )
    assert f"{c.residuals_pct[0]:+,.3f} % (pingpong,n=1000)" in text
    assert "distinct fit" not in text and "identifiability" not in text
    obj = c.to_json()
    assert obj["fitted_within_tolerance"] is False
    assert obj["max_abs_residual_pct"] == pytest.approx(abs(c.residuals_pct[0]))


# ------------------------------------------------------------------------- model file
def test_out_writes_a_complete_model_with_fitted_values_and_comments(j6, tmp_path):
    truth = j6.with_overrides({"ddr.latency_cycles": 150.0, "ddr.bytes_per_cycle": 0.6})
    ms = [measured(truth, "pingpong", 20_000), measured(truth, "direct", 4_000)]
    c = calibrate(j6, ms, LB, identify=False)
    out = write_model_file(c, tmp_path / "fitted.toml", date=date(2030, 1, 2))
    text = out.read_text()
    raw = tomllib.loads(text)  # valid TOML, complete: no base, every hardware key
    assert "base" not in raw
    at_defaults = {s for s, t in j6.as_dict().items()  # op tables j6 leaves at defaults
                   if s in OP_SCHEMAS and t == OP_SCHEMAS[s].defaults()}
    assert {f"{s}.{k}" for s, t in raw.items() for k in t} >= set(j6.flat()) - {
        k for k in j6.flat() if k.split(".")[0] in at_defaults}
    sources = key_sources(j6.source)
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        if key in ("latency_cycles", "bytes_per_cycle"):
            assert "fitted by `dspsim calibrate` on 2030-01-02" in line
            assert "pingpong,n=20000=" in line and "direct,n=4000=" in line
        elif key == "count":
            assert line.endswith("# " + sources["core.count"])
    again = load_model(out)
    assert again.ddr.latency_cycles == pytest.approx(150.0, rel=0.02)
    assert again.flat() | {"ddr.latency_cycles": 0, "ddr.bytes_per_cycle": 0} == j6.flat() | {
        "ddr.latency_cycles": 0,
        "ddr.bytes_per_cycle": 0,
    }


# ------------------------------------------------------------------------------- CLI
def test_cli_calibrate_json_and_out(j6, tmp_path):
    truth = j6.with_overrides({"ddr.latency_cycles": 150.0, "ddr.bytes_per_cycle": 0.6})
    a = measured(truth, "pingpong", 20_000)
    csv = tmp_path / "m.csv"
    b = measured(truth, "direct", 4_000)
    csv.write_text(f"mode,n,cycles\ndirect,{b.n},{b.cycles}\n")
    out = tmp_path / "fit.toml"
    code, stdout, err = cli(
        "calibrate",
        "--measured",
        a.spec(),
        "--measured-csv",
        str(csv),
        "--free",
        LB[0],
        "--free",
        LB[1],
        "--out",
        str(out),
        "--json",
    )
    assert code == 0, err
    obj = json.loads(stdout)
    assert obj["fitted_within_tolerance"] is True
    assert obj["fit"]["ddr.latency_cycles"]["unit"] == "cycles"
    assert "ns at 1000 MHz" in obj["fit"]["ddr.latency_cycles"]["reading"]
    assert "GB/s" in obj["fit"]["ddr.bytes_per_cycle"]["reading"]
    assert [round(m["residual_pct"], 3) for m in obj["measurements"]] == [0.0, 0.0]
    assert obj["identifiability"]["determined"] is True
    lat = obj["identifiability"]["intervals"]["ddr.latency_cycles"]
    assert lat["lo"] <= 150.0 <= lat["hi"]
    assert load_model(out).ddr.latency_cycles == pytest.approx(150.0, rel=0.02)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--free", "ddr.latency_cycles"], "no measurements"),
        (["--measured", "pingpong=5"], "nothing to fit"),
        (["--measured", "pingpong=5", "--free", "ddr.latency_cycles", "--out", "x.txt"], ".toml"),
        (
            ["--measured", "pingpong,softmax.tile_bytes=6=5", "--free", "ddr.latency_cycles"],
            "multiple of 4",
        ),
        (["--measured-csv", "/nonexistent.csv", "--free", "ddr.latency_cycles"], "not found"),
        (
            ["--measured", "pingpong=5", "--free", "softmax.guard_shifted_input"],
            "only numeric keys can be fitted",
        ),
        (
            ["--measured", "pingpong,n=1000000000=5", "--free", "ddr.latency_cycles"],
            "more than the DSP's 2,147,483,648-byte window",
        ),
        # measured cycles are a count: never rounded, never a malformed or absurd number
        (["--measured", "direct,n=10000=1.5", "--free", "ddr.latency_cycles"], "whole number"),
        (["--measured", "direct,n=10000=1__0", "--free", "ddr.latency_cycles"], "not a positive"),
        (["--measured", "direct,n=10000=99999999999999999999999999", "--free",
          "ddr.latency_cycles"], "2**53"),
        (["--measured", "direct,n=1__000=800000", "--free", "ddr.latency_cycles"], "n = "),
        (["--measured", "direct,n=10000=9007199254740993", "--free", "ddr.latency_cycles"],
         "2**53"),  # one past 2**53: float64 would round it silently
    ],
)
def test_cli_errors_are_one_line_exit_2(argv, match):
    code, out, err = cli("calibrate", *argv)
    assert code == 2
    assert err.count("\n") == 1 and match in err


def test_out_is_checked_before_the_fit(tmp_path, monkeypatch):
    def no_simulation(*args, **kwargs):
        raise AssertionError("simulated before checking --out")

    monkeypatch.setattr(dspsim.study.calibrate.problem, "simulate", no_simulation)
    target = tmp_path / "missing" / "fit.toml"
    code, out, err = cli(
        "calibrate", "--measured", "pingpong=5154293", "--free", "ddr.latency_cycles",
        "--out", str(target),
    )
    assert code == 2 and err.count("\n") == 1
    assert "--out" in err and "does not exist" in err


def test_calibrate_exits_1_when_no_fit_reaches_the_measurements():
    assert cli("calibrate", "--measured", "pingpong,n=1000=100", "--free",
               "ddr.latency_cycles", "--fidelity", "tile")[0] == 1


# ------------------------------------------------------------- any op (op-generic calibration)
def _fake_op():
    """A second 1-D op for when no second op is registered: softmax's program under another
    name, its own parameter table and no closed-form estimate."""
    import dataclasses

    from dspsim.ops.softmax import PARAMS, Softmax
    from dspsim.schema import OpSchema

    class Fake(Softmax):
        name = "fakeop"
        cmd = 0x7FF1
        document = None
        params = OpSchema(
            "fakeop",
            tuple(dataclasses.replace(k, name="fakeop." + k.short) for k in PARAMS.keys),
        )

        def bounds(self, model, variant, shape):
            return {}

    return Fake()


@pytest.fixture
def second():
    """(op name, model, variant, small shape) of a second op: layernorm if registered, else a
    fake op registered for the test (and removed after it)."""
    from dspsim.ops import OPS, op_names, register_op
    from dspsim.schema import OP_SCHEMAS

    if "layernorm" in op_names():
        yield "layernorm", load_model(), "direct", (8, 256)
        return
    op = register_op(_fake_op())
    try:
        yield op.name, load_model(), "direct", (2048,)
    finally:
        OPS.pop(op.name, None)
        OP_SCHEMAS.pop(op.name, None)


def two_d_op():
    from dspsim.ops import get_op, op_names

    names = [n for n in op_names() if get_op(n).ndim == 2]
    if not names:
        pytest.skip("no 2-D op registered")
    return get_op(names[0])


def test_latency_is_calibrated_from_a_measurement_of_a_second_op(second):
    name, model, variant, shape = second
    truth = model.with_overrides({"ddr.latency_cycles": 150.0})
    cycles = simulate(truth, name, variant, shape=shape, data=False).cycles
    m = Measurement(variant, cycles, shape, {}, op=name)
    assert parse_measurement(m.spec()) == m and m.label().startswith(f"{name}:{variant},")
    c = calibrate(model, [m], ["ddr.latency_cycles=20:2000"])
    assert c.fitted_within_tolerance and abs(c.residuals_pct[0]) < 1.0
    # the fitted model really reproduces the measurement within 1 %
    again = simulate(c.fitted, name, variant, shape=shape, data=False).cycles
    assert again == pytest.approx(cycles, rel=0.01)
    assert c.values["ddr.latency_cycles"] == pytest.approx(150.0, rel=0.05)
    assert c.determined
    # the reports say op and variant (and keep mode / n)
    row = c.to_json()["measurements"][0]
    assert (row["op"], row["variant"], tuple(row["shape"]), row["mode"]) == (
        name, variant, shape, variant
    )
    assert row["n"] == m.n and row["spec"].startswith(f"{name}:{variant},")
    assert f"of {name}," in c.text() and m.label() in c.text()


def test_an_op_without_an_estimate_starts_from_tile_simulations(second, monkeypatch):
    from dspsim.ops import get_op

    name, model, variant, shape = second
    monkeypatch.setattr(get_op(name), "bounds", lambda model, variant, shape: None)
    truth = model.with_overrides({"ddr.latency_cycles": 150.0})
    m = Measurement(variant, simulate(truth, name, variant, shape=shape, data=False).cycles,
                    shape, {}, op=name)
    fidelities = []
    real = dspsim.study.calibrate.problem.simulate

    def spy(*args, **kwargs):
        fidelities.append(kwargs.get("fidelity"))
        return real(*args, **kwargs)

    monkeypatch.setattr(dspsim.study.calibrate.problem, "simulate", spy)
    c = calibrate(model, [m], ["ddr.latency_cycles=20:2000"], identify=False)
    assert "tile" in fidelities and "burst" in fidelities
    assert abs(c.residuals_pct[0]) < 1.0


def test_the_proposal_asks_each_measured_op_for_its_candidates(j6, second):
    from dspsim.ops import Op, get_op
    from dspsim.study.calibrate import candidate_measurements

    name, model, variant, shape = second
    op = get_op(name)
    m = Measurement(variant, 1e6, shape, {}, op=name)
    cands = candidate_measurements(model, ["ddr.latency_cycles"], [m])
    assert cands and all(c.op == name for c in cands)
    assert all(c.label() != m.label() for c in cands)  # what was measured is not proposed
    assert {c.variant for c in cands} <= set(op.variants)
    if type(op).calibration_candidates is Op.calibration_candidates:  # the generic default
        want = {(v, s) for v, s, _ in Op.calibration_candidates(op, model, [], shape)}
        assert {(c.variant, c.shape) for c in cands} == want - {(variant, shape)}
        assert any(c.shape == tuple(op.default_shape) for c in cands)
    # softmax's own list: the seed case still proposes one 64 KiB tile per pass at n = 16384
    seed = [Measurement("pingpong", 5e6), Measurement("direct", 7e6)]
    labels = [c.label() for c in candidate_measurements(j6, LB, seed)]
    assert "pingpong,n=16384,softmax.tile_bytes=65536" in labels
    assert all(c.op == "softmax" for c in candidate_measurements(j6, LB, seed))


def test_the_default_candidates_are_each_variant_at_three_shapes(j6):
    from dspsim.ops import Op, get_op

    op = get_op("softmax")
    got = Op.calibration_candidates(op, j6, [], (20_000,))
    assert got == [
        (v, s, {}) for v in op.variants for s in [(6250,), (20_000,), (100_000,)]
    ]


@pytest.mark.parametrize(
    "text, op, variant, shape, cycles",
    [
        ("pingpong=5154293", "softmax", "pingpong", (100_000,), 5_154_293),
        ("softmax:direct,n=50000=3900000", "softmax", "direct", (50_000,), 3_900_000),
        ("softmax:pingpong,shape=2048=5", "softmax", "pingpong", (2048,), 5),
        (" softmax : direct ,n=1_000=7", "softmax", "direct", (1000,), 7),
    ],
)
def test_op_variant_shape_syntax(text, op, variant, shape, cycles):
    m = parse_measurement(text)
    assert (m.op, m.variant, m.shape, m.cycles) == (op, variant, shape, cycles)
    assert (m.mode, m.n) == (variant, shape[0])
    assert parse_measurement(m.spec()) == m == parse_measurement(m.spec(with_op=True))


def test_a_2d_shape_is_written_rows_x_cols():
    op = two_d_op()
    v = op.default_variant
    m = parse_measurement(f"{op.name}:{v},shape=64x32=1234567")
    assert (m.op, m.variant, m.shape, m.cycles, m.n) == (op.name, v, (64, 32), 1_234_567, 2048)
    assert m.label() == f"{op.name}:{v},shape=64x32"
    assert parse_measurement(m.spec()) == m
    assert parse_measurement(f"{op.name}:{v}=5").shape == tuple(op.default_shape)


@pytest.mark.parametrize(
    "text, match",
    [
        ("nosuchop:direct=5", r"unknown op 'nosuchop'; allowed: .*softmax"),
        ("softmax:turbo=5", r"version 'turbo' unknown; allowed for softmax: pingpong, direct"),
        ("softmax=5", r"'softmax' is an op: write softmax:VARIANT"),
        ("pingpong,shape=10x3=5", r"shape = '10x3': softmax takes one positive length"),
        ("pingpong,shape=abc=5", r"shape = 'abc'"),
        ("pingpong,n=5,shape=5=6", r"give n or shape, not both"),
        ("pingpong,n=5,n=6=7", r"n is given twice"),
    ],
)
def test_bad_op_variant_or_shape_is_named(text, match):
    with pytest.raises(DspsimInputError, match=match) as e:
        parse_measurement(text)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "tail, match",
    [
        ("direct,n=5=5", r"takes a 2-D shape, not n; write shape=ROWSxCOLS"),
        ("direct,shape=8=5", r"takes 2 positive integers joined by 'x'"),
        ("direct,shape=8x0=5", r"shape = '8x0'"),
        ("turbo=5", r"version 'turbo' unknown; allowed for {op}: "),
    ],
)
def test_bad_2d_shapes_are_named(tail, match):
    op = two_d_op()
    with pytest.raises(DspsimInputError, match=match.format(op=op.name)) as e:
        parse_measurement(f"{op.name}:{tail}")
    assert "\n" not in str(e.value)


def host_fits(model, op, shape):
    """Whether the host's buffers for one run of ``op`` on ``shape`` fit DDR, allocated as
    ``dspsim.run.simulate`` does, without running."""
    ucp = Ucp(Platform(simpy.Environment(), model, data=False), firmware_registry())
    try:
        ucp.malloc(op.input_bytes(shape), "input array")
        ucp.malloc(op.input_bytes(shape), "output array")
        ucp.malloc(64, "parameter block")
    except DspsimInputError:
        return False
    return True


def test_the_ddr_window_check_is_per_op(j6):
    from dspsim.host.window import largest_first_dim, window_bytes
    from dspsim.ops import get_op

    op = two_d_op()
    cols = op.default_shape[1]
    rows = largest_first_dim(op, (1, cols))
    assert host_fits(j6, op, (rows, cols)) and not host_fits(j6, op, (rows + 1, cols))
    assert window_bytes(op, (rows, cols)) <= 2**31 < window_bytes(op, (rows + 1, cols))
    v = op.default_variant
    assert parse_measurement(f"{op.name}:{v},shape={rows}x{cols}=5").shape == (rows, cols)
    with pytest.raises(DspsimInputError, match=f"DDR.*allowed shape up to {rows}x{cols}"):
        parse_measurement(f"{op.name}:{v},shape={rows + 1}x{cols}=5")
    assert largest_first_dim(get_op("softmax"), (1,)) == MAX_N


def test_measurement_defaults_and_checks():
    from dspsim.ops import get_op, op_names

    m = Measurement("direct", 5)
    assert (m.op, m.shape, m.settings, m.n) == ("softmax", (100_000,), {}, 100_000)
    assert Measurement("direct", 5, 1000) == Measurement("direct", 5, (1000,), op="softmax")
    for name in op_names():
        op = get_op(name)
        assert Measurement(op.default_variant, 5, op=name).shape == tuple(op.default_shape)
    with pytest.raises(DspsimInputError, match="turbo"):
        Measurement("turbo", 5)
    with pytest.raises(DspsimInputError, match="unknown op"):
        Measurement("direct", 5, op="nosuchop")


def test_seed_measurements_come_from_the_ops_documents():
    from dspsim.ops import get_op, op_names
    from dspsim.study.calibrate import seed_measurements

    want = [
        (name, v, tuple(get_op(name).document["shape"]), c)
        for name in op_names()
        if get_op(name).document
        for v, c in get_op(name).document["cycles"].items()
    ]
    got = [(m.op, m.variant, m.shape, m.cycles) for m in seed_measurements()]
    assert got == want and ("softmax", "pingpong", (100_000,), 5_154_293) in got
    assert dict(SEED_MEASUREMENTS_CYCLES) == dict(get_op("softmax").document["cycles"])


def test_measurements_csv_with_op_variant_and_shape(tmp_path):
    op = two_d_op()
    v = op.default_variant
    p = tmp_path / "m.csv"
    p.write_text(
        "op,variant,n,shape,cycles,ddr.latency_cycles\n"
        "softmax,direct,5000,,100,\n"
        f"{op.name},{v},,64x32,200,120\n"
        ",pingpong,,,300,\n"
    )
    a, b, c = read_measurements_csv(p)
    assert a == Measurement("direct", 100, (5000,), {}, op="softmax")
    assert b == Measurement(v, 200, (64, 32), {"ddr.latency_cycles": 120.0}, op=op.name)
    assert c == Measurement("pingpong", 300)


@pytest.mark.parametrize(
    "body, match",
    [
        ("op,cycles\nsoftmax,5\n", "missing column 'variant' \\(or 'mode'\\)"),
        ("variant,mode,cycles\ndirect,direct,5\n", "'variant' and 'mode' name the same"),
        ("op,variant,cycles\nnosuchop,direct,5\n", "line 2: unknown op 'nosuchop'"),
        ("variant,shape,cycles\ndirect,3x4,5\n", "line 2: shape = '3x4'"),
        ("variant,n,shape,cycles\ndirect,4,4,5\n", "line 2: give n or shape, not both"),
    ],
)
def test_bad_op_csv_is_named(tmp_path, body, match):
    p = tmp_path / "m.csv"
    p.write_text(body)
    with pytest.raises(DspsimInputError, match=match) as e:
        read_measurements_csv(p)
    assert "\n" not in str(e.value)


def test_cli_calibrates_from_a_second_op(second, tmp_path):
    name, model, variant, shape = second
    truth = model.with_overrides({"ddr.latency_cycles": 150.0})
    cycles = simulate(truth, name, variant, shape=shape, data=False, fidelity="tile").cycles
    spec = Measurement(variant, cycles, shape, {}, op=name).spec()
    code, stdout, err = cli("calibrate", "--measured", spec, "--free", "ddr.latency_cycles=20:2000",
                            "--fidelity", "tile", "--json")
    assert code == 0, err
    obj = json.loads(stdout)
    row = obj["measurements"][0]
    assert (row["op"], row["variant"], row["shape"]) == (name, variant, list(shape))
    assert abs(row["residual_pct"]) < 1.0
    assert obj["fit"]["ddr.latency_cycles"]["value"] == pytest.approx(150.0, rel=0.05)


def test_a_tile_key_is_explored_and_freed_on_its_multiples(j6):
    """The explorer's grid and a --free range keep to the values the key takes (multiples of
    4): a grid value off them would be refused by the model and silently never tried."""
    from dspsim.study.calibrate.explore import explore_space
    from dspsim.study.calibrate.measure import parse_free

    ms = [Measurement("pingpong", 5_154_293, (100_000,))]
    space = explore_space(j6, ms, free=["softmax.tile_bytes=4000:70000"])
    tiles = space.grid["softmax.tile_bytes"]
    assert len(tiles) >= 3 and all(t % 4 == 0 and 4000 <= t <= 70000 for t in tiles)
    p = parse_free("softmax.tile_bytes=1001:2003", j6)
    assert (p.lo, p.hi) == (1004, 2000)
    with pytest.raises(DspsimInputError, match="multiples of 4"):
        parse_free("softmax.tile_bytes=5:7", j6)
    with pytest.raises(DspsimInputError, match="holds one value"):
        parse_free("softmax.tile_bytes=5:9", j6)


def test_a_measurements_csv_with_a_bom_reads(tmp_path):
    """A spreadsheet's "CSV UTF-8" starts with a byte-order mark."""
    from dspsim.study.calibrate.measure import read_measurements_csv

    f = tmp_path / "m.csv"
    f.write_bytes(b"\xef\xbb\xbfvariant,n,cycles\ndirect,10000,800000\n")
    (m,) = read_measurements_csv(f)
    assert m.variant == "direct" and m.cycles == 800000


def test_a_key_the_runs_ignore_is_refused():
    """Softmax never reads layernorm.eps: every value would fit, so no fit can tell it (it was
    once reported determined, then not determined); it is refused before the fit."""
    code, out, err = cli("calibrate", "--measured", "pingpong,n=20000=1031783",
                         "--free", "layernorm.eps=0:1")
    assert code == 2 and not out, out + err
    assert err.count("\n") == 1 and "layernorm.eps" in err and "changes no measurement" in err


def test_integer_interval_ends_compare_exactly_at_large_values():
    """An integer key's interval is at its search end only when it reaches it exactly: at 3e9
    bytes a relative tolerance of 1e-9 would take 3,000,000,001 for 3,000,000,002."""
    import numpy as np

    from dspsim.study.calibrate.measure import FreeParam
    from dspsim.study.calibrate.problem import FitPoint, _interval

    hi = 3_000_000_002
    p = FreeParam("ddr.size_bytes", 4096, hi, True)

    class Grid:  # the one thing _interval asks of a Problem
        def combos(self) -> list[dict[str, float]]:
            return [{p.key: v} for v in (4096, hi - 1, hi)]

    good = [FitPoint({p.key: float(hi - 1)}, np.zeros(1))]
    short = _interval(Grid(), p, good, None, False)
    assert (short.lo, short.hi, short.reaches_search_bound) == (hi - 1, hi - 1, False)
    reached = _interval(Grid(), p, [FitPoint({p.key: float(hi)}, np.zeros(1))], None, False)
    assert reached.reaches_search_bound



def test_no_measurement_is_proposed_that_separates_nothing(j6):
    """A write latency fitted to a TCM -> DDR copy: copies DDR -> TCM never write DDR, so every
    fit predicts each of them to the cycle; none is proposed (one was, 'the equally good fits
    differ by up to 0 cycles'), and the text says that none separates the fits."""
    import dataclasses
    import math

    import numpy as np

    from dspsim.study.calibrate.problem import FitPoint, Problem, propose_measurement

    model = j6.with_overrides({"ddr.write_latency_cycles": 300.0})
    settings = {"copy.src": "tcm", "copy.dst": "ddr"}
    cycles = simulate(model.with_overrides(settings), "copy", "idma", shape=(65536,),
                      data=False).cycles
    m = Measurement("idma", cycles, 65536, settings, op="copy")
    c = calibrate(model, [m], ["ddr.write_latency_cycles"], fidelity="tile")
    assert not c.determined
    pr = c.proposal
    assert pr is None or (pr.spread_cycles > 0 and len({p for _, p in pr.predictions}) > 1)
    prob = Problem(model, [m], c.free, "tile")
    members = [FitPoint({"ddr.write_latency_cycles": v}, np.zeros(1)) for v in (3, 300, 2000)]
    reads = [Measurement(v, math.nan, n, {}, op="copy") for v in ("idma", "memcpy")
             for n in (4096, 65536)]  # DDR -> TCM: the copy op's default ends
    assert propose_measurement(prob, members, 1, reads) is None
    text = dataclasses.replace(c, proposal=None).text()
    assert "separating measurement: none found" in text


def test_the_candidates_include_runs_with_each_measurements_settings(j6):
    """A write latency fitted to a TCM -> DDR copy: the copy op's own candidates copy DDR ->
    TCM and never write DDR; runs with the measurement's ends are proposed too, and one of them
    separates the fits (the proposal was none, or one 'differing by up to 0 cycles')."""
    from dspsim.study.calibrate import candidate_measurements

    model = j6.with_overrides({"ddr.write_latency_cycles": 300.0})
    ends = {"copy.src": "tcm", "copy.dst": "ddr"}
    cycles = simulate(model.with_overrides(ends), "copy", "idma", shape=(65536,),
                      data=False).cycles
    m = Measurement("idma", cycles, 65536, ends, op="copy")
    cands = candidate_measurements(model, ["ddr.write_latency_cycles"], [m])
    assert any(c.settings == {} for c in cands)  # the op's own candidates stay
    assert any(c.settings == ends for c in cands) and all(c.label() != m.label() for c in cands)
    c = calibrate(model, [m], ["ddr.write_latency_cycles"], fidelity="tile")
    pr = c.proposal
    assert pr is not None and pr.measurement.settings == ends
    assert pr.spread_cycles == max(p for _, p in pr.predictions) - min(p for _, p in pr.predictions)
    assert pr.spread_cycles > 0


@pytest.mark.parametrize("free", ["idma.engine_bytes_per_cycle",
                                  "idma.engine_bytes_per_cycle=0:10000"])
def test_a_rate_whose_0_means_no_limit_is_searched_above_0(free):
    """idma.engine_bytes_per_cycle = 0 is no limit: a search from 0 (J6's value) to 10,000 had
    both ends as fast, so a rate the runs plainly depend on was refused as changing no
    measurement's cycles "between 0 and 10000". Refused in one line asking for LO > 0; a range
    above 0 recovers the rate."""
    cycles = simulate(load_model().with_overrides({"idma.engine_bytes_per_cycle": 0.1}),
                      mode="pingpong", n=20_000, data=False).cycles
    code, out, err = cli("calibrate", "--measured", f"pingpong,n=20000={cycles}",
                         "--free", free)
    assert code == 2 and not out and err.count("\n") == 1, out + err
    assert "means no limit" in err and "LO > 0" in err and "changes no measurement" not in err
    c = calibrate(load_model(), [Measurement("pingpong", cycles, 20_000)],
                  ["idma.engine_bytes_per_cycle=0.001:10000"], fidelity="tile", identify=False)
    assert c.values["idma.engine_bytes_per_cycle"] == pytest.approx(0.1, rel=0.01)


def test_a_key_searched_from_0_gets_its_whole_interval():
    """idma.descriptor_cycles (J6: 0) is searched over 0 .. 1e6 on a linear scale; its profile
    stepped 0.5 % of that range (5,000 cycles), over the whole interval of a fit near 9,000, and
    reported 8970 .. 8970 (+0.0 %), when every value from about 7,870 to 10,070 keeps the
    measurement within 1 % (the tolerance range: with one key free, the same set)."""
    from dspsim.study.interval import tolerance_ranges

    model = load_model()
    ms = [Measurement("pingpong", 1_100_000, 20_000)]
    c = calibrate(model, ms, ["idma.descriptor_cycles"])
    (iv,) = c.intervals
    (lo, hi), = tolerance_ranges(c.fitted, ["idma.descriptor_cycles"], ms, 1.0).values()
    assert lo < 0.9 * hi  # a real interval
    assert iv.lo == pytest.approx(lo, rel=0.01) and iv.hi == pytest.approx(hi, rel=0.01)
@pytest.mark.parametrize(("measurement", "message"), [
    (Measurement("pingpong", float("nan"), 4096), "measurement 'pingpong,n=4096': cycles nan: "),
    (Measurement("pingpong", -5.0, 4096), "measurement 'pingpong,n=4096': cycles -5.0: "),
    (Measurement("pingpong", 0, 4096), "measurement 'pingpong,n=4096': cycles 0: "),
    (Measurement("pingpong", "5000", 4096), "measurement 'pingpong,n=4096': cycles '5000': "),
    (Measurement("pingpong", True, 4096), "measurement 'pingpong,n=4096': cycles True: "),
    (Measurement("pingpong", 2.0**54, 4096), "measurement 'pingpong,n=4096': cycles 1.8"),
    (Measurement("pingpong", 5e4, 4096, [1]), "calibrate: measurement Measurement(variant="),
    ("pingpong,n=4096=50000", "calibrate: measurement 'pingpong,n=4096=50000': expected a "),
])
def test_a_measurement_built_in_python_is_refused_before_the_fit(j6, measurement, message):
    """A Measurement checks its op, variant and shape, but calibrate took its cycles and
    settings as given: a NaN was SciPy's "Residuals are not finite", -5 or 0 cycles fitted
    silently, text cycles or a list of settings a TypeError or AttributeError."""
    with pytest.raises(DspsimInputError) as e:
        calibrate(j6, [measurement], ["ddr.latency_cycles"], identify=False)
    assert str(e.value).startswith(message) and "\n" not in str(e.value), e.value


@pytest.mark.parametrize(("free", "message"), [
    (("dma.x", 1.0, 2.0, False), "--free 'dma.x=1.0:2.0': unknown model key 'dma.x'"),
    (("ddr.latency_cycles", 300.0, 100.0, False), "--free 'ddr.latency_cycles=300.0:100.0': the "
                                                  "range must have LO < HI"),
    (("ddr.latency_cycles", -5.0, 1e9, False), "--free 'ddr.latency_cycles=-5.0:1000000000.0': "
                                               "ddr.latency_cycles allows 0 to"),
    (("ddr.latency_cycles", float("nan"), 9.0, False), "--free 'ddr.latency_cycles=nan:9.0': "
                                                        "expected KEY=LO:HI with two numbers"),
])
def test_a_free_param_built_in_python_is_checked_as_its_text_is(j6, free, message):
    """calibrate took a FreeParam as given: an inverted range was SciPy's ValueError, a range
    outside the key's allowed one fitted, an unknown key a raw ConfigError mid-fit. Each is
    parse_free's line for the same KEY=LO:HI now."""
    from dspsim.study.calibrate.measure import FreeParam

    with pytest.raises(DspsimInputError) as e:
        calibrate(j6, [Measurement("pingpong", 5e4, 4096)], [FreeParam(*free)], identify=False)
    assert str(e.value).startswith(message) and "\n" not in str(e.value), e.value
