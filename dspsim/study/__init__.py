"""Studies built on the simulator: many runs of a model and what is read from them (parameter
sweeps, their tables and figures, the experiment scripts' helpers)."""
