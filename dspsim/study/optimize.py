"""Search an op's schedules and their parameters for the fastest: :func:`optimize`.

The candidates are the op's variants times the values the op says are worth searching for each
(:meth:`dspsim.ops.base.Op.search_space`); ``params`` adds axes (a hardware key goes to every
variant it acts in) or replaces them (a key of the op's table, in the variants that search it);
a key that acts in no variant searched is refused (``Op.key_variants``). Nothing here knows an
op, a variant or a key: the op decides. The steps: (1) enumerate, skipping and
counting what the op refuses; (2) screen every candidate at tile fidelity, data path off, in
``jobs`` processes (:func:`dspsim.study.sweep.executors.evaluate_point`); (3) re-run the best
``top`` at burst fidelity beside the baseline (the default variant at the model's values, also
when ``params`` changes the hardware); (4) run the winner with the data path on for its error.

With several ``models`` a candidate's cycles are its worst case (``cycles_by_model`` gives
each) and its bound, bytes and busy cycles those of that model. Ranking: a result-changing
warning or a hazard ranks after every clean candidate (it can make a run *look* faster than its
work); then fewest cycles, fewest bytes in the memories, enumeration order. The result
(:class:`OptimizeResult`, a table, JSON or CSV): ``--out`` and ``--json`` keep every
screened candidate, ranked (:meth:`OptimizeResult.ranking`): the re-runs at burst fidelity first,
in their order, then the others in the screening's order at tile fidelity.
"""

from __future__ import annotations

import copy
import itertools
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dspsim.config import (
    HardwareModel,
    check_model_entries,
    checked_model,
    load_model,
    model_key,
)
from dspsim.errors import DspsimInputError
from dspsim.ops import default_op, get_op
from dspsim.ops.base import Op, refuse_idle_keys, summary_json
from dspsim.run import simulate
from dspsim.study.sweep.executors import evaluate_point
from dspsim.study.sweep.files import csv_line
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
SCREEN_FIDELITY = "tile"
RERUN_FIDELITY = "burst"


@dataclass
class Candidate:
    """One variant at one setting of its parameters, and what it did (worst case over the
    models)."""

    variant: str
    params: dict[str, Any]
    index: int = 0  # enumeration order: the last tie-break
    fidelity: str = ""
    cycles: int | None = None  # the worst case over the models
    cycles_by_model: dict[str, int] = field(default_factory=dict)
    worst_model: str = ""  # the model whose cycles these are
    # bytes each memory of the worst model served (J6: ``ddr``; a model's own names)
    read_bytes: dict[str, int] = field(default_factory=dict)
    write_bytes: dict[str, int] = field(default_factory=dict)
    core_busy_cycles: int = 0
    warnings: list[str] = field(default_factory=list)  # codes that change the result
    hazards: int = 0
    lower_bound_cycles: float | None = None
    speedup: float | None = None  # the baseline's cycles / these
    rank: int = 0
    error: str = ""

    def bytes_columns(self) -> dict[str, int]:
        """``<memory>_read_bytes`` and ``<memory>_write_bytes`` of every memory it used."""
        return {f"{m}_{rw}_bytes": n for m, read in self.read_bytes.items()
                for rw, n in (("read", read), ("write", self.write_bytes.get(m, 0)))}

    @property
    def flagged(self) -> bool:
        """The run carries a result-changing warning or a hazard: its cycles are suspect."""
        return bool(self.warnings) or self.hazards > 0

    @property
    def gap_pct(self) -> float | None:
        """How far above its own lower bound, in %."""
        if not self.lower_bound_cycles or self.cycles is None:
            return None
        return 100.0 * (self.cycles / self.lower_bound_cycles - 1.0)

    @property
    def core_busy_pct(self) -> float | None:
        return 100.0 * self.core_busy_cycles / self.cycles if self.cycles else None

    @property
    def memory_bytes(self) -> int:
        """Bytes read and written in every memory (the tie-break after cycles)."""
        return sum(self.read_bytes.values()) + sum(self.write_bytes.values())

    def sort_key(self) -> tuple:
        return (self.flagged, self.cycles, self.memory_bytes, self.index)

    def identity(self) -> tuple:
        return (self.variant, tuple(sorted((k, format_value(v)) for k, v in self.params.items())))

    def to_json(self) -> dict[str, Any]:
        def values(*keys: str) -> dict[str, Any]:  # containers copied
            return {k: copy.copy(getattr(self, k)) for k in keys}

        return {**values("rank", "variant", "params", "cycles", "cycles_by_model", "worst_model",
                         "fidelity", "speedup"), **self.bytes_columns(),
                **values("lower_bound_cycles", "gap_pct", "core_busy_pct", "warnings", "hazards")}


