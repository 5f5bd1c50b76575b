"""The Chrome Trace Event export, checked on real runs."""

import collections
import gzip
import json

import numpy as np
import pytest

from dspsim.analysis.perfetto import (
    DDR_COUNTER,
    DDR_REQUESTS_COUNTER,
    DEFAULT_EVENT_LIMIT,
    TCM_COUNTER,
    check_trace_path,
    trace_events,
    write_trace,
)
from dspsim.analysis.series import interval_integral
from dspsim.cli import main
from dspsim.run import simulate


def ns(us):
    """What a viewer reads: microseconds -> integer nanoseconds."""
    return int(round(us * 1000))


@pytest.fixture(scope="module")
def pingpong(j6):
    return simulate(j6, variant="pingpong", n=40_000, data=False, trace=True, port_log=True)


@pytest.fixture(scope="module")
def doc(pingpong):
    return trace_events(pingpong)


def slices_by_tid(events):
    out = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            out[e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e))
    return {t: sorted(v, key=lambda x: (x[0], x[1])) for t, v in out.items()}


def check_structure(doc):
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    assert doc["displayTimeUnit"] == "ns"
    events = doc["traceEvents"]
    assert {e["pid"] for e in events} == {1}  # one process: the DSP subsystem
    meta = [e for e in events if e["ph"] == "M"]
    names = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert any(e["name"] == "process_name" for e in meta)
    assert {e["tid"] for e in events if e["ph"] in "Xsf"} <= set(names)
    assert len(set(names.values())) == len(names)  # thread names are unique
    # events on one thread never overlap (back to back is fine)
    for rows in slices_by_tid(events).values():
        for (_, end_a, a), (start_b, _, b) in zip(rows, rows[1:]):
            assert start_b >= end_a, (a, b)
    return names


def test_structure_threads_and_no_overlap(doc):
    names = check_structure(doc)
    assert set(names.values()) == {"pass", "core", "iDMA ch0", "iDMA ch1", "TCM buffer 0",
                                   "TCM buffer 1"}
    json.dumps(doc)  # serialisable as is


def test_slices_carry_args_and_times_from_cycles(doc, pingpong):
    clock = pingpong.model.core.clock_mhz
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) >= len(pingpong.trace)
    for e in xs:
        a = e["args"]
        assert {"tile", "pass", "bytes", "buffer", "cycles"} <= set(a)
        # ts and dur are microseconds = cycles / clock, rounded to whole nanoseconds
        assert e["ts"] == pytest.approx(a["start_cycle"] / clock, abs=0.6e-3)
        assert e["dur"] == pytest.approx(a["cycles"] / clock, abs=1.1e-3)
    # every trace row is there once, on its engine's thread
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"
             and e["name"] == "thread_name"}
    per_thread = collections.Counter(names[e["tid"]] for e in xs
                                     if e["cat"] not in ("tcm", "pass"))
    # the core's thread is "core", a channel's is numbered by its position among the run's
    threads = {pingpong.core: "core"}
    threads |= {ch: f"iDMA ch{i}" for i, ch in enumerate(pingpong.engines_of("idma"))}
    rows = pingpong.trace["engine"].map(threads)
    assert per_thread == collections.Counter(rows)


def test_ddr_counter_integrates_to_the_port_log(doc, pingpong):
    clock = pingpong.model.core.clock_mhz
    c = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == DDR_COUNTER]
    assert "exact" in doc["otherData"]["ddr_bytes_in_flight"]
    ts = np.array([ns(e["ts"]) for e in c], float)
    v = np.array([e["args"]["bytes"] for e in c])
    assert (np.diff(ts) > 0).all() and (v >= -1e-6).all() and v[-1] == pytest.approx(0)
    # closed form: the area under bytes-in-flight is sum(bytes x (done - issue))
    log = np.array([(x[0], x[3], x[4]) for x in pingpong.port_log])
    area_ns = float((log[:, 2] * (log[:, 1] - log[:, 0])).sum()) * 1000.0 / clock
    assert float((v[:-1] * np.diff(ts)).sum()) == pytest.approx(area_ns, rel=1e-4)
    cap = pingpong.model.ddr.max_outstanding * pingpong.model.idma.burst_bytes
    assert v.max() <= cap


