"""An op's array that does not fit its memory is refused in one line that says what would fit
(the ESP32-S3's default softmax, 100,000 float32 in and out of 512 KiB of SRAM)."""

from __future__ import annotations

from tests.cli_helpers import one_line, run_cli


def test_an_array_too_large_for_its_memory_says_what_is_allowed(capsys):
    code, _, err = run_cli(capsys, "run", "--model", "esp32s3", "--op", "softmax",
                           "--variant", "direct")
    assert code == 2 and one_line(err)
    assert "does not fit sram" in err and "allowed:" in err and "sram.size_bytes" in err


def test_a_host_array_too_large_names_host_memory_as_the_way_elsewhere(capsys):
    """A copy between two PSRAM ends still keeps the host's arrays in host.memory (the SRAM):
    the refusal names that key, and with it set to the PSRAM the copy runs."""
    argv = ["run", "--model", "esp32s3", "--op", "copy", "--variant", "idma", "--n", "1048576",
            "--set", "copy.src=psram", "--set", "copy.dst=psram", "--no-data"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and one_line(err)
    assert "input array of 1048576 bytes does not fit sram" in err and "host.memory" in err
    code, out, _ = run_cli(capsys, *argv, "--set", "host.memory=psram")
    assert code == 0 and "1,048,576 bytes" in out
