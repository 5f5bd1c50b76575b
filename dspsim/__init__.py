"""dspsim: a discrete-event timing and functional model of a vision-DSP subsystem."""

__version__ = "0.1.0"
