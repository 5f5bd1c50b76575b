"""dspsim validate, the measurements it ships, the second platform's file, and calibrating
from microbenchmarks."""

import json
import re
import tomllib
from pathlib import Path

import pytest

from dspsim import load_model
from dspsim.config import models_dir
from dspsim.study.validate import read_measurements, shipped_files, validation_dir
from tests.cli_helpers import one_line, run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_validate_prints_every_shipped_measurement_and_calibration_is_within_1_pct(capsys):
    code, out, err = run_cli(capsys, "validate")
    assert code == 0, err
    assert "softmax ping-pong TCM, 100,000 float32" in out and "5,154,293" in out
    assert "5,154,294" in out and "7,648,258" in out  # what reproduce prints
    for name in ("memcpy 98,304 B PSRAM -> DTCM", "iDMA 1 descriptor 98,304 B",
                 "fc_s8 kernel, 128 x 768", "iDMA PSRAM -> DTCM limit 430 MB/s"):
        assert name in out
    assert "every one within 1 %" in out
    # the README's "Every platform's rows today" is this output (its high end of the ESP32-S3's
    # SRAM -> PSRAM memcpy said 736,030 after the model had moved it to 736,029)
    published = (ROOT / "README.md").read_text().split("### Every platform's rows today")[1]
    for line in out.strip().splitlines():
        assert ("    " + line).rstrip() in published, f"README's validate table lacks: {line}"


def test_validation_docs_tables_are_validates_rows(capsys):
    """docs/validation.md sections 7 and 8 are written by hand from `dspsim validate`: section 7
    still gave the ESP32-S3's rows of before its PSRAM refresh fit (memcpy PSRAM -> SRAM at
    409,614, -0.78 %, outside its interval)."""
    code, out, err = run_cli(capsys, "validate", "--models", "esp32s3,ameba_hifi5", "--json")
    assert code == 0, err
    doc = (ROOT / "docs" / "validation.md").read_text()
    for r in json.loads(out)["rows"]:
        cells = (f"| {r['measured_cycles']:,} | {r['predicted_cycles']:,} | "
                 f"{r['error_pct']:+.2f} | [{r['low_cycles']:,}, {r['high_cycles']:,}]")
        assert cells in doc, f"docs/validation.md lacks {r['name']}: {cells}"


def test_validate_json_has_every_row(capsys):
    code, out, _ = run_cli(capsys, "validate", "--json")
    obj = json.loads(out)
    rows = obj["rows"]
    assert code == 0 and obj["calibration_within_1_pct"]
    shipped = sum(len(read_measurements(f)) for f in shipped_files())
    assert len(rows) == shipped >= 11
    cal = [r for r in rows if r["role"] == "calibration"]
    assert {r["platform"] for r in cal} == {"j6", "ameba_hifi5", "esp32s3"}
    assert all(abs(r["error_pct"]) <= 1.0 for r in cal)
    assert all(r["predicted_cycles"] > 0 and r["source"] for r in rows)
    assert any(r["role"] == "check" for r in rows)
    for r in rows:
        assert r["error_pct"] == pytest.approx(
            100 * (r["predicted_cycles"] / r["measured_cycles"] - 1))


def test_models_validate_every_reading_of_a_platform(capsys):
    code, out, _ = run_cli(capsys, "validate", "--models",
                           "j6,j6_outstanding_bound,j6_descriptor_bound", "--json")
    rows = json.loads(out)["rows"]
    assert code == 0
    assert {r["model"] for r in rows} == {"j6", "j6_outstanding_bound", "j6_descriptor_bound"}
    assert {r["platform"] for r in rows} == {"j6"} and len(rows) == 6
    assert all(abs(r["error_pct"]) < 0.01 for r in rows)


