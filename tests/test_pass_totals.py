"""A run of many rows prints one line per pass name, its spans and cycles in all: the sums of
every pass the run logged."""

from dspsim.probes import PassLog, PassRun, pass_totals
from dspsim.run import simulate
from tests.cli_helpers import run_cli


def test_many_rows_print_one_line_per_pass_name(j6, capsys):
    r = simulate(j6, "softmax", "direct", shape=(40, 8), data=False)
    totals = pass_totals(r.passes)
    assert list(totals) == ["max", "exp", "sum", "mul"]
    for name, (count, cycles) in totals.items():
        spans = [p for p in r.passes if p["name"] == name]
        assert count == len(spans) == 40
        # the totals are of the unrounded spans; each span printed is rounded to a cycle
        assert abs(cycles - sum(p["end_cycle"] - p["start_cycle"] for p in spans)) <= count
    listed = pass_totals(list(r.passes))
    assert list(listed) == list(totals) and all(
        listed[k][0] == totals[k][0] and abs(listed[k][1] - totals[k][1]) <= totals[k][0]
        for k in totals)
    code, out, _ = run_cli(capsys, "run", "--op", "softmax", "--variant", "direct",
                           "--shape", "40,8", "--no-data")
    lines = [line for line in out.splitlines() if line.strip().startswith("pass ")]
    assert code == 0 and len(lines) == 4
    assert lines[0].split()[:4] == ["pass", "max", "40", "spans,"]
    code, out, _ = run_cli(capsys, "run", "--op", "softmax", "--variant", "direct",
                           "--shape", "2,8", "--no-data")
    assert sum(line.strip().startswith("pass ") for line in out.splitlines()) == 8


def test_a_pass_log_slices_as_the_list_of_its_entries():
    """Passes begun one by one around a booked run of rows: every slice (negative bounds and
    steps too) holds what slicing the list of the entries does."""
    log = PassLog()
    log.append({"name": "a", "start_tick": 0, "end_tick": 1})
    log.append_run(PassRun([{"name": "b", "start_tick": 1, "end_tick": 2},
                            {"name": "c", "start_tick": 2, "end_tick": 3}], 5, 2))
    log.append({"name": "d", "start_tick": 20, "end_tick": 21})
    entries = list(log)
    assert len(entries) == 12 and entries[-2] == {"name": "c", "start_tick": 10,
                                                  "end_tick": 11}
    bounds = [None, *range(-14, 15)]
    for start in bounds:
        for stop in bounds:
            for step in (None, 1, 2, 3, -1, -2):
                assert log[start:stop:step] == entries[start:stop:step], (start, stop, step)
