"""Benchmark: how fast the simulator runs on this machine.

``python -m dspsim.bench`` reports, each time the best of ``--repeat``: every op and variant on
three engines (burst without event elision, the reference; burst, the default; tile), data path
on and off, with events per second against the bare SimPy rate measured right before each run;
the tile engine's and event elision's speed-ups; the streaming ping-pong; the direct variants'
alike rows booked at once (against the reference engine on a slice, scaled); long kernel calls
walked access by access; ``dspsim run --json`` against a bare interpreter; the J6 calibration;
the peak RSS of one run per op, variant and rank; a sweep on two workers (and on a local dask
cluster); with ``--workload-seconds``, the camera workload. With ``--baseline DIR`` (another
checkout) that version's runs alternate with this one's in fresh processes. Speed is measured
here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import simpy

from dspsim.bench_report import print_report, print_workload
from dspsim.config import load_model
from dspsim.run import simulate


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """The best wall time (s) of ``repeat`` calls of ``fn``, and the last call's value."""
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def bare_simpy_rate(events: int = 100_000) -> float:
    """Events per second of one process yielding ``env.timeout(1)`` in a loop."""

    def proc(env: simpy.Environment):
        for _ in range(events):
            yield env.timeout(1)

    def once() -> None:
        env = simpy.Environment()
        env.process(proc(env))
        env.run()

    wall, _ = best_of(2, once)
    return events / wall


def _measured(repeat: int, run: Callable[[], Any]) -> dict[str, Any]:
    """Best-of wall time of ``run``, with the bare SimPy rate measured right before it (the
    machine's speed drifts with load: a ratio taken side by side is comparable)."""
    bare = bare_simpy_rate()
    wall, r = best_of(repeat, run)
    return {"wall_s": wall, "cycles": r.cycles, "events": r.events,
            "events_per_s": r.events / wall, "simulated_cycles_per_s": r.cycles / wall,
            "bare_simpy_events_per_s": bare, "ratio_to_bare_simpy": r.events / wall / bare}


def run_benchmark(a: argparse.Namespace) -> dict[str, Any]:
    """Every section of the benchmark the options ``a`` (:func:`_parser`'s) ask for, as ``main``
    prints it (see the module docstring); ``--workload-only``: the camera workload alone."""
    out = {} if a.workload_only else _sections(a)
    secs = a.workload_seconds or (3600.0 if a.workload_only else 0.0)
    if secs:
        out["workload"] = workload_wall(secs, a.reference_seconds, a.workload_cores,
                                        baseline=a.baseline, jobs=a.workload_jobs)
    return out


def _sections(a: argparse.Namespace) -> dict[str, Any]:
    """Every section but the camera workload's."""
    model, repeat, stream_n = load_model(), a.repeat, tuple(n for n in a.stream_n if n)
    machine = f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}"
    out: dict[str, Any] = {"machine": machine, "n": a.n, "runs": engine_runs(model, a.n, repeat)}
    out.update(tile_speedups(out["runs"]))
    out["elision"] = elision_speedup(model, a.elision_n, repeat)
    out["row_runs"] = row_run_speedup(model, repeat, a.baseline)
    out["walks"] = walk_runs(repeat, a.baseline)
    if stream_n:
        out["streaming"] = streaming(stream_n, repeat, a.baseline)
    out["cli"] = cli_wall(repeat)
    out["calibrate"] = calibrate_wall(model, repeat)
    if a.memory_elements:
        out["memory"] = memory_peaks(a.memory_elements)
    if a.sweep_points:
        out.update(sweep_walls(a.sweep_points, repeat))
    return out


