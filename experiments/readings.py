"""Which of dspsim's conclusions hold under every reading of the J6 figures?

Each ``models/j6*.toml`` is one reading of the seed document's two figures (``dspsim calibrate
--explore``; docs/readings.md): j6 (port-bandwidth-bound), j6_outstanding_bound (one request
in flight per channel), j6_descriptor_bound (2.6 us per iDMA descriptor, 1 KiB tiles). Under
each, this runs the comparisons behind the README's conclusions:

- ``length``: ping-pong against direct at n = 64 .. 100,000 (does ping-pong beat direct?);
- ``variant``: every softmax variant at n = 100,000 (is ``resident`` the best schedule, and by
  how much does it beat the seed's ping-pong?);
- ``tile_pow2``: ping-pong over power-of-two tiles 512 B .. 128 KiB, and ``tile_1k``: every
  multiple of 1 KiB that fits a DataRAM's free space (is the tile size flat? which sizes stop
  the timer early, ``unwaited_copy``?);
- ``outstanding``: ping-pong with ``idma.max_outstanding`` 1 .. 64 (do more requests help?);
- ``separating``: the measurements that tell the readings apart.

Writes results/readings.csv (one row per run: model, comparison, variant, n, the key changed
and its value, cycles, the core's and the DDR port's busy share, the warning codes; no wall
time) and results/readings_summary.csv (one
row per model) and prints the summary.
Run: ``python experiments/readings.py [--jobs 2] [--fidelity burst|tile] [--out-dir DIR]``.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from _results import experiment_parser, out_dir_of, script_main, staged

from dspsim.config import load_model, models_dir
from dspsim.ops import get_op
from dspsim.paths import atomic_write_text
from dspsim.run import simulate
from dspsim.workers import imap_unordered

N = 100_000  # the document's length
LENGTHS = (64, 1024, 16_384, N)
POW2_TILES = [512 << k for k in range(9)]  # 512 B .. 128 KiB
OUTSTANDING = (1, 2, 4, 8, 16, 32, 64)
EARLY_TIMER = "unwaited_copy"  # the seed's timer stopped before the other channel's last copy
FLAT = 0.01  # "flat": within 1 %
# (label, n, settings): what `dspsim calibrate --explore` proposes, and the earlier proposal
SEPARATING = (
    ("explore", 64, {"softmax.tile_bytes": 256}),
    ("one_64k_tile", 16_384, {"softmax.tile_bytes": 65536}),
)
# the descriptor-bound reading's far end: its port is not determined (0.43 .. 64 B/cycle fit)
WIDE_PORT = {"ddr.bytes_per_cycle": 16.0, "ddr.latency_cycles": 596.606,
             "idma.setup_cycles": 2584.54}
COLUMNS = ("model", "comparison", "variant", "n", "key", "value", "cycles", "core_busy_pct",
           "ddr_busy_pct", "warnings")


def readings() -> list[tuple[str, str, dict]]:
    """(label, model name, overrides): every packaged j6 reading, then the descriptor-bound
    reading with a 16 B/cycle port."""
    names = sorted(p.stem for p in models_dir().glob("j6*.toml"))
    names.sort(key=lambda s: (s != "j6", s))
    out = [(n, n, {}) for n in names]
    if "j6_descriptor_bound" in names:
        out.append(("j6_descriptor_bound@16B", "j6_descriptor_bound", WIDE_PORT))
    return out


def run_one(task: tuple) -> dict:
    label, name, overrides, comparison, variant, n, key, value, fidelity = task
    model = load_model(name)
    settings = dict(overrides)
    if key:
        settings[key] = value
    if settings:
        model = model.with_overrides(settings)
    r = simulate(model, "softmax", variant, n=n, data=False, fidelity=fidelity)
    codes = ";".join(dict.fromkeys(str(w["code"]) for w in r.warnings
                                   if w.get("severity") != "info"))
    ddr = sum(r.busy_cycles[e] for e in r.engines_of("ddr"))
    return {"model": label, "comparison": comparison, "variant": variant, "n": n,
            "key": key, "value": value, "cycles": int(r.cycles),
            "core_busy_pct": round(100 * r.busy_cycles[r.core] / r.cycles, 2),
            "ddr_busy_pct": round(100 * ddr / r.cycles, 2), "warnings": codes}


def tasks_for(label: str, name: str, overrides: dict, fidelity: str) -> list[tuple]:
    model = load_model(name).with_overrides(overrides) if overrides else load_model(name)
    free = model.tcm.bank_bytes - model.tcm.reserved_bytes
    out = []

    def add(comparison, variant, n, key="", value=""):
        out.append((label, name, overrides, comparison, variant, n, key, value, fidelity))

    for n in LENGTHS:
        for v in ("pingpong", "direct"):
            add("length", v, n)
    for v in get_op("softmax").variants:
        add("variant", v, N)
    for t in POW2_TILES:
        if t <= free:
            add("tile_pow2", "pingpong", N, "softmax.tile_bytes", t)
    for t in range(1024, free + 1, 1024):
        add("tile_1k", "pingpong", N, "softmax.tile_bytes", t)
    for k in OUTSTANDING:
        add("outstanding", "pingpong", N, "idma.max_outstanding", k)
    for what, n, settings in SEPARATING:
        (key, value), = settings.items()
        add(f"separating:{what}", "pingpong", n, key, value)
    return out


def summarise(rows: list[dict], label: str, name: str, overrides: dict) -> dict:
    mine = [r for r in rows if r["model"] == label]

    def pick(comparison, **where):
        return [r for r in mine if r["comparison"] == comparison
                and all(r[k] == v for k, v in where.items())]

    model = load_model(name).with_overrides(overrides) if overrides else load_model(name)
    seed = pick("length", variant="pingpong", n=N)[0]["cycles"]
    direct = pick("length", variant="direct", n=N)[0]["cycles"]
    ratios = [pick("length", variant="direct", n=n)[0]["cycles"]
              / pick("length", variant="pingpong", n=n)[0]["cycles"] for n in LENGTHS]
    variants = {r["variant"]: r["cycles"] for r in pick("variant")}
    best = min(variants, key=variants.get)
    pow2 = [r for r in pick("tile_pow2") if EARLY_TIMER not in r["warnings"]]
    pow2_early = [r["value"] for r in pick("tile_pow2") if EARLY_TIMER in r["warnings"]]
    grid = pick("tile_1k")
    complete = [r["cycles"] for r in grid if EARLY_TIMER not in r["warnings"]]
    early = [r for r in grid if EARLY_TIMER in r["warnings"]]
    lo_c, hi_c = min(complete), max(complete)
    own_k = model.idma.max_outstanding
    by_k = {r["value"]: r["cycles"] for r in pick("outstanding")}
    faster_k = min(by_k, key=by_k.get)
    out = {
        "model": label,
        "document_pingpong": seed,
        "document_direct": direct,
        "pingpong_core_busy_pct": pick("length", variant="pingpong", n=N)[0]["core_busy_pct"],
        "pingpong_ddr_busy_pct": pick("length", variant="pingpong", n=N)[0]["ddr_busy_pct"],
        "pingpong_beats_direct_every_n": all(x > 1 for x in ratios),
        **{f"direct_over_pingpong_n{n}": round(x, 3) for n, x in zip(LENGTHS, ratios)},
        "best_variant": best,
        "best_speedup_vs_seed": round(seed / variants[best], 3),
        "resident_speedup_vs_seed": round(seed / variants["resident"], 3),
        "resident_is_best": best == "resident",
        "tile_pow2_spread_pct": round(100 * (max(r["cycles"] for r in pow2)
                                             / min(r["cycles"] for r in pow2) - 1), 2),
        "tile_pow2_fastest": min(pow2, key=lambda r: r["cycles"])["value"],
        "tile_pow2_early_timer": ";".join(str(t) for t in pow2_early),
        "tile_1k_sizes": len(grid),
        "tile_1k_early_timer_sizes": len(early),
        "tile_1k_smallest_early_timer": min((r["value"] for r in early), default=""),
        "tile_1k_complete_spread_pct": round(100 * (hi_c / lo_c - 1), 2),
        "tile_1k_early_timer_drop_pct": round(100 * (1 - min(r["cycles"] for r in early)
                                                     / lo_c), 2) if early else 0.0,
        "outstanding_own": own_k,
        "outstanding_fastest": faster_k,
        "outstanding_best_speedup": round(by_k[own_k] / by_k[faster_k], 3),
        "outstanding_1_slowdown": round(by_k[1] / by_k[own_k], 3),
    }
    for what, _, _ in SEPARATING:
        out[f"separating_{what}"] = pick(f"separating:{what}")[0]["cycles"]
    return out


def write_csv(path: Path, rows: list[dict], columns) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(path, buf.getvalue(), "table")


def main() -> None:
    args = experiment_parser(__doc__.splitlines()[0]).parse_args()
    out_dir = out_dir_of(args.out_dir)
    which = readings()
    tasks = [t for label, name, ov in which for t in tasks_for(label, name, ov, args.fidelity)]
    print(f"readings: {len(tasks)} runs under {len(which)} readings ({args.fidelity} fidelity)",
          file=sys.stderr)
    # workers that die with this script, never more than tasks; rows in the tasks' order
    done = dict(imap_unordered(run_one, range(len(tasks)), args.jobs, work=len(tasks),
                               args=lambda i: (tasks[i],)))
    rows = [done[i] for i in range(len(tasks))]
    summary = [summarise(rows, label, name, ov) for label, name, ov in which]
    with staged(out_dir) as stage:  # both tables replace the old ones together
        write_csv(stage / "readings.csv", rows, COLUMNS)
        write_csv(stage / "readings_summary.csv", summary, list(summary[0]))
    for s in summary:
        print(f"\n{s['model']}")
        for k, v in s.items():
            if k != "model":
                print(f"  {k:<32} {v}")
    holds = {
        "ping-pong beats direct at every length": all(
            s["pingpong_beats_direct_every_n"] for s in summary),
        "resident is the best schedule": all(s["resident_is_best"] for s in summary),
        f"tile size flat within {100 * FLAT:g} % (power-of-two tiles, complete runs)": all(
            s["tile_pow2_spread_pct"] <= 100 * FLAT for s in summary),
        "more outstanding requests do not help": all(
            s["outstanding_best_speedup"] <= 1 + FLAT for s in summary),
    }
    print("\nholds under every reading:")
    for claim, ok in holds.items():
        print(f"  {'yes' if ok else 'NO '}  {claim}")


if __name__ == "__main__":
    script_main(main)