@dataclass
class OptimizeResult:
    """What :func:`optimize` found: the ranked re-runs, the screen, and what was left out."""

    op: str
    shape: tuple[int, ...]
    models: dict[str, str]  # label -> the file it was read from
    top: int
    baseline: Candidate | None  # the op's default variant at the model's values (burst)
    candidates: list[Candidate]  # the re-runs at burst fidelity, ranked
    screened: list[Candidate]  # every candidate that ran at tile fidelity, ranked
    refused: int = 0  # combinations the op refused (not run)
    refusals: list[str] = field(default_factory=list)  # a few of the reasons
    failed: int = 0  # candidates whose run failed on some model
    failures: list[str] = field(default_factory=list)
    baseline_refused: str = ""  # why the default variant cannot run here, if it cannot
    numerics: dict[str, Any] | None = None  # the winner with the data path on
    rerun_errors: dict[tuple, str] = field(default_factory=dict)  # identity -> why it failed

    def ranking(self) -> list[tuple[Candidate, Candidate]]:
        """Every screened candidate, ranked: the re-runs at burst fidelity in their order, then
        the others in the screening's order (their cycles are the screen's, at tile
        fidelity). Pairs (the candidate as ranked, its screening run)."""
        by_id = {c.identity(): c for c in self.screened}
        ranked = [(c, by_id.get(c.identity(), c)) for c in self.candidates]
        done = {c.identity() for c in self.candidates}
        ranked += [(c, c) for c in self.screened if c.identity() not in done]
        return ranked

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def _union(self, keys_of: Any) -> list[str]:
        """The keys ``keys_of(candidate)`` gives over every candidate, in first-seen order."""
        return list(dict.fromkeys(k for c in [*self.candidates, *self.screened]
                                  for k in keys_of(c)))

    def ranking_json(self) -> list[dict[str, Any]]:
        """:meth:`ranking` as JSON objects: ``rank`` (overall), ``fidelity`` of ``cycles``,
        ``screen_rank`` and ``screen_cycles`` (the tile-fidelity screen), ``error`` (a re-run
        that failed)."""
        return [c.to_json() | {"rank": i, "screen_rank": screen.rank,
                               "screen_cycles": screen.cycles,
                               "error": self.rerun_errors.get(c.identity(), "")}
                for i, (c, screen) in enumerate(self.ranking(), 1)]

    def to_json(self) -> dict[str, Any]:
        base = self.baseline or Candidate(get_op(self.op).default_variant, {})
        summary = ("variant", "params", "cycles", "cycles_by_model", "lower_bound_cycles")
        return {
            "op": self.op, "shape": list(self.shape), "models": dict(self.models),
            "fidelity": {"screen": SCREEN_FIDELITY, "rerun": RERUN_FIDELITY},
            "baseline": _picked(base, *summary, "warnings", "hazards")
            | {"refused": self.baseline_refused or None},
            "best": _picked(self.best, *summary, "gap_pct", "speedup", "warnings", "hazards")
            | {"max_rel_err": summary_json(self.numerics or {}).get("max_rel_err")},
            "candidates": [c.to_json() for c in self.candidates],
            # every screened candidate, ranked (the re-runs first): what --out writes
            "ranking": self.ranking_json(), "screened": len(self.screened),
            "refused": self.refused, "failed": self.failed,
            "numerics": summary_json(self.numerics),
        }

    def table_rows(self) -> list[dict[str, Any]]:
        """:meth:`ranking_json` as CSV rows: a column per parameter key (empty where a candidate
        lacks it) and, with several models, a ``cycles[LABEL]`` column per model."""
        rows = []
        params, byte_columns = self._union(lambda c: c.params), self._union(Candidate.bytes_columns)
        for obj in self.ranking_json():
            row = {k: obj[k] for k in ("rank", "fidelity", "variant")}
            row.update({k: obj["params"].get(k, "") for k in params}, cycles=obj["cycles"])
            if len(self.models) > 1:
                row.update({f"cycles[{m}]": obj["cycles_by_model"].get(m) for m in self.models})
            row.update({k: obj.get(k, "") for k in ("screen_rank", "screen_cycles", "speedup",
                        *byte_columns, "lower_bound_cycles", "gap_pct", "core_busy_pct")})
            row.update(warnings=";".join(obj["warnings"]), hazards=obj["hazards"],
                       error=obj["error"])
            rows.append(row)
        return rows

    def csv_text(self) -> str:
        rows = self.table_rows()
        header = list(rows[0])
        lines = [csv_line(header), *(csv_line([_cell(row[k]) for k in header]) for row in rows)]
        return b"".join(lines).decode("utf-8")


