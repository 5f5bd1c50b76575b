"""A run of many rows prints one line per pass name, its spans and cycles in all: the sums of
every pass the run logged."""

from dspsim.probes import pass_totals
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
