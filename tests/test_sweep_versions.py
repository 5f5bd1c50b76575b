"""A sweep begun by an older dspsim, before some model key existed, resumes: its rows were
computed as at the key's default. Only a changed value of something the sweep fixed makes it
another sweep."""

import json

import pytest

from dspsim.study.sweep.sidecar import key_default
from tests.cli_helpers import one_line, run_cli

ARGV = ["sweep", "--n", "1000", "--variant", "pingpong,direct", "--param",
        "ddr.latency_cycles=100,200", "--fidelity", "tile"]
# keys with a default, j6 at it; tcm.reserved_bytes has one too (0), but j6 keeps 16 KiB (the
# sidecar of a softmax sweep records no layernorm key: another op's keys do not act on it)
NEWER = ("softmax.buffers", "softmax.schedule", "tcm.reserved_bytes")


@pytest.fixture
def old_sweep(tmp_path, capsys):
    """A finished sweep whose sidecar lacks keys with defaults, as an older dspsim wrote it."""
    out = tmp_path / "s.csv"
    assert run_cli(capsys, *ARGV, "--set", "tcm.reserved_bytes=0", "--out", out)[0] == 0
    side = out.with_name(out.name + ".sweep.json")
    doc = json.loads(side.read_text())
    assert not any(k.startswith("layernorm.") for k in doc["fixed_model"])
    for key in NEWER:
        assert key_default(key) is not None
        del doc["fixed_model"][key]
    side.write_text(json.dumps(doc))
    return out, side


def test_a_sweep_begun_before_a_key_existed_resumes_at_its_default(old_sweep, capsys):
    """Before: "sidecar damaged: fixed_model has no softmax.buffers"."""
    out, side = old_sweep
    before = out.read_bytes()
    code, stdout, err = run_cli(capsys, *ARGV, "--set", "tcm.reserved_bytes=0", "--out", out)
    assert code == 0 and "0 computed, 4 already" in stdout, (stdout, err)
    assert err.count("\n") == 1 and "note:" in err and "before" in err, err
    for key in NEWER:
        assert key in err
    assert out.read_bytes() == before
    # the sidecar records the defaults now: the next resume is silent
    fixed = json.loads(side.read_text())["fixed_model"]
    assert fixed["softmax.buffers"] == key_default("softmax.buffers")
    code, stdout, err = run_cli(capsys, *ARGV, "--set", "tcm.reserved_bytes=0", "--out", out)
    assert code == 0 and err == "" and "0 computed" in stdout, err


@pytest.mark.parametrize("setting", [["--set", "softmax.schedule=split"], []])
def test_a_new_key_at_another_value_is_another_sweep(old_sweep, capsys, setting):
    """``softmax.schedule=split``, or j6's own 16 KiB of tcm.reserved_bytes: not the default the
    rows were computed at (a key that acts in the sweep's runs: ``softmax.buffers=2``, which
    acts in neither pingpong nor direct, is refused as it is by ``run``)."""
    out, _ = old_sweep
    before = out.read_bytes()
    fixed = ["--set", "tcm.reserved_bytes=0"] if setting else []
    code, _, err = run_cli(capsys, *ARGV, *setting, *fixed, "--out", out)
    assert code == 2 and one_line(err) and "different sweep" in err, err
    assert ("softmax.schedule" if setting else "tcm.reserved_bytes") in err
    assert "before the key existed" in err
    assert out.read_bytes() == before


def test_a_changed_fixed_value_is_still_another_sweep(old_sweep, capsys):
    out, _ = old_sweep
    code, _, err = run_cli(capsys, *ARGV, "--set", "tcm.reserved_bytes=0", "--set",
                           "idma.burst_bytes=128", "--out", out)
    assert code == 2 and one_line(err) and "idma.burst_bytes = 64 there, 128 here" in err, err


def test_a_key_without_a_default_missing_is_damage(old_sweep, capsys):
    out, side = old_sweep
    doc = json.loads(side.read_text())
    del doc["fixed_model"]["core.count"]
    side.write_text(json.dumps(doc))
    code, _, err = run_cli(capsys, *ARGV, "--set", "tcm.reserved_bytes=0", "--out", out)
    assert code == 2 and one_line(err) and "damaged" in err and "core.count" in err, err


@pytest.mark.parametrize("first, then, says", [
    (["--set", "ddr.write_latency_cycles=3000"], [], "write_latency_cycles = 3000.0 there, unset"),
    ([], ["--set", "ddr.write_latency_cycles=300"], "write_latency_cycles unset there, 300.0")])
def test_an_optional_key_set_on_one_side_only_is_another_sweep(tmp_path, capsys, first, then,
                                                              says):
    """A key with no default (ddr.write_latency_cycles: unset, writes take latency_cycles) set
    when the file was begun and not on resume: its rows were taken as they were (the key was
    compared only where this sweep sets it), the cycles of another model; set only on resume:
    a TypeError traceback. Either is another sweep, refused in one line."""
    out = tmp_path / "s.csv"
    argv = ["sweep", "--op", "copy", "--variant", "idma", "--n", "65536", "--set", "copy.src=tcm",
            "--set", "copy.dst=host", "--param", "copy.descriptor_bytes=4096,8192"]
    assert run_cli(capsys, *argv, *first, "--out", out)[0] == 0
    before = out.read_bytes()
    code, _, err = run_cli(capsys, *argv, *then, "--out", out)
    assert code == 2 and one_line(err) and "different sweep" in err and says in err, err
    assert out.read_bytes() == before
