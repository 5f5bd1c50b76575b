"""What ``dspsim calibrate`` (and ``--explore``) does, from the texts of its options (the
argparse part is in :mod:`dspsim.cli.calibrate`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from dspsim.config import HardwareModel
from dspsim.paths import writable_file
from dspsim.platform import check_fidelity
from dspsim.study.calibrate.fitting import DEFAULT_TOLERANCE_PCT, calibrate, check_tolerance
from dspsim.study.calibrate.measure import Measurement, parse_measurement, read_measurements_csv
from dspsim.study.calibrate.modelfile import write_model_file
from dspsim.study.calibrate.params import FreeParam, parse_free
from dspsim.study.calibrate.problem import Progress
from dspsim.study.calibrate.readings import Exploration, explore
from dspsim.study.calibrate.report import Calibration


def _parse(model: HardwareModel, measured: Iterable[str], measured_csv: Iterable[str | Path],
           free: Iterable[str]) -> tuple[list[Measurement], list[FreeParam]]:
    """The ``--measured`` specs and ``--measured-csv`` files' measurements, the ``--free``
    keys."""
    measurements = [parse_measurement(t) for t in measured]
    for path in measured_csv:
        measurements.extend(read_measurements_csv(path))
    return measurements, [parse_free(t, model) for t in free]


def run_calibration(
    model: HardwareModel,
    measured: Iterable[str] = (),
    measured_csv: Iterable[str | Path] = (),
    free: Iterable[str] = (),
    fidelity: str = "burst",
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    out: str | Path | None = None,
    progress: Progress = None,
    on_simulation: Callable[[], None] | None = None,
) -> Calibration:
    """Parse the options, calibrate, and with ``out`` write the fitted model file (its path
    checked before the fit)."""
    measurements, params = _parse(model, measured, measured_csv, free)
    if out:  # before the fit, which may take minutes
        writable_file(out, "--out", (".toml",))
    cal = calibrate(model, measurements, params, fidelity=fidelity, tolerance_pct=tolerance_pct,
                    progress=progress, on_simulation=on_simulation)
    if out:
        cal.out_path = str(write_model_file(cal, out))
    return cal


def run_exploration(
    model: HardwareModel,
    measured: Iterable[str] = (),
    measured_csv: Iterable[str | Path] = (),
    free: Iterable[str] = (),
    tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
    final_fidelity: str = "burst",
    jobs: int | None = None,
    progress: Progress = None,
) -> Exploration:
    """``--explore``: parse the options (no measurement: the documents' figures), then
    :func:`~dspsim.study.calibrate.readings.explore`."""
    check_tolerance(tolerance_pct)
    check_fidelity(final_fidelity)
    measurements, params = _parse(model, measured, measured_csv, free)
    return explore(model, measurements or None, params, tolerance_pct, jobs=jobs,
                   final_fidelity=final_fidelity, progress=progress)
