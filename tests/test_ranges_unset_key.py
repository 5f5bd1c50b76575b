"""A [ranges] entry for a key the model leaves unset (psram.latency_cycles on the ESP32-S3's
transactions PSRAM) is refused in one line, as a range that does not hold its value is."""

from __future__ import annotations

import pytest

from dspsim import load_model
from dspsim.errors import ConfigError
from tests.cli_helpers import one_line, run_cli


def _file(tmp_path, entry: str):
    path = tmp_path / "m.toml"
    path.write_text(f'base = "esp32s3"\n[ranges]\n{entry}\n')
    return path


@pytest.mark.parametrize("entry", ['"psram.latency_cycles" = [1.0, 4.0]',
                                   '"psram.bytes_per_cycle" = [0.5, 2.0]'])
def test_a_range_of_an_unset_key_is_refused(tmp_path, entry):
    with pytest.raises(ConfigError, match="no value"):
        load_model(_file(tmp_path, entry))


def test_the_cli_refuses_it_in_one_line(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--model", _file(tmp_path,
                           '"psram.latency_cycles" = [1.0, 4.0]'), "--op", "copy", "--n", "1024")
    assert code == 2 and one_line(err) and "psram.latency_cycles" in err


def test_a_range_of_a_set_key_still_loads(tmp_path):
    m = load_model(_file(tmp_path, '"psram.refresh_clocks" = [0.2, 0.5]'))
    assert m.ranges["psram.refresh_clocks"] == (0.2, 0.5)


@pytest.mark.parametrize("model, free, says", [
    ("j6", "ddr.write_latency_cycles", "--set ddr.write_latency_cycles=VALUE"),
    ("j6", "ddr.write_latency_cycles=10:2000", "--set ddr.write_latency_cycles=VALUE"),
    ("esp32s3", "psram.latency_cycles", "cannot act on a transactions memory")])
def test_calibrate_refuses_to_free_an_unset_key_in_one_line(capsys, model, free, says):
    """--free of a key the model leaves unset (no value to start the fit from) was a
    TypeError traceback; it is one line saying what to do."""
    code, _, err = run_cli(capsys, "calibrate", "--model", model, "--free", free,
                           "--measured", "copy:idma,n=4096=11000")
    assert code == 2 and one_line(err) and says in err