def test_tcm_counter_stays_within_the_buffers(doc, pingpong):
    c = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == TCM_COUNTER]
    assert c
    tile = pingpong.model.softmax.tile_bytes
    for e in c:
        assert set(e["args"]) == {"buffer 0", "buffer 1"}
        assert all(0 <= v <= tile for v in e["args"].values())
    assert max(e["args"]["buffer 0"] for e in c) == tile
    assert c[-1]["args"] == {"buffer 0": 0.0, "buffer 1": 0.0}


def enclosing(rows, t):
    return [e for s, end, e in rows if s <= t <= end]


def test_flows_link_copy_in_compute_copy_out(doc, pingpong):
    events = doc["traceEvents"]
    rows = slices_by_tid(events)
    flows = collections.defaultdict(dict)
    for e in events:
        if e["ph"] in "sf":
            assert e["ph"] not in flows[e["id"]]
            flows[e["id"]][e["ph"]] = e
    tiles_per_pass = -(-pingpong.n // (pingpong.model.softmax.tile_bytes // 4))
    # copy_in -> compute for every tile of 3 passes; compute -> copy_out for 2 of them
    assert len(flows) == 3 * tiles_per_pass + 2 * tiles_per_pass
    links = collections.Counter()
    for pair in flows.values():
        s, f = pair["s"], pair["f"]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"]) and f["bp"] == "e"
        assert s["ts"] < f["ts"]
        src = enclosing(rows[s["tid"]], ns(s["ts"]))
        dst = enclosing(rows[f["tid"]], ns(f["ts"]))
        assert len(src) == 1 and len(dst) == 1
        src, dst = src[0], dst[0]
        assert (src["args"]["pass"], src["args"]["tile"]) == (dst["args"]["pass"],
                                                               dst["args"]["tile"])
        links[(src["cat"], dst["cat"])] += 1
    assert links == {("copy_in", "compute"): 3 * tiles_per_pass,
                     ("compute", "copy_out"): 2 * tiles_per_pass}


def test_limit_cuts_and_resamples_and_says_so(pingpong):
    full = trace_events(pingpong)
    small = trace_events(pingpong, limit=150)
    assert len(small["traceEvents"]) <= 150 < len(full["traceEvents"])
    other = small["otherData"]
    assert other["event_limit"] == 150 and other["events"] == len(small["traceEvents"])
    assert other["slices"].startswith("cut at")
    assert other["ddr_bytes_in_flight"].startswith("resampled")
    check_structure(small)
    ids = collections.Counter(e["id"] for e in small["traceEvents"] if e["ph"] in "sf")
    assert set(ids.values()) <= {2}  # flows stay paired
    # a resampled counter keeps the area under the curve up to the cut
    c = [e for e in small["traceEvents"] if e["ph"] == "C" and e["name"] == DDR_COUNTER]
    ts = np.array([ns(e["ts"]) for e in c], float)
    v = np.array([e["args"]["bytes"] for e in c])
    width_ns = np.diff(ts).mean()
    assert np.allclose(np.diff(ts), width_ns, atol=1.0)  # equal bins
    clock = pingpong.model.core.clock_mhz
    cut_cycles = (ts[-1] + width_ns) * clock / 1000.0
    log = np.array([(x[0], x[3], x[4]) for x in pingpong.port_log]) - [
        pingpong.origin_cycle, pingpong.origin_cycle, 0]
    expect = interval_integral(log[:, 0], log[:, 1], log[:, 2], np.array([cut_cycles]))[0]
    assert float(v.sum()) * width_ns * clock / 1000.0 == pytest.approx(expect, rel=2e-3)


def test_overlapping_buffer_goes_to_an_extra_thread(j6):
    model = j6.with_overrides({"softmax.schedule": "split"})
    r = simulate(model, variant="pingpong", n=40_000, data=False, trace=True, port_log=True)
    names = check_structure(trace_events(r))
    assert "TCM buffer 0 (2)" in names.values()


def test_clock_scales_timestamps(j6):
    slow = j6.with_overrides({"core.clock_mhz": 500.0})
    r = simulate(slow, variant="direct", n=3000, data=False, trace=True, port_log=True)
    doc = trace_events(r)
    check_structure(doc)
    x = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "pass"]
    total_us = sum(e["dur"] for e in x)
    assert total_us == pytest.approx(r.cycles / 500.0, abs=1e-2)
    assert not [e for e in doc["traceEvents"] if e["name"] == TCM_COUNTER]


