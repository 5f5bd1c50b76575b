"""Analyses of a finished run: where the time goes, the per-tile table, the text report, the
timeline figures and the Perfetto export.

Analyses read a :class:`~dspsim.run.Result` only (its trace, DDR port log, passes, counters and
model), never the simulator's internals, so that they work the same on a run just simulated and
on one loaded back by :func:`dspsim.results.load_run`. Nothing under ``dspsim.analysis`` imports
the simulator's engines or the command line, names an engine (names come from the run:
``Result.engines``, ``Result.core``) or knows an op (titles use ``Result.op``, ``variant``,
``shape``; whether a run has tiles is read off its trace).

- :mod:`~dspsim.analysis.engines`: the run's core, channels and DDR port, and their labels;
- :mod:`~dspsim.analysis.stalls`: the core's cycles per pass, engine utilisation, stall summary;
- :mod:`~dspsim.analysis.tiles`: one row per tile per pass, TCM buffer segments, tiles CSV;
- :mod:`~dspsim.analysis.series`: numeric helpers over intervals and the DDR port log;
- :mod:`~dspsim.analysis.report`: the readable text report;
- :mod:`~dspsim.analysis.timeline`, :mod:`~dspsim.analysis.compare`: Gantt figures;
- :mod:`~dspsim.analysis.perfetto`: Chrome Trace Event export.
"""
