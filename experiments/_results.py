"""What the scripts in ``experiments/`` share about ``results/``: its place, and that the tables
committed there hold no host timings (``wall_s`` differs on every run and machine, so a rerun
that changes nothing else would still rewrite the file)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from dspsim.paths import atomic_write_text

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


def finish_table(csv_path: Path) -> Path:
    """A table written under ``results/`` loses its host timings; elsewhere it stays whole."""
    return drop_host_columns(csv_path) if is_results_dir(Path(csv_path).parent) else csv_path