def _picked(c: Candidate, *keys: str) -> dict[str, Any]:
    obj = c.to_json()
    return {k: obj[k] for k in keys}


def _cell(v: Any) -> str:
    return "" if v is None else f"{v:.6g}" if isinstance(v, float) else format_value(v)


# ------------------------------------------------------------------------------ inputs
def _variants(the_op: Op, variants: str | Sequence[str] | None) -> list[str]:
    if variants is None:
        return list(the_op.variants)
    names = variants.split(",") if isinstance(variants, str) else list(variants)
    names = [str(v).strip() for v in names]
    if not names or any(not v for v in names):
        raise DspsimInputError(f"variants {variants!r}: expected V1,V2,...; allowed: "
                               f"{', '.join(the_op.variants)}")
    for v in names:
        the_op.check_variant(v)
    if len(set(names)) < len(names):
        raise DspsimInputError(f"variants {variants!r}: a variant is given twice")
    return names


def _axes(the_op: Op, params: Sequence[str] | Mapping[str, Any] | None,
          variants: Sequence[str]) -> dict[str, list]:
    """``--param`` texts (``KEY=V1,V2`` or ``KEY=START:STOP:STEP``) or key -> values, checked:
    keys that act in one of ``variants``; a search too large is refused before any value."""
    items = _param_items(params or {})
    axes: dict[str, list] = {}
    for key, _values in items:
        if key in SPECIAL_KEYS:
            raise DspsimInputError(f"--param {key}: not a model key; optimize takes the variants "
                                   "with --variants and the size with --n / --shape")
        model_key(key)  # unknown key -> one line naming the allowed ones
        refuse_idle_keys([key], [(the_op, v) for v in variants], "--param")
        if key in axes:
            raise DspsimInputError(f"--param {key} is given twice")
        axes[key] = []
    # counted before a value is built (two axes of 10^6 values took minutes and gigabytes
    # to refuse)
    counts = {key: value_count(key, values) if isinstance(values, str) else
              len(values) if isinstance(values, list) else 1 for key, values in items}
    op_keys = [n for k, n in counts.items() if model_key(k).section == the_op.name]
    hardware = math.prod(n for k, n in counts.items() if model_key(k).section != the_op.name)
    if all(n <= MAX_VALUES_PER_KEY for n in counts.values()):
        _check_runs(hardware * max(op_keys, default=1) * max(1, len(variants)), "at least ")
    return {key: parse_values(key, values) if isinstance(values, str) else
            spec_values(key, values) for key, values in items}


