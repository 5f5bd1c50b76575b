"""What an operator is to dspsim: everything about it, in one object.

An :class:`Op` owns its parameters (a ``[name]`` table in model files), its variants (the
schedules its C can run), the DSP program (``handler``, written beside the C as SimPy
generators), the host's parameter block, a float64 reference, closed-form bounds, and the
figures a document gives for it. Nothing outside ``ops/<name>/`` knows any of this: the
platform runs any op, the analyses read its result, the studies sweep its keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import Any, ClassVar

import numpy as np

from dspsim.errors import ConfigError, DspsimInputError
from dspsim.schema import OpSchema

Proc = Generator[Any, Any, Any]  # a SimPy process body: what ``yield from`` runs


class Op:
    name: ClassVar[str]
    doc: ClassVar[str]
    cmd: ClassVar[int]  # the RPC command the firmware registers the handler under
    latency_us: ClassVar[int] = 0  # hb_dsp_register_fn's latency hint
    variants: ClassVar[dict[str, str]]  # name -> what the schedule does
    default_variant: ClassVar[str]
    # the variants a study (a sweep) compares when none is named; None: every variant
    study_variants: ClassVar[tuple[str, ...] | None] = None
    params: ClassVar[OpSchema]
    ndim: ClassVar[int]  # input dimensions: 1 (``--n``) or 2 (``--shape ROWS,COLS``)
    # every input dimension the op accepts (default: ``ndim`` only)
    ndims: ClassVar[tuple[int, ...]] = ()

    @property
    def input_dims(self) -> tuple[int, ...]:
        """The input dimensions the op accepts."""
        return self.ndims or (self.ndim,)
    default_shape: ClassVar[tuple[int, ...]]
    # what the paper or document measured: {"shape": ..., "cycles": {variant: cycles}, ...}
    document: ClassVar[dict[str, Any] | None] = None
    # the codes of the warnings the op's own code raises (``dsp.warn(code, ...)``)
    warning_codes: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ shapes and inputs
    def check_variant(self, variant: str) -> str:
        if variant not in self.variants:
            raise DspsimInputError(
                f"{self.name} has no variant {variant!r}; allowed: {', '.join(self.variants)}"
            )
        return variant

    def shape_of(self, n: Any = None, shape: Any = None) -> tuple[int, ...]:
        """The input shape from ``n`` or ``shape`` (default :attr:`default_shape`), checked."""
        if n is not None and shape is not None:
            raise DspsimInputError("give n or shape, not both")
        if n is not None:
            if self.ndim != 1:
                raise DspsimInputError(
                    f"{self.name} takes a {self.ndim}-D shape (--shape ROWS,COLS), not n"
                )
            shape = (n,)
        if shape is None:
            return tuple(self.default_shape)
        shape = tuple(shape) if isinstance(shape, list | tuple) else (shape,)
        if len(shape) != self.ndim or any(
            isinstance(d, bool) or not isinstance(d, int | np.integer) or d <= 0 for d in shape
        ):
            want = "a positive integer n" if self.ndim == 1 else "two positive integers ROWS,COLS"
            raise DspsimInputError(f"{self.name} shape {shape!r}: expected {want}")
        return tuple(int(d) for d in shape)

    def requirements(self, variant: str) -> dict[str, int]:
        """What a variant needs of each core: ``{"channels": k, "banks": b}``."""
        return {"channels": 0, "banks": 0}

    def checks_params(self, variant: str) -> bool:
        """Whether a run of ``variant`` checks the op's parameter table against the hardware
        (default: every variant; a variant that uses no TCM need not fit a tile in it)."""
        return True

    def check_run(self, model: Any, variant: str, shape: tuple[int, ...]) -> None:
        """Refuse, before simulating, a run the platform or the op's parameters cannot do."""
        if self.params.check is not None and self.checks_params(variant):
            self.params.check(model.params(self.name), model)
        need = self.requirements(variant)
        have = {"channels": model.idma.channels, "banks": model.tcm.banks}
        keys = {"channels": "idma.channels", "banks": "tcm.banks"}
        words = {"channels": "iDMA channels", "banks": "DataRAM banks"}
        for what, count in need.items():
            if count > have[what]:
                raise DspsimInputError(
                    f"{self.name} {variant} needs {count} {words[what]} per core; the platform "
                    f"has {have[what]} ({keys[what]} = {have[what]}); allowed: {keys[what]} >= "
                    f"{count} or another variant"
                )

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        """The input a run uses when none is given (float32, ``shape``)."""
        raise NotImplementedError

    def input_bytes(self, shape: tuple[int, ...]) -> int:
        return 4 * math.prod(int(d) for d in shape)

    # ------------------------------------------------------------------ the program
    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> Any:
        """The struct the host packs for the RPC (one input and one output buffer)."""
        raise NotImplementedError

    def handler(self, dsp: Any, input: Any, output: Any, tm: Any) -> Proc:
        """The DSP side: ``hb_dsp_<op>(input, output, tm)`` as a SimPy generator."""
        raise NotImplementedError

    # ------------------------------------------------------------------ checks
    def reference(self, x: np.ndarray, params: Any) -> np.ndarray:
        """The exact answer in float64."""
        raise NotImplementedError

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Any) -> dict[str, Any]:
        """Sum, non-finite counts and errors against :meth:`reference`."""
        return error_summary(out, self.reference(x, params))

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, Any]:
        """Traffic, lower bounds (``lower_bound_cycles``) and an estimate, in closed form."""
        return {}

    # ------------------------------------------------------------------ optimisation
    def search_space(self, model: Any, variant: str, shape: tuple[int, ...]) -> dict[str, list]:
        """The parameters worth searching for ``variant`` at ``shape`` on ``model``: model
        keys (dotted, e.g. ``"softmax.tile_bytes"``) -> candidate values, for ``dspsim
        optimize`` to run in every combination (the combinations :meth:`check_run` refuses are
        skipped). The values should include the model's own, so that the defaults are among
        the candidates. This default: nothing to search (the variant runs once, at the model's
        values); an op whose schedules have knobs (tile sizes, buffer counts) overrides it."""
        return {}

    # ------------------------------------------------------------------ calibration
    def calibration_candidates(
        self, model: Any, free_keys: Any, longest_shape: tuple[int, ...]
    ) -> list[tuple[str, tuple[int, ...], dict[str, Any]]]:
        """Runs a board could make to tell apart fits that match the measurements equally
        well: ``(variant, shape, model-key settings)``, for ``dspsim calibrate`` to simulate
        with every such fit and propose the one they disagree on most.

        ``free_keys`` are the keys being fitted (a run must not set them); ``longest_shape`` is
        the largest shape of this op measured. This default: each variant the platform can run
        at a small shape (the first dimension of :attr:`default_shape` / 16: latency weighs
        more), at :attr:`default_shape` and at ``longest_shape``, with no settings. An op that
        knows which of its parameters separate latency from bandwidth overrides it.
        """
        small = (max(1, self.default_shape[0] // 16),) + tuple(self.default_shape[1:])
        shapes = sorted(
            {small, tuple(self.default_shape), tuple(longest_shape)},
            key=lambda s: (int(np.prod(s)), s),
        )
        out: list[tuple[str, tuple[int, ...], dict[str, Any]]] = []
        for variant in self.variants:
            for shape in shapes:
                try:
                    self.check_run(model, variant, shape)
                except DspsimInputError:
                    continue  # the op cannot run it here: not a measurement a board can take
                out.append((variant, shape, {}))
        return out


def check_tile_bytes(key: str, tile_bytes: int, model: Any) -> None:
    """A TCM tile key's value: a whole number of float32 and no larger than a DataRAM."""
    if tile_bytes % 4:
        raise ConfigError(f"{key} = {tile_bytes}: must be a multiple of 4 (float32)")
    if tile_bytes > model.tcm.bank_bytes:
        raise ConfigError(
            f"{key} = {tile_bytes}: larger than a DataRAM (tcm.bank_bytes = "
            f"{model.tcm.bank_bytes}); allowed 4 to {model.tcm.bank_bytes}"
        )


SUMMARY_CHUNK_ELEMENTS = 1 << 18  # reference and error arrays are built this many at a time


def error_summary(
    out: np.ndarray, ref: np.ndarray | Callable[[slice], np.ndarray], floor: float = 1e-30,
    wrong_rel: float = 1e-3,
) -> dict[str, Any]:
    """Sum, non-finite counts, the max relative error over the elements whose reference
    exceeds ``floor`` in magnitude (``None`` when there are none), the max absolute error, and
    how many elements are off by more than ``wrong_rel`` relative.

    ``ref`` is the float64 reference, or a function giving it for a slice of the flattened
    output (so that a long run never holds a float64 copy of its whole output); the errors are
    gathered a slice at a time either way."""
    flat = out.reshape(-1)
    max_rel = max_abs = -1.0
    wrong = 0
    seen_rel = seen_abs = False
    for lo in range(0, flat.size, SUMMARY_CHUNK_ELEMENTS):
        part = slice(lo, lo + SUMMARY_CHUNK_ELEMENTS)
        r = ref(part) if callable(ref) else ref.reshape(-1)[part]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            ref_abs = np.abs(r)
            diff = np.abs(flat[part].astype(np.float64) - r)
            finite = np.isfinite(r)
            mask = finite & (ref_abs > floor)
            rel = diff[mask] / ref_abs[mask]
            absolute = diff[finite]
        rel = np.where(np.isnan(rel), np.inf, rel)
        absolute = np.where(np.isnan(absolute), np.inf, absolute)
        if rel.size:
            seen_rel, max_rel = True, max(max_rel, float(rel.max()))
            wrong += int(np.count_nonzero(rel > wrong_rel))
        if absolute.size:
            seen_abs, max_abs = True, max(max_abs, float(absolute.max()))
    return {
        "sum": float(np.sum(out, dtype=np.float64)),
        "nan_count": int(np.isnan(out).sum()),
        "inf_count": int(np.isinf(out).sum()),
        "max_rel_err": max_rel if seen_rel and np.isfinite(max_rel) else None,
        "max_abs_err": max_abs if seen_abs and np.isfinite(max_abs) else None,
        "wrong_count": wrong,
    }
