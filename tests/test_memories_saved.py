"""Saved runs of a platform of several memories: every memory's port log and counters, the data
cache's counters, each checked field by field; older files load with their counters.
"""

from __future__ import annotations

import gzip
import json

import pytest

from dspsim import load_model, simulate
from dspsim.analysis.perfetto import trace_events
from dspsim.analysis.series import port_log_cut_cycle
from dspsim.analysis.timeline import timeline_figure
from dspsim.cli.run import cut_trace_note
from dspsim.errors import DspsimInputError
from dspsim.results import load_run, run_document, save_run
from tests import two_memories
from tests.test_platform import CACHED
from tests.test_timeline import V1_RUN
from tests.two_memories import N  # the run the files share: the fixture two_memories_run


@pytest.fixture(scope="module")
def two(two_memories_run):
    return two_memories_run[2]


def ylabels(fig):
    return [a.get_ylabel() for a in fig.axes if a.get_visible()]


def legend(fig):
    return [t.get_text() for t in fig.legends[0].get_texts()]


# ------------------------------------------------------------------ saved runs
def test_every_memorys_log_and_counters_survive_a_save(two, tmp_path):
    with two_memories.registered():
        back = load_run(save_run(two, tmp_path / "two.json.gz"))
    assert back.port_logs["sram"] == two.port_logs["sram"]
    assert back.port_logs["ddr"] == two.port_log and back.port_log == two.port_log
    assert back.memories == two.memories and back.dcache is None
    assert back.to_json() == two.to_json()
    assert [la.split("\n")[0] for la in ylabels(timeline_figure(back))[1:]] == [
        "DDR data path", "DDR requests", "SRAM data path", "SRAM requests"]
    assert trace_events(back) == trace_events(two)


def test_a_j6_run_saves_as_it_did(j6):
    """One memory: no new document key (a J6 file is byte for byte what it was)."""
    r = simulate(j6, variant="direct", n=3000, data=False, trace=True, port_log=True)
    assert {"port_logs", "port_log_cut_cycles"}.isdisjoint(run_document(r))


def test_a_cut_log_of_another_memory_says_where_it_stops(two_memories_run, tmp_path):
    _, model, _ = two_memories_run
    with two_memories.registered():
        r = simulate(model, op=two_memories.NAME, variant="direct", n=N, data=False,
                     trace=True, port_log=True, trace_limit=100)
        back = load_run(save_run(r, tmp_path / "cut.json"))
    cut = port_log_cut_cycle(r, "sram")
    assert cut is not None and 0 < cut < r.cycles and r.port_log_cut_cycle is not None
    assert port_log_cut_cycle(back, "sram") == pytest.approx(cut, rel=1e-12)
    assert f"its SRAM port log up to cycle {cut:,.0f}" in cut_trace_note(back)
    keys = [k for k in legend(timeline_figure(back)) if k.startswith("not recorded")]
    assert keys == [f"not recorded (--trace-limit): DDR port log after cycle "
                    f"{r.port_log_cut_cycle:,.0f}, SRAM port log after cycle {cut:,.0f}"]
    assert "SRAM port log is whole only up to cycle" in trace_events(back)["otherData"][
        "recorded"]


def test_a_cached_runs_counters_survive_a_save(tmp_path):
    (tmp_path / "c.toml").write_text(CACHED)
    model = load_model(tmp_path / "c.toml").with_overrides({"host.memory": "psram"})
    r = simulate(model, variant="direct", n=5000, data=False, trace=True, port_log=True)
    back = load_run(save_run(r, tmp_path / "c.json"))
    assert r.dcache is not None and r.dcache["misses"] > 0
    assert back.dcache == r.dcache and back.memories == r.memories
    doc = json.loads((tmp_path / "c.json").read_text())
    for change, message in (
        (lambda d: d["result"].update(dcache=None), "null but the model has a data cache"),
        (lambda d: d["result"]["dcache"].update(extra=1), "expected exactly hits, misses"),
        (lambda d: d["result"]["dcache"].update(hits=-1), "result.dcache.hits"),
    ):
        bad = json.loads(json.dumps(doc))
        change(bad)
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(DspsimInputError, match=message) as e:
            load_run(tmp_path / "bad.json")
        assert "\n" not in str(e.value)


