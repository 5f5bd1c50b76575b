"""Search an op's schedules and their parameters for the fastest: :func:`optimize`.

The candidates are the op's variants times the values the op says are worth searching for each
(:meth:`dspsim.ops.base.Op.search_space`); ``params`` adds axes (a hardware key goes to every
variant) or replaces them (a key of the op's table, in the variants that search it). Nothing
here knows an op, a variant or a key: the op decides. The steps: (1) enumerate, skipping and
counting what the op refuses; (2) screen every candidate at tile fidelity, data path off, in
``jobs`` processes (:func:`dspsim.study.sweep.executors.evaluate_point`); (3) re-run the best
``top`` at burst fidelity beside the baseline (the default variant at the model's values, also
when ``params`` changes the hardware); (4) run the winner with the data path on for its error.

With several ``models`` a candidate's cycles are its worst case (``cycles_by_model`` gives
each) and its bound, bytes and busy cycles those of that model. Ranking: a result-changing
warning or a hazard ranks after every clean candidate (it can make a run *look* faster than its
work); then fewest cycles, fewest bytes in the memories, enumeration order.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dspsim.config import HardwareModel, check_model_entries, load_model, model_key
from dspsim.errors import DspsimInputError
from dspsim.ops import default_op, get_op, op_names
from dspsim.ops.base import Op
from dspsim.run import simulate
from dspsim.study.optimize_result import (  # noqa: F401 - the names callers import from here
    RERUN_FIDELITY,
    SCREEN_FIDELITY,
    Candidate,
    OptimizeResult,
)
from dspsim.study.sweep.executors import evaluate_point
from dspsim.study.sweep.journal import check_jobs
from dspsim.study.sweep.values import (
    MAX_VALUES_PER_KEY,
    SPECIAL_KEYS,
    check_on_model,
    format_value,
    parse_values,
    shape_text,
    spec_values,
    value_count,
)
from dspsim.text import one_line
from dspsim.workers import imap_unordered, pool_failure

DEFAULT_TOP = 5
MAX_CANDIDATES = 100_000  # points x models screened at most
EXAMPLES = 3  # reasons kept for refused and failed candidates


# ------------------------------------------------------------------------------ inputs
def _variants(the_op: Op, variants: str | Sequence[str] | None) -> list[str]:
    if variants is None:
        return list(the_op.variants)
    names = variants.split(",") if isinstance(variants, str) else list(variants)
    names = [str(v).strip() for v in names]
    if not names or any(not v for v in names):
        raise DspsimInputError(
            f"variants {variants!r}: expected V1,V2,...; allowed: {', '.join(the_op.variants)}"
        )
    for v in names:
        the_op.check_variant(v)
    if len(set(names)) < len(names):
        raise DspsimInputError(f"variants {variants!r}: a variant is given twice")
    return names


def _axes(the_op: Op, params: Sequence[str] | Mapping[str, Any] | None,
          variants: int = 1) -> dict[str, list]:
    """``--param`` texts (``KEY=V1,V2`` or ``KEY=START:STOP:STEP``) or key -> values, checked:
    keys of the hardware or this op's table; a search too large is refused before any value."""
    if not params:
        return {}
    items = _param_items(params)
    axes: dict[str, list] = {}
    for key, _values in items:
        if key in SPECIAL_KEYS:
            raise DspsimInputError(
                f"--param {key}: not a model key; optimize takes the variants with --variants "
                "and the size with --n / --shape"
            )
        section = model_key(key).section  # unknown key -> one line naming the allowed ones
        if section != the_op.name and section in op_names():
            raise DspsimInputError(
                f"--param {key}: a key of op {section}, not of {the_op.name}; allowed: "
                f"hardware keys and {the_op.name}.* keys"
            )
        if key in axes:
            raise DspsimInputError(f"--param {key} is given twice")
        axes[key] = []
    _check_search_size(the_op, items, variants)
    for key, values in items:
        axes[key] = parse_values(key, values) if isinstance(values, str) else spec_values(
            key, values)
    return axes