def engine_runs(model: Any, n: int, repeat: int) -> list[dict[str, Any]]:
    """Every variant of every op at ``n`` (or its default shape), on each engine (burst, burst
    without elision, tile), values off and on."""
    from dspsim.ops import get_op, op_names

    runs = []
    for op in op_names():
        shape = (n,) if get_op(op).ndim == 1 else get_op(op).default_shape
        for variant in get_op(op).variants:
            for engine, fidelity, elide in (("burst, no elision", "burst", False),
                                            ("burst", "burst", True), ("tile", "tile", True)):
                for data in (False, True):
                    run = functools.partial(simulate, model, op, variant, shape=shape, data=data,
                                            fidelity=fidelity, elide=elide)
                    runs.append({"op": op, "variant": variant, "shape": list(shape),
                                 "engine": engine, "data": data, **_measured(repeat, run)})
    return runs


def tile_speedups(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per op and variant, values off: the tile engine's speed-up over burst, with and without
    event elision."""
    walls = {(r["op"], r["variant"], r["engine"], r["data"]): r["wall_s"] for r in runs}
    tiles = [(op, v) for (op, v, e, d) in walls if e == "tile" and not d]
    return {name: {f"{op} {v}": walls[(op, v, over, False)] / walls[(op, v, "tile", False)]
                   for op, v in tiles}
            for name, over in (("tile_speedup", "burst"),
                               ("tile_vs_reference", "burst, no elision"))}


def elision_speedup(model: Any, n: int, repeat: int) -> list[dict[str, Any]]:
    """Burst ping-pong at ``n``: the reference engine and the elided one, run alternately."""
    rows = []
    for data in (False, True):
        walls, events = dict.fromkeys((False, True), float("inf")), {}
        for _ in range(repeat):
            for elide in (False, True):
                wall, r = best_of(1, functools.partial(simulate, model, variant="pingpong", n=n,
                                                       data=data, elide=elide))
                walls[elide] = min(walls[elide], wall)
                events[elide] = r.events
        rows.append({"n": n, "data": data, "reference_wall_s": walls[False],
                     "elided_wall_s": walls[True], "reference_events": events[False],
                     "elided_events": events[True], "speedup": walls[False] / walls[True]})
    return rows


# (op, shape, rows of the slice the reference engine runs): the two row loops of the scale
# issue; before rows were booked at once, the default engine took 84 s and over 300 s on them
ROW_RUNS = (("layernorm", (102_400, 256), 3_200), ("softmax", (67_108_864, 1), 8_192))
ROW_RUN_FIELDS = ("cycles", "bytes", "busy_cycles", "stall_cycles", "ddr_contention_cycles",
                  "memories", "warnings", "hazards")


def row_run_speedup(model: Any, repeat: int, baseline: str | None = None
                    ) -> list[dict[str, Any]]:
    """The direct variants' alike rows, data path off: the whole shape with rows booked at
    once, against the reference engine (every row simulated) on a slice of the rows, scaled by
    rows, ``identical`` on the slice; with ``baseline`` (a checkout), that version alike."""
    rows = []
    for op, shape, part in ROW_RUNS:
        whole = functools.partial(simulate, model, op, "direct", shape=shape, data=False)
        wall, r = best_of(repeat, whole)
        sliced = (part, *shape[1:])
        ref_wall, ref = best_of(1, functools.partial(simulate, model, op, "direct",
                                                     shape=sliced, data=False, elide=False))
        fast = simulate(model, op, "direct", shape=sliced, data=False)
        same = all(getattr(fast, f) == getattr(ref, f) for f in ROW_RUN_FIELDS) \
            and list(fast.passes) == list(ref.passes)
        reference = ref_wall * shape[0] / part
        row = {"op": op, "shape": list(shape), "cycles": r.cycles, "events": r.events,
               "wall_s": wall, "reference_rows": part, "reference_wall_s_scaled": reference,
               "speedup": reference / wall, "identical": same}
        if baseline:
            base = on_baseline(baseline, {"kind": "rows", "op": op, "shape": list(sliced)})
            row["baseline_wall_s_scaled"] = base["wall_s"] * shape[0] / part
            row["speedup_over_baseline"] = row["baseline_wall_s_scaled"] / wall
        rows.append(row)
    return rows


# one job in a fresh process of the checkout at argv[1] (this one, or a --baseline): the
# streaming ping-pong (best of its repeat), rows of a direct variant, or a workload simulated
# task by task; prints its best wall time (and cycles and events of a simulation)
JOB_CODE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from dspsim import load_model, simulate
job = json.loads(sys.argv[2])
model, best = load_model(job.get("model")).with_overrides(job.get("overrides", {})), float("inf")
for _ in range(job.get("repeat", 1)):
    t0 = time.perf_counter()
    if job["kind"] == "stream":
        r = simulate(model, variant="pingpong", n=job["n"], data=False, fidelity=job["fidelity"])
    elif job["kind"] == "rows":
        r = simulate(model, job["op"], "direct", shape=tuple(job["shape"]), data=False)
    elif job["kind"] == "walk":
        r = simulate(model, job["op"], job["variant"], n=job["n"], data=False)
    else:
        from dspsim.study.workload import parse_workload, run_workload
        r = run_workload(parse_workload(job["spec"]), model, fidelity=job["fidelity"])
    best = min(best, time.perf_counter() - t0)
out = {"wall_s": best}
if job["kind"] != "workload":
    out.update(cycles=r.cycles, events=r.events)
print(json.dumps(out))
"""


def alternated(jobs: dict[str, list[str]], rounds: int = 1) -> dict[str, list[dict[str, Any]]]:
    """Each of ``jobs`` (arguments of a ``python`` printing a JSON object last) in a fresh
    process, ``rounds`` times taking turns (the load changes alike for all): its objects."""
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in jobs}
    for _ in range(max(1, rounds)):
        for key, argv in jobs.items():
            p = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                               check=True)
            runs[key].append(json.loads(p.stdout.strip().splitlines()[-1]))
    return runs


