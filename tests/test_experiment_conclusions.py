"""An experiment's printed conclusion says what its run shows: each claim holds on the numbers
of the run it describes, on a run that finds a limit and on one that does not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def experiment(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cams():
    return experiment("camera_streams")


def conclude(cams, df):
    limits = {s: cams.sustain_limit(df[df["setup"] == s]) for s in dict.fromkeys(df["setup"])}
    return cams.conclusion(df, limits)


@pytest.fixture(scope="module")
def table(cams):
    """The committed run: 1 to 12 cameras, the seed's ping-pong falls behind at 7."""
    return cams.read_table(ROOT / "results" / "camera_streams.csv")


def test_cameras_a_run_that_finds_the_port_limit_says_so(cams, table):
    text = conclude(cams, table)
    assert "At 7 cameras on 1 core the backlog grows without bound" in text
    assert "that port, which the cores share, is the limit" in text
    assert "a second core adds no camera" in text
    assert "changing the schedule buys at least 6 camera(s) on 1 core" in text


def test_cameras_a_run_where_every_setup_kept_up_concludes_no_limit(cams, table):
    """Before: "bound by that port" and "the schedule buys more cameras" at a 52 %-busy port
    where every setup kept up (``--seconds 0.5 --max-cameras 3``)."""
    small = table[table["cameras"] <= 3]
    assert small["sustained"].all()
    text = conclude(cams, small)
    assert "bound" not in text and "is the limit" not in text and "buys" not in text
    assert "neither falls behind, so this run shows no limit" in text
    assert "cannot rank a new schedule against a second core" in text


def test_cameras_a_limit_with_an_idle_port_is_not_the_port(cams, table):
    quiet = table.assign(ddr_utilisation=table["ddr_utilisation"] * 0.5)
    text = conclude(cams, quiet)
    assert "the port is not the limit" in text and "which the cores share" not in text


def timelines_conclusion(**kw):
    args = dict(cycles={"pingpong": 100, "direct": 200}, compute_pct=30.0, wait_in_pct=60.0,
                direct_stall_pct=80.0, hidden_pct=10.0,
                moved={"pingpong": 1000, "direct": 3000},
                ddr_pct={"pingpong": 90.0, "direct": 70.0})
    return experiment("timelines").conclusion(**(args | kw))


def test_timelines_conclusion_follows_the_numbers():
    text = timelines_conclusion()
    assert "(2.00x faster), but not by hiding DMA" in text
    assert "the gain comes from moving fewer bytes" in text
    text = timelines_conclusion(cycles={"pingpong": 300, "direct": 200}, hidden_pct=70.0,
                                moved={"pingpong": 3000, "direct": 3000})
    assert "(1.50x slower), although it hides DMA" in text
    assert "the gain" not in text and "it moves no fewer bytes" in text


def test_ddr_latency_speedup_is_ping_pongs_over_direct(monkeypatch):
    """Before: the script divided by the op's default variant (ping-pong), so where direct
    takes twice ping-pong's cycles it printed "Ping-pong never pays ... 0.50x"."""
    import pandas as pd
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))  # its _results
    rows = [{"op": "softmax", "variant": v, "n": 1000, "ddr.latency_cycles": lat,
             "cycles": c * k, "warnings": "", "hazards": 0, "wall_s": 0.0, "error": ""}
            for lat, k in ((1.0, 1), (10.0, 3)) for v, c in (("pingpong", 100), ("direct", 200))]
    text = experiment("sweep_ddr_latency").conclusion(pd.DataFrame(rows))
    assert text.startswith("Ping-pong pays at every DDR latency from 1 to 10 cycles")
    assert "from 2.00x at 1 to 2.00x at 10 cycles" in text
