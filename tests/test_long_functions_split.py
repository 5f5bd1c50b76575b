"""The analysis, results, benchmark, kernel, study and op-bound modules hold no function over
the package's line budget (``python -m dspsim.budgets``): each is split along its own seams (a
phase, a table, a panel, a check). The ops' transcriptions of the C frames, which read beside
the C line by line, are left whole."""

from dspsim.budgets import LONG_FUNCTION_LINES, long_functions

# module prefixes (dotted) where every function keeps within the budget
SHORT = (
    "dspsim.run",
    "dspsim.analysis.",
    "dspsim.results",
    "dspsim.results_check",
    "dspsim.bench",
    "dspsim.bench_report",
    "dspsim.arrays",
    "dspsim.kernels.",
    "dspsim.study.calibrate.",
    "dspsim.study.workload.",
    "dspsim.study.optimize",
    "dspsim.study.sweep_plot",
    "dspsim.ops.pingpong_bounds",
    "dspsim.ops.softmax.bounds",
    "dspsim.ops.copy.bounds",
    "dspsim.ops.copy.traffic",
    "dspsim.ops.fc",
    "dspsim.ops.rowwise",
    "dspsim.ops.base",
)


def _in_scope(module: str) -> bool:
    return any(module == p or (p.endswith(".") and module.startswith(p)) for p in SHORT)


def test_no_function_over_the_budget_in_these_modules():
    long = [f"{m}.{f}: {n} lines" for m, f, n in long_functions() if _in_scope(m)]
    assert long == [], f"functions over {LONG_FUNCTION_LINES} lines: {long}"


def test_the_scope_names_modules_that_exist():
    from dspsim.budgets import module_files

    modules = set(module_files())
    for prefix in SHORT:
        assert any(m == prefix or (prefix.endswith(".") and m.startswith(prefix))
                   for m in modules), prefix
