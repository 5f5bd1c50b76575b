"""Fit free model keys to measured cycle counts, and say how well the measurements pin them.

Modules, each importing only those before it: ``measure`` (the measurements, ``--measured`` /
``--measured-csv``, the documents' figures, the ``--free`` keys), ``problem`` (the
least-squares fit, each key's interval and the measurement that would separate equally good
fits), ``fitting`` (:func:`calibrate`, :class:`Calibration` as text and JSON, ``--out``),
``explore`` and ``readings`` (``--explore``: every reading, grouped by what binds). The
argparse part is :mod:`dspsim.cli.calibrate`. The J6 model's two DDR values come from ``python
-m dspsim.study.calibrate`` (the documents' figures, ``ddr.latency_cycles`` and
``ddr.bytes_per_cycle`` free)."""

from dspsim.study.calibrate.explore import classify
from dspsim.study.calibrate.fitting import (
    DEFAULT_TOLERANCE_PCT,
    Calibration,
    calibrate,
    describe_interval,
    fit,
    fit_seed,
    fits_table,
    reading,
    run_calibration,
    unit,
    write_model_file,
)
from dspsim.study.calibrate.measure import (
    MAX_N,
    SEED_FREE,
    SEED_MEASUREMENTS_CYCLES,
    Measurement,
    parse_free,
    parse_measurement,
    read_measurements_csv,
    seed_measurements,
)
from dspsim.study.calibrate.problem import candidate_measurements
from dspsim.study.calibrate.readings import explore, run_exploration

__all__ = [
    "DEFAULT_TOLERANCE_PCT", "MAX_N", "SEED_FREE", "SEED_MEASUREMENTS_CYCLES", "Calibration",
    "Measurement", "calibrate", "candidate_measurements", "classify", "describe_interval",
    "explore", "fit", "fit_seed", "fits_table", "parse_free", "parse_measurement",
    "read_measurements_csv", "reading", "run_calibration", "run_exploration",
    "seed_measurements", "unit", "write_model_file",
]
