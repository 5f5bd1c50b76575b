"""The document's cycle figures are calibration targets, never inputs to the simulator."""

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dspsim"
FIGURES = re.compile(r"5[_,]?154[_,]?293|7[_,]?648[_,]?254")
# where a figure may stand: as a calibration target, a measurement, or in documentation
ALLOWED = re.compile(r"SEED_MEASUREMENTS_CYCLES|target|measured|doc|seed|calib", re.IGNORECASE)


def test_document_figures_appear_only_as_calibration_targets():
    hits = []
    for path in PACKAGE.rglob("*.py"):
        # the calibration and an op's document (what it measured): the figures are targets there
        if "calibrate" in path.relative_to(PACKAGE).parts or path.name == "document.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if FIGURES.search(line) and not ALLOWED.search(line):
                hits.append(f"{path.name}:{lineno}: {line.strip()}")
    assert not hits, hits