def _param_items(params: Sequence[str] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(key, values) of each ``--param`` text (``KEY=...``) or mapping entry, keys stripped."""
    if isinstance(params, Mapping):
        items = [(str(k), v) for k, v in params.items()]
    else:
        items = []
        for item in params:
            key, eq, text = str(item).partition("=")
            if not eq or not key.strip():
                raise DspsimInputError(
                    f"--param {item!r}: expected KEY=V1,V2,... or KEY=START:STOP:STEP, e.g. "
                    "idma.max_outstanding=8,32"
                )
            items.append((key, text))
    return [(key.strip(), values) for key, values in items]


def _check_search_size(the_op: Op, items: list[tuple[str, Any]], variants: int) -> None:
    """Refuse a search of more than :data:`MAX_CANDIDATES` runs, counted before a value is built
    (two axes of 10^6 values took minutes and gigabytes to refuse)."""
    counts = {key: value_count(key, values) if isinstance(values, str) else
              len(values) if isinstance(values, list) else 1 for key, values in items}
    hardware = math.prod(n for k, n in counts.items() if model_key(k).section != the_op.name)
    op_axis = max((n for k, n in counts.items() if model_key(k).section == the_op.name),
                  default=1)
    at_least = hardware * op_axis * max(1, variants)
    if all(n <= MAX_VALUES_PER_KEY for n in counts.values()):
        _check_runs(at_least, "at least ")


def _check_runs(runs: int, at_least: str = "") -> None:
    if runs > MAX_CANDIDATES:
        raise DspsimInputError(
            f"the search has {at_least}{runs:,} runs (candidates x models); at most "
            f"{MAX_CANDIDATES:,}: restrict it with --variants or fewer --param values"
        )


def _load_models(
    model: str | Path | HardwareModel | None,
    models: str | Sequence[str | Path | HardwareModel] | None,
    overrides: Sequence[str] | Mapping[str, Any] | None,
) -> dict[str, HardwareModel]:
    """label -> model: each of ``models``, else ``model`` alone; ``overrides`` apply to all."""
    if models is not None and model is not None:
        raise DspsimInputError("give --model or --models, not both")
    if isinstance(models, str):
        models = [m.strip() for m in models.split(",")]
    given = list(models) if models is not None else [model]
    if not given or any(isinstance(m, str) and not m for m in given):
        raise DspsimInputError(f"--models {models!r}: expected A.toml,B.toml,... (or names)")
    ov: dict[str, Any] | list[str] = (dict(overrides) if isinstance(overrides, Mapping)
                                      else list(overrides or []))
    check_model_entries([m for m in given if isinstance(m, str | Path)])  # j6,./j6.toml ...
    out: dict[str, HardwareModel] = {}
    for m in given:
        if isinstance(m, HardwareModel):
            loaded = m.with_overrides(ov) if ov else m
            label = m.name
        else:
            loaded = load_model(m, ov or None)
            label = loaded.name if m is None else str(m)
        if label in out:
            if not isinstance(m, HardwareModel):
                raise DspsimInputError(f"--models: {label} is given twice")
            label = f"{label}#{len(out)}"
        out[label] = loaded
    return out


# ------------------------------------------------------------------------- the search
def _enumerate(
    the_op: Op, variants: list[str], shape: tuple[int, ...], models: dict[str, HardwareModel],
    axes: dict[str, list],
) -> list[Candidate]:
    """Every (variant, setting) of the search, without duplicates, in order."""
    spaces = {}
    for v in variants:
        space: dict[str, list] = {}
        for m in models.values():  # the union over the models, each key's values ascending
            for key, values in the_op.search_space(m, v, shape).items():
                merged = {format_value(x): x for x in space.get(key, [])}
                merged.update({format_value(x): x for x in values})
                space[key] = _ascending(list(merged.values()))
        spaces[v] = space
    searched = {k for s in spaces.values() for k in s}
    for space in spaces.values():
        for key, values in axes.items():
            # a key of the op's table goes to the variants that search it (all, when none
            # does); hardware keys to every variant
            if (model_key(key).section != the_op.name or key in space
                    or key not in searched):
                space[key] = list(values)
    # counted before anything is built: each axis holds distinct values, so a variant's
    # candidates are exactly the product of its axes' lengths
    runs = sum(math.prod(len(vals) for vals in space.values()) for space in spaces.values())
    _check_runs(runs * len(models))
    out: list[Candidate] = []
    seen: set[tuple] = set()
    for v, space in spaces.items():
        keys = list(space)
        for combo in itertools.product(*(space[k] for k in keys)):
            c = Candidate(v, dict(zip(keys, combo)), index=len(out))
            if c.identity() not in seen:
                seen.add(c.identity())
                out.append(c)
    return out


def _ascending(values: list[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return values


def _point(the_op: Op, variant: str, shape: tuple[int, ...], params: Mapping[str, Any]) -> dict:
    """A sweep point (what :func:`evaluate_point` runs)."""
    size = {"n": shape[0]} if len(shape) == 1 else {"shape": shape_text(shape)}
    return {"op": the_op.name, "variant": variant, **size, **params}


def evaluate_all(tasks: list[tuple[HardwareModel, dict, str]], jobs: int, show: bool,
                 desc: str) -> list[dict[str, Any]]:
    """``evaluate_point(*task)`` for every task in ``jobs`` processes; results in order."""
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    bar = None

    def started() -> None:  # the workers are forked before the bar starts its thread
        nonlocal bar
        if show and tasks:
            from tqdm import tqdm

            bar = tqdm(total=len(tasks), unit="run", desc=desc, file=sys.stderr,
                       dynamic_ncols=True, leave=False)

    try:
        for i, row in imap_unordered(evaluate_point, range(len(tasks)), jobs, work=len(tasks),
                                     args=lambda i: tasks[i], started=started,
                                     failed=pool_failure(f"optimize ({desc})")):
            results[i] = row
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return results  # type: ignore[return-value]


def _run(
    the_op: Op, cands: list[Candidate], shape: tuple[int, ...],
    models: dict[str, HardwareModel], fidelity: str, jobs: int, show: bool, desc: str,
) -> None:
    """Run each candidate on every model at ``fidelity``; fill in its worst case (or error)."""
    labels = list(models)
    tasks = [(models[m], _point(the_op, c.variant, shape, c.params), fidelity)
             for c in cands for m in labels]
    rows = evaluate_all(tasks, jobs, show, desc)
    for i, c in enumerate(cands):
        mine = dict(zip(labels, rows[i * len(labels):(i + 1) * len(labels)]))
        c.fidelity = fidelity
        bad = next(((m, r) for m, r in mine.items() if r.get("error")), None)
        if bad is not None:
            c.error = f"{bad[1]['error']} (model {bad[0]})" if len(labels) > 1 else bad[1]["error"]
            c.cycles = None
            continue
        c.error = ""
        c.cycles_by_model = {m: int(r["cycles"]) for m, r in mine.items()}
        c.worst_model = max(labels, key=lambda m: c.cycles_by_model[m])  # first on a tie
        worst = mine[c.worst_model]
        c.cycles = c.cycles_by_model[c.worst_model]
        memories = models[c.worst_model].memories
        c.read_bytes = {m: int(worst[f"{m}_read_bytes"]) for m in memories}
        c.write_bytes = {m: int(worst[f"{m}_write_bytes"]) for m in memories}
        c.core_busy_cycles = int(worst["core_busy_cycles"])
        # the worst model's warnings first; a warning or hazard on any model marks it
        codes = (str(r.get("warnings") or "").split(";") for r in (worst, *mine.values()))
        c.warnings = [w for w in dict.fromkeys(w for ws in codes for w in ws) if w]
        c.hazards = max(int(r["hazards"]) for r in mine.values())


def _set(model: HardwareModel, c: Candidate) -> HardwareModel:
    """``model`` at the candidate's parameters."""
    return model.with_overrides(dict(c.params)) if c.params else model


def _bound(the_op: Op, model: HardwareModel, c: Candidate, shape: tuple[int, ...]) -> float | None:
    b = the_op.bounds(_set(model, c), c.variant, shape)
    value = None if b is None else b.lower_bound_cycles
    return None if value is None or not math.isfinite(value) else float(value)


def optimize(
    op: str | None = None, *, n: int | None = None, shape: Sequence[int] | None = None,
    variants: str | Sequence[str] | None = None,
    params: Sequence[str] | Mapping[str, Any] | None = None,
    model: str | Path | HardwareModel | None = None,
    models: str | Sequence[str | Path | HardwareModel] | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    top: int = DEFAULT_TOP, jobs: int = 1, check_numerics: bool = True,
    progress: bool | None = None,
) -> OptimizeResult:
    """Find the fastest (variant, parameters) of ``op`` at ``n`` / ``shape`` (module docstring).
    ``params``: ``--param`` texts or key -> values; ``models``: files to rank by the worst case
    over; ``overrides`` apply to every model; ``progress`` (default: stderr is a terminal)."""
    the_op = get_op(op if op is not None else default_op())
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise DspsimInputError(f"top = {top!r}: must be a positive integer")
    check_jobs(jobs)  # 1 to MAX_JOBS, as a sweep's
    shape_t = the_op.shape_of(n=n, shape=tuple(shape) if shape is not None else None)
    names = _variants(the_op, variants)
    if the_op.variants_differ and len(names) > 1:
        raise DspsimInputError(f"optimize {the_op.name}: {the_op.variants_differ}, so the "
                               f"fastest says nothing; allowed: one --variants (compare them "
                               f"with dspsim sweep --op {the_op.name})")
    axes = _axes(the_op, params, len(names))
    loaded = _load_models(model, models, overrides)
    for key in axes:  # a memory's key on a model without that memory: one line, not 0 runs
        for m in loaded.values():
            check_on_model(m, key, f"--param {key}")
    show = sys.stderr.isatty() if progress is None else bool(progress)

    runnable, refused, refusals = _runnable(the_op, names, shape_t, loaded, axes)
    screened, failures = _screen(the_op, runnable, shape_t, loaded, jobs, show)
    finals, baseline, baseline_refused, rerun_errors = _rerun(
        the_op, screened[:top], shape_t, loaded, jobs, show, failures)
    result = OptimizeResult(
        the_op.name, shape_t, {k: m.source for k, m in loaded.items()}, top, baseline, finals,
        screened, refused, refusals, len(failures), failures[:EXAMPLES], baseline_refused,
        rerun_errors=rerun_errors,
    )
    if check_numerics:
        result.numerics = _numerics(the_op, finals[0], loaded, shape_t)
    return result


def _runnable(the_op: Op, names: list[str], shape_t: tuple[int, ...],
              loaded: dict[str, HardwareModel],
              axes: dict[str, list]) -> tuple[list[Candidate], int, list[str]]:
    """Step 1: every candidate the op accepts on every model; how many it refused, and why."""
    runnable: list[Candidate] = []
    refusals: list[str] = []
    refused = 0
    for c in _enumerate(the_op, names, shape_t, loaded, axes):
        try:
            for m in loaded.values():
                the_op.check_run(_set(m, c), c.variant, shape_t)
        except ValueError as e:
            refused += 1
            if len(refusals) < EXAMPLES:
                refusals.append(f"{c.variant} {params_text(c.params)}: {one_line(e)}".strip())
            continue
        runnable.append(c)
    if not runnable:
        why = f" (e.g. {refusals[0]})" if refusals else ""
        raise DspsimInputError(
            f"no candidate left: the op refused all {refused} combinations of the search{why}"
        )
    return runnable, refused, refusals


def _screen(the_op: Op, runnable: list[Candidate], shape_t: tuple[int, ...],
            loaded: dict[str, HardwareModel], jobs: int,
            show: bool) -> tuple[list[Candidate], list[str]]:
    """Step 2: the candidates at tile fidelity, ranked; the failures."""
    _run(the_op, runnable, shape_t, loaded, SCREEN_FIDELITY, jobs, show, "screen")
    failures = [f"{c.variant} {params_text(c.params)}: {c.error}" for c in runnable if c.error]
    screened = _ranked([c for c in runnable if not c.error])
    if not screened:
        raise DspsimInputError(f"no candidate left: every run failed (e.g. {failures[0]})")
    return screened, failures


def _ranked(cands: list[Candidate]) -> list[Candidate]:
    """``cands`` sorted best first, each with its rank."""
    cands = sorted(cands, key=Candidate.sort_key)
    for rank, c in enumerate(cands, 1):
        c.rank = rank
    return cands


def _rerun(the_op: Op, best: list[Candidate], shape_t: tuple[int, ...],
           loaded: dict[str, HardwareModel], jobs: int, show: bool, failures: list[str]
           ) -> tuple[list[Candidate], Candidate | None, str, dict[Any, str]]:
    """Step 3: the best at burst fidelity beside the baseline, ranked, with bounds and
    speed-ups; the baseline (or why none), the re-runs' errors (also added to ``failures``)."""
    finals = [Candidate(c.variant, dict(c.params), index=c.index) for c in best]
    default = the_op.default_variant
    base = Candidate(default, {}, index=-1)
    baseline_refused = ""
    try:
        for m in loaded.values():
            the_op.check_run(m, default, shape_t)
    except ValueError as e:
        baseline_refused = one_line(e)
    batch = finals + ([] if baseline_refused else [base])
    _run(the_op, batch, shape_t, loaded, RERUN_FIDELITY, jobs, show, "re-run")
    rerun_errors = {c.identity(): c.error for c in finals if c.error}
    for c in batch:
        if c.error:  # ran at the screening fidelity, failed at the reference one
            failures.append(f"{c.variant} {params_text(c.params)} at {RERUN_FIDELITY} "
                            f"fidelity: {c.error}")
        else:
            c.lower_bound_cycles = _bound(the_op, loaded[c.worst_model], c, shape_t)
    if base.error:
        baseline_refused = f"its run failed: {base.error}"
    baseline = None if baseline_refused else base
    finals = [c for c in finals if not c.error]
    if not finals:
        raise DspsimInputError(f"no candidate left: every re-run at {RERUN_FIDELITY} fidelity "
                               f"failed (e.g. {failures[-1]})")
    finals = _ranked(finals)
    if baseline is not None:
        for c in finals:
            c.speedup = baseline.cycles / c.cycles
        baseline.speedup = 1.0
    return finals, baseline, baseline_refused, rerun_errors


def _numerics(the_op: Op, best: Candidate, loaded: dict[str, HardwareModel],
              shape_t: tuple[int, ...]) -> dict[str, Any]:
    """Step 4: the winner's numerics, with the data path on."""
    try:
        r = simulate(_set(loaded[best.worst_model], best), the_op.name, best.variant,
                     shape=shape_t, data=True, fidelity=RERUN_FIDELITY)
    except Exception as e:  # noqa: BLE001 - reported with the result, not fatal
        return {"model": best.worst_model, "max_rel_err": None,
                "error": f"{type(e).__name__}: {one_line(e)}"}
    return {"model": best.worst_model, **(r.output or {}),
            "cycles_match": r.cycles == best.cycles}


def params_text(params: Mapping[str, Any], strip: str = "") -> str:
    """``key=value`` pairs, space-separated (``strip``: a prefix to drop from the keys)."""
    return " ".join(f"{k.removeprefix(strip)}={format_value(v)}" for k, v in params.items())
