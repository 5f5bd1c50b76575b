"""Partial model files (``base = ...``), op tables and every key doing something."""

import re

import pytest

from dspsim import simulate
from dspsim.config import all_keys, load_model
from dspsim.errors import ConfigError
from dspsim.ticks import cycles as tick_cycles


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_partial_file_changes_one_key_and_inherits_the_rest(tmp_path, j6):
    p = write(tmp_path, "m.toml", 'base = "j6"\n[softmax]\ntile_bytes = 8192  # guess\n')
    m = load_model(p)
    assert m.softmax.tile_bytes == 8192
    assert m.ddr == j6.ddr and m.core == j6.core
    assert m.name == "m"  # named after its file: a base's name is not inherited


def test_base_chain_and_relative_paths(tmp_path):
    write(tmp_path, "a.toml", 'base = "j6"\n[model]\nname = "a"\n[ddr]\nlatency_cycles = 200.0\n')
    (tmp_path / "sub").mkdir()
    p = write(tmp_path / "sub", "b.toml", 'base = "../a.toml"\n[ddr]\nbytes_per_cycle = 2.0\n')
    m = load_model(p)
    assert (m.name, m.ddr.latency_cycles, m.ddr.bytes_per_cycle) == ("b", 200.0, 2.0)
    assert load_model(tmp_path / "a.toml").name == "a"  # its own [model] name


@pytest.mark.parametrize(
    "text, message",
    [
        ('base = "nope"\n', "no packaged model or file"),
        ("base = 5\n", "expected a model name"),
        ('base = "loop.toml"\n', "loop of model files"),
        ('base = "j6"\nmodel = 5\n', "must be a table"),
        ('base = "j6"\n[model]\nname = "x"\ncolour = "red"\n', "unknown key model.colour"),
        ('base = "j6"\n[gpu]\ncores = 3\n', "unknown table [gpu]"),
        ('base = "j6"\n[layernorm]\nwidth = 3\n', "unknown model key 'layernorm.width'"),
        ('base = "j6"\n[layernorm]\neps = "small"\n', "expected a number"),
        ("[ddr]\nlatency_cycles = 100.0\n", "missing key core.count"),
    ],
)
def test_bad_partial_files_are_one_line(tmp_path, text, message):
    p = write(tmp_path, "loop.toml", text)
    with pytest.raises(ConfigError, match=re.escape(message)) as e:
        load_model(p)
    assert "\n" not in str(e.value)


def test_deeply_nested_and_non_regular_files_are_refused(tmp_path):
    p = write(tmp_path, "deep.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply|unknown table"):
        load_model(p)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_model("/dev/zero")


