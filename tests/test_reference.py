"""The model-file reference is written from the schema and kept in docs/reference.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dspsim.config import model_key
from dspsim.reference import BEGIN, END, generated_block, model_file_reference
from dspsim.schema import OP_SCHEMAS
from dspsim.tables import HARDWARE, MEMORY_FIELDS

DOC = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def test_the_docs_page_holds_the_generated_reference():
    text = DOC.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    kept = text[text.index(BEGIN):text.index(END) + len(END)]
    assert kept == generated_block(), (
        "docs/reference.md is out of date: paste `dspsim keys --markdown` between its markers")


def test_every_table_and_key_is_in_the_reference():
    ref = model_file_reference()
    for section, cls in HARDWARE.items():
        assert f"#### `[{section}]`" in ref
        for f in cls.__dataclass_fields__:
            assert f"| `{section}.{f}` |" in ref
    for f in MEMORY_FIELDS:
        assert f"| `<memory>.{f}` |" in ref
    for section, schema in OP_SCHEMAS.items():
        assert f"#### `[{section}]`" in ref
        for k in schema.keys:
            assert f"| `{k.name}` |" in ref


def test_a_key_without_a_default_is_marked_required():
    ref = model_file_reference()
    assert model_key("core.count").describe()["default"] is None
    assert "| `core.count` | cores | an integer >= 1, <= 4 | *required* |" in ref
    assert "| `host.memory` | - | a string | `\"ddr\"` |" in ref


def test_ranges_are_written_exactly():
    # an integer key's bound as the integer it is, not rounded to six digits
    assert model_key("tcm.bank_bytes").allowed() == "an integer >= 4, <= 1073741824"
    assert model_key("ddr.bytes_per_cycle").allowed() == "a number >= 1e-06, <= 10000"


def test_the_command_prints_it():
    out = subprocess.run([sys.executable, "-m", "dspsim", "keys", "--markdown"],
                         capture_output=True, text=True, check=True).stdout
    assert out == model_file_reference()
