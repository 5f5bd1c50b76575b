"""What an operator is to dspsim: the :class:`Op` contract, in one object.

An op must give :data:`REQUIRED` (identity, firmware, math; :func:`~dspsim.ops.register_op`
refuses an op without them); every other hook is declared on :class:`Op` with a default, so
nothing outside ``ops/`` looks one up by name (docs/contributing.md tabulates them and who reads
each). Also here: the :class:`Bounds` of an op's closed forms, and its output summary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dspsim.errors import ConfigError, DspsimInputError
from dspsim.schema import OP_SCHEMAS, OpSchema

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.hw.memory import Ptr
    from dspsim.hw.tcm import TileManager
    from dspsim.platform import Dsp
    from dspsim.schema import Params

Proc = Generator[Any, Any, Any]  # a SimPy process body: what ``yield from`` runs
# a candidate run for calibrate: (variant, shape, model-key settings)
Candidate = tuple[str, tuple[int, ...], dict[str, Any]]

# what an op must give: class attributes, then methods the subclass must define
REQUIRED_ATTRIBUTES = ("name", "doc", "variants", "default_variant", "params", "ndim",
                       "default_shape")
REQUIRED_METHODS = ("param_block", "handler", "reference", "default_input")
REQUIRED = REQUIRED_ATTRIBUTES + REQUIRED_METHODS + ("requirements",)


# a hardware table a variant uses only when it needs the part (:meth:`Op.requirements`)
USES = {"idma": ("channels", "iDMA channel"), "tcm": ("banks", "DataRAM")}
# a bound an op does not give (a microbenchmark's): 0 cycles, no constraint
NO_BOUND = {"lower_bound_cycles": 0.0, "dma_bound_cycles": 0.0, "latency_bound_cycles": 0.0,
            "compute_bound_cycles": 0.0, "estimate_cycles": 0.0}


@dataclass(frozen=True, eq=False)
class Bounds(Mapping[str, Any]):
    """An op's closed forms for one run (docs/contributing.md: who reads each field) and
    ``details``, its own (``run --json``); reads as the mapping of all, in the op's ``order``."""

    lower_bound_cycles: float  # no run is faster: the largest of the three bounds below
    dma_bound_cycles: float  # the bytes that must cross the DDR port over its bandwidth
    latency_bound_cycles: float  # the requests' round trips over the requests in flight
    compute_bound_cycles: float  # the core's kernel and descriptor cycles
    estimate_cycles: float  # the closed-form estimate calibrate starts its fits from
    ddr_read_bytes: int = 0
    ddr_write_bytes: int = 0
    ddr_requests: int | None = None  # None: calibrate derives the window from the latency bound
    outstanding_requests: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    order: tuple[str, ...] = ()

    FIELDS: ClassVar[tuple[str, ...]] = (
        "lower_bound_cycles", "dma_bound_cycles", "latency_bound_cycles",
        "compute_bound_cycles", "estimate_cycles", "ddr_read_bytes", "ddr_write_bytes",
        "ddr_requests", "outstanding_requests")

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Bounds:
        """From an op's mapping of its bounds (every field but the two optional ones given)."""
        typed = {k: values[k] for k in cls.FIELDS if k in values}
        details = {k: v for k, v in values.items() if k not in cls.FIELDS}
        return cls(**typed, details=details, order=tuple(values))

    def _all(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.FIELDS if getattr(self, k) is not None}
        out.update(self.details)
        return {k: out[k] for k in self.order if k in out} | out

    def __getitem__(self, key: str) -> Any:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class Op:
    """An operator: what a subclass must give (:data:`REQUIRED`) and the hooks it may override."""

    # ------------------------------------------------------------------ must: identity
    name: ClassVar[str]
    doc: ClassVar[str]
    variants: ClassVar[dict[str, str]]  # name -> what the schedule does
    default_variant: ClassVar[str]
    params: ClassVar[OpSchema]
    ndim: ClassVar[int]  # input dimensions: 1 (``--n``) or 2 (``--shape ROWS,COLS``)
    default_shape: ClassVar[tuple[int, ...]]
    # ------------------------------------------------------------------ must: firmware
    # the RPC command of the handler; None: register_op allots the first free custom one
    cmd: int | None = None

    # ------------------------------------------------------------------ may
    latency_us: ClassVar[int] = 0  # hb_dsp_register_fn's latency hint
    # the variants a study (a sweep) compares when none is named; None: every variant
    study_variants: ClassVar[tuple[str, ...] | None] = None
    # every input dimension the op accepts (default: ``ndim`` only)
    ndims: ClassVar[tuple[int, ...]] = ()
    # what the paper or document measured: {"shape": ..., "cycles": {variant: cycles}, ...}
    document: ClassVar[Mapping[str, Any] | None] = None
    # the codes of the warnings the op's own code raises (``dsp.warn(code, ...)``)
    warning_codes: ClassVar[tuple[str, ...]] = ()
    # the key of the op's TCM tile ("<name>.tile_bytes"; random configurations set it), or None
    tile_key: ClassVar[str | None] = None
    # what the size counts, as printed after it ("100,000 float32", "128 x 768 weights")
    size_unit: ClassVar[str] = "float32"
    # why its variants are not ways to one result (optimize refuses to rank them), or None
    variants_differ: ClassVar[str | None] = None
    # (relative, absolute): an element is right when |out - ref| <= max(rel |ref|, abs);
    # None: no tolerance claimed (:meth:`output_summary` then gives no ``within_tolerance``)
    tolerance: ClassVar[tuple[float, float] | None] = None
    # rows above and below a row that its reference reads (output_summary's blocks carry them)
    reference_halo_rows: int = 0

    @property
    def input_dims(self) -> tuple[int, ...]:
        """The input dimensions the op accepts."""
        return self.ndims or (self.ndim,)

    # ------------------------------------------------------------------ must: firmware
    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> object:
        """The struct the host packs for the RPC (one input and one output buffer)."""
        raise NotImplementedError

    def handler(self, dsp: Dsp, input: Ptr, output: Ptr, tm: TileManager) -> Proc:
        """The DSP side: ``hb_dsp_<op>(input, output, tm)`` as a SimPy generator."""
        raise NotImplementedError

    def requirements(self, variant: str) -> dict[str, int]:
        """What a variant needs of each core: ``{"channels": k, "banks": b}``."""
        return {"channels": 0, "banks": 0}

    # ------------------------------------------------------------------ must: math
    def reference(self, x: np.ndarray, params: Params) -> np.ndarray:
        """The exact answer in float64."""
        raise NotImplementedError

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        """The input a run uses when none is given (float32, ``shape``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shapes and inputs
    def check_variant(self, variant: str) -> str:
        if variant not in self.variants:
            raise DspsimInputError(
                f"{self.name} has no variant {variant!r}; allowed: {', '.join(self.variants)}"
            )
        return variant

    def shape_of(self, n: int | None = None, shape: Any = None) -> tuple[int, ...]:
        """The input shape from ``n`` or ``shape`` (default :attr:`default_shape`), checked."""
        if n is not None and shape is not None:
            raise DspsimInputError("give n or shape, not both")
        if n is not None:
            if 1 not in self.input_dims:
                raise DspsimInputError(
                    f"{self.name} takes a {self.ndim}-D shape (--shape ROWS,COLS), not n"
                )
            shape = (n,)
        if shape is None:
            return tuple(self.default_shape)
        dims = tuple(shape) if isinstance(shape, list | tuple) else (shape,)
        if len(dims) not in self.input_dims or any(
            isinstance(d, bool) or not isinstance(d, int | np.integer) or d <= 0 for d in dims
        ):
            raise DspsimInputError(self.shape_refusal(shape, dims))
        return tuple(int(d) for d in dims)

    def shape_refusal(self, given: Any, dims: tuple[Any, ...]) -> str:
        """The one line refusing a bad ``shape`` (``dims``: it as a tuple)."""
        want = "a positive integer n" if self.ndim == 1 else "two positive integers ROWS,COLS"
        return f"{self.name} shape {dims!r}: expected {want}"

    def input_bytes(self, shape: tuple[int, ...]) -> int:
        """Bytes of the input array (float32): what the host allocates, twice with the output."""
        return 4 * math.prod(int(d) for d in shape)

    def output_bytes(self, shape: tuple[int, ...]) -> int:
        """Bytes of the output array the host allocates (default: as many as the input)."""
        return self.input_bytes(shape)

    # ------------------------------------------------------------------ may: host side
    def check_input(self, x: Any) -> tuple[np.ndarray, tuple[int, ...] | None]:
        """A given input checked: ``(array, shape)``, shape None when the array's (default: one
        float32 array of :attr:`input_dims` dimensions)."""
        from dspsim.arrays import check_input_array

        return check_input_array(x, "x", self.input_dims), None

    def read_input_file(self, path: str) -> Any:
        """``--input PATH``: what :meth:`check_input` takes (default: a ``.npy`` array)."""
        from dspsim.arrays import load_input

        return load_input(path, self.input_dims)

    def check_output_file(self, path: str) -> None:
        """``--output PATH``, refused before simulating (default: one that cannot be written)."""
        from dspsim.arrays import check_output_path

        check_output_path(path)

    def write_input(self, memory: Any, ptr: Any, x: np.ndarray, shape: tuple[int, ...]
                    ) -> None:
        """The host writes the input at ``ptr`` of its memory (default: float32, flat)."""
        memory.f32(ptr, x.size)[:] = x.reshape(-1)

    def host_array(self, memory: Any, ptr: Any, shape: tuple[int, ...], output: bool
                   ) -> np.ndarray:
        """The host's view of the input or (``output``) output buffer (default: float32, shaped)."""
        return memory.f32(ptr, math.prod(shape)).reshape(shape)

    def run_report(self, r: Any) -> dict[str, float]:
        """Figures a run reports besides its cycles (``run`` prints them); default none."""
        return {}

    # ------------------------------------------------------------------ may: refusals
    def checks_params(self, variant: str) -> bool:
        """Whether a run of ``variant`` checks the op's table against the hardware (default: yes;
        a variant using no TCM need not fit a tile in it)."""
        return True

    def check_run(self, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> None:
        """Refuse, before simulating, a run the platform or the op's parameters cannot do."""
        if self.params.check is not None and self.checks_params(variant):
            self.params.check(model.params(self.name), model)
        unmet = self.unmet_need(model, variant)
        if unmet is not None:
            raise DspsimInputError(f"{unmet} or another variant")

    def unmet_need(self, model: HardwareModel, variant: str) -> str | None:
        """Why the platform lacks what ``variant`` needs of a core (:meth:`requirements`), with
        what is allowed; None when it has it."""
        platform = {"channels": (model.idma.channels, "idma.channels", "iDMA channels"),
                    "banks": (model.tcm.banks, "tcm.banks", "DataRAM banks")}
        for what, count in self.requirements(variant).items():
            have, key, words = platform[what]
            if count > have:
                return (f"{self.name} {variant} needs {count} {words} per core; the platform "
                        f"has {have} ({key} = {have}); allowed: {key} >= {count}")
        return None

    def key_variants(self, key: str) -> tuple[str, ...]:
        """The variants in which model key ``key`` acts: the one test of
        :func:`refuse_idle_keys` and a sweep's notes (default: none for another op's key, those
        needing a channel for an iDMA key and a DataRAM for a TCM key (:meth:`requirements`),
        the tile key where :meth:`checks_params`, any other in every variant)."""
        section = key.partition(".")[0]
        if section in OP_SCHEMAS and section != self.name:
            return ()
        if section in USES:
            return tuple(v for v in self.variants if self.requirements(v).get(USES[section][0]))
        if key == self.tile_key:
            return tuple(v for v in self.variants if self.checks_params(v))
        return tuple(self.variants)

    def idle_key(self, model: HardwareModel, key: str) -> str | None:
        """Why ``key`` can act on no run of this op on ``model`` (each variant it acts in needs
        more than the platform has), None when it can."""
        variants = self.key_variants(key)
        unmet = [self.unmet_need(model, v) for v in variants]
        if not variants or not all(unmet):
            return None
        return f"it acts only in {self.name} {', '.join(variants)}; {unmet[0]}"

    def same_cycles_reason(self, variant: str, shape: tuple[int, ...], key: str,
                           values: Sequence[Any],
                           models: Sequence[HardwareModel] | None = None) -> str | None:
        """Why ``values`` of ``key`` gave runs of ``variant`` the same cycles (``dspsim sweep``
        prints it), else None: a key that does not act in ``variant``, a 1-D tile key leaving
        the same last tile, or (given each value's model) the port binding every run alike."""
        if variant not in self.key_variants(key):
            uses = USES.get(key.partition(".")[0])
            why = f": it uses no {uses[1]}" if uses else ""
            return f"{key} does not act in {self.name} {variant}{why}"
        reason = self._same_last_tile_reason(shape, key, values)
        if reason is None and models:
            reason = self.port_bound_reason(variant, shape, models)
        return reason

    def _same_last_tile_reason(self, shape: tuple[int, ...], key: str, values: Sequence[Any]
                               ) -> str | None:
        if key != self.tile_key or len(shape) != 1 or not values:
            return None
        n = int(shape[0])
        counts, lasts = set(), set()
        for v in values:
            per = int(v) // 4  # elements per tile
            if per < 1:
                return None
            counts.add(-(-n // per))
            lasts.add(n % per or per)
        if len(lasts) != 1:
            return None
        last = lasts.pop()
        if len(counts) == 1:
            return (f"the tile count ({counts.pop():,}) and the last tile ({last:,} elements) "
                    "are the same for these values")
        whole = [f"{c - 1:,}" for c in sorted(counts)]
        return (f"every value leaves the same last tile ({last:,} elements, after "
                f"{', '.join(whole[:-1])} or {whole[-1]} whole tiles that move the same bytes "
                "in all)")

    def port_bound_reason(self, variant: str, shape: tuple[int, ...],
                          models: Sequence[HardwareModel]) -> str | None:
        """A "port-bound: ..." reason when, on every model, the op's DMA bound binds and is the
        same (the port's time, which no other key changes); else None."""
        seen = set()
        for model in models:
            b = self.bounds(model, variant, shape)
            if b is None:
                return None
            dma = float(b.dma_bound_cycles)
            bpc = float(model.host_memory.bytes_per_cycle)
            nbytes = round(dma * bpc)
            if (dma <= 0 or dma < max(b.latency_bound_cycles, b.compute_bound_cycles)
                    or nbytes > b.ddr_read_bytes + b.ddr_write_bytes):
                return None  # not the port that binds (or not the host memory's port)
            seen.add((model.host.memory, bpc, nbytes, round(dma, 3)))
        if len(seen) != 1:
            return None
        memory, bpc, nbytes, dma = seen.pop()
        return (f"port-bound: the {memory.upper()} port moves {nbytes:,} bytes at {bpc:g} "
                f"bytes/cycle = {dma:,.0f} cycles either way")

    # ------------------------------------------------------------------ may: checks
    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Params) -> dict[str, Any]:
        """:func:`error_summary` against :meth:`reference`, a block of rows at a time (rows
        independent but for :attr:`reference_halo_rows`; an op coupling more overrides this);
        with a :attr:`tolerance`, also ``within_tolerance`` (its absolute part the floor)."""
        cols = x.shape[-1] if x.ndim else 1
        rel, floor = self.tolerance or (None, 1e-30)
        halo = self.reference_halo_rows

        def reference(part: slice) -> np.ndarray:  # the rows covering a slice of the output
            lo, hi = part.start, min(part.stop, out.size)
            first = max(0, lo // cols - halo)  # and the rows its reference reads beside them
            block = x.reshape(-1, cols)[first:-(-hi // cols) + halo]
            return self.reference(block, params).reshape(-1)[lo - first * cols:hi - first * cols]

        return error_summary(out, reference, floor=floor, tolerance=rel)

    # ------------------------------------------------------------------ may: closed forms
    def bounds(self, model: HardwareModel, variant: str, shape: tuple[int, ...]
               ) -> Bounds | None:
        """Traffic, lower bounds and an estimate in closed form; None: the op gives none
        (``calibrate`` then classifies its runs as ``unknown``)."""
        return None

    # ------------------------------------------------------------------ may: optimisation
    def search_space(self, model: HardwareModel, variant: str, shape: tuple[int, ...]
                     ) -> dict[str, list]:
        """Model keys (``"softmax.tile_bytes"``) -> candidate values, the model's own among them,
        for ``dspsim optimize`` to run in every combination :meth:`check_run` allows."""
        return {}

    # ------------------------------------------------------------------ may: calibration
    def calibration_candidates(
        self, model: HardwareModel, free_keys: Iterable[str], longest_shape: tuple[int, ...]
    ) -> list[Candidate]:
        """Runs a board could make to tell equally good fits apart (``dspsim calibrate``;
        ``free_keys``: fitted, so not set by a run). Default: each variant at the default shape,
        the longest measured and one 16 times shorter (latency weighs more)."""
        small = (max(1, self.default_shape[0] // 16),) + tuple(self.default_shape[1:])
        shapes = sorted(
            {small, tuple(self.default_shape), tuple(longest_shape)},
            key=lambda s: (int(np.prod(s)), s),
        )
        out: list[Candidate] = []
        for variant in self.variants:
            for shape in shapes:
                try:
                    self.check_run(model, variant, shape)
                except DspsimInputError:
                    continue  # the op cannot run it here: not a measurement a board can take
                out.append((variant, shape, {}))
        return out


def refuse_idle_keys(keys: Iterable[str], runs: Iterable[tuple[Op, str]], option: str,
                     switch: str = "--op ") -> None:
    """Refuse, in one line, a model key given with ``option`` that acts in none of ``runs`` (an
    op and a variant each; :meth:`Op.key_variants`): ``run --set``, ``sweep --set``,
    ``optimize`` and ``workload --set`` (``switch``: how a run of another op is asked for)."""
    runs = list(dict.fromkeys(runs))
    ops = list(dict.fromkeys(op for op, _ in runs))
    for key in keys:
        section = key.partition(".")[0]
        if any(v in op.key_variants(key) for op, v in runs):
            continue
        if section in OP_SCHEMAS and section not in [op.name for op in ops]:
            names = " or ".join(op.name for op in ops)
            raise DspsimInputError(f"{option} {key} does nothing in a {names} run: it is a key "
                                   f"of {section}; allowed: {names}'s keys and the hardware's "
                                   f"(dspsim keys), or {switch}{section}")
        acts = "; ".join(f"{op.name} {', '.join(op.key_variants(key))}" for op in ops
                         if op.key_variants(key))
        where = "; ".join(f"{op.name} {', '.join(v for o, v in runs if o is op)}" for op in ops)
        raise DspsimInputError(f"{option} {key} does nothing in {where}: it acts in " + (
            f"{acts}; allowed: one of those variants, or" if acts else
            f"no {' or '.join(op.name for op in ops)} variant; allowed:") + " leave it unset")


def bind(out: dict[str, Any], raise_estimate: bool = True) -> None:
    """Set ``lower_bound_cycles`` (the largest of the three bounds) and ``binding_bound`` (its
    name); ``raise_estimate``: the estimate at least the lower bound."""
    named = {k: out[f"{k}_bound_cycles"] for k in ("dma", "latency", "compute")}
    binding = max(named, key=named.get)
    out["lower_bound_cycles"] = named[binding]
    out["binding_bound"] = binding
    if raise_estimate:
        out["estimate_cycles"] = max(out["estimate_cycles"], named[binding])


HOST, TCM = "host", "tcm"  # an op's ends besides the model's memories: host.memory, a DataRAM


def memory_name(model: HardwareModel, where: str) -> str | None:
    """The memory ``where`` names (``host``: ``host.memory``); None for TCM."""
    if where == TCM:
        return None
    return model.host.memory if where == HOST else where


def memory_of(model: HardwareModel, where: str) -> Any:
    """The memory table of ``where`` (``host`` -> ``host.memory``); None for TCM."""
    name = memory_name(model, where)
    return None if name is None else model.memories[name]


def check_memory_key(key: str, where: str, model: HardwareModel) -> None:
    """Refuse ``key = where`` when ``where`` is neither host, tcm nor a memory of ``model``."""
    if where not in (HOST, TCM) and where not in model.memories:
        raise ConfigError(
            f"{key} = {where!r}: the platform has no such memory; allowed: host, tcm "
            f"or one of its memories ({', '.join(model.memories)})"
        )


def align_up(x: int, a: int) -> int:
    """``x`` rounded up to a multiple of ``a``."""
    return -(-x // a) * a


def free_bank_bytes(model: HardwareModel) -> int:
    """Bytes of one DataRAM the tile manager can hand out (a buffer stays in one DataRAM)."""
    return max(0, model.tcm.bank_bytes - model.tcm.reserved_bytes)


def check_tile_bytes(key: str, tile_bytes: int, model: HardwareModel) -> None:
    """Refuse a TCM tile key's value not whole float32 or over a DataRAM's free space."""
    if tile_bytes % 4:
        raise ConfigError(f"{key} = {tile_bytes}: must be a multiple of 4 (float32)")
    bank, reserved = model.tcm.bank_bytes, model.tcm.reserved_bytes
    largest = max(0, bank - reserved) // 4 * 4
    if tile_bytes > largest:
        allowed = f"allowed 4 to {largest}" if largest >= 4 else "no tile fits"
        raise ConfigError(
            f"{key} = {tile_bytes}: larger than a DataRAM's free space (tcm.bank_bytes - "
            f"tcm.reserved_bytes = {bank} - {reserved} = {bank - reserved} bytes); {allowed}"
        )


SUMMARY_CHUNK_ELEMENTS = 1 << 18  # reference and error arrays are built this many at a time
WRONG_REL = 1e-3  # an element off by more than this, relative (and the floor), is wrong
# JSON has no infinite or NaN number: an output summary writes them as these strings
NON_FINITE_TEXT = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _number_text(v: Any) -> Any:
    if isinstance(v, float | np.floating) and not math.isfinite(v):
        return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
    return v


def summary_json(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An output summary as JSON holds it: a non-finite number as its :data:`NON_FINITE_TEXT`."""
    return None if summary is None else {k: _number_text(v) for k, v in summary.items()}


def summary_from_json(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The output summary :func:`summary_json` wrote, its numbers floats again."""
    if summary is None:
        return None
    return {k: NON_FINITE_TEXT.get(v, v) if isinstance(v, str) else v for k, v in summary.items()}


def errors_text(summary: Mapping[str, Any]) -> str:
    """An output summary's errors in words (``n/a``: nothing compared), and how many elements
    are wrong when any is."""
    def shown(v: Any) -> str:
        return "n/a" if v is None else f"{v:.3g}"

    text = (f"max relative error vs float64 {shown(summary.get('max_rel_err'))}, max absolute "
            f"error {shown(summary.get('max_abs_err'))}")
    wrong = summary.get("wrong_count") or 0
    if wrong:
        text += f", {wrong:,} wrong (off by more than {WRONG_REL:g} relative)"
    return text


def _chunk_errors(got: np.ndarray, r: np.ndarray, floor: float, tolerance: float | None
                  ) -> tuple[list[float], list[float], int, bool]:
    """One slice of :func:`error_summary`: its max relative and absolute errors (none when
    nothing was measured; a non-finite element stands for ``inf`` wrong, 0 matching), how many
    of its elements are wrong, and whether all are within ``tolerance``."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ref_abs = np.abs(r)
        diff = np.abs(got - r)
        finite = np.isfinite(r)
        mask = finite & (ref_abs > floor)
        rel = diff[mask] / ref_abs[mask]
        absolute = diff[finite]
        # a non-finite reference matched exactly: NaN for NaN, the same inf
        same = ~finite & ((got == r) | (np.isnan(got) & np.isnan(r)))
        within = tolerance is None or bool(np.all(
            (diff <= np.maximum(tolerance * ref_abs, floor)) | same))
        # wrong: off by more than WRONG_REL relative and floor absolute (NaN off too)
        wrong = np.count_nonzero(finite & ~(diff <= np.maximum(WRONG_REL * ref_abs, floor)))
    rel = np.where(np.isnan(rel), np.inf, rel)
    absolute = np.where(np.isnan(absolute), np.inf, absolute)
    # wrong without a relative error: against a non-finite reference, or non-finite
    # against one below floor
    off = int(np.count_nonzero(~finite & ~same)
              + np.count_nonzero(finite & ~mask & ~np.isfinite(got)))
    special = ([np.inf] if off else []) + ([0.0] if same.any() else [])
    rels = ([float(rel.max())] if rel.size else []) + special
    absolutes = ([float(absolute.max())] if absolute.size else []) + special
    return rels, absolutes, int(wrong + np.count_nonzero(~finite & ~same)), within


def error_summary(
    out: np.ndarray, ref: np.ndarray | Callable[[slice], np.ndarray], floor: float = 1e-30,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """Sum, non-finite counts, max relative error (where ``|ref| > floor``), max absolute error
    and ``wrong_count`` (off by more than :data:`WRONG_REL` relative and ``floor`` absolute), a
    slice at a time. A non-finite reference matched exactly is right, any other non-finite
    disagreement wrong (errors inf); a max is None when nothing was compared. ``ref``: the
    float64 reference, or a function giving it for a slice of the flattened output (no float64
    copy of a long output held). With a relative ``tolerance``, also ``within_tolerance``
    (``floor`` its absolute part)."""
    flat = out.reshape(-1)
    rels: list[float] = []
    absolutes: list[float] = []
    wrong, within = 0, True
    for lo in range(0, flat.size, SUMMARY_CHUNK_ELEMENTS):
        part = slice(lo, lo + SUMMARY_CHUNK_ELEMENTS)
        r = ref(part) if callable(ref) else ref.reshape(-1)[part]
        chunk_rels, chunk_abs, chunk_wrong, chunk_within = _chunk_errors(
            flat[part].astype(np.float64), r, floor, tolerance)
        rels += chunk_rels
        absolutes += chunk_abs
        wrong += chunk_wrong
        within &= chunk_within
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf: the sum is NaN
        total = float(np.sum(out, dtype=np.float64))
    summary = {"sum": total, "nan_count": int(np.isnan(out).sum()),
               "inf_count": int(np.isinf(out).sum()), "max_rel_err": max(rels, default=None),
               "max_abs_err": max(absolutes, default=None), "wrong_count": wrong}
    return summary if tolerance is None else summary | {"within_tolerance": within}
