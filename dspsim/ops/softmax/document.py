"""What the seed document (Horizon Robotics J6 OpenExplorer, DSP development flow) measured for
its softmax custom operator: the figures ``dspsim reproduce`` compares with and the J6 model is
calibrated to. Measured on the board, not computed here."""

from __future__ import annotations

from types import MappingProxyType

DOCUMENT = MappingProxyType({
    "title": "softmax of 100,000 float32",
    # the platform the figures were measured on: reproduce compares them only on a model of it
    # (its model file, or one with base = "j6")
    "platform": "j6",
    "shape": (100_000,),
    "cycles": MappingProxyType({"pingpong": 5_154_293, "direct": 7_648_254}),
    # the host's check of the two outputs: relative difference per element
    "check": ("direct", "pingpong", 1e-6),
})
