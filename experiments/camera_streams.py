"""How many 30-fps cameras can the DSP subsystem keep up with, on one core and on two?

Each camera submits a 100,000-element softmax (the seed's) every 33.3 ms (priority 0, backend
``any``, deadline: the next frame, 33.3 ms; releases staggered evenly over a period and
jittered by up to 0.5 ms); one high-priority model submits a LayerNorm (1024 x 256, priority
200, backend ``any``, deadline 100 ms) at 10 Hz. A setup **sustains** N cameras when, with N,
every deadline is met and the backlog does not grow (``dspsim workload``'s overload test);
its limit is the largest N such that it sustains every count up to N.

Setups: the seed's ping-pong schedule on 1 and 2 cores; and, if the softmax op has a variant
named ``online`` or ``resident`` when this runs, the best of them ("best schedule") on 1 and 2
cores. Tile fidelity.

Writes results/camera_streams.csv and .png and prints the conclusion.
Run: ``python experiments/camera_streams.py [--seconds 2] [--max-cameras 12] [--jobs 2]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _results, when loaded by path
from _results import (  # noqa: E402
    MAX_JOBS,
    count_arg,
    out_dir_of,
    parser,
    script_main,
    seconds_arg,
    staged,
)

from dspsim.analysis.timeline import save_figure  # noqa: E402
from dspsim.config import load_model  # noqa: E402
from dspsim.errors import DspsimInputError  # noqa: E402
from dspsim.ops import get_op  # noqa: E402
from dspsim.paths import atomic_write_text, plain_text  # noqa: E402
from dspsim.platform import FIDELITIES  # noqa: E402
from dspsim.run import simulate  # noqa: E402
from dspsim.study.workload import run_workload, summarise, task_table  # noqa: E402
from dspsim.study.workload.cameras import (  # noqa: E402
    HP,
    PERIOD_US,
    N,
    camera_workload,
    frames_of,
    hp_tasks_of,
    tasks_of,
)
from dspsim.study.workload.spec import MAX_TASKS, MAX_TIME_US  # noqa: E402
from dspsim.workers import imap_unordered  # noqa: E402

NAME = "camera_streams"
RESULTS = Path(__file__).resolve().parents[1] / "results"
MAX_CAMERAS = 64
# the workload's releases stay within what a workload file allows (MAX_TIME_US: 24 h); its
# tasks too (MAX_TASKS), which main() checks against --max-cameras
MAX_SECONDS = MAX_TIME_US / 1e6 - 0.1
BEST_CANDIDATES = ("online", "resident")


def max_seconds_for(cameras: int) -> float:
    """The largest --seconds, in tenths of a second, whose ``cameras``-camera workload has at
    most MAX_TASKS tasks (the count only grows with the seconds)."""
    tenths = int(round(MAX_SECONDS * 10))
    while tenths > 1 and tasks_of(cameras, tenths / 10) > MAX_TASKS:
        tenths -= 1
    return tenths / 10


def check_size(max_cameras: int, seconds: float) -> None:
    """Refuse, before anything runs, a --seconds and --max-cameras whose largest workload has
    more than MAX_TASKS tasks (it would fail only once the smaller ones had run)."""
    tasks = tasks_of(max_cameras, seconds)
    if tasks <= MAX_TASKS:
        return
    cameras = max_cameras - 1
    while cameras > 1 and tasks_of(cameras, seconds) > MAX_TASKS:
        cameras -= 1
    reverse = (f", or --max-cameras at most {cameras} for --seconds {seconds:g}"
               if tasks_of(cameras, seconds) <= MAX_TASKS else "")
    raise DspsimInputError(
        f"--seconds {seconds:g} with --max-cameras {max_cameras}: the {max_cameras}-camera "
        f"workload would have {tasks:,} tasks ({frames_of(seconds):,} frames per camera plus "
        f"{hp_tasks_of(seconds):,} LayerNorm tasks), and a workload allows at most "
        f"{MAX_TASKS:,}; use --seconds at most {max_seconds_for(max_cameras):g} for --max-cameras "
        f"{max_cameras}{reverse}"
    )


def workload(cameras: int, variant: str, seconds: float):
    return camera_workload(cameras, seconds, variant)


def best_variant(fidelity: str) -> tuple[str | None, str]:
    """The fastest of the ``online`` / ``resident`` softmax variants alone, and why."""
    softmax = get_op("softmax")
    found = [v for v in BEST_CANDIDATES if v in softmax.variants]
    if not found:
        return None, (f"no softmax variant named {' or '.join(BEST_CANDIDATES)} exists (variants: "
                      f"{', '.join(softmax.variants)}): the best-schedule setup is skipped")
    model = load_model()
    cycles = {}
    for v in found:
        try:
            cycles[v] = simulate(model, "softmax", v, n=N, data=False, fidelity=fidelity).cycles
        except ValueError as e:
            print(f"{NAME}: softmax {v} cannot run at n = {N:,}: {e}", file=sys.stderr)
    if not cycles:
        return None, "no best-schedule variant runs at n = 100,000: the setup is skipped"
    best = min(cycles, key=cycles.get)
    seed = simulate(model, "softmax", "pingpong", n=N, data=False, fidelity=fidelity).cycles
    return best, (f"best schedule: softmax {best} ({cycles[best]:,} cycles alone, against "
                  f"{seed:,} for pingpong; candidates {', '.join(cycles)})")


def run_point(setup: str, cores: int, variant: str, cameras: int, seconds: float,
              fidelity: str) -> dict:
    model = load_model().with_overrides({"core.count": cores})
    run = run_workload(workload(cameras, variant, seconds), model, fidelity=fidelity)
    df = task_table(run)
    s = summarise(run, df)
    cams = df[df["stream"] != HP["name"]]
    hp = next(st for st in s["streams"] if st["name"] == HP["name"])
    return {
        "setup": setup, "cores": cores, "variant": variant, "cameras": cameras,
        "tasks": len(df),
        "camera_p50_us": float(cams["latency_us"].quantile(0.50)),
        "camera_p99_us": float(cams["latency_us"].quantile(0.99)),
        "camera_max_us": float(cams["latency_us"].max()),
        "camera_misses": int(cams["missed"].sum()),
        "hp_p50_us": hp["latency_us"]["p50"], "hp_p99_us": hp["latency_us"]["p99"],
        "hp_max_us": hp["latency_us"]["max"], "hp_misses": hp["deadline_misses"],
        "core_utilisation": sum(c["utilisation"] for c in s["core_utilisation"]) / cores,
        "ddr_utilisation": s["ddr"]["utilisation"],
        "longest_backlog": s["queue"]["longest_backlog"],
        "backlog_growth": s["queue"]["backlog_growth"],
        "overloaded": s["queue"]["overloaded"],
        "sustained": not s["queue"]["overloaded"] and s["deadline_misses"] == 0,
        "wall_s": run.wall_s,
    }


def sustain_limit(rows: pd.DataFrame) -> int:
    """The largest N such that every camera count up to N is sustained (0: not even one)."""
    limit = 0
    for n, ok in zip(rows["cameras"], rows["sustained"]):
        if not ok:
            break
        limit = n
    return limit


def _limit_text(limit: int, tested: int) -> str:
    if limit >= tested:
        return f"sustains all {tested} tested"
    return f"sustains {limit}" if limit else "sustains none"


def plot(df: pd.DataFrame, limits: dict[str, int], path: Path) -> None:
    save_figure(figure(df, limits), path, dpi=130)


@plain_text
def figure(df: pd.DataFrame, limits: dict[str, int]):
    """The two panels (camera p99, high-priority p99), not yet saved."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    tested = int(df["cameras"].max())
    fig = Figure(figsize=(13, 5.8))
    FigureCanvasAgg(fig)
    ax_c, ax_h = fig.subplots(1, 2, sharex=True)
    colours = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")
    setups = list(dict.fromkeys(df["setup"]))
    for i, setup in enumerate(setups):
        rows = df[df["setup"] == setup]
        c = colours[i % len(colours)]
        label = f"{setup} ({_limit_text(limits[setup], tested)})"
        ax_c.plot(rows["cameras"], rows["camera_p99_us"] / 1000, "o-", color=c, label=label,
                  linewidth=1.6 - 0.25 * i, markersize=6 - i)
        ax_h.plot(rows["cameras"], rows["hp_p99_us"] / 1000, "s-", color=c, label=label,
                  linewidth=1.6 - 0.25 * i, markersize=6 - i)
        lim = limits[setup]
        if 0 < lim < tested:  # a setup that sustains every count tested has no limit to mark
            for ax in (ax_c, ax_h):
                ax.axvline(lim + 0.08 * (i - 1.5), color=c, linestyle=":", linewidth=1.6)
    ax_c.axhline(PERIOD_US / 1000, color="#888888", linewidth=0.8)
    # at the panel's right edge whatever cameras were run (the legend is upper left)
    ax_c.text(0.99, PERIOD_US / 1000 * 1.08, "deadline: the next frame (33.3 ms)", fontsize=8,
              color="#555555", ha="right", transform=ax_c.get_yaxis_transform())
    ax_h.axhline(HP["deadline_us"] / 1000, color="#888888", linewidth=0.8)
    ax_h.text(0.99, HP["deadline_us"] / 1000 * 0.85, "deadline: 100 ms", fontsize=8,
              color="#555555", va="top", ha="right", transform=ax_h.get_yaxis_transform())
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for ax, ticks in ((ax_c, (2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)),
                      (ax_h, (5, 7, 10, 15, 20, 30, 50, 100))):
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        floor = max((t for t in ticks if t <= lo), default=lo)  # a labelled tick below all
        ax.set_ylim(floor, hi)
        ax.set_yticks([t for t in ticks if floor <= t <= hi * 1.5])
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax_c.set_title("cameras (30 fps, softmax of 100,000, priority 0): p99", fontsize=10)
    ax_h.set_title("high-priority LayerNorm 1024x256 (10 Hz, priority 200): p99", fontsize=10)
    for ax in (ax_c, ax_h):
        ax.set_xlabel("30-fps cameras")
        ax.set_xticks(range(1, tested + 1))
        ax.grid(color="#e4e4e4", linewidth=0.5)
    for ax in (ax_c, ax_h):
        ax.set_ylabel("p99 latency, submit to done incl. the 0.3 ms RPC (ms, log scale)")
    ax_c.legend(fontsize=8, loc="upper left", title="setup (dotted: the most cameras it sustains)",
                title_fontsize=8)
    fig.suptitle("How many cameras each setup keeps up with (no deadline missed, no backlog "
                 "growth), and what it costs the high-priority stream", fontsize=11)
    fig.text(0.99, 0.01, "no preemption (a running task always finishes); tile fidelity; J6 "
             "model; backend any", ha="right", fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    return fig


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--seconds", type=seconds_arg(0.0, MAX_SECONDS), default=2.0,
                   help=f"simulated seconds (default 2, at most {MAX_SECONDS:g}, and so that "
                   f"the workload of --max-cameras cameras has at most {MAX_TASKS:,} tasks: "
                   f"at most {max_seconds_for(12):g} s for 12 cameras)")
    p.add_argument("--max-cameras", type=count_arg(1, MAX_CAMERAS), default=12,
                   help=f"1 to {MAX_CAMERAS} (default 12)")
    p.add_argument("--fidelity", choices=FIDELITIES, default="tile")
    p.add_argument("--jobs", type=count_arg(1, MAX_JOBS), default=2,
                   help="worker processes (default 2)")
    p.add_argument("--out-dir", metavar="DIR", help="where to write (default: results/)")
    p.add_argument("--replot", action="store_true",
                   help="redraw the figure and conclusion from the CSV, simulate nothing")
    args = p.parse_args()
    if not args.replot:  # before the out-dir is made: nothing written for a run that cannot be
        check_size(args.max_cameras, args.seconds)
    out_dir = out_dir_of(args.out_dir)
    if args.replot:
        df = read_table(out_dir / f"{NAME}.csv")
        limits = {s: sustain_limit(df[df["setup"] == s]) for s in dict.fromkeys(df["setup"])}
        plot(df, limits, out_dir / f"{NAME}.png")
        print(conclusion(df, limits))
        return
    setups = [("seed pingpong, 1 core", 1, "pingpong"), ("seed pingpong, 2 cores", 2, "pingpong")]
    best, note = best_variant(args.fidelity)
    print(note)
    if best is not None:
        setups += [(f"best ({best}), 1 core", 1, best), (f"best ({best}), 2 cores", 2, best)]
    start = time.perf_counter()
    points = [(setup, cores, variant, cameras) for setup, cores, variant in setups
              for cameras in range(1, args.max_cameras + 1)]
    # workers that die with this script, never more than points; rows in the points' order
    done = {}
    for i, r in imap_unordered(run_point, range(len(points)), args.jobs, work=len(points),
                               args=lambda i: (*points[i], args.seconds, args.fidelity)):
        done[i] = r
        print(f"  {r['setup']:<24} {r['cameras']:>2} cameras: camera p99 "
              f"{r['camera_p99_us'] / 1000:8.1f} ms, high-priority p99 "
              f"{r['hp_p99_us'] / 1000:6.1f} ms, DDR {100 * r['ddr_utilisation']:5.1f} %, "
              f"misses {r['camera_misses'] + r['hp_misses']:>4}, "
              f"{'sustained' if r['sustained'] else 'NOT sustained'} ({r['wall_s']:.1f} s)",
              file=sys.stderr)
    rows = [done[i] for i in range(len(points))]
    df = pd.DataFrame(rows)
    limits = {s: sustain_limit(df[df["setup"] == s]) for s, _, _ in setups}
    with staged(out_dir) as stage:  # the table and the figure replace the old ones together
        atomic_write_text(stage / f"{NAME}.csv",
                          df.drop(columns=["wall_s"], errors="ignore").to_csv(
                              index=False, float_format="%.6g"), "table")
        plot(df, limits, stage / f"{NAME}.png")
    print(f"{len(df)} workloads ({df['tasks'].sum():,} tasks) in {time.perf_counter() - start:.1f} "
          f"s wall, {args.fidelity} fidelity; wrote {out_dir / NAME}.csv and .png")
    print(conclusion(df, limits))


