"""What ``dspsim calibrate`` (and ``--explore``) does, from the texts of its options (the
argparse part is in :mod:`dspsim.cli.calibrate`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from dspsim.config import HardwareModel
from dspsim.errors import DspsimInputError
from dspsim.paths import writable_file
from dspsim.platform import FIDELITIES
from dspsim.study.calibrate.fitting import DEFAULT_TOLERANCE_PCT, calibrate
from dspsim.study.calibrate.measure import parse_measurement, read_measurements_csv
from dspsim.study.calibrate.modelfile import write_model_file
from dspsim.study.calibrate.params import parse_free
from dspsim.study.calibrate.problem import Progress
from dspsim.study.calibrate.readings import Exploration, explore
from dspsim.study.calibrate.report import Calibration


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
    """Parse the ``--measured`` specs, the ``--measured-csv`` files and the ``--free`` keys,
    calibrate, and with ``out`` write the fitted model file (its path checked before the fit)."""
    measurements = [parse_measurement(t) for t in measured]
    for path in measured_csv:
        measurements.extend(read_measurements_csv(path))
    params = [parse_free(t, model) for t in free]
    if out:  # before the fit, which may take minutes
        writable_file(out, "--out", (".toml",))
    cal = calibrate(
        model,
        measurements,
        params,
        fidelity=fidelity,
        tolerance_pct=tolerance_pct,
        progress=progress,
        on_simulation=on_simulation,
    )
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
    """``--explore``: parse the measurements (none: the documents' figures) and the extra
    ``--free`` keys, then :func:`~dspsim.study.calibrate.readings.explore`."""
    if not (isinstance(tolerance_pct, (int, float)) and 0 < tolerance_pct < 100):
        raise DspsimInputError(f"tolerance {tolerance_pct!r} %: must be a number between 0 and 100")
    if final_fidelity not in FIDELITIES:
        raise DspsimInputError(f"fidelity {final_fidelity!r}: allowed {', '.join(FIDELITIES)}")
    measurements = [parse_measurement(t) for t in measured]
    for path in measured_csv:
        measurements.extend(read_measurements_csv(path))
    params = [parse_free(t, model) for t in free]
    return explore(model, measurements or None, params, tolerance_pct, jobs=jobs,
                   final_fidelity=final_fidelity, progress=progress)