def on_baseline(root: str, job: dict[str, Any]) -> dict[str, Any]:
    """:data:`JOB_CODE`'s ``job`` with the checkout at ``root`` in a fresh process."""
    return alternated({"baseline": ["-c", JOB_CODE, root, json.dumps(job)]})["baseline"][0]


def streaming(sizes: tuple[int, ...], repeat: int, baseline: str | None = None
              ) -> list[dict[str, Any]]:
    """Burst ping-pong, data path off, at each size, burst and tile fidelity, in a fresh
    process (best of ``repeat`` inside it); with ``baseline`` (a checkout), that version's same
    runs, ``repeat`` processes of each alternately, and the speed-up over it."""
    return [_fresh_row({"n": n, "fidelity": fidelity},
                       {"kind": "stream", "n": n, "fidelity": fidelity, "repeat": repeat},
                       baseline, repeat if baseline else 1)
            for n in sizes for fidelity in ("burst", "tile")]


def _fresh_row(row: dict[str, Any], job: dict[str, Any], baseline: str | None,
               rounds: int = 1) -> dict[str, Any]:
    """``row`` with :data:`JOB_CODE`'s ``job`` run in fresh processes (this checkout, and the
    ``baseline`` one alternately, ``rounds`` times): each version's best run as
    ``{version}_{figure}``, and with a baseline the speed-up and whether the cycles agree."""
    here = str(Path(__file__).resolve().parent.parent)
    versions = {"this": here, **({"baseline": baseline} if baseline else {})}
    jobs = {name: ["-c", JOB_CODE, root, json.dumps(job)] for name, root in versions.items()}
    for name, rs in alternated(jobs, rounds).items():
        row.update({f"{name}_{k}": v for k, v in min(rs, key=lambda r: r["wall_s"]).items()})
    if baseline:
        row["speedup"] = row["baseline_wall_s"] / row["this_wall_s"]
        row["same_cycles"] = row["baseline_cycles"] == row["this_cycles"]
    return row