def test_cli_writes_a_trace(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["run", "--n", "20000", "--trace", str(out), "--trace-limit", "5000"]) == 0
    doc = json.loads(out.read_text())
    check_structure(doc)
    assert len(doc["traceEvents"]) <= 5000 and doc["otherData"]["event_limit"] == 5000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "--n", "100", "--trace", "t.txt"], "allowed .json"),
        (["run", "--n", "100", "--trace", "/nonexistent-dir/t.json"], "does not exist"),
        (["run", "--n", "100", "--trace-limit", "500"], "give --trace"),
        (["run", "--n", "100", "--trace", "t.json", "--trace-limit", "5"], "at least 100"),
    ],
)
def test_bad_trace_options_are_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_write_trace_to_a_directory_is_refused(pingpong, tmp_path):
    from dspsim.errors import DspsimInputError

    target = tmp_path / "d.json"
    target.mkdir()
    with pytest.raises(DspsimInputError, match="is a directory"):
        write_trace(pingpong, target)


# ------------------------------------------------------------------ whole nanoseconds, no overlap
@pytest.fixture(scope="module")
def million(j6):
    """n = 10^6 with 8 KiB tiles: ~1,500 tiles a pass, 51.5 million cycles."""
    model = j6.with_overrides({"softmax.tile_bytes": 8192})
    return simulate(model, variant="pingpong", n=1_000_000, data=False, trace=True,
                    port_log=True)


def test_no_slices_overlap_on_a_thread_at_a_million(million):
    # before: ts and dur rounded separately, ts + dur in floating point passed the next slice's
    # ts on 1,545 pairs; now neither a viewer adding floats nor one rounding to ns sees overlap
    for limit in (DEFAULT_EVENT_LIMIT, 2_000_000):
        doc = trace_events(million, limit)
        check_structure(doc)
        per_thread = collections.defaultdict(list)
        for e in doc["traceEvents"]:
            if e["ph"] == "X":
                per_thread[e["tid"]].append(e)
        assert sum(len(v) for v in per_thread.values()) > 1000
        for rows in per_thread.values():
            rows.sort(key=lambda e: (e["ts"], e["dur"]))
            for a, b in zip(rows, rows[1:]):
                assert a["ts"] + a["dur"] <= b["ts"], (a, b)


def test_timestamps_are_whole_nanoseconds_from_whole_cycles(million):
    doc = trace_events(million)
    assert doc["displayTimeUnit"] == "ns"
    clock = million.model.core.clock_mhz
    for e in doc["traceEvents"]:
        if e["ph"] in "XCsf":
            assert abs(e["ts"] * 1000 - round(e["ts"] * 1000)) < 1e-6, e
        if e["ph"] == "X":
            dur_ns = e["dur"] * 1000
            assert abs(dur_ns - round(dur_ns)) < 1e-6, e
            a = e["args"]
            if not a.get("cut"):  # whole cycles at the model's clock (1 ns a cycle on J6)
                assert round(e["ts"] * 1000) == round(round(a["start_cycle"]) * 1000 / clock)
                assert ns(e["ts"]) + ns(e["dur"]) == round(round(a["end_cycle"]) * 1000 / clock)
    assert "microseconds" in doc["otherData"]["time_note"]


def test_a_slow_clock_keeps_slices_apart(j6):
    r = simulate(j6.with_overrides({"core.clock_mhz": 700.0}), variant="pingpong", n=20_000,
                 data=False, trace=True, port_log=True)
    check_structure(trace_events(r))


# ------------------------------------------------------------------ gzip, flows, passes, requests
def test_gzipped_trace(pingpong, tmp_path):
    assert check_trace_path(tmp_path / "t.json.gz") == tmp_path / "t.json.gz"
    assert check_trace_path(tmp_path / "t.JSON.GZ")
    gz = write_trace(pingpong, tmp_path / "t.json.gz", limit=5000)
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    doc = json.loads(gzip.decompress(gz.read_bytes()))
    check_structure(doc)
    plain = json.loads(write_trace(pingpong, tmp_path / "t.json", limit=5000).read_text())
    assert doc == plain
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file
    from dspsim.errors import DspsimInputError

    with pytest.raises(DspsimInputError, match="allowed .json, .json.gz"):
        check_trace_path(tmp_path / "t.gz")


