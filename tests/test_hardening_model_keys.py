"""Model files and keys: memory names that the run's reports already use, the unknown-key
list of a model, keys that cannot act on a platform, keys a file must give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim import load_model, simulate
from dspsim.config import ConfigError, models_dir
from dspsim.ops import OPS
from tests.cli_helpers import one_line, run_cli

RESERVED_NAME = re.compile(r"(core|idma)[0-9]*|idma_in|idma_out")  # as the error lists them
MEMORY = """
latency_cycles = 100.0
bytes_per_cycle = 1.0
max_outstanding = 4
base_address = 0x20000000
size_bytes = 0x00100000
"""


def memory_file(tmp_path: Path, name: str, host: bool = False) -> Path:
    """J6 with one more memory, ``name`` (the host's memory when ``host``)."""
    p = tmp_path / "m.toml"
    text = f'base = "j6"\n[{name}]{MEMORY}'
    if host:
        text += f'[host]\nmemory = "{name}"\n'
    p.write_text(text)
    return p


# ------------------------------------------------------------------ reserved memory names
RESERVED = st.one_of(
    st.builds(lambda w, k: f"{w}{k}", st.sampled_from(["core", "idma"]),
              st.integers(0, 10**6)),
    st.sampled_from(["core0", "core1", "idma0", "idma1", "idma_in", "idma_out"]),
)


@settings(max_examples=40, deadline=None)
@given(name=RESERVED)
def test_a_memory_named_like_an_engine_or_a_wait_is_refused(tmp_path_factory, name):
    """Before: ``[core0]`` or ``[idma_in]`` loaded as a memory, and a run's busy_cycles,
    stall_cycles and a sweep's columns mixed its counters with the engine's or the wait's."""
    p = memory_file(tmp_path_factory.mktemp("m"), name)
    with pytest.raises(ConfigError, match="reserved") as e:
        load_model(p)
    text = str(e.value)
    assert "\n" not in text and f"[{name}]" in text
    assert "core<N>, idma<N>, idma_in, idma_out" in text


@pytest.mark.parametrize("name", ["idma_in", "core0", "idma1"])
def test_the_command_line_refuses_a_reserved_memory_name(tmp_path, capsys, name):
    code, _, err = run_cli(capsys, "run", "--model", memory_file(tmp_path, name, host=True),
                           "--op", "copy", "--n", "64")
    assert code == 2 and one_line(err) and "reserved" in err, err


@pytest.mark.parametrize("name", ["cores", "idma_inner", "core_mem", "dma0", "idmax"])
def test_names_near_the_reserved_ones_keep_their_own_counters(tmp_path, name):
    """Each engine and wait of the report is counted once: as many busy and stall entries as
    engines and memories plus the two waits, the host memory's stall its own."""
    m = load_model(memory_file(tmp_path, name, host=True))
    r = simulate(m, "softmax", "direct", n=512, data=False)
    assert set(r.busy_cycles) == set(r.engines) and len(r.engines) == 1 + 2 + 2
    assert set(r.stall_cycles) == {"ddr", name, "idma_in", "idma_out"}
    assert r.stall_cycles[name] > 0 and r.stall_cycles["idma_in"] == 0
    # a sweep's row: each memory's columns hold its own counters, each engine's its own
    from dspsim.study.sweep.executors import result_row

    row = result_row(r)
    assert row[f"{name}_stall_cycles"] == r.stall_cycles[name]
    assert row[f"{name}_busy_cycles"] == r.busy_cycles[name]
    assert row["idma_in_stall_cycles"] == 0 and row["core_busy_cycles"] == r.busy_cycles["core0"]
    assert len(row) == 2 + 4 * 2 + 1 + 2 + 2 + 2  # no column written twice


TAKEN = {"ddr", "model", "core", "idma", "tcm", "host", "dcache", *OPS}


@settings(max_examples=25, deadline=None)
@given(name=st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,24}", fullmatch=True).filter(
    lambda n: n not in TAKEN and n.lower() != "ddr"))  # [DDR] beside [ddr]: refused for case
def test_every_name_loads_as_a_memory_or_is_refused_as_reserved(tmp_path_factory, name):
    """No third way: a name that loads keeps every counter of the report its own."""
    p = memory_file(tmp_path_factory.mktemp("m"), name, host=True)
    try:
        m = load_model(p)
    except ConfigError as e:
        assert "reserved" in str(e) and RESERVED_NAME.fullmatch(name)
        return
    assert not RESERVED_NAME.fullmatch(name)
    r = simulate(m, "softmax", "direct", n=256, data=False)
    assert len(r.engines) == 5 and set(r.busy_cycles) == set(r.engines)
    assert set(r.stall_cycles) == {"ddr", name, "idma_in", "idma_out"}