COLUMNS = ("setup", "cores", "variant", "cameras", "camera_p99_us", "hp_p99_us",
           "ddr_utilisation", "sustained", "hp_misses")


def read_table(path: Path) -> pd.DataFrame:
    """The CSV ``--replot`` redraws: missing, unreadable or without its columns is one line."""
    if not path.is_file():
        raise DspsimInputError(f"--replot: {str(path)!r} not found (or not a regular file); "
                               "run without --replot first to write it")
    try:
        df = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise DspsimInputError(f"--replot: {str(path)!r} is not a camera_streams table: "
                               f"{e.__class__.__name__}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing or df.empty:
        raise DspsimInputError(f"--replot: {str(path)!r} is not a camera_streams table "
                               f"(missing {', '.join(missing) or 'rows'})")
    return df


PORT_BOUND = 0.95  # a DDR port at least this busy where a setup falls behind is its limit


def conclusion(df: pd.DataFrame, limits: dict[str, int]) -> str:
    """What the run shows, each claim tested on its numbers: where each setup falls behind
    (if it does), whether the DDR port is then the limit, and what a second core and the best
    schedule buy (nothing is concluded from counts that every setup kept up with)."""
    tested = int(df["cameras"].max())

    def at(setup, n, col):
        r = df[(df["setup"] == setup) & (df["cameras"] == n)]
        return float(r[col].iloc[0]) if len(r) else float("nan")

    def ms(setup, n, col):
        return f"{at(setup, n, col) / 1000:.1f} ms"

    def busy(setup, n):
        return f"{100 * at(setup, n, 'ddr_utilisation'):.0f} %"

    def limit(setup):
        lim = limits[setup]
        return f"all {tested} tested" if lim >= tested else str(lim)

    def gain(more: int, base: int) -> str:  # cameras ``more`` keeps up with beyond ``base``
        least = "at least " if more >= tested else ""
        return ("no camera" if more == base else f"{least}{more - base} camera(s)" if more > base
                else f"{base - more} camera(s) fewer")

    one, two = "seed pingpong, 1 core", "seed pingpong, 2 cores"
    l1, l2 = limits[one], limits[two]
    n = max(l1, 1)
    text = [f"With the seed's ping-pong softmax, 1 core keeps up with {limit(one)} cameras at "
            f"30 fps and 2 cores with {limit(two)}"]
    if l1 >= tested and l2 >= tested:
        text[0] += (f" (the DDR port {busy(one, tested)} busy at {tested} cameras on 1 core): "
                    "neither falls behind, so this run shows no limit and not what a second "
                    "core adds (try more cameras).")
    else:
        first = l1 + 1 if l1 < tested else l2 + 1  # the first count a seed setup falls behind
        who = one if l1 < tested else two
        port = at(who, first, "ddr_utilisation")
        behind = ("the backlog grows without bound" if bool(at(who, first, "overloaded"))
                  else "deadlines are missed") if "overloaded" in df.columns else "it falls behind"
        text[0] += (f". At {first} cameras on {who.split(', ')[1]} {behind} (camera p99 "
                    f"{ms(who, first, 'camera_p99_us')}) with the DDR port {100 * port:.0f} % "
                    "busy: " + ("that port, which the cores share, is the limit"
                                if port >= PORT_BOUND else "the port is not the limit")
                    + f"; a second core adds {gain(l2, l1)}.")
    hp1, hp2 = at(one, tested, "hp_p99_us"), at(two, tested, "hp_p99_us")
    hp_misses = int(df[df["setup"].isin([one, two])]["hp_misses"].sum())
    text.append(
        "The high-priority LayerNorm (priority 200) "
        + ("meets its 100 ms deadline throughout" if hp_misses == 0 else
           f"misses its 100 ms deadline {hp_misses} times")
        + ": p99 "
        f"{ms(one, n, 'hp_p99_us')} on 1 core at {n} cameras (no preemption: it waits for the "
        f"running softmax, then runs), {ms(one, tested, 'hp_p99_us')} at {tested}; on 2 cores "
        f"{ms(two, n, 'hp_p99_us')} and {ms(two, tested, 'hp_p99_us')}"
        + (": the second core makes it slower, not faster, because it then shares the port with "
           "a running softmax instead of waiting for it." if hp2 > hp1 * 1.05 else ".")
    )
    best = [s for s in limits if s.startswith("best")]
    if best:
        b1 = best[0]
        lb = limits[b1]
        less = at(b1, 1, "ddr_utilisation") < at(one, 1, "ddr_utilisation")
        text.append(
            f"The best schedule ({df[df['setup'] == b1]['variant'].iloc[0]}) "
            + ("keeps the DDR port less busy per frame and " if less else "")
            + f"keeps up with {limit(b1)} cameras on 1 core"
            + (f" and {limit(best[1])} on 2" if len(best) > 1 else "")
            + f" (at {tested} cameras: camera p99 {ms(b1, tested, 'camera_p99_us')}, DDR port "
            f"{busy(b1, tested)} busy): "
            + ("with every count tested kept up on both, this run cannot rank a new schedule "
               "against a second core." if lb >= tested and l2 >= tested else
               f"changing the schedule buys {gain(lb, l1)} on 1 core, a second core "
               f"{gain(l2, l1)}.")
        )
    else:
        text.append("No online/resident softmax variant existed, so no best-schedule setup ran.")
    return " ".join(text)


if __name__ == "__main__":
    script_main(main)
