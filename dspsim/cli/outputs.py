"""What ``dspsim run`` writes besides its summary (saved run, tiles CSV, Perfetto trace,
timeline): the options checked before simulating, then the files, each written atomically. The
analyses behind a file are imported only when that file is asked for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspsim.errors import DspsimInputError
from dspsim.paths import check_distinct

RUN_FILES = ("--timeline", "--trace", "--tiles", "--save", "--output")  # each a file path


@dataclass(frozen=True)
class RunOutputs:
    """What ``dspsim run`` was asked to write besides its summary, checked before simulating."""

    timeline: Path | None = None
    window: tuple[float, float] | None = None
    trace: Path | None = None
    trace_limit: int = 0
    tiles: Path | None = None
    save: Path | None = None
    json: bool = False
    row_limit: int | None = None  # --trace-limit given: the run keeps at most this many rows

    @property
    def needs_trace(self) -> bool:
        return self.json or any((self.timeline, self.trace, self.tiles, self.save))

    @property
    def needs_port_log(self) -> bool:
        return any((self.timeline, self.trace, self.save))

    def write(self, result: Any) -> list[str]:
        """Write every requested file; return one line per file written."""
        if self.timeline:
            from dspsim.analysis.timeline import check_window

            check_window(self.window, result.cycles)  # before writing anything
        done = []
        if self.save:
            from dspsim.results import save_run

            save_run(result, self.save)
            done.append(f"saved run to {self.save}")
        if self.tiles:
            from dspsim.analysis.tiles import write_tiles_csv

            write_tiles_csv(result, self.tiles)
            done.append(f"wrote tile table to {self.tiles}")
        if self.trace:
            from dspsim.analysis.perfetto import write_trace

            write_trace(result, self.trace, self.trace_limit)
            done.append(f"wrote Perfetto trace to {self.trace} (open in ui.perfetto.dev)")
        if self.timeline:
            from dspsim.analysis.timeline import plot_timeline

            plot_timeline(result, self.timeline, self.window)
            done.append(f"wrote timeline to {self.timeline}")
        return done


def run_outputs(args: Any) -> RunOutputs:
    """Check the output options of ``dspsim run`` (paths, extensions, window syntax, that no two
    outputs are one file)."""
    timeline, window, trace, tiles, save, limit = (getattr(args, k, None) for k in (
        "timeline", "window", "trace", "tiles", "save", "trace_limit"))
    if window is not None and timeline is None:
        raise DspsimInputError(
            "--window zooms the timeline: give --timeline FILE.png|.svg|.pdf too")
    if limit is not None and trace is None and save is None:
        raise DspsimInputError(
            "--trace-limit limits the trace: give --trace FILE.json or --save FILE.json too")
    if limit is not None and (tiles or timeline):
        given = "--tiles" if tiles else "--timeline"
        raise DspsimInputError(
            f"--trace-limit keeps only the run's first trace rows; {given} needs all of them: "
            f"drop --trace-limit or write {given} in another run")
    check_distinct([(opt, getattr(args, opt[2:], None)) for opt in RUN_FILES])
    if timeline:
        from dspsim.analysis.timeline import check_figure_path, parse_window
    if trace:
        from dspsim.analysis.perfetto import DEFAULT_EVENT_LIMIT, check_limit, check_trace_path
    if tiles:
        from dspsim.analysis.tiles import check_tiles_path
    if save:
        from dspsim.results import check_save_path
    return RunOutputs(
        timeline=check_figure_path(timeline) if timeline else None,
        window=parse_window(window) if window is not None else None,
        trace=check_trace_path(trace) if trace else None,
        trace_limit=(check_limit(limit if limit is not None else DEFAULT_EVENT_LIMIT) if trace
                     else 0),
        tiles=check_tiles_path(tiles) if tiles else None,
        save=check_save_path(save) if save else None,
        json=bool(getattr(args, "json", False)),
        row_limit=limit,
    )