# ------------------------------------------------------------------ unknown keys of a model
@pytest.mark.parametrize("key", ["psram.nope", "ddr.x", "core.nope"])
def test_an_unknown_key_lists_the_models_own_keys(key):
    """Before: the list was J6's (``ddr.*``) whatever the model, without its memories'."""
    with pytest.raises(ConfigError, match="unknown model key") as e:
        load_model("ameba_hifi5", [f"{key}=1"])
    assert "\n" not in str(e.value)
    listed = str(e.value).split("; allowed keys: ")[1].split(", ")
    assert "psram.latency_cycles" in listed and "sram.cached" in listed
    assert not [k for k in listed if k.startswith("ddr.")]
    # the same through a mapping of overrides, and J6's own list on J6
    with pytest.raises(ConfigError, match="psram.latency_cycles"):
        load_model("ameba_hifi5").with_overrides({key: 1})
    with pytest.raises(ConfigError, match="ddr.latency_cycles") as e:
        load_model("j6", [f"{key}=1"])
    assert not [k for k in str(e.value).split("; allowed keys: ")[1].split(", ")
                if k.startswith(("psram.", "sram."))]


def test_the_command_line_lists_the_models_keys(capsys):
    code, _, err = run_cli(capsys, "run", "--model", "ameba_hifi5", "--set", "psram.nope=1")
    assert code == 2 and one_line(err) and "psram.bytes_per_cycle" in err
    assert " ddr." not in err


# ------------------------------------------------------------------ keys that cannot act
def test_the_write_buffer_cannot_act_behind_a_write_back_cache():
    """HiFi5: every memory is cached, write-back; a store goes into the cache, never into
    the write buffer, so its size changes no run (shown below) and setting it is refused."""
    hifi5 = load_model("ameba_hifi5")
    with pytest.raises(ConfigError, match="write-back data cache") as e:
        hifi5.with_overrides({"core.write_buffer_entries": 16})
    assert "\n" not in str(e.value) and "core.write_buffer_entries cannot act" in str(e.value)
    # it acts with a write-through cache, and on J6 (DDR uncached)
    hifi5.with_overrides({"dcache.write_policy": "write_through",
                          "core.write_buffer_entries": 16})
    load_model("j6").with_overrides({"core.write_buffer_entries": 16})


@pytest.mark.parametrize("op, variant, kw", [
    ("copy", "memcpy", {"n": 4096}), ("softmax", "direct", {"n": 3000}),
    ("fc", "direct", {"shape": (8, 64)}), ("rmsnorm", "direct", {"shape": (4, 100)}),
])
def test_the_refused_write_buffer_changes_no_run(op, variant, kw):
    through = load_model("ameba_hifi5").with_overrides({"dcache.write_policy": "write_through"})
    cycles = set()
    for entries in (1, 1024):
        m = through.with_overrides({"core.write_buffer_entries": entries})
        m = m.with_overrides({"dcache.write_policy": "write_back"})
        cycles.add(simulate(m, op, variant, data=False, **kw).cycles)
    assert len(cycles) == 1


@pytest.mark.parametrize("key, value", [
    ("softmax.tile_bytes", 8192), ("layernorm.tile_bytes", 8192), ("rmsnorm.tile_bytes", 8192),
    ("softmax.schedule", "split"), ("softmax.max_init", "-inf"), ("softmax.buffers", 2),
])
def test_tcm_variant_keys_cannot_act_on_one_channel(capsys, key, value):
    """With one iDMA channel only the direct variants run, and they use no tile: the keys of
    the ping-pong variants are refused (before: accepted, and changed nothing)."""
    with pytest.raises(ConfigError, match="cannot act") as e:
        load_model("j6").with_overrides({"idma.channels": 1, key: value})
    assert "\n" not in str(e.value) and "idma.channels >= 2" in str(e.value)
    with pytest.raises(ConfigError, match="cannot act"):  # a one-channel platform's file
        load_model("ameba_hifi5").with_overrides({key: value})
    code, _, err = run_cli(capsys, "run", "--set", "idma.channels=1", "--set",
                           f"{key}={value}", "--variant", "direct")
    assert code == 2 and one_line(err) and key in err, err
    load_model("j6").with_overrides({key: value})  # two channels: it acts


def test_a_model_file_gives_no_op_key_its_platform_cannot_act_on(tmp_path):
    """The file's own op tables are checked as a --set is; its base's are the base's."""
    p = tmp_path / "board.toml"
    p.write_text('base = "ameba_hifi5"\n[layernorm]\ntile_bytes = 8192\n')
    with pytest.raises(ConfigError, match="layernorm.tile_bytes cannot act") as e:
        load_model(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)
    p.write_text('base = "j6"\n[idma]\nchannels = 1\n')  # J6's [softmax] is the base's
    assert load_model(p).idma.channels == 1


