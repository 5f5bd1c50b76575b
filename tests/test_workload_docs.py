"""What ``docs/workloads.md`` shows ``dspsim workload`` printing is what it prints: its example
file, run as the page says, gives the page's report line for line (but the wall time, which the
page gives as an example)."""

from __future__ import annotations

import re
from pathlib import Path

from dspsim.cli import main

PAGE = Path(__file__).resolve().parents[1] / "docs" / "workloads.md"
WALL = re.compile(r" in [0-9.]+ s wall, ")


def _indented_block(text: str, first: str) -> list[str]:
    """The 4-space-indented lines from the one starting with ``first`` to the block's end."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("    " + first))
    block = []
    for line in lines[start:]:
        if not line.startswith("    ") and line.strip():
            break
        block.append(line[4:])
    while block and not block[-1].strip():
        block.pop()
    return block


def test_the_pages_example_report_is_what_the_command_prints(tmp_path, monkeypatch, capsys):
    text = PAGE.read_text(encoding="utf-8")
    (tmp_path / "cams.toml").write_text("\n".join(_indented_block(text, "seed = 1")) + "\n")
    shown = _indented_block(text, "workload cams.toml on j6")
    monkeypatch.chdir(tmp_path)
    assert main(["workload", "cams.toml", "--set", "core.count=2"]) == 0
    printed = capsys.readouterr().out.rstrip("\n").splitlines()
    assert [WALL.sub(" in _ s wall, ", line) for line in printed] == [
        WALL.sub(" in _ s wall, ", line) for line in shown]


def test_the_stream_tables_deadline_column_names_its_unit(tmp_path, monkeypatch, capsys):
    """Before: a column "deadline" of microseconds beside op_us, p50_us, ... max_us."""
    text = PAGE.read_text(encoding="utf-8")
    (tmp_path / "cams.toml").write_text("\n".join(_indented_block(text, "seed = 1")) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["workload", "cams.toml"]) == 0
    header = next(ln for ln in capsys.readouterr().out.splitlines() if "op/variant" in ln)
    assert header.split()[-3:] == ["deadline_us", "missed", "tasks/s"]


def test_the_stream_table_stays_aligned_with_long_names(tmp_path, monkeypatch, capsys):
    """Before: the name and op/variant columns were 14 and 19 characters wide whatever they
    held; a longer stream name or an op file's op ("softmax_file/pingpong") pushed the rest of
    its row out from under the header."""
    op_file = Path(__file__).resolve().parents[1] / "examples" / "ops" / "softmax.toml"
    (tmp_path / "w.toml").write_text(
        '[[stream]]\nname = "a_longer_stream_name"\nop = "softmax"\nn = 1000\n'
        'period_us = 1000\ncount = 2\n'
        f'[[stream]]\nname = "f"\nop_file = "{op_file.as_posix()}"\nop = "softmax_file"\n'
        'n = 1000\nperiod_us = 1000\ncount = 2\n')
    monkeypatch.chdir(tmp_path)
    assert main(["workload", "w.toml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, ln in enumerate(lines) if "op/variant" in ln)
    header, rows = lines[at], lines[at + 1:at + 3]
    for title in ("prio", "tasks", "op_us", "tasks/s"):
        end = header.index(title) + len(title)  # right-aligned: each row's field ends there
        for row in rows:
            assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (header, row)
    assert rows[0].split()[:2] == ["a_longer_stream_name", "softmax/pingpong"]
    assert rows[1].split()[:2] == ["f", "softmax_file/pingpong"]
