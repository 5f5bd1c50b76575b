"""What the scripts in ``experiments/`` share about ``results/``: its place, and that the tables
committed there hold no host timings (``wall_s`` differs on every run and machine, so a rerun
that changes nothing else would still rewrite the file)."""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from dspsim.cli.common import (
    INTERRUPTED_EXIT,
    _Parser,
    ignore_file_size_signal,
    int_in,
    interrupted_message,
    interrupts_handled,
)
from dspsim.errors import DspsimInputError
from dspsim.paths import atomic_write_text, remove_stale_temps, temp_prefix
from dspsim.platform import FIDELITIES
from dspsim.study.sweep.journal import MAX_JOBS

RESULTS = Path(__file__).resolve().parents[1] / "results"
HOST_COLUMNS = ("wall_s",)


def is_results_dir(path: Path) -> bool:
    return Path(path).resolve() == RESULTS.resolve()


def drop_host_columns(csv_path: Path) -> Path:
    """Rewrite a sweep table without its host timing columns, every other cell as written."""
    rows = list(csv.reader(io.StringIO(Path(csv_path).read_text(encoding="utf-8"))))
    if not rows:
        return csv_path
    keep = [i for i, name in enumerate(rows[0]) if name not in HOST_COLUMNS]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[r[i] for i in keep] for r in rows])
    return atomic_write_text(csv_path, buf.getvalue(), "table")


def finish_table(csv_path: Path, final_dir: Path | None = None) -> Path:
    """A table bound for ``results/`` (its folder, or ``final_dir`` when it is written in a
    staging folder first) loses its host timings; elsewhere it stays whole."""
    where = final_dir if final_dir is not None else Path(csv_path).parent
    return drop_host_columns(csv_path) if is_results_dir(where) else csv_path


# ------------------------------------------------------------------ what every script shares
# Every script's ``main`` runs under :func:`script_main`: bad input (an option, a model, an
# out-dir, a file that cannot be written) is one line on stderr and exit 2, never a traceback.
# Its outputs are written into a staging folder inside the out-dir and renamed into place only
# once all of them are written (:func:`staged`), so the out-dir never mixes new tables with an
# old figure.


def parser(description: str) -> argparse.ArgumentParser:
    """argparse with the dspsim CLI's parser class: a bad option is one line (a UsageError, a
    DspsimInputError), not the usage message."""
    return _Parser(description=description)


def experiment_parser(description: str) -> argparse.ArgumentParser:
    """Options shared by the sweep scripts (``dspsim.study.experiments``'s, with one-line errors
    and checked values)."""
    p = parser(description)
    p.add_argument("--jobs", type=int_in(1, MAX_JOBS), default=2,
                   help=f"worker processes (default 2, at most {MAX_JOBS})")
    p.add_argument(
        "--fidelity", choices=FIDELITIES, default="burst",
        help="default: burst, the reference (an experiment's grid is small); tile is the fast "
        "approximation for large sweeps, exact where the port is not contended",
    )
    p.add_argument("--out-dir", metavar="DIR", help="where to write (default: results/)")
    return p


count_arg = int_in  # an argparse type: a whole number from lo to hi


def seconds_arg(lo: float, hi: float):
    """An argparse type: a finite number of seconds, above ``lo`` and at most ``hi``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or not lo < value <= hi:
            raise argparse.ArgumentTypeError(
                f"{text!r}: allowed more than {lo:g} and at most {hi:g} seconds")
        return value

    return parse


def out_dir_of(path: str | Path | None, default: Path = RESULTS) -> Path:
    """The out-dir, created if missing; one line when it is not a usable directory (a regular
    file, a device such as /dev/full, not writable). Checked before any simulation runs."""
    p = Path(path) if path else default
    shown = f"--out-dir {str(p)!r}"
    try:
        if p.exists() and not p.is_dir():
            raise DspsimInputError(f"{shown}: exists and is not a directory; give a directory")
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DspsimInputError(f"{shown}: cannot create it: {e.strerror or e}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise DspsimInputError(f"{shown}: not writable")
    return p


@contextlib.contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A staging folder inside ``out_dir``: write every output there; when the block ends
    without error each file is renamed over its namesake in ``out_dir`` (renames in one folder
    do not fail for space or a file-size limit), else the staging folder is removed and
    ``out_dir`` is left as it was."""
    try:
        remove_stale_temps(out_dir)  # a staging folder a killed run left behind
        stage = Path(tempfile.mkdtemp(prefix=temp_prefix(), suffix=".staging", dir=out_dir))
    except OSError as e:
        raise DspsimInputError(f"--out-dir {str(out_dir)!r}: cannot write: "
                               f"{e.strerror or e}") from None
    try:
        try:
            yield stage
        except DspsimInputError as e:  # name the file it was writing, not the staging one
            raise DspsimInputError(str(e).replace(str(stage), str(out_dir))) from None
        for f in sorted(stage.iterdir()):
            os.replace(f, out_dir / f.name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def staged_main(description: str, run: Callable[[argparse.Namespace, Path], object]) -> None:
    """A sweep script's ``main``: parse the common arguments, check the out-dir before anything
    runs, and let ``run(args, final_dir)`` write into a staging folder (``args.out_dir``) whose
    files replace the old ones together."""
    args = experiment_parser(description).parse_args()
    final = out_dir_of(args.out_dir)
    with staged(final) as stage:
        args.out_dir = str(stage)
        run(args, final)


def script_main(main: Callable[[], object], name: str | None = None) -> None:
    """Run a script's ``main()``: bad input, a file that cannot be read or written, or running
    out of memory is one line on stderr and exit 2; Ctrl-C is one line and exit 130, as in
    the command line (the staging folder and the workers are cleaned up)."""
    prog = name or Path(sys.argv[0]).name
    ignore_file_size_signal()
    try:
        with interrupts_handled():
            main()
    except KeyboardInterrupt:
        interrupted_message(prog)
        sys.exit(INTERRUPTED_EXIT)
    except DspsimInputError as e:
        _fail(prog, str(e))
    except MemoryError:
        _fail(prog, "out of memory")
    except OSError as e:
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        _fail(prog, f"{e.strerror or e}{where}")


def _fail(prog: str, message: str) -> None:
    message = " ".join(message.split()).removeprefix(f"{prog}: ")  # the parser names it too
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(2)