def test_a_one_channel_platform_still_takes_the_keys_of_its_variants():
    m = load_model("j6").with_overrides({"idma.channels": 1})  # the file's tile stays
    m.with_overrides({"softmax.guard_shifted_input": True})  # direct has the seed's guard
    m.with_overrides({"layernorm.eps": 1e-3, "copy.descriptor_bytes": 256})


@pytest.mark.parametrize("op", ["softmax", "layernorm", "rmsnorm"])
def test_the_tile_indeed_changes_no_run_a_one_channel_platform_can_do(op):
    op_ = OPS[op]
    shape = (3000,) if op == "softmax" else (4, 300)
    cycles = set()
    for tile in (4096, 65536):
        m = load_model("j6").with_overrides({f"{op}.tile_bytes": tile})
        m = m.with_overrides({"idma.channels": 1})
        runnable = [v for v in op_.variants if op_.unmet_need(m, v) is None]
        assert runnable and not set(runnable) & set(op_.key_variants(f"{op}.tile_bytes"))
        cycles |= {(v, simulate(m, op, v, shape=shape, data=False).cycles) for v in runnable}
    assert len(cycles) == len(runnable)


# ------------------------------------------------------------------ keys a file must give
def test_a_file_with_a_cache_gives_its_shape(tmp_path):
    """Before: ``dcache.ways`` (and line_bytes, write_policy, prefetch) took a default
    silently in a file that gives a data cache."""
    text = (models_dir() / "ameba_hifi5.toml").read_text()
    p = tmp_path / "board.toml"
    p.write_text(text.replace("ways = 3 ", "# ways = 3 "))
    with pytest.raises(ConfigError, match=r"missing key dcache\.ways") as e:
        load_model(p)
    assert "\n" not in str(e.value) and "every missing key" not in str(e.value)
    p.write_text(text.replace("ways = 3 ", "# ways = 3 ").replace("line_bytes = 128 ", "#"))
    with pytest.raises(ConfigError, match="every missing key: dcache.line_bytes, dcache.ways"):
        load_model(p)


def test_a_file_names_every_key_it_misses_in_one_line(tmp_path):
    p = tmp_path / "board.toml"
    p.write_text("[ddr]\nlatency_cycles = 100.0\n[core]\ncount = 1\n")
    with pytest.raises(ConfigError) as e:
        load_model(p)
    text = str(e.value)
    assert "\n" not in text and "missing key core.clock_mhz" in text
    for key in ("idma.channels", "tcm.bank_bytes",
                "host.rpc_latency_us", "ddr.bytes_per_cycle", "ddr.max_outstanding"):
        assert key in text
    # keys with a default are not missing: dspsim keys shows it
    for key in ("ddr.base_address", "dcache.capacity_bytes", "host.memory", "tcm.reserved_bytes",
                "core.write_buffer_entries"):
        assert key not in text


def test_a_file_without_a_cache_needs_no_cache_keys(tmp_path):
    text = (models_dir() / "j6.toml").read_text()
    assert "[dcache]" not in text
    assert load_model("j6").dcache.capacity_bytes == 0


def test_dspsim_keys_shows_each_default(capsys):
    code, out, _ = run_cli(capsys, "keys", "--model", "ameba_hifi5", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert code == 0
    assert rows["psram.cached"]["default"] is False and rows["host.memory"]["default"] == "ddr"
    assert rows["core.count"]["default"] is None and rows["dcache.capacity_bytes"]["default"] == 0
    assert "a model with a data cache gives it" in rows["dcache.ways"]["doc"]
    assert not any(k.startswith("ddr.") for k in rows)


@pytest.mark.parametrize("path", sorted(models_dir().glob("*.toml")), ids=lambda p: p.stem)
def test_the_shipped_models_load(path):
    assert load_model(path).memories


def test_a_file_giving_a_key_that_cannot_act_on_it_is_one_line(tmp_path):
    """The HiFi5's memories are all behind its write-back cache: no store is ever posted to
    the write buffer, so a file of that platform that sizes it is refused, and the shipped
    file leaves the key to its default."""
    hifi5 = load_model("ameba_hifi5")
    assert hifi5.core.write_buffer_entries == 8  # the default, given by no file
    p = tmp_path / "mine.toml"
    p.write_text('base = "ameba_hifi5"\n[core]\nwrite_buffer_entries = 16\n')
    with pytest.raises(ConfigError) as e:
        load_model(p)
    text = str(e.value)
    assert "\n" not in text and str(p) in text and "core.write_buffer_entries cannot act" in text
    p.write_text('base = "ameba_hifi5"\n[dcache]\nwrite_policy = "write_through"\n'
                 '[core]\nwrite_buffer_entries = 16\n')
    assert load_model(p).core.write_buffer_entries == 16  # write-through: stores are posted
