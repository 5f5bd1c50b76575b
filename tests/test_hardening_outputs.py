"""Every output path is checked before anything is simulated: a bad extension is one line and
exit 2 with no simulation started (a trap on the event loop's construction proves it)."""

from __future__ import annotations

import pytest
import simpy

from tests.cli_helpers import one_line, run_cli

WORKLOAD = 'seed = 1\n[[stream]]\nname = "a"\nop = "softmax"\nn = 1000\nperiod_us = 1000\n' \
           'count = 2\n'


@pytest.fixture
def no_simulation(monkeypatch):
    """Any simulation started in this process fails the test."""
    def refuse(*_a, **_k):
        raise AssertionError("a simulation started before the outputs were checked")

    monkeypatch.setattr(simpy.Environment, "__init__", refuse)


@pytest.mark.parametrize("argv", [
    ["run", "--n", "1000", "--timeline", "{d}/o.txt"],
    ["run", "--n", "1000", "--trace", "{d}/o.txt"],
    ["run", "--n", "1000", "--tiles", "{d}/o.txt"],
    ["run", "--n", "1000", "--save", "{d}/o.txt"],
    ["run", "--n", "1000", "--output", "{d}/o.txt"],
    ["run", "--n", "1000", "--timeline", "{d}/o"],
    ["workload", "{d}/w.toml", "--timeline", "{d}/o.txt"],
    ["workload", "{d}/w.toml", "--trace", "{d}/o.txt"],
    ["workload", "{d}/w.toml", "--out", "{d}/o.txt"],
    ["optimize", "--n", "1000", "--jobs", "1", "--out", "{d}/o.txt"],
    ["calibrate", "--measured", "direct,n=1000=100000", "--out", "{d}/o.txt"],
    ["sweep", "--param", "ddr.latency_cycles=50", "--n", "1000", "--out", "{d}/o.txt"],
    ["plot", "timeline", "{d}/w.toml", "--out", "{d}/o.txt"],
])
def test_a_bad_output_extension_is_refused_before_simulating(tmp_path, capsys, no_simulation,
                                                              argv):
    (tmp_path / "w.toml").write_text(WORKLOAD)
    code, out, err = run_cli(capsys, *[a.format(d=tmp_path) for a in argv])
    assert code == 2 and one_line(err) and "unknown extension" in err, err
    assert not (tmp_path / "o.txt").exists() and not (tmp_path / "o").exists()


def test_the_trap_catches_a_simulation(tmp_path, no_simulation):
    """The fixture above is not vacuous: a run with a good output path does reach it."""
    from dspsim.cli import main

    with pytest.raises(AssertionError, match="a simulation started"):
        main(["run", "--n", "1000", "--tiles", str(tmp_path / "o.csv")])