def test_the_cache_counters_are_the_ones_a_saved_run_checks(tmp_path):
    from dspsim.results_check import DCACHE_COUNTERS

    (tmp_path / "c.toml").write_text(CACHED)
    model = load_model(tmp_path / "c.toml").with_overrides({"host.memory": "psram"})
    assert list(simulate(model, variant="direct", n=500, data=False).dcache) == \
        list(DCACHE_COUNTERS)


_DELETE = object()


@pytest.fixture(scope="module")
def two_doc(two):
    return json.loads(json.dumps(run_document(two)))


@pytest.mark.parametrize("path, value, message", [
    (("result", "memories"), _DELETE, "result.memories is missing"),
    (("result", "memories", "sram", "read_bytes"), 5, "is not result.bytes.sram_read"),
    (("result", "memories", "sram", "busy_cycles"), -1, "result.memories.sram.busy_cycles"),
    (("result", "memories", "sram", "extra"), 1, "expected exactly read_bytes"),
    (("result", "memories", "flash"), {}, "are not its memories"),
    (("result", "dcache"), {"hits": 1}, "the model has no data cache"),
    (("result", "dcache"), _DELETE, "result.dcache is missing"),
    (("result", "bytes", "sram_read"), _DELETE, "result.bytes.sram_read is missing"),
    (("result", "bytes", "flash_read"), 1, "'flash_read' is not <memory>_read"),
    (("result", "stall_cycles", "flash"), 1, "'flash' is not one of its memories"),
    (("result", "engines", "sram"), _DELETE, "are not the model's"),
    (("port_logs", "ddr"), None, "other than the host's 'ddr'"),
    (("port_logs", "flash"), None, "'flash' is not one of the run's memories"),
    (("port_logs", "sram", "requester", 0), "nobody", "not one of the run's engines"),
    (("port_logs", "sram", "bytes"), [], "port_logs.sram columns of different lengths"),
    (("port_logs", "sram", "colour"), [], "column 'colour'"),
    (("port_log_cut_cycles",), {"sram": -1e15}, "before the run began"),
    (("port_log_cut_cycles",), {"flash": 1.0}, "has no log in port_logs"),
])
def test_a_saved_run_of_two_memories_is_checked_field_by_field(two_doc, tmp_path, path,
                                                               value, message):
    doc = json.loads(json.dumps(two_doc))
    *head, last = path
    at = doc
    for k in head:
        at = at[k]
    if value is _DELETE:
        del at[last]
    else:
        at[last] = value
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with two_memories.registered(), pytest.raises(DspsimInputError, match=message) as e:
        load_run(tmp_path / "bad.json")
    assert "\n" not in str(e.value)


def test_a_file_from_before_several_memories_loads_with_its_counters(j6, tmp_path):
    """A version-2 file written before ``memories`` and ``dcache`` existed (one memory, no
    cache) loads with them made from its bytes and busy cycles; so does version 1."""
    r = simulate(j6, variant="pingpong", n=3000, data=False, trace=True, port_log=True)
    doc = run_document(r)
    for k in ("memories", "dcache"):
        del doc["result"][k]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    back = load_run(tmp_path / "old.json")
    assert back.memories == r.memories and back.dcache is None
    v1 = load_run(V1_RUN)
    raw = json.loads(gzip.open(V1_RUN).read())["result"]
    assert v1.memories == {"ddr": {"read_bytes": raw["bytes"]["ddr_read"],
                                   "write_bytes": raw["bytes"]["ddr_write"],
                                   "busy_cycles": raw["busy_cycles"]["ddr"],
                                   "contention_cycles": raw["ddr_contention_cycles"]}}