def test_every_hardware_key_changes_some_run(j6):
    """A key that changes nothing is a lie: each hardware key moves the cycles, the busy
    engines or the host's round trip of some run, or builds engines a run reports."""
    bumps = {
        "core.clock_mhz": (500.0, {}), "core.lanes_f32": (16, {}),
        "core.load_store_units": (1, {}), "core.vector_alu_slots": (1, {}),
        "core.alu_latency_cycles": (8, {}), "core.call_overhead_cycles": (300, {}),
        "ddr.latency_cycles": (300.0, {}), "ddr.bytes_per_cycle": (4.0, {}),
        "ddr.max_outstanding": (1, {}), "ddr.write_latency_cycles": (20_000.0, {}),
        "idma.max_outstanding": (1, {}),
        "idma.burst_bytes": (256, {"ddr.bytes_per_cycle": 64.0}), "idma.setup_cycles": (3000.0, {}),
        "host.rpc_latency_us": (10.0, {}),
    }
    # engines the platform builds, and the write buffer (below)
    built = {"core.count", "idma.channels", "tcm.banks", "core.write_buffer_entries",
             "tcm.bank_bytes", "tcm.reserved_bytes"}
    # where the memory sits, how large it is, whether the core caches it, which memory the host
    # allocates from: each is shown to act in tests/test_platform.py
    built |= {"ddr.base_address", "ddr.size_bytes", "ddr.cached", "host.memory"}
    # a refusal, not a time: shown to act in tests/test_copy.py
    built |= {"idma.tcm_end_required"}
    # a memory served one transaction at a time: shown to act in tests/test_port_transactions.py
    built |= {f"ddr.{k}" for k in ("protocol", "clock_cycles", "command_clocks", "bytes_per_clock",
                                   "read_hold_clocks", "write_hold_clocks", "page_bytes",
                                   "refresh_clocks")}
    # the ESP32-S3's core-local SRAM, scalar accesses and paced GDMA: shown to act against
    # closed forms in tests/test_esp32s3.py
    built |= {"ddr.core_local", "core.scalar_access_bytes", "idma.engine_bytes_per_cycle",
              "idma.descriptor_cycles"}
    assert set(bumps) | built == {k for k in all_keys()
                                  if k.split(".")[0] in ("core", "ddr", "idma", "tcm", "host")}

    def fingerprint(model, variant):
        r = simulate(model, variant=variant, n=3000, data=False)
        return (r.cycles, r.time_us, r.rpc_cycles, tuple(sorted(r.busy_cycles.items())))

    for key, (value, extra) in bumps.items():
        base = j6.with_overrides(extra) if extra else j6
        other = base.with_overrides({key: value})
        assert any(fingerprint(other, v) != fingerprint(base, v)
                   for v in ("pingpong", "direct")), key

    with pytest.raises(ConfigError, match="larger than a DataRAM"):  # it bounds the tiles
        simulate(j6.with_overrides({"tcm.bank_bytes": 20000}), n=3000, data=False)
    # the TCM the firmware keeps for itself bounds what the resident schedule keeps in TCM
    n = 100_000
    keep = [simulate(j6.with_overrides({"tcm.reserved_bytes": r}), n=n, variant="resident",
                     data=False).cycles for r in (0, 200_000)]
    assert keep[1] > keep[0]
    two = simulate(j6.with_overrides({"core.count": 2}), n=3000, data=False, core=1)
    assert two.core == "core1"
    three = simulate(j6.with_overrides({"idma.channels": 3}), n=3000, data=False)
    assert three.engines_of("idma") == ["core0.idma0", "core0.idma1", "core0.idma2"]
    import simpy

    from dspsim.platform import Platform
    banks = Platform(simpy.Environment(), j6.with_overrides({"tcm.banks": 3})).dsps[0].tm.banks
    assert [b.name for b in banks] == ["core0.dram0", "core0.dram1", "core0.dram2"]


def test_the_write_buffer_binds_a_kernel_that_stores_to_ddr_from_tcm(j6):
    """Every shipped variant loads from DDR before each store, so a store has always drained
    before the next one; a kernel reading TCM and writing DDR fills the buffer."""
    import simpy

    from dspsim.platform import Platform

    def cycles(entries):
        model = j6.with_overrides({"core.write_buffer_entries": entries})
        env = simpy.Environment()
        dsp = Platform(env, model, data=False).dsps[0]
        src = dsp.tm.allocate(4096, 0, 128)
        dst = dsp.ddr.add_block(4096)
        env.process(dsp.core.call("vecmul", 1024, src, dst, scalar=2.0))
        env.run()
        return tick_cycles(env.now)

    assert cycles(1) > cycles(8) > cycles(64)


def test_a_variant_without_tcm_runs_whatever_the_tile_key_says(j6):
    """``direct`` keeps nothing in TCM: a DataRAM smaller than the tile refuses the TCM
    variants, not it."""
    small = j6.with_overrides({"tcm.bank_bytes": 20000})
    assert simulate(small, "softmax", "direct", n=3000, data=False).cycles == \
        simulate(j6, "softmax", "direct", n=3000, data=False).cycles
    assert simulate(small, "layernorm", "direct", shape=(4, 256), data=False).cycles > 0
    for op, variant, shape in (("softmax", "online", (3000,)), ("layernorm", "pingpong", (4, 256))):
        with pytest.raises(ConfigError, match="larger than a DataRAM"):
            simulate(small, op, variant, shape=shape, data=False)