# (model, op, variant, n): one long kernel call's walk, a DDR round trip per vector (the
# direct softmax, passes of 10^6 to 10^8 elements), and a stream through a data cache (the
# HiFi5's memcpy of 2 MiB)
WALK_RUNS = (("j6", "softmax", "direct", 1_000_000), ("j6", "softmax", "direct", 10_000_000),
             ("j6", "softmax", "direct", 100_000_000),
             ("ameba_hifi5", "copy", "memcpy", 2_097_152))


def walk_runs(repeat: int, baseline: str | None = None) -> list[dict[str, Any]]:
    """Kernel calls walked access by access (:data:`WALK_RUNS`), data path off, each in a
    fresh process (best of ``repeat`` inside it); with ``baseline`` (a checkout), that
    version's same runs alternately, the speed-up over it and whether the cycles agree."""
    return [_fresh_row({"model": model, "op": op, "variant": variant, "n": n},
                       {"kind": "walk", "model": model, "op": op, "variant": variant, "n": n,
                        "repeat": repeat}, baseline)
            for model, op, variant, n in WALK_RUNS]


def workload_wall(seconds: float, reference_seconds: float, cores: int = 1,
                  cameras: int = 6, baseline: str | None = None, jobs: int = 2
                  ) -> dict[str, Any]:
    """The camera workload over ``seconds`` with reuse, against simulating every task over
    ``reference_seconds`` (extrapolated by tasks, tables compared); with ``jobs > 1`` in that
    many parts at once; with ``baseline`` (a checkout), that version extrapolated alike."""
    from dspsim.study.workload import run_workload, task_table
    from dspsim.study.workload.cameras import camera_spec, camera_workload

    model = load_model().with_overrides({"core.count": cores})
    plan = [("reuse", seconds, True, 1), ("reference", reference_seconds, False, 1),
            ("reuse_short", reference_seconds, True, 1)] + (
        [("parts", seconds, True, jobs)] if jobs > 1 else [])
    runs = {}
    for label, secs, reuse, parts in plan:
        wl = camera_workload(cameras, secs)
        t0 = time.perf_counter()
        run = run_workload(wl, model, reuse=reuse, jobs=parts)
        table = task_table(run)
        runs[label] = {"tasks": wl.tasks, "reused_tasks": run.reused_tasks,
                       "episodes": run.episodes, "wall_s": time.perf_counter() - t0,
                       "table": table}
    ref, full = runs["reference"], runs["reuse"]
    extrapolated = ref["wall_s"] / ref["tasks"] * full["tasks"]
    out = {} if jobs <= 1 else {
        "jobs": jobs, "jobs_wall_s": runs["parts"]["wall_s"],
        "jobs_identical": bool(runs["parts"]["table"].equals(full["table"]))}
    out.update({
        "cameras": cameras, "cores": cores, "seconds": seconds, "tasks": full["tasks"],
        "wall_s": full["wall_s"], "reused_tasks": full["reused_tasks"],
        "episodes": full["episodes"],
        "reference_seconds": reference_seconds, "reference_tasks": ref["tasks"],
        "reference_wall_s": ref["wall_s"], "reference_extrapolated_wall_s": extrapolated,
        "speedup": extrapolated / full["wall_s"],
        "identical_over_reference": bool(ref["table"].equals(runs["reuse_short"]["table"]))})
    if baseline:  # that version simulating every task over reference_seconds, extrapolated
        base = on_baseline(baseline, {"kind": "workload", "overrides": {"core.count": cores},
                                      "spec": camera_spec(cameras, reference_seconds),
                                      "fidelity": "tile"})
        out["baseline_wall_s"] = base["wall_s"]
        out["baseline_extrapolated_wall_s"] = base["wall_s"] / ref["tasks"] * full["tasks"]
        out["speedup_over_baseline"] = out["baseline_extrapolated_wall_s"] / full["wall_s"]
    return out