def test_flows_carry_their_source_slices_category(doc):
    events = doc["traceEvents"]
    rows = slices_by_tid(events)
    flows = [e for e in events if e["ph"] in "sf"]
    assert flows and all(e["cat"] in ("copy_in", "compute") for e in flows)
    for e in flows:
        if e["ph"] == "s":
            (src,) = enclosing(rows[e["tid"]], ns(e["ts"]))
            assert e["cat"] == src["cat"]
        else:
            assert e["bp"] == "e"


def test_pass_track(doc, pingpong):
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    passes = [e for e in doc["traceEvents"] if e["ph"] == "X" and names[e["tid"]] == "pass"]
    assert [e["name"] for e in passes] == [p["name"] for p in pingpong.passes]
    for e, p in zip(passes, pingpong.passes):
        assert e["cat"] == "pass"
        assert ns(e["ts"]) == round(p["start_cycle"]) and ns(e["dur"]) == round(
            p["end_cycle"]) - round(p["start_cycle"])
    assert min(names) == min(t for t, n in names.items() if n == "pass")  # the top thread


def test_ddr_requests_in_flight_per_requester(doc, pingpong):
    c = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == DDR_REQUESTS_COUNTER]
    assert "exact" in doc["otherData"]["ddr_requests_in_flight"]
    assert set(c[0]["args"]) == {"iDMA ch0", "iDMA ch1"}  # named as their threads
    ts = np.array([ns(e["ts"]) for e in c], float)
    assert (np.diff(ts) > 0).all()
    channels = pingpong.engines_of("idma")
    for label, engine in (("iDMA ch0", channels[0]), ("iDMA ch1", channels[1])):
        v = np.array([e["args"][label] for e in c])
        assert v.min() >= 0 and v.max() <= pingpong.model.idma.max_outstanding
        log = np.array([(x[0], x[3]) for x in pingpong.port_log if x[6] == engine])
        area_ns = float((log[:, 1] - log[:, 0]).sum()) * 1000.0 / pingpong.model.core.clock_mhz
        assert float((v[:-1] * np.diff(ts)).sum()) == pytest.approx(area_ns, rel=1e-4)


# ------------------------------------------------------------------ the limit is exact
@pytest.mark.parametrize("limit", [100, 101, 137, 1000, 4321, 20_000])
def test_limit_is_exact_metadata_included(pingpong, limit):
    doc = trace_events(pingpong, limit)
    events = doc["traceEvents"]
    other = doc["otherData"]
    assert len(events) <= limit and other["events"] == len(events)
    assert other["event_limit"] == limit and "metadata" in other["limit_counts"]
    check_structure(doc)
    full = len(trace_events(pingpong, 10**7)["traceEvents"])
    if full > limit:  # what was cut or resampled is said
        assert other["slices"].startswith("cut at") or "resampled" in other[
            "ddr_bytes_in_flight"]
    cut = [e for e in events if e["ph"] == "X" and e["args"].get("cut")]
    if other["slices"] != "all":
        assert f"{len(cut):,} end at the cut" in other["slices"]


def test_limit_at_a_million(million):
    for limit in (100, 5_000, DEFAULT_EVENT_LIMIT):
        doc = trace_events(million, limit)
        assert len(doc["traceEvents"]) <= limit
        names = {e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        assert "pass" in names
        passes = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "pass"]
        if doc["otherData"]["slices"] != "all":  # the pass across the cut ends there
            assert passes and passes[-1]["args"].get("cut") is True


def test_cli_writes_a_gzipped_trace(tmp_path, capsys):
    out = tmp_path / "t.json.gz"
    assert main(["run", "--n", "20000", "--no-data", "--trace", str(out),
                 "--trace-limit", "3000"]) == 0
    doc = json.loads(gzip.decompress(out.read_bytes()))
    check_structure(doc)
    assert len(doc["traceEvents"]) <= 3000 and doc["otherData"]["event_limit"] == 3000
