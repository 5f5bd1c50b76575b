"""Benchmark: how fast the simulator runs on this machine.

``python -m dspsim.bench`` reports, in one run: the bare SimPy rate of ``env.timeout`` events,
then for each version at the headline size the simulation wall time, events per second,
simulated cycles per second and the ratio to the bare rate, with the data path on and off,
the tile-fidelity speed-up per point, and the wall time of a 1,000-point sweep on two worker
processes. Each simulation figure is the best of ``--repeat`` runs.
Speed is measured here, never asserted in the test suite.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
from collections.abc import Callable
from typing import Any

import simpy

from dspsim.config import load_model
from dspsim.run import simulate


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def bare_simpy_rate(events: int = 300_000) -> float:
    """Events per second of one process yielding ``env.timeout(1)`` in a loop."""

    def proc(env: simpy.Environment):
        for _ in range(events):
            yield env.timeout(1)

    def once() -> None:
        env = simpy.Environment()
        env.process(proc(env))
        env.run()

    wall, _ = best_of(3, once)
    return events / wall


def run_benchmark(n: int = 100_000, repeat: int = 3, sweep_points: int = 1000) -> dict[str, Any]:
    model = load_model()
    bare = bare_simpy_rate()
    out: dict[str, Any] = {
        "machine": f"{platform.machine()} {platform.python_implementation()} "
        f"{platform.python_version()}",
        "n": n,
        "bare_simpy_events_per_s": bare,
        "runs": [],
    }
    together = {}
    for fidelity in ("burst", "tile"):
        for data in (False, True):
            for mode in ("pingpong", "direct"):
                wall, r = best_of(
                    repeat, functools.partial(simulate, model, variant=mode, n=n, data=data,
                                              fidelity=fidelity)
                )
                out["runs"].append({
                    "mode": mode, "fidelity": fidelity, "data": data, "wall_s": wall,
                    "cycles": r.cycles, "events": r.events, "events_per_s": r.events / wall,
                    "simulated_cycles_per_s": r.cycles / wall,
                    "ratio_to_bare_simpy": r.events / wall / bare,
                })
                together[(fidelity, data)] = together.get((fidelity, data), 0.0) + wall
    out["both_versions_wall_s"] = {f"{f}, data {'on' if d else 'off'}": w
                                   for (f, d), w in together.items()}
    walls = {(r["mode"], r["fidelity"], r["data"]): r["wall_s"] for r in out["runs"]}
    out["tile_speedup"] = {
        mode: walls[(mode, "burst", False)] / walls[(mode, "tile", False)]
        for mode in ("pingpong", "direct")
    }
    if sweep_points:
        from dspsim.study.experiments import bench_sweep

        out["sweep"] = bench_sweep(points=sweep_points, jobs=2)
    return out


def print_report(b: dict[str, Any]) -> None:
    print(f"machine: {b['machine']}")
    print(f"bare SimPy env.timeout rate: {b['bare_simpy_events_per_s']:,.0f} events/s")
    print(f"{'mode':<9} {'fidelity':<8} {'data':<5} {'wall_s':>8} {'events':>8} "
          f"{'events_per_s':>13} {'sim_cycles_per_s':>17} {'vs_bare':>8}")
    for r in b["runs"]:
        print(f"{r['mode']:<9} {r['fidelity']:<8} {'on' if r['data'] else 'off':<5} "
              f"{r['wall_s']:>8.4f} {r['events']:>8,} {r['events_per_s']:>13,.0f} "
              f"{r['simulated_cycles_per_s']:>17,.0f} {r['ratio_to_bare_simpy']:>8.2f}")
    for k, w in b["both_versions_wall_s"].items():
        print(f"both versions together ({k}): {w:.3f} s")
    for mode, s in b["tile_speedup"].items():
        print(f"tile fidelity speed-up per point, {mode}: {s:.1f}x")
    if "sweep" in b:
        sw = b["sweep"]
        print(f"sweep of {sw['points']:,} points (tile fidelity, --jobs 2): {sw['wall_s']:.1f} s, "
              f"{sw['points_per_s']:.0f} points/s")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m dspsim.bench", description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sweep-points", type=int, default=1000,
                   help="points of the sweep benchmark (0 skips it)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    b = run_benchmark(args.n, args.repeat, args.sweep_points)
    if args.json:
        print(json.dumps(b, indent=2))
    else:
        print_report(b)


if __name__ == "__main__":
    main()
