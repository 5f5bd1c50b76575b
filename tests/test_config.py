"""The model file and its checks."""

import re
import tomllib
from pathlib import Path

import pytest

from dspsim.config import all_keys, default_model_path, load_model
from dspsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_KEYS = [
    "core.clock_mhz", "core.lanes_f32", "ddr.latency_cycles", "ddr.bytes_per_cycle",
    "idma.channels", "idma.max_outstanding", "idma.burst_bytes", "idma.setup_cycles",
    "tcm.banks", "tcm.bank_bytes", "softmax.tile_bytes",
]


def test_public_keys_exist(j6):
    for key in PUBLIC_KEYS:
        assert key in all_keys()
        j6.get(key)


def test_every_value_says_where_it_comes_from():
    labels = ("fact", "derived", "inferred", "guess", "fitted")
    fitted = []
    for line in (ROOT / "models" / "j6.toml").read_text().splitlines():
        if re.match(r"^\s*[a-z_]+\s*=", line) and not line.startswith("name"):
            key, _, comment = line.partition("#")
            assert any(comment.strip().startswith(lbl) for lbl in labels), line
            if comment.strip().startswith("fitted"):
                fitted.append(key.split("=")[0].strip())
    assert 1 <= len(fitted) <= 3, fitted


def test_default_model_is_the_repository_j6():
    assert default_model_path().name == "j6.toml"
    assert tomllib.loads(default_model_path().read_text())["model"]["name"] == "j6"


def test_overrides_are_typed_and_checked(j6):
    m = j6.with_overrides(["ddr.latency_cycles=300", "idma.max_outstanding=4",
                           "softmax.max_init=-inf"])
    assert m.ddr.latency_cycles == 300.0 and m.idma.max_outstanding == 4
    assert m.softmax.max_init == "-inf"
    assert dict(m.overrides)["ddr.latency_cycles"] == 300
    assert j6.ddr.latency_cycles != 300.0  # frozen: the original is untouched


@pytest.mark.parametrize(
    "override, message",
    [
        ("dram.latency=3", "unknown model key 'dram.latency'"),
        ("ddr.latency=3", "allowed keys"),
        ("ddr.latency_cycles=0", "greater than 0"),
        ("ddr.latency_cycles=-5", "greater than 0"),
        ("ddr.bytes_per_cycle=fast", "expected a number"),
        ("idma.max_outstanding=2.5", "expected an integer"),
        ("idma.max_outstanding=0", "allowed range"),
        ("softmax.tile_bytes=524288", "larger than a DataRAM"),
        ("softmax.tile_bytes=1002", "multiple of 4"),
        ("softmax.max_init=minus", "allowed values"),
        ("tcm.bank_bytes=true", "expected an integer"),
        ("noequals", "expected KEY=VALUE"),
    ],
)
def test_bad_overrides_name_the_problem(j6, override, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        j6.with_overrides([override])
    assert "\n" not in str(e.value)


def test_bad_model_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_model(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[core\nclock_mhz = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_model(bad)
    text = default_model_path().read_text()
    missing = tmp_path / "missing_key.toml"
    missing.write_text(re.sub(r"(?m)^burst_bytes.*$", "", text))
    with pytest.raises(ConfigError, match="missing key idma.burst_bytes"):
        load_model(missing)
    extra = tmp_path / "extra.toml"
    extra.write_text(text + "\n[gpu]\ncores = 3\n")
    with pytest.raises(ConfigError, match=r"unknown table \[gpu\]"):
        load_model(extra)
    meta = tmp_path / "meta.toml"
    meta.write_text(text.replace('name = "j6"', 'name = "j6"\ncolour = "red"', 1))
    with pytest.raises(ConfigError, match=r"unknown key model\.colour; allowed: model\.name"):
        load_model(meta)


def test_an_override_given_twice_is_refused(capsys):
    from dspsim.cli import main

    code = main(["run", "--n", "2000", "--set", "ddr.latency_cycles=10",
                 "--set", "ddr.latency_cycles=20"])
    err = capsys.readouterr().err
    assert code == 2 and "given twice" in err and err.count("\n") == 1
