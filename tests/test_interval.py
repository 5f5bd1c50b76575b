"""Every prediction with an interval: ranges in model files, the interval search, the dominant
key, `run --interval`, `validate`'s columns and `--suggest`, and the tolerance ranges of fitted
keys."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim.config import load_model, read_model_tables, resolve_model_path
from dspsim.errors import ConfigError, DspsimInputError
from dspsim.run import simulate
from dspsim.study.interval import FIT_KEYS, op_interval, trend
from tests.cli_helpers import one_line, run_cli

N = 1024  # small softmax runs: a few milliseconds each
J6 = load_model("j6")


def _with_ranges(model, ranges):
    return dataclasses.replace(model, ranges=dict(ranges))


def _cycles(model, variant="pingpong", n=N, **moved):
    m = model.with_overrides(moved) if moved else model
    return simulate(m, "softmax", variant, n, data=False).cycles


# ranges drawn around J6's values: (key, the widest half-width as a factor of the value)
_RANGEABLE = {"ddr.latency_cycles": 3.0, "ddr.bytes_per_cycle": 4.0, "idma.setup_cycles": 20.0,
              "core.call_overhead_cycles": 5.0}


@st.composite
def _ranges(draw):
    keys = draw(st.lists(st.sampled_from(sorted(_RANGEABLE)), min_size=1, max_size=3,
                         unique=True))
    out = {}
    for k in keys:
        v, f = J6.get(k), _RANGEABLE[k]
        lo = v / draw(st.floats(1.0, f))
        hi = v * draw(st.floats(1.0, f))
        out[k] = (int(lo), int(hi) + 1) if isinstance(v, int) else (lo, hi)
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ranges(), st.sampled_from(["pingpong", "direct"]), st.integers(64, 2048))
def test_an_interval_contains_the_point_and_widens_with_a_range(ranges, variant, n):
    model = _with_ranges(J6, ranges)
    iv = op_interval(model, "softmax", variant, (n,))
    assert iv.low_cycles <= iv.point_cycles <= iv.high_cycles
    assert iv.point_cycles == _cycles(J6, variant, n)
    key = sorted(ranges)[0]
    lo, hi = ranges[key]
    wider = {**ranges, key: (lo / 2 if isinstance(lo, float) else lo // 2, hi * 2)}
    iv2 = op_interval(_with_ranges(J6, wider), "softmax", variant, (n,))
    assert iv2.low_cycles <= iv.low_cycles and iv2.high_cycles >= iv.high_cycles


def test_the_interval_is_the_cycles_at_the_ranges_corners():
    """Two monotone keys: the interval is exactly the run at both slow ends and at both fast
    ends (every corner checked)."""
    ranges = {"ddr.latency_cycles": (60.0, 300.0), "ddr.bytes_per_cycle": (0.2, 2.0)}
    iv = op_interval(_with_ranges(J6, ranges), "softmax", "direct", (N,))
    corners = [_cycles(J6, "direct", **{"ddr.latency_cycles": a, "ddr.bytes_per_cycle": b})
               for a in ranges["ddr.latency_cycles"] for b in ranges["ddr.bytes_per_cycle"]]
    assert (iv.low_cycles, iv.high_cycles) == (min(corners), max(corners))


def test_a_key_without_a_range_does_not_move_the_interval():
    none = op_interval(_with_ranges(J6, {}), "softmax", "pingpong", (N,))
    assert none.low_cycles == none.point_cycles == none.high_cycles
    assert none.dominant_key is None and none.runs == 1
    one = {"ddr.latency_cycles": (100.0, 200.0)}
    a = op_interval(_with_ranges(J6, one), "softmax", "pingpong", (N,))
    # a second key whose range is its value alone adds nothing
    b = op_interval(_with_ranges(J6, {**one, "idma.setup_cycles": (30.0, 30.0)}), "softmax",
                    "pingpong", (N,))
    assert (a.low_cycles, a.high_cycles) == (b.low_cycles, b.high_cycles)
    assert set(a.alone) == {"ddr.latency_cycles"}


@pytest.mark.parametrize("variant", ["pingpong", "direct"])
def test_the_dominant_key_is_the_one_whose_range_alone_moves_the_cycles_most(variant):
    ranges = {"ddr.latency_cycles": (80.0, 400.0), "ddr.bytes_per_cycle": (0.3, 0.6),
              "idma.setup_cycles": (10.0, 3000.0), "core.call_overhead_cycles": (0, 400)}
    iv = op_interval(_with_ranges(J6, ranges), "softmax", variant, (N,))
    alone = {k: op_interval(_with_ranges(J6, {k: r}), "softmax", variant, (N,)).width_cycles
             for k, r in ranges.items()}
    assert iv.dominant_key == max(alone, key=alone.get)
    lo, hi = iv.alone[iv.dominant_key]
    assert hi - lo == alone[iv.dominant_key]


@pytest.mark.parametrize("variant, n", [("resident", 150_000), ("pingpong", 4096)])
def test_the_tcm_the_firmware_reserves_is_inside_the_interval(variant, n):
    """tcm.reserved_bytes decides how much of `resident` stays in the DataRAMs (J6's range
    [0, 65536]: 3,496,428 to 3,823,369 cycles alone at 150,000): the interval holds its ends
    (it took the key as moving nothing: high 3,784,854)."""
    iv = op_interval(J6, "softmax", variant, (n,))
    ends = [_cycles(J6, variant, n, **{"tcm.reserved_bytes": r}) for r in (0, 65536)]
    assert all(iv.contains(c) for c in ends)
    if variant == "resident":
        assert iv.alone["tcm.reserved_bytes"] == (min(ends), max(ends)) != (ends[0], ends[0])


def test_the_headline_interval_costs_at_most_20_runs():
    iv = op_interval(J6, "softmax", "pingpong", (100_000,))
    assert iv.runs <= 20
    assert iv.low_cycles <= 5_154_294 <= iv.high_cycles
    assert iv.dominant_key == "ddr.bytes_per_cycle"


def test_j6_fitted_ranges_are_the_three_readings_values():
    files = ["j6", "j6_descriptor_bound", "j6_outstanding_bound"]
    for key in ("ddr.latency_cycles", "ddr.bytes_per_cycle"):
        section, _, short = key.partition(".")
        values = [read_model_tables(resolve_model_path(f))[section][short] for f in files]
        assert J6.ranges[key] == (min(values), max(values))
        for f in files:
            assert load_model(f).ranges[key] == (min(values), max(values))


def test_ranges_are_inherited_and_dropped_with_a_new_value(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('base = "j6"\n[idma]\nsetup_cycles = 40.0\n')
    m = load_model(p)
    assert "idma.setup_cycles" not in m.ranges  # the file gives the value: its own, no range
    assert m.ranges["ddr.latency_cycles"] == J6.ranges["ddr.latency_cycles"]
    assert "ddr.latency_cycles" not in J6.with_overrides({"ddr.latency_cycles": 150.0}).ranges
    p.write_text('base = "j6"\n[idma]\nsetup_cycles = 40.0\n[ranges]\n'
                 '"idma.setup_cycles" = [35.0, 45.0]\n')
    assert load_model(p).ranges["idma.setup_cycles"] == (35.0, 45.0)


@pytest.mark.parametrize("ranges, words", [
    ('"ddr.latency_cycles" = [120.0, 140.0]', "does not hold its value"),
    ('"ddr.nope" = [1.0, 2.0]', "unknown model key 'ddr.nope'"),
    ('"softmax.schedule" = [1, 2]', "not a number"),
    ('"idma.setup_cycles" = [50.0, 20.0]', "inverted"),
    ('"idma.setup_cycles" = [20.0]', "expected [LOW, HIGH]"),
    ('"idma.setup_cycles" = ["a", 50.0]', "expected a number"),
    ('"ddr.latency_cycles" = { span_of = ["no_such_model"] }', "span_of 'no_such_model'"),
    ('"sram.latency_cycles" = [1.0, 2.0]', "unknown model key 'sram.latency_cycles'"),
])
def test_a_bad_range_is_one_line(tmp_path, capsys, ranges, words):
    p = tmp_path / "bad.toml"
    p.write_text(f'base = "j6"\n[ranges]\n{ranges}\n' if "=" in ranges else
                 f'base = "j6"\n{ranges}\n')
    with pytest.raises(ConfigError, match="ranges"):
        load_model(p)
    code, _, err = run_cli(capsys, "run", "--model", p, "--n", "64", "--no-data", "--interval")
    assert code == 2 and one_line(err) and words in err, err


def test_run_interval_prints_and_json(capsys):
    code, out, _ = run_cli(capsys, "run", "--n", N, "--no-data", "--interval")
    iv = op_interval(J6, "softmax", "pingpong", (N,))
    assert code == 0
    assert f"cycles [{iv.low_cycles:,}, {iv.high_cycles:,}]" in out and iv.dominant_key in out
    code, out, _ = run_cli(capsys, "run", "--n", N, "--no-data", "--interval", "--json")
    assert json.loads(out)["interval"] == iv.to_json()


def test_validate_rows_carry_their_intervals(capsys, tmp_path):
    f = tmp_path / "small.toml"
    f.write_text('platform = "j6"\nsource = "the model itself"\n' + "".join(
        f'[[measurement]]\nname = "{v}"\nop = "softmax"\nvariant = "{v}"\nn = {N}\n'
        f'cycles = {_cycles(J6, v) + 7}\nrole = "check"\n' for v in ("pingpong", "direct")))
    code, out, _ = run_cli(capsys, "validate", "--only", "--measurements", f, "--json",
                           "--suggest")
    obj = json.loads(out)
    assert obj["checks_inside_interval"] == 2
    for row in obj["rows"]:
        assert row["low_cycles"] <= row["predicted_cycles"] <= row["high_cycles"]
        assert row["inside"] == (row["low_cycles"] <= row["measured_cycles"]
                                 <= row["high_cycles"])
        assert row["dominant_key"] in J6.ranges
    s = obj["suggest"]
    assert s["key"] in J6.ranges and 0 < s["narrowed_by_pct"] <= 100
    widest = max(obj["rows"], key=lambda r: (r["high_cycles"] - r["low_cycles"])
                 / r["predicted_cycles"])
    assert s["widest"]["name"] == widest["name"]
    assert (s["narrowed"]["high_cycles"] - s["narrowed"]["low_cycles"]
            < widest["high_cycles"] - widest["low_cycles"])


def test_tolerance_ranges_are_where_every_row_stays_within_tolerance():
    from dspsim.study.calibrate import Measurement
    from dspsim.study.interval import tolerance_ranges

    measured = _cycles(J6, "direct")
    rows = [Measurement("direct", measured, (N,), op="softmax")]
    (lo, hi), = tolerance_ranges(J6, ["ddr.latency_cycles"], rows, 1.0).values()
    assert lo < J6.ddr.latency_cycles < hi
    for v in (lo, hi):
        assert abs(_cycles(J6, "direct", **{"ddr.latency_cycles": v}) / measured - 1) <= 0.01
    for v in (lo * 0.99, hi * 1.01):  # just beyond: out of tolerance
        assert abs(_cycles(J6, "direct", **{"ddr.latency_cycles": v}) / measured - 1) > 0.01



def test_a_positive_keys_tolerance_range_ends_at_a_value_the_walk_tried():
    """A write latency a TCM -> DDR copy barely feels fits down towards 0, which the key
    refuses: the low end is the walk's floor (its value x REL_PRECISION, within tolerance),
    not the smallest float the bisection once halved down to (5e-324)."""
    from dspsim.study.calibrate import Measurement
    from dspsim.study.interval import REL_PRECISION, tolerance_ranges

    model = J6.with_overrides({"ddr.write_latency_cycles": 300.0})
    ends = {"copy.src": "tcm", "copy.dst": "ddr"}
    measured = simulate(model.with_overrides(ends), "copy", "idma", shape=(65536,),
                        data=False).cycles
    rows = [Measurement("idma", measured, 65536, ends, op="copy")]
    (lo, hi), = tolerance_ranges(model, ["ddr.write_latency_cycles"], rows, 1.0).values()
    assert lo == pytest.approx(300.0 * REL_PRECISION) and 300.0 < hi
    at_lo = model.with_overrides({**ends, "ddr.write_latency_cycles": lo})
    cycles = simulate(at_lo, "copy", "idma", shape=(65536,), data=False).cycles
    assert abs(cycles / measured - 1) <= 0.01


def test_a_rate_range_reaching_0_is_refused_not_taken_as_its_slow_end(tmp_path):
    """idma.engine_bytes_per_cycle = 0 is no limit: a range [0, 1] was searched with 0 as its
    slow end (cycles fall as the rate rises), so the interval's high was the point itself,
    though a rate near 0 makes the run as slow as you like. One line, no interval."""
    p = tmp_path / "rate.toml"
    p.write_text('base = "j6"\n[idma]\nengine_bytes_per_cycle = 0.25\n[ranges]\n'
                 '"idma.engine_bytes_per_cycle" = [0.0, 1.0]\n')
    with pytest.raises(DspsimInputError, match="reaches 0, which means no limit"):
        op_interval(load_model(p), "softmax", "pingpong", (N,))
    ok = load_model(p).with_overrides({})
    ok = dataclasses.replace(ok, ranges={"idma.engine_bytes_per_cycle": (0.125, 1.0)})
    iv = op_interval(ok, "softmax", "pingpong", (N,))
    assert iv.high_cycles == _cycles(ok, **{"idma.engine_bytes_per_cycle": 0.125}) > iv.point_cycles


def test_a_tolerance_range_walks_a_key_on_its_multiples():
    """softmax.tile_bytes takes multiples of 4: the walk tried 32,768 + 3 (refused: a misfit
    for the walk) and reported [32768, 32768], though tiles from about 26,700 to 43,100 bytes
    keep the measurement within 1 %. Each end is a multiple, the next multiple out misfits."""
    from dspsim.study.calibrate import Measurement
    from dspsim.study.interval import tolerance_ranges

    measured = _cycles(J6, n=20_000)
    rows = [Measurement("pingpong", measured, 20_000)]
    (lo, hi), = tolerance_ranges(J6, ["softmax.tile_bytes"], rows, 1.0).values()
    assert lo < J6.softmax.tile_bytes < hi and lo % 4 == 0 and hi % 4 == 0
    for v, fits in ((lo, True), (hi, True), (lo - 4, False), (hi + 4, False)):
        cycles = _cycles(J6, n=20_000, **{"softmax.tile_bytes": v})
        assert (abs(cycles / measured - 1) <= 0.01) == fits, v

def test_every_ranged_key_of_the_shipped_models_has_a_claim_or_is_searched():
    for name in ("j6", "ameba_hifi5", "esp32s3"):
        untrended = [k for k in load_model(name).ranges if trend(k) is None
                     and k not in FIT_KEYS]  # a fit key: run at its ends alone
        assert len(untrended) <= 3, untrended


def test_keys_shows_each_range_and_its_source(capsys):
    code, out, _ = run_cli(capsys, "keys", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert rows["ddr.latency_cycles"]["range"] == list(J6.ranges["ddr.latency_cycles"])
    assert rows["idma.setup_cycles"]["range_source"].startswith("guess")
    assert rows["idma.channels"]["range"] is None  # a fact: no range
    code, out, _ = run_cli(capsys, "keys")
    assert "range [20.0, 50.0]: guess" in out


def test_calibrate_reports_each_fitted_keys_tolerance_range(capsys):
    measured = _cycles(J6, "direct")
    code, out, _ = run_cli(capsys, "calibrate", "--free", "ddr.latency_cycles",
                           "--measured", f"direct,n={N}={measured}", "--json")
    lo, hi = json.loads(out)["tolerance_ranges"]["ddr.latency_cycles"]
    assert lo < J6.ddr.latency_cycles < hi
    for v in (lo, hi):
        assert abs(_cycles(J6, "direct", **{"ddr.latency_cycles": v}) / measured - 1) <= 0.01
    code, out, _ = run_cli(capsys, "calibrate", "--free", "ddr.latency_cycles",
                           "--measured", f"direct,n={N}={measured}")
    assert '"ddr.latency_cycles" = [' in out.split("tolerance ranges")[1]


def test_a_table_of_ranges_is_required_and_run_models_takes_no_interval(tmp_path, capsys):
    p = tmp_path / "bad.toml"
    p.write_text('ranges = 5\nbase = "j6"\n')
    code, _, err = run_cli(capsys, "run", "--model", p, "--n", "64", "--no-data")
    assert code == 2 and one_line(err) and "ranges must be a table" in err
    code, _, err = run_cli(capsys, "run", "--models", "j6,j6_outstanding_bound", "--n", "64",
                           "--no-data", "--interval")
    assert code == 2 and one_line(err) and "--interval" in err


def test_span_of_names_a_model_beside_the_file(tmp_path):
    (tmp_path / "b.toml").write_text('base = "j6"\n[ddr]\nlatency_cycles = 200.0\n')
    a = tmp_path / "a.toml"
    a.write_text('base = "j6"\n[ddr]\nlatency_cycles = 150.0\n[ranges]\n'
                 '"ddr.latency_cycles" = { span_of = ["b"] }  # fitted: readings a and b\n')
    assert load_model(a).ranges["ddr.latency_cycles"] == (150.0, 200.0)
    from dspsim.config import key_sources, range_sources

    assert range_sources(a)["ddr.latency_cycles"] == "fitted: readings a and b"
    assert not any(k.startswith("ranges.") for k in key_sources(a))


def test_too_many_keys_without_a_trend_and_a_refused_corner_are_one_line(tmp_path, capsys):
    from dspsim.errors import DspsimInputError

    untrended = {"softmax.tile_bytes": (16384, 65536), "core.lanes_f32": (16, 64),
                 "idma.burst_bytes": (32, 128), "idma.channels": (2, 4)}
    with pytest.raises(DspsimInputError, match="4 ranged keys without a proven trend"):
        op_interval(_with_ranges(J6, untrended), "softmax", "pingpong", (N,))
    p = tmp_path / "m.toml"
    p.write_text('base = "j6"\n[ranges]\n"softmax.tile_bytes" = [16384, 1048576]\n')
    code, _, err = run_cli(capsys, "run", "--model", p, "--n", N, "--no-data", "--interval")
    assert code == 2 and one_line(err) and "softmax.tile_bytes=1048576" in err, err


def test_suggest_names_the_model_its_command_runs_under(capsys, tmp_path):
    """Before: the widest interval was the HiFi5's, but the command to measure left out
    --model, so it ran J6: another interval, another dominant key."""
    f = tmp_path / "hifi5.toml"
    f.write_text('platform = "ameba_hifi5"\nsource = "a test"\n' + "".join(
        f'[[measurement]]\nname = "fc {v}"\nop = "fc"\nvariant = "{v}"\nshape = [64, 256]\n'
        f'cycles = 100000\nrole = "check"\n' for v in ("pingpong", "direct")))
    code, out, err = run_cli(capsys, "validate", "--only", "--measurements", f, "--suggest")
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("widest interval"))
    command = line.split("(`dspsim ")[1].split("`")[0].split()
    assert command[:3] == ["run", "--model", "ameba_hifi5"]
    code, js, _ = run_cli(capsys, "validate", "--only", "--measurements", f, "--suggest",
                          "--json")
    m = json.loads(js)["suggest"]["measure"]
    code, ran, err = run_cli(capsys, *command, "--no-data")  # the interval it was chosen for
    assert code == 0, err
    assert f"cycles [{m['low_cycles']:,}, {m['high_cycles']:,}]" in ran
