"""What :func:`dspsim.study.optimize.optimize` returns: the candidates (:class:`Candidate`) and
the ranked result (:class:`OptimizeResult`), as a table, JSON or CSV. ``--out`` and ``--json``
keep every screened candidate, ranked (:meth:`OptimizeResult.ranking`): the re-runs at burst
fidelity first, in their order, then the others in the screening's order at tile fidelity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dspsim.ops import get_op
from dspsim.ops.base import summary_json
from dspsim.study.sweep.files import csv_line
from dspsim.study.sweep.values import format_value

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

    @property
    def memory_bytes(self) -> int:
        """Bytes read and written in every memory (the tie-break after cycles)."""
        return sum(self.read_bytes.values()) + sum(self.write_bytes.values())

    def bytes_columns(self) -> dict[str, int]:
        """``<memory>_read_bytes`` and ``<memory>_write_bytes`` of every memory it used."""
        out = {}
        for m in self.read_bytes:
            out[f"{m}_read_bytes"] = self.read_bytes[m]
            out[f"{m}_write_bytes"] = self.write_bytes.get(m, 0)
        return out

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
        if not self.cycles:
            return None
        return 100.0 * self.core_busy_cycles / self.cycles

    def sort_key(self) -> tuple:
        return (self.flagged, self.cycles, self.memory_bytes, self.index)

    def identity(self) -> tuple:
        return (self.variant, tuple(sorted((k, format_value(v)) for k, v in self.params.items())))

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "variant": self.variant,
            "params": dict(self.params),
            "cycles": self.cycles,
            "cycles_by_model": dict(self.cycles_by_model),
            "worst_model": self.worst_model,
            "fidelity": self.fidelity,
            "speedup": self.speedup,
            **self.bytes_columns(),
            "lower_bound_cycles": self.lower_bound_cycles,
            "gap_pct": self.gap_pct,
            "core_busy_pct": self.core_busy_pct,
            "warnings": list(self.warnings),
            "hazards": self.hazards,
        }


@dataclass
class OptimizeResult:
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
        out = []
        for i, (c, screen) in enumerate(self.ranking(), 1):
            obj = c.to_json()
            obj.update(rank=i, screen_rank=screen.rank, screen_cycles=screen.cycles,
                       error=self.rerun_errors.get(c.identity(), ""))
            out.append(obj)
        return out

    def to_json(self) -> dict[str, Any]:
        base = self.baseline or Candidate(get_op(self.op).default_variant, {})
        summary = ("variant", "params", "cycles", "cycles_by_model", "lower_bound_cycles")
        return {
            "op": self.op,
            "shape": list(self.shape),
            "models": dict(self.models),
            "fidelity": {"screen": SCREEN_FIDELITY, "rerun": RERUN_FIDELITY},
            "baseline": _picked(base, *summary, "warnings", "hazards")
            | {"refused": self.baseline_refused or None},
            "best": _picked(self.best, *summary, "gap_pct", "speedup", "warnings", "hazards")
            | {"max_rel_err": summary_json(self.numerics or {}).get("max_rel_err")},
            "candidates": [c.to_json() for c in self.candidates],
            # every screened candidate, ranked (the re-runs first): what --out writes
            "ranking": self.ranking_json(),
            "screened": len(self.screened),
            "refused": self.refused,
            "failed": self.failed,
            "numerics": summary_json(self.numerics),
        }

    def table_rows(self) -> list[dict[str, Any]]:
        """:meth:`ranking_json` as CSV rows: a column per parameter key (empty where a candidate
        lacks it) and, with several models, a ``cycles[LABEL]`` column per model."""
        rows = []
        params, byte_columns = self._union(lambda c: c.params), self._union(Candidate.bytes_columns)
        for obj in self.ranking_json():
            row = {k: obj[k] for k in ("rank", "fidelity", "variant")}
            row.update({k: obj["params"].get(k, "") for k in params})
            row["cycles"] = obj["cycles"]
            if len(self.models) > 1:
                row.update({f"cycles[{m}]": obj["cycles_by_model"].get(m) for m in self.models})
            row.update({k: obj.get(k, "") for k in (
                "screen_rank", "screen_cycles", "speedup",
                *byte_columns, "lower_bound_cycles", "gap_pct",
                "core_busy_pct")})
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
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return format_value(v)
