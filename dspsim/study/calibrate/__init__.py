"""Fit free model keys to measured cycle counts, and say how well the measurements pin them.

Modules, each importing only those before it: ``measure`` (the measurements, ``--measured`` /
``--measured-csv``, the documents' figures, the ``--free`` keys), ``problem`` (the
least-squares fit), ``identify`` (each key's interval and the measurement that would separate
equally good fits), ``report`` (:class:`Calibration`, text and JSON), ``fitting``
(:func:`calibrate`, ``dspsim calibrate`` from its options, ``--out``), ``explore`` and
``readings`` (``--explore``: every reading, grouped by what binds). The argparse part is
:mod:`dspsim.cli.calibrate`. The J6 model's two DDR values come from ``python -m
dspsim.study.calibrate`` (the documents' figures, ``ddr.latency_cycles`` and
``ddr.bytes_per_cycle`` free)."""

from dspsim.study.calibrate.explore import classify
from dspsim.study.calibrate.fitting import (
    DEFAULT_TOLERANCE_PCT,
    calibrate,
    fit,
    fit_seed,
    run_calibration,
    write_model_file,
)
from dspsim.study.calibrate.identify import candidate_measurements
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
from dspsim.study.calibrate.readings import explore, run_exploration
from dspsim.study.calibrate.report import Calibration, describe_interval, fits_table, reading, unit

__all__ = [
    "DEFAULT_TOLERANCE_PCT", "MAX_N", "SEED_FREE", "SEED_MEASUREMENTS_CYCLES", "Calibration",
    "Measurement", "calibrate", "candidate_measurements", "classify", "describe_interval",
    "explore", "fit", "fit_seed", "fits_table", "parse_free", "parse_measurement",
    "read_measurements_csv", "reading", "run_calibration", "run_exploration",
    "seed_measurements", "unit", "write_model_file",
]
