"""Analyses of a finished run: where the time goes (:mod:`~dspsim.analysis.stalls`), the
per-tile table and the text report (:mod:`~dspsim.analysis.tiles`), the timeline figures
(:mod:`~dspsim.analysis.timeline`) and the Perfetto export.

They read a :class:`~dspsim.run.Result` only (trace, port logs, passes, counters, model), so they
work alike on a run just simulated and one loaded by :func:`dspsim.results.load_run`; nothing
here imports the simulator or the command line, spells an engine's name or knows an op.
"""