def _param_items(params: Sequence[str] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(key, values) of each ``--param`` text (``KEY=...``) or mapping entry, keys stripped."""
    if isinstance(params, Mapping):
        return [(str(k).strip(), v) for k, v in params.items()]
    items = []
    for item in params:
        key, eq, text = str(item).partition("=")
        if not eq or not key.strip():
            raise DspsimInputError(f"--param {item!r}: expected KEY=V1,V2,... or "
                                   "KEY=START:STOP:STEP, e.g. idma.max_outstanding=8,32")
        items.append((key.strip(), text))
    return items


def _check_runs(runs: int, at_least: str = "") -> None:
    if runs > MAX_CANDIDATES:
        raise DspsimInputError(f"the search has {at_least}{runs:,} runs (candidates x models); "
                               f"at most {MAX_CANDIDATES:,}: restrict it with --variants or "
                               "fewer --param values")


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
            loaded = checked_model(m)  # one built or replaced in Python too
            loaded = loaded.with_overrides(ov) if ov else loaded
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
                merged = {format_value(x): x for x in [*space.get(key, []), *values]}
                try:
                    space[key] = sorted(merged.values())
                except TypeError:
                    space[key] = list(merged.values())
        spaces[v] = space
    searched = {k for s in spaces.values() for k in s}
    for v, space in spaces.items():
        for key, values in axes.items():
            # a key goes to the variants it acts in; of those, a key of the op's table to the
            # variants that search it (all, when none does)
            if v in the_op.key_variants(key) and (
                    model_key(key).section != the_op.name or key in space or key not in searched):
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


def evaluate_all(tasks: list[tuple[HardwareModel, dict, str]], jobs: int, show: bool,
                 desc: str) -> list[dict[str, Any]]:
    """``evaluate_point(*task)`` for every task in ``jobs`` processes; results in order."""
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    bars: list[Any] = []  # the progress bar, once the workers are up

    def started() -> None:  # the workers are forked before the bar starts its thread
        if show and tasks:
            from tqdm import tqdm

            bars.append(tqdm(total=len(tasks), unit="run", desc=desc, file=sys.stderr,
                             dynamic_ncols=True, leave=False))

    try:
        for i, row in imap_unordered(evaluate_point, range(len(tasks)), jobs, work=len(tasks),
                                     args=lambda i: tasks[i], started=started,
                                     failed=pool_failure(f"optimize ({desc})")):
            results[i] = row
            for bar in bars:
                bar.update(1)
    finally:
        for bar in bars:
            bar.close()
    return results  # type: ignore[return-value]


def _run(
    the_op: Op, cands: list[Candidate], shape: tuple[int, ...],
    models: dict[str, HardwareModel], fidelity: str, jobs: int, show: bool, desc: str,
) -> None:
    """Run each candidate on every model at ``fidelity``; fill in its worst case (or error)."""
    labels = list(models)
    size = {"n": shape[0]} if len(shape) == 1 else {"shape": shape_text(shape)}
    tasks = [(models[m], {"op": the_op.name, "variant": c.variant, **size, **c.params}, fidelity)
             for c in cands for m in labels]  # sweep points (what evaluate_point runs)
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
    axes = _axes(the_op, params, names)
    loaded = _load_models(model, models, overrides)
    refuse_idle_keys(overrides if isinstance(overrides, Mapping) else
                     [o.partition("=")[0].strip() for o in overrides or ()],
                     [(the_op, v) for v in names], "--set")
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
        why = _refusal(the_op, c, loaded, shape_t)
        if not why:
            runnable.append(c)
            continue
        refused += 1
        if len(refusals) < EXAMPLES:
            refusals.append(f"{c.variant} {params_text(c.params)}: {why}".strip())
    if not runnable:
        why = f" (e.g. {refusals[0]})" if refusals else ""
        raise DspsimInputError(f"no candidate left: the op refused all {refused} combinations "
                               f"of the search{why}")
    return runnable, refused, refusals


def _refusal(the_op: Op, c: Candidate, loaded: dict[str, HardwareModel],
             shape_t: tuple[int, ...]) -> str:
    """Why the op refuses to run ``c`` on one of the models (``""``: it runs on all)."""
    try:
        for m in loaded.values():
            the_op.check_run(_set(m, c), c.variant, shape_t)
    except ValueError as e:
        return one_line(e)
    return ""


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
    base = Candidate(the_op.default_variant, {}, index=-1)
    baseline_refused = _refusal(the_op, base, loaded, shape_t)
    batch = finals + ([] if baseline_refused else [base])
    _run(the_op, batch, shape_t, loaded, RERUN_FIDELITY, jobs, show, "re-run")
    rerun_errors = {c.identity(): c.error for c in finals if c.error}
    for c in batch:
        if c.error:  # ran at the screening fidelity, failed at the reference one
            failures.append(f"{c.variant} {params_text(c.params)} at {RERUN_FIDELITY} "
                            f"fidelity: {c.error}")
        else:
            b = the_op.bounds(_set(loaded[c.worst_model], c), c.variant, shape_t)
            value = None if b is None else b.lower_bound_cycles
            c.lower_bound_cycles = (None if value is None or not math.isfinite(value)
                                    else float(value))
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
