"""A run asked for in parts (``jobs``) that is cut into fewer says so and why: a data cache keeps
its lines from task to task, so the platform is never clean and the run is one part; a part
takes at least ``MIN_PART_TASKS`` tasks. The summary (``--json``) carries it, and the command
prints it as one line on stderr."""

from __future__ import annotations

import json

import pytest

from dspsim.cli import main
from dspsim.config import load_model
from dspsim.study.workload import parts, run_workload, summarise
from tests.workload_helpers import stream_spec, workload

N = 3_000
CACHE = {"ddr.cached": True, "dcache.capacity_bytes": 16384}


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(parts, "MIN_PART_TASKS", 4)


def _wl(count: int):
    return workload(stream_spec("cam", (N, 400.0, count), variant="direct"))


def test_a_data_cache_runs_in_one_part_and_says_why(small_parts):
    run = run_workload(_wl(10), load_model().with_overrides(CACHE), jobs=2)
    assert (run.jobs, run.parts, run.parts_note) == (2, 1, parts.CACHE_PARTS_NOTE)
    assert "data cache" in run.parts_note and "never idle" in run.parts_note
    assert summarise(run)["parts"] == {"jobs": 2, "parts": 1, "note": parts.CACHE_PARTS_NOTE}


def test_one_job_or_as_many_parts_as_asked_is_no_note(small_parts):
    model = load_model()
    assert summarise(run_workload(_wl(10), model))["parts"] == {"jobs": 1, "parts": 1,
                                                                 "note": None}
    run = run_workload(_wl(10), model, jobs=2)
    assert (run.parts, run.parts_note) == (2, None)


def test_too_few_tasks_for_the_parts_asked_is_said():
    run = run_workload(_wl(10), load_model(), jobs=2)
    assert run.parts == 1
    assert run.parts_note == (f"run in one part: 10 tasks, and a part takes at least "
                              f"{parts.MIN_PART_TASKS} (a worker's start costs more than so few "
                              "save)")
    assert parts.plan_parts(5 * parts.MIN_PART_TASKS, 8, False) == (
        5, f"run in 5 parts: {5 * parts.MIN_PART_TASKS:,} tasks, and a part takes at least "
        f"{parts.MIN_PART_TASKS} (a worker's start costs more than so few save)")


@pytest.mark.parametrize("as_json", [False, True])
def test_the_command_warns_on_stderr_in_one_line(tmp_path, capsys, small_parts, as_json):
    f = tmp_path / "w.toml"
    f.write_text('[[stream]]\nname = "cam"\nop = "softmax"\nvariant = "direct"\nn = 3000\n'
                 'period_us = 400\ncount = 10\n')
    argv = ["workload", str(f), "--jobs", "2", "--set", "ddr.cached=true",
            "--set", "dcache.capacity_bytes=16384", *(["--json"] if as_json else [])]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == f"dspsim: warning: --jobs 2: {parts.CACHE_PARTS_NOTE}\n"
    if as_json:
        assert json.loads(out)["parts"]["note"] == parts.CACHE_PARTS_NOTE
