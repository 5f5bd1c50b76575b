"""The benchmark's printed report (``python -m dspsim.bench``): each section of its figures in
words, from the dictionary :func:`dspsim.bench.run_benchmark` returns."""

from __future__ import annotations

from typing import Any


def print_report(b: dict[str, Any]) -> None:
    """Every section of the report, in order."""
    print_runs(b)
    print_speedups(b)
    print_resources(b)
    if "workload" in b:
        print_workload(b["workload"])


def print_runs(b: dict[str, Any]) -> None:
    """The machine, each engine run, and the tile engine's speed-ups."""
    print(f"machine: {b['machine']}")
    print(f"{'op':<10} {'variant':<9} {'engine':<18} {'data':<5} {'wall_s':>8} {'events':>8} "
          f"{'events_per_s':>13} {'bare_per_s':>11} {'vs_bare':>8}")
    for r in b["runs"]:
        print(f"{r['op']:<10} {r['variant']:<9} {r['engine']:<18} "
              f"{'on' if r['data'] else 'off':<5} {r['wall_s']:>8.4f} {r['events']:>8,} "
              f"{r['events_per_s']:>13,.0f} {r['bare_simpy_events_per_s']:>11,.0f} "
              f"{r['ratio_to_bare_simpy']:>8.2f}")
    for key, over in (("tile_speedup", "burst"), ("tile_vs_reference", "burst without elision")):
        for k, s in b[key].items():
            print(f"tile fidelity speed-up per point over {over}, {k}: {s:.1f}x")


def print_speedups(b: dict[str, Any]) -> None:
    """Streaming against the baseline, event elision, alike rows booked at once."""
    for row in b.get("streaming", []):
        line = (f"streaming ping-pong, data off, n = {row['n']:,}, {row['fidelity']}: "
                f"{row['this_wall_s']:.3f} s, {row['this_events']:,} events")
        if "baseline_wall_s" in row:
            line += (f"; baseline {row['baseline_wall_s']:.3f} s, {row['baseline_events']:,} "
                     f"events: {row['speedup']:.2f}x"
                     f"{'' if row['same_cycles'] else ' (CYCLES DIFFER)'}")
        print(line)
    for e in b["elision"]:
        print(f"event elision, burst pingpong n = {e['n']:,}, data {'on' if e['data'] else 'off'}:"
              f" {e['reference_events']:,} -> {e['elided_events']:,} events, "
              f"{e['reference_wall_s']:.3f} s -> {e['elided_wall_s']:.3f} s ({e['speedup']:.2f}x)")
    for w in b.get("walks", []):
        line = (f"a call's walk, {w['model']} {w['op']} {w['variant']} n = {w['n']:,}, data "
                f"off: {w['this_wall_s']:.3f} s, {w['this_events']:,} events")
        if "baseline_wall_s" in w:
            line += (f"; baseline {w['baseline_wall_s']:.3f} s: {w['speedup']:.1f}x"
                     f"{'' if w['same_cycles'] else ' (CYCLES DIFFER)'}")
        print(line)
    for e in b.get("row_runs", []):
        print(f"alike rows booked at once, {e['op']} direct {'x'.join(map(str, e['shape']))}, "
              f"data off: {e['wall_s']:.2f} s ({e['events']:,} events); the reference engine "
              f"simulating every row: {e['reference_wall_s_scaled']:,.0f} s (scaled from "
              f"{e['reference_rows']:,} rows; {'identical' if e['identical'] else 'DIFFERENT'}"
              f" results there): {e['speedup']:,.0f}x")
        if "baseline_wall_s_scaled" in e:
            print(f"  the baseline on the same rows: {e['baseline_wall_s_scaled']:,.1f} s "
                  f"(scaled): {e['speedup_over_baseline']:,.0f}x faster here")


def print_resources(b: dict[str, Any]) -> None:
    """The command line's start-up, the peak memory, the sweeps' points per second."""
    cli = b["cli"]
    print(f"dspsim run --json: {cli['run_json_wall_s']:.3f} s wall (a bare python importing numpy "
          f"and simpy: {cli['bare_python_wall_s']:.3f} s)")
    if "calibrate" in b:
        c = b["calibrate"]
        print(f"J6 calibration ({c['measurements']} document figures, "
              f"{', '.join(c['values'])} free, with their intervals): {c['wall_s']:.2f} s, "
              f"{c['simulations']:,} simulations")
    for m in b.get("memory", []):
        run = f"{m['op']} {m['variant']} shape {'x'.join(map(str, m['shape']))}"
        if "refused" in m:
            print(f"peak RSS, {run}: not run ({m['refused']})")
            continue
        print(f"peak RSS, values on, {run}: {m['peak_rss_bytes'] / 2**20:,.0f} MiB "
              f"(input + output {m['arrays_bytes'] / 2**20:,.0f} MiB; target <= "
              f"{m['target_bytes'] / 2**20:,.0f} MiB{'' if m['within_target'] else ': OVER'})")
    for key in ("sweep", "sweep_dask"):
        if key in b:
            sw = b[key]
            head = (f"sweep of {sw['points']:,} points (tile fidelity, --jobs 2)" if key == "sweep"
                    else "the same sweep on a local dask cluster of 2 workers (start-up "
                    "included, small points batched)")
            print(f"{head}: {sw['wall_s']:.1f} s, {sw['points_per_s']:.0f} points/s{_spread(sw)}")


def print_workload(w: dict[str, Any]) -> None:
    """The camera workload: with reuse, every task simulated, in parts, the baseline."""
    print(f"camera workload, {w['cameras']} cameras at 30 fps + a 10 Hz LayerNorm on "
          f"{w['cores']} core(s), {w['seconds']:,g} s ({w['tasks']:,} tasks), data path off: "
          f"{w['wall_s']:.1f} s wall with reuse ({w['reused_tasks']:,} tasks reused, "
          f"{w['episodes']:,} episode(s) simulated)")
    print(f"  simulating every task (reuse off): {w['reference_wall_s']:.1f} s for "
          f"{w['reference_seconds']:,g} s ({w['reference_tasks']:,} tasks), extrapolated by "
          f"tasks to {w['reference_extrapolated_wall_s']:,.0f} s for {w['seconds']:,g} s "
          f"({w['speedup']:,.0f}x); task tables over {w['reference_seconds']:,g} s "
          f"{'identical' if w['identical_over_reference'] else 'DIFFERENT'}")
    if "jobs_wall_s" in w:
        print(f"  in {w['jobs']} parts at once (jobs={w['jobs']}, worker processes): "
              f"{w['jobs_wall_s']:.1f} s wall; task table "
              f"{'identical' if w['jobs_identical'] else 'DIFFERENT'} to the one run's")
    if "baseline_wall_s" in w:
        print(f"  baseline (every task simulated): {w['baseline_wall_s']:.1f} s for "
              f"{w['reference_seconds']:,g} s, extrapolated to "
              f"{w['baseline_extrapolated_wall_s']:,.0f} s: {_over_baseline(w)}")


def _over_baseline(w: dict[str, Any]) -> str:
    text = f"{w['speedup_over_baseline']:,.1f}x faster here"
    if "jobs_wall_s" in w:
        text += (f" in one process, {w['baseline_extrapolated_wall_s'] / w['jobs_wall_s']:,.1f}x "
                 f"in {w['jobs']} parts at once")
    return text


def _spread(sweep: dict[str, Any]) -> str:
    walls = sweep.get("walls_s", [])
    if len(walls) < 2:
        return ""
    return f" (best of {len(walls)}, run alternately; median {sweep['median_wall_s']:.1f} s)"