def cli_wall(repeat: int) -> dict[str, Any]:
    """Wall time of ``dspsim run --json`` and of a bare interpreter importing numpy and simpy
    (what any run pays), run alternately, best of ``repeat`` each."""
    commands = {"run_json_wall_s": [sys.executable, "-m", "dspsim.cli", "run", "--json"],
                "bare_python_wall_s": [sys.executable, "-c", "import numpy, simpy"]}
    best = dict.fromkeys(commands, float("inf"))
    for _ in range(max(repeat, 3)):
        for key, argv in commands.items():
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            best[key] = min(best[key], time.perf_counter() - t0)
    return best


def calibrate_wall(model: Any, repeat: int) -> dict[str, Any]:
    """The J6 calibration as ``dspsim calibrate`` runs it by default (the documents' figures,
    two DDR keys free, with intervals): best wall time, simulations, fitted values."""
    from dspsim.study.calibrate import SEED_FREE, calibrate, seed_measurements

    measurements = seed_measurements(model)
    wall, c = best_of(repeat, lambda: calibrate(model, measurements, SEED_FREE))
    return {"wall_s": wall, "simulations": c.simulations, "measurements": len(measurements),
            "values": dict(c.values)}


SWEEP_CODE = """
import json, sys
from dspsim.study.experiments import bench_sweep
print(json.dumps(bench_sweep(points=int(sys.argv[1]), jobs=2, executor=sys.argv[2])))
"""


def sweep_walls(points: int, repeat: int) -> dict[str, Any]:
    """The sweep benchmark (:func:`dspsim.study.experiments.bench_sweep`) on 2 workers and,
    with dask installed, a local dask cluster of 2 (start-up included), alternately in fresh
    processes ``max(repeat, 3)`` times: the best run of each, the median, every wall time."""
    import importlib.util
    import statistics

    executors = {"sweep": "local"}
    if importlib.util.find_spec("distributed") is not None:  # dask not installed: no dask row
        executors["sweep_dask"] = "dask"
    runs = alternated({key: ["-c", SWEEP_CODE, str(points), executor]
                       for key, executor in executors.items()}, max(repeat, 3))
    out = {}
    for key, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        out[key] = {**min(rs, key=lambda r: r["wall_s"]),
                    "median_wall_s": statistics.median(walls), "walls_s": walls}
    return out