def _file(tmp_path, text, name="mine.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


MINE = """platform = "ameba_hifi5"
source = "my board"
[[measurement]]
name = "my copy"
op = "copy"
variant = "idma"
n = 8192
settings = { "copy.src" = "sram" }
cycles = 9000
role = "check"
"""


def test_measurements_adds_a_users_own(tmp_path, capsys):
    p = _file(tmp_path, MINE)
    code, out, _ = run_cli(capsys, "validate", "--measurements", p, "--only", "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and len(rows) == 1 and rows[0]["name"] == "my copy"
    assert rows[0]["settings"] == {"copy.src": "sram"}
    code, out, _ = run_cli(capsys, "validate", "--measurements", p)
    assert code == 0 and "my copy" in out and "softmax ping-pong" in out


def test_a_calibration_measurement_outside_1_pct_fails_the_command(tmp_path, capsys):
    p = _file(tmp_path, MINE.replace('role = "check"', 'role = "calibration"'))
    code, out, _ = run_cli(capsys, "validate", "--measurements", p, "--only")
    assert code == 1 and "OUTSIDE 1 %" in out and "SOME OUTSIDE" in out


@pytest.mark.parametrize("edit, message", [
    (('role = "check"', 'role = "guess"'), "role = 'guess'"),
    (("cycles = 9000", "cycles = 0"), "cycles = 0"),
    (("cycles = 9000", ""), "cycles = None"),
    (('n = 8192', 'n = 8192\ncolour = "red"'), "unknown field 'colour'"),
    (('variant = "idma"', 'variant = "turbo"'), "no variant 'turbo'"),
    (('"copy.src" = "sram"', '"copy.turbo" = 1'), "unknown model key"),
    (('platform = "ameba_hifi5"', 'platform = "nosuch"'), "platform 'nosuch'"),
    (('[[measurement]]', 'stray = 1\n[[measurement]]'), "unknown top-level key 'stray'"),
])
def test_a_bad_measurements_file_is_one_line_and_exit_2(tmp_path, capsys, edit, message):
    p = _file(tmp_path, MINE.replace(*edit))
    code, _, err = run_cli(capsys, "validate", "--measurements", p, "--only")
    assert code == 2 and one_line(err) and message in err, err


def test_models_of_no_measured_platform_is_one_line(tmp_path, capsys):
    p = _file(tmp_path, '[model]\nname = "other"\n' + (models_dir() / "j6.toml").read_text()
              .replace('[model]\nname = "j6"\n', ""), "other.toml")
    code, _, err = run_cli(capsys, "validate", "--models", p)
    assert code == 2 and one_line(err) and "no measurement is of the models given" in err, err


def test_the_measurements_ship_in_the_wheel():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = cfg["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert include["validation"] == "dspsim/validation"
    assert validation_dir().is_dir()
    assert {f.stem for f in shipped_files()} >= {"j6", "ameba_hifi5"}


# ------------------------------------------------------------------ the second platform
def test_the_hifi5_file_stands_alone_and_labels_every_value():
    text = (models_dir() / "ameba_hifi5.toml").read_text()
    assert not re.search(r"^\s*base\s*=", text, re.M)
    labels = ("fact", "derived", "inferred", "guess", "fitted")
    fitted = []
    section = ""
    for line in text.splitlines():
        head = re.match(r"^\[([a-z0-9_]+)\]", line)
        if head:
            section = head.group(1)
        elif re.match(r"^\s*[a-z_]+\s*=", line) and section != "model":
            key, _, comment = line.partition("#")
            assert any(comment.strip().startswith(lbl) for lbl in labels), line
            if comment.strip().startswith("fitted"):
                fitted.append(f"{section}.{key.split('=')[0].strip()}")
    assert sorted(fitted) == ["copy.interrupt_handler_cycles", "core.call_overhead_cycles",
                              "dcache.miss_cycles", "psram.refresh_clocks",
                              "sram.latency_cycles"]


def test_the_hifi5_platform_is_what_the_facts_say():
    m = load_model("ameba_hifi5")
    assert set(m.memories) == {"psram", "sram"} and m.host.memory == "psram"
    assert (m.tcm.banks, m.tcm.bank_bytes) == (2, 128 * 1024)
    assert (m.idma.channels, m.idma.max_outstanding, m.idma.tcm_end_required) == (1, 16, True)
    assert (m.dcache.line_bytes, m.core.clock_mhz) == (128, 500.0)
    assert m.psram.cached and m.sram.cached and m.sram.bytes_per_cycle == 1920 / 500
    # the data cache: 48 KiB, 3 ways of 128-byte lines (the vendor's cache documentation)
    assert (m.dcache.capacity_bytes, m.dcache.ways) == (48 * 1024, 3)
    # the PSRAM: one transaction at a time, T = 4 ns = 2 cycles at 500 MHz, 8 lines DDR (2
    # bytes a clock), CMD+ADDR 3 + (LC - 1) with LC = 7, read hold 2, write hold 1
    p = m.psram
    assert (p.protocol, p.max_outstanding, p.clock_cycles, p.bytes_per_clock) == (
        "transactions", 1, 2.0, 2.0)
    assert (p.command_clocks, p.read_hold_clocks, p.write_hold_clocks) == (3 + 7 - 1, 2, 1)
    assert 1024 <= p.page_bytes <= 2048
    # no benchmark span holds a prologue (the example's source)
    assert m.copy.prologue_cycles == 0


def test_the_fitted_values_are_what_calibrate_finds_from_the_microbenchmarks(capsys):
    """Each group of calibration measurements refitted from the model's own values: the fit
    stays where the file says (a file edited by hand would fail here)."""
    rows = [m for m in read_measurements(validation_dir() / "ameba_hifi5.toml")
            if m.role == "calibration"]
    fc = next(m for m in rows if m.op == "kernel")
    code, out, err = run_cli(capsys, "calibrate", "--model", "ameba_hifi5", "--json",
                             "--measured", fc.spec(), "--free", "core.call_overhead_cycles=0:50")
    assert code == 0, err
    assert json.loads(out)["fit"]["core.call_overhead_cycles"]["value"] == 9
    sram = next(m for m in rows if m.settings.get("copy.src") == "sram")
    code, out, err = run_cli(capsys, "calibrate", "--model", "ameba_hifi5", "--json",
                             "--measured", sram.spec(), "--free", "sram.latency_cycles=1:100")
    assert code == 0, err
    assert json.loads(out)["fit"]["sram.latency_cycles"]["value"] == pytest.approx(
        load_model("ameba_hifi5").sram.latency_cycles, rel=1e-3)


def test_calibrate_takes_copy_and_kernel_measurements_from_a_csv(tmp_path, capsys):
    p = tmp_path / "m.csv"
    p.write_text("op,variant,n,shape,copy.src,copy.timed_prologue,cycles\n"
                 "kernel,fc_s8,,128x768,,,5149\n"
                 "copy,memcpy,131072,,sram,false,36592\n")
    code, out, err = run_cli(capsys, "calibrate", "--model", "ameba_hifi5", "--json",
                             "--measured-csv", p, "--free", "core.call_overhead_cycles=0:50")
    obj = json.loads(out)
    assert code == 0, err
    assert [m["spec"] for m in obj["measurements"]] == [
        "kernel:fc_s8,shape=128x768=5149",
        "copy:memcpy,n=131072,copy.src=sram,copy.timed_prologue=False=36592"]
    assert obj["fit"]["core.call_overhead_cycles"]["value"] == 9


def test_keys_lists_a_platform_without_ddr_with_its_labels(capsys):
    """Before: `dspsim keys` asked every model for a table named ddr (a traceback here)."""
    code, out, err = run_cli(capsys, "keys", "--model", "ameba_hifi5", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert code == 0, err
    assert "ddr.latency_cycles" not in rows and rows["psram.refresh_clocks"]["label"] == "fitted"
    assert rows["psram.clock_cycles"]["label"] == "fact"
    assert rows["sram.bytes_per_cycle"]["label"] == "derived"
    assert rows["idma.tcm_end_required"]["value"] is True


def test_validation_docs_fidelity_table_has_the_runs_events(monkeypatch):
    """docs/validation.md section 2 (experiments/validation.py's output) gave the headline
    ping-pong 493 events, idma.max_outstanding=1 1,411: the engine books more since (498,
    466); each case's events are the run's."""
    from dspsim.run import simulate
    monkeypatch.syspath_prepend(str(ROOT / "experiments"))  # the script's _results
    import importlib.util
    spec = importlib.util.spec_from_file_location("validation_script",
                                                  ROOT / "experiments" / "validation.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    doc = (ROOT / "docs" / "validation.md").read_text()
    for mode, n, settings in script.FIDELITY_CASES:
        r = simulate(load_model().with_overrides(settings), variant=mode, n=n, data=False)
        shown = ", ".join(f"`{k}={v}`" for k, v in settings.items()) or "J6"
        assert f"| {mode} | {n:,} | {shown} | {r.cycles:,} | {r.cycles:,} | +0.00 | " \
            f"{r.events:,} | {r.events:,} |" in doc, (mode, n, settings)
