"""Fit free model keys to measured cycle counts, and say how well the measurements pin them.

Measurements (:mod:`~dspsim.study.calibrate.measure`)
    A measurement is an op and one of its variants, optionally an input shape and any model
    keys it was taken with, and the cycle count measured:
    ``[OP:]VARIANT[,n=N][,shape=RxC][,KEY=VALUE ...]=CYCLES`` on the command line
    (``--measured``), or a CSV row (``--measured-csv``). The documents' figures (every op's
    ``document``) are :func:`seed_measurements`.

Free keys (:mod:`~dspsim.study.calibrate.params`)
    ``--free KEY[=LO:HI]`` frees a numeric model key within ``[LO, HI]`` (default: a factor of
    100 either side of its current value, within the key's allowed range).

Fit (:mod:`~dspsim.study.calibrate.problem`, :mod:`~dspsim.study.calibrate.fitting`)
    Least squares on the relative error of every measurement, integer keys on a grid, started
    from the model's values and from the minima of the closed-form estimate.

Identifiability (:mod:`~dspsim.study.calibrate.identify`)
    For every free key, the interval over which some choice of the other free keys keeps
    **every** measurement within the tolerance (1 %); when the measurements do not determine the
    keys, the candidate measurement on which the equally good fits differ most (each measured
    op proposes its candidates: ``Op.calibration_candidates``).

Result and output (:mod:`~dspsim.study.calibrate.report`,
:mod:`~dspsim.study.calibrate.modelfile`)
    :class:`Calibration` renders as text or JSON; ``--out`` writes a complete model file of the
    calibrated model (no ``base``), each fitted value with a comment saying what it was fitted
    to and when, checked to load before it replaces anything.

Readings (:mod:`~dspsim.study.calibrate.explore`, :mod:`~dspsim.study.calibrate.classify`,
:mod:`~dspsim.study.calibrate.readings`)
    ``--explore`` frees the structural keys as well (outstanding limits, descriptor setup, the
    measured op's tile size, the port's bandwidth over its physical range), keeps every fit
    within the tolerance on a coarse grid, groups the fits into families by what binds each
    measurement (port bandwidth, outstanding requests, descriptor overhead, compute) and
    proposes the measurement that tells the families apart: :func:`explore`.

:func:`run_calibration` and :func:`run_exploration` (:mod:`~dspsim.study.calibrate.command`)
are what ``dspsim calibrate`` does with its options; the argparse part is
:mod:`dspsim.cli.calibrate`.

The J6 model's two DDR values come from ``python -m dspsim.study.calibrate`` (the documents'
figures, ``ddr.latency_cycles`` and ``ddr.bytes_per_cycle`` free).

Layers (each module imports only those before it): measure, params, problem, identify, report,
fitting, modelfile, classify, explore, readings, command.
"""

from dspsim.study.calibrate.classify import Binding, classify
from dspsim.study.calibrate.command import run_calibration, run_exploration
from dspsim.study.calibrate.fitting import DEFAULT_TOLERANCE_PCT, Fit, calibrate, fit, fit_seed
from dspsim.study.calibrate.identify import Interval, Proposal, candidate_measurements
from dspsim.study.calibrate.measure import (
    DEFAULT_N,
    DEFAULT_OP,
    MAX_N,
    SEED_MEASUREMENTS_CYCLES,
    Measurement,
    ddr_bytes,
    max_first_dim,
    parse_measurement,
    read_measurements_csv,
    seed_measurements,
    simulated_cycles,
)
from dspsim.study.calibrate.modelfile import write_model_file
from dspsim.study.calibrate.params import SEED_FREE, FreeParam, default_range, parse_free
from dspsim.study.calibrate.problem import FitPoint
from dspsim.study.calibrate.readings import Exploration, Family, explore
from dspsim.study.calibrate.report import (
    Calibration,
    describe_interval,
    fits_table,
    reading,
    unit,
)

__all__ = [
    "DEFAULT_N",
    "DEFAULT_OP",
    "DEFAULT_TOLERANCE_PCT",
    "MAX_N",
    "SEED_FREE",
    "SEED_MEASUREMENTS_CYCLES",
    "Binding",
    "Calibration",
    "Exploration",
    "Family",
    "Fit",
    "FitPoint",
    "FreeParam",
    "Interval",
    "Measurement",
    "Proposal",
    "calibrate",
    "candidate_measurements",
    "classify",
    "ddr_bytes",
    "default_range",
    "describe_interval",
    "explore",
    "fit",
    "fit_seed",
    "fits_table",
    "max_first_dim",
    "parse_free",
    "parse_measurement",
    "read_measurements_csv",
    "reading",
    "run_calibration",
    "run_exploration",
    "seed_measurements",
    "simulated_cycles",
    "unit",
    "write_model_file",
]