MEMORY_ROW_ELEMENTS = 1000  # a 2-D input of the memory benchmark: rows of this many elements
PEAK_RSS_CODE = """
import json, resource, sys
from dspsim import load_model, simulate
op, variant, shape = json.loads(sys.argv[1])
simulate(load_model(), op, variant, shape=tuple(shape), fidelity="tile")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def memory_peaks(elements: int) -> list[dict[str, Any]]:
    """Peak RSS of one run with values on, every op, variant and input rank, in a fresh process
    each (``ru_maxrss``: KiB on Linux)."""
    from dspsim.ops import get_op, op_names

    rows = []
    for name in op_names():
        op = get_op(name)
        for ndim in op.ndims or (op.ndim,):
            shape = (elements,) if ndim == 1 else (
                max(1, elements // MEMORY_ROW_ELEMENTS), MEMORY_ROW_ELEMENTS)
            arrays = 2 * op.input_bytes(shape)  # the input and the output, float32
            for variant in op.variants:
                p = subprocess.run(
                    [sys.executable, "-c", PEAK_RSS_CODE, json.dumps([name, variant, shape])],
                    capture_output=True, text=True)
                refused = p.stderr.strip().splitlines()[-1:] if p.returncode else []
                if refused and "DspsimInputError" in refused[0]:  # not a shape this variant
                    rows.append({"op": name, "variant": variant, "shape": list(shape),
                                 "refused": refused[0].split(": ", 1)[-1]})
                    continue
                p.check_returncode()
                peak = int(p.stdout.split()[-1]) * 1024
                target = 3 * arrays + 150 * 2**20
                rows.append({"op": name, "variant": variant, "shape": list(shape),
                             "arrays_bytes": arrays, "peak_rss_bytes": peak,
                             "target_bytes": target, "within_target": peak <= target})
    return rows


def checkout(text: str) -> str:
    """An argparse type: the root of a dspsim checkout (a folder holding ``dspsim/run.py``)."""
    if not (Path(text) / "dspsim" / "run.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a dspsim checkout (no "
                                         "dspsim/run.py in it); give the folder holding dspsim/")
    return str(Path(text).resolve())


def out_file(text: str) -> str:
    """An argparse type: a file the report can be written to (its folder exists), checked
    before the benchmark runs for minutes."""
    folder = Path(text).resolve().parent
    if not text or Path(text).is_dir() or not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file in an existing folder; give "
                                         "a path such as docs/bench.txt")
    return text


def _parser() -> argparse.ArgumentParser:
    from dspsim.cli.common import float_in, int_in

    p = argparse.ArgumentParser(prog="python -m dspsim.bench", description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int_in(1), default=100_000,
                   help="array length of every op and variant's runs (a 2-D op: its default shape)")
    p.add_argument("--repeat", type=int_in(1), default=3,
                   help="each wall time is the best of this many runs")
    p.add_argument("--sweep-points", type=int_in(0), default=1000,
                   help="points of the sweep benchmark (0 skips it)")
    p.add_argument("--elision-n", type=int_in(1), default=1_000_000,
                   help="array length of the elision comparison (burst ping-pong)")
    p.add_argument("--memory-elements", type=int_in(0), default=10_000_000,
                   help="elements of the peak-memory runs (0 skips them)")
    p.add_argument("--stream-n", type=int_in(0), nargs="*", default=[1_000_000, 10_000_000],
                   help="array lengths of the streaming ping-pong runs (none: skip them)")
    p.add_argument("--baseline", metavar="DIR", type=checkout,
                   help="a checkout of another version (its root, holding dspsim/) to run "
                   "the streaming ping-pong, the alike rows and the camera workload beside: "
                   "today's figure next to each target")
    p.add_argument("--workload-seconds", type=float_in(0.0, 3600.0 * 24), default=0.0,
                   help="simulated seconds of the camera workload (3600: the one-hour "
                   "workload; 0, the default, skips it)")
    p.add_argument("--reference-seconds", type=float_in(0.1, 3600.0 * 24), default=2.0,
                   help="simulated seconds of the same workload simulating every task, "
                   "extrapolated (default 2)")
    p.add_argument("--workload-cores", type=int_in(1), default=1,
                   help="cores of the camera workload's platform (core.count; default 1)")
    p.add_argument("--workload-jobs", type=int_in(1, 256), default=2,
                   help="also run the workload in this many parts at once, in worker "
                   "processes (default 2; 1 skips it)")
    p.add_argument("--workload-only", action="store_true",
                   help="run only the camera workload benchmark")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--out", metavar="FILE", type=out_file,
                   help="also write the report (the JSON with --json) to FILE, replaced whole "
                   "once the benchmark has finished (the README quotes docs/bench.txt)")
    return p


def main() -> None:
    """Run the benchmark, print its report (the JSON with ``--json``) and keep it (``--out``)."""
    args = _parser().parse_args()
    b = run_benchmark(args)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        if args.json:
            print(json.dumps(b, indent=2))
        elif args.workload_only:
            print_workload(b["workload"])
        else:
            print_report(b)
    text = buf.getvalue()
    sys.stdout.write(text)
    if args.out:
        from dspsim.paths import atomic_write_text

        command = " ".join(["python -m dspsim.bench", *sys.argv[1:]])
        header = "" if args.json else f"# {command}\n"
        atomic_write_text(args.out, header + text, "bench report")


if __name__ == "__main__":
    main()
