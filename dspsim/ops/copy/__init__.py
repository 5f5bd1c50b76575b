"""The copy microbenchmark (RPC command 0x8005): the copies vendors publish (a DMA copy of a
few sizes, a memcpy).

``dspsim run --op copy --variant idma|dma|memcpy|loop --n BYTES`` moves ``n`` bytes from
``copy.src`` to ``copy.dst`` (``host``, ``tcm`` or a memory of the model). The default input
is ``(7 + 131 i) mod 256`` for byte ``i`` (an ``--input`` array is copied as its bytes); the
output is compared with it byte for byte. ``dma`` names the platform's DMA engine (an iDMA, a
GDMA): the ``idma`` variant under another name (:data:`DMA_ALIASES`). ``program.py`` is the
benchmark's C (with the loop variant's walk), ``traffic.py`` the bytes each port carries,
``bounds.py`` the closed forms.

``copy.src`` and ``copy.dst`` name ``host`` (the memory the host allocates from,
``host.memory``), ``tcm`` (a DataRAM of the core) or any memory table of the model. Which names
exist is checked against the platform when a run starts (:meth:`Copy.check_run`), not when the
``[copy]`` table is read: nothing is known of the run then.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dspsim.errors import DspsimInputError
from dspsim.ops import base
from dspsim.ops.base import HOST, NO_BOUND, TCM, Bounds, Op, Proc, free_bank_bytes  # noqa: I001
from dspsim.ops.copy import bounds as _bounds
from dspsim.ops.copy.program import (
    COPY_CMD,
    LOOP,
    RING_MIN_BYTES,
    hb_dsp_copy,
    hbDSPCopyParam,
    plan,
)
from dspsim.ops.registry import register_op
from dspsim.schema import Key, OpSchema


def _check_ends(p: Any, model: Any) -> None:
    """``copy.src`` and ``copy.dst`` name host, tcm or a memory of the model."""
    for key in ("src", "dst"):
        base.check_memory_key(f"copy.{key}", getattr(p, key), model)


PARAMS = OpSchema(
    "copy",
    (
        Key("copy.src", str, "where the bytes come from: host (the host's memory, "
            "host.memory), tcm (a DataRAM) or a memory of the model", default=HOST),
        Key("copy.dst", str, "where they go: tcm (a DataRAM; smaller than the copy, it is "
            "reused as a ring), host or a memory of the model", default=TCM),
        Key("copy.descriptor_bytes", int, "bytes per iDMA descriptor (idma) or per memcpy call "
            "into a TCM ring; 0: the whole copy when it fits the destination, else the largest "
            "power of two of which two fit a DataRAM's free space", default=0, lo=0,
            hi=1 << 30, unit="bytes", multiple=4),
        Key("copy.rows", int, "idma: the copy is a 2-D block (idma_copy_2d_desc) of copy.rows "
            "rows of n / copy.rows bytes each (n stays every byte moved, and must be a "
            "multiple of copy.rows), read at copy.src_pitch_bytes and written at "
            "copy.dst_pitch_bytes; copy.descriptor_bytes, when set, a whole number of rows; "
            "both ends must hold the whole block (no ring); 1: contiguous", default=1, lo=1,
            hi=1 << 24, unit="rows"),
        Key("copy.src_pitch_bytes", int, "idma with copy.rows > 1: bytes from one source row's "
            "start to the next (at least the row); 0: the row (rows back to back)", default=0,
            lo=0, hi=1 << 30, unit="bytes"),
        Key("copy.dst_pitch_bytes", int, "idma with copy.rows > 1: bytes from one destination "
            "row's start to the next (at least the row); 0: the row", default=0, lo=0,
            hi=1 << 30, unit="bytes"),
        Key("copy.ring_descriptors", int, "idma: descriptors of the channel's fixed buffer "
            "(idma_init_loop); a descriptor starts as soon as the buffer has room", default=2,
            lo=1, hi=64, unit="descriptors"),
        Key("copy.prologue_cycles", float, "core cycles the benchmark spends inside its timed "
            "span before the copy starts (the SDK cleans and invalidates the data cache first)",
            default=0.0, lo=0.0, hi=1e9, unit="cycles", trend=1),
        Key("copy.timed_prologue", bool, "the timed span includes the prologue "
            "(copy.prologue_cycles), as a cycle-counter benchmark's does; false: the copy "
            "alone, as a throughput table times it", default=True),
        Key("copy.completion_interrupt", bool, "idma: the last descriptor raises a completion "
            "interrupt whose handler runs before the timer stops (copy.interrupt_handler_cycles)",
            default=False),
        Key("copy.interrupt_handler_cycles", float, "idma with copy.completion_interrupt: "
            "cycles from the last descriptor's completion to the handler's return (entry, the "
            "handler's work, exit)", default=0.0, lo=0.0, hi=1e9, unit="cycles", trend=1),
        Key("copy.access_bytes", int, "loop: bytes each iteration loads and then stores (32: "
            "two 16-byte vector loads, then two stores, as the ESP32-S3 PIE loop does; at most "
            "the core's vector bytes otherwise); n must be a multiple of it; "
            "the default, a byte loop, copies any n", default=1,
            choices=(1, 2, 4, 8, 16, 32), unit="bytes"),
        Key("copy.loop_cycles_per_iteration", float, "loop: core cycles an iteration costs "
            "when nothing misses (its load, its store, the pointer and loop updates)",
            default=1.0, positive=True, hi=1e6, unit="cycles"),
        Key("copy.flush_destination", bool, "memcpy and loop: every dirty line of the "
            "destination is written back before the timer stops (esp_cache_msync after the "
            "copy), the core waiting for the last", default=False),
        Key("copy.memcpy_access_bytes", int, "memcpy: the library memcpy is a core loop of "
            "this many bytes per load and store (as the loop variant's copy.access_bytes; the "
            "ESP32-S3's newlib memcpy copies 32-bit words); 0: the core's vector memcpy kernel",
            default=0, choices=(0, 1, 2, 4, 8, 16, 32), unit="bytes"),
        Key("copy.memcpy_cycles_per_iteration", float, "memcpy with copy.memcpy_access_bytes: "
            "core cycles an iteration of that loop costs when nothing misses", default=1.0,
            positive=True, hi=1e6, unit="cycles", trend=1),
        Key("copy.dma_cache_sync_cycles_per_line", float, "idma (dma): core cycles per data "
            "cache line of each cached end's range that the DMA driver syncs inside the timed "
            "span (esp_async_memcpy's esp_cache_msync: the source's lines written back before "
            "the start, the destination's invalidated at completion); 0: none", default=0.0,
            lo=0.0, hi=1e6, unit="cycles", trend=1),
    ),
    check=_check_ends,
)


_LOOP_KEYS = ("copy.access_bytes", "copy.loop_cycles_per_iteration")
_KEY_VARIANTS = {  # the variants a key acts in (a memcpy moves one contiguous run, no channel)
    **dict.fromkeys(("copy.rows", "copy.src_pitch_bytes", "copy.dst_pitch_bytes",
                     "copy.ring_descriptors", "copy.completion_interrupt",
                     "copy.interrupt_handler_cycles", "copy.dma_cache_sync_cycles_per_line"),
                    ("idma", "dma")),
    **dict.fromkeys(_LOOP_KEYS, ("loop",)),
    "copy.flush_destination": ("memcpy", "loop"),
    **dict.fromkeys(("copy.memcpy_access_bytes", "copy.memcpy_cycles_per_iteration"),
                    ("memcpy",)),
}
_VARIANT_CODE = {"memcpy": 0, "idma": 1, "loop": LOOP}
DMA_ALIASES = {"dma": "idma"}  # another name of a variant -> the variant it runs (module doc)


class Copy(Op):
    name = "copy"
    doc = ("a copy microbenchmark: n bytes from copy.src to copy.dst (host, tcm or a memory) "
           "by iDMA descriptors or the core's memcpy; n in bytes")
    cmd = COPY_CMD
    variants = {
        "idma": "one iDMA channel in ring mode (idma_init_loop of copy.ring_descriptors): "
                "descriptors of copy.descriptor_bytes, each started as soon as the ring has "
                "room, then polled to completion (between two external memories where "
                "idma.tcm_end_required is false, each burst read, then written once read)",
        "memcpy": "the core's memcpy kernel (one vector load and one vector store per "
                  "iteration), through the data cache where the memory is cached, then MEMW: "
                  "the timer sees the stores still posted complete",
        "loop": "a core loop of known cost: per iteration one load and one store of "
                "copy.access_bytes, copy.loop_cycles_per_iteration cycles when nothing misses; "
                "blocking read misses, store misses (dcache.write_allocate), write-backs "
                "drained behind it on the port, then MEMW",
        "dma": "the platform's DMA engine (the iDMA, a GDMA): the idma variant under this name",
    }
    default_variant = "idma"
    study_variants = ("idma", "memcpy", "loop")  # dma is idma again
    params = PARAMS
    ndim = 1
    default_shape = (65536,)
    size_unit = "bytes"  # n counts bytes, not float32

    # ------------------------------------------------------------------ sizes and values
    def input_bytes(self, shape: tuple[int, ...]) -> int:
        """``n`` bytes rounded up to a word (the memcpy kernel moves whole 32-bit words)."""
        return -(-int(shape[0]) // 4) * 4

    def default_input(self, shape: tuple[int, ...]) -> np.ndarray:
        return ((7 + 131 * np.arange(shape[0], dtype=np.int64)) % 256).astype(np.uint8)

    def check_input(self, x: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        """An input array's bytes (any 1-D array of numbers) and the run's shape ``(bytes,)``."""
        x = np.asarray(x)
        if x.ndim != 1 or x.size == 0 or x.dtype.kind not in "uifb":
            raise DspsimInputError(f"copy input: shape {x.shape} of {x.dtype}; expected a "
                                   "non-empty 1-D array of numbers (copied as its bytes)")
        b = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        return b, self.shape_of(n=int(b.size))

    def write_input(self, memory: Any, ptr: Any, x: np.ndarray, shape: tuple[int, ...]) -> None:
        memory.write(ptr.addr, np.ascontiguousarray(x).view(np.uint8))

    def host_array(self, memory: Any, ptr: Any, shape: tuple[int, ...], output: bool
                   ) -> np.ndarray:
        return memory.read(ptr.addr, int(shape[0]))

    # ------------------------------------------------------------------ the run
    def requirements(self, variant: str) -> dict[str, int]:
        return {"channels": 1 if DMA_ALIASES.get(variant, variant) == "idma" else 0, "banks": 1}

    def key_variants(self, key: str) -> tuple[str, ...]:
        return _KEY_VARIANTS.get(key) or super().key_variants(key)

    def check_run(self, model: Any, variant: str, shape: tuple[int, ...]) -> None:
        super().check_run(model, variant, shape)
        variant = DMA_ALIASES.get(variant, variant)
        p, n = model.copy, shape[0]
        if p.rows > 1:
            self._check_rows(model, variant, n)
        _check_engine(model, variant)
        self._check_keys(p, variant)
        if variant == "loop":
            self._check_loop(model, n, p.access_bytes)
        if variant == "memcpy" and p.memcpy_access_bytes:
            self._check_loop(model, n, p.memcpy_access_bytes, "copy.memcpy_access_bytes")
        _check_space(model, n)

    @staticmethod
    def _check_rows(model: Any, variant: str, n: int) -> None:
        """A 2-D copy (``copy.rows > 1``): the idma variant, whole rows, pitches at least the
        row, descriptors of whole rows, each end holding its block."""
        p = model.copy
        if variant != "idma":
            raise DspsimInputError(f"copy {variant} with copy.rows = {p.rows}: a 2-D block is "
                                   "an iDMA descriptor; allowed: --variant idma, or copy.rows "
                                   "= 1")
        if n % p.rows:
            raise DspsimInputError(
                f"copy of {n:,} bytes in copy.rows = {p.rows:,} rows: n is every byte moved "
                f"and must be a whole number of rows; allowed: n a multiple of {p.rows:,}")
        row = n // p.rows
        for key in ("src_pitch_bytes", "dst_pitch_bytes"):
            if 0 < getattr(p, key) < row:
                raise DspsimInputError(
                    f"copy.{key} = {getattr(p, key):,}: smaller than a row of {row:,} bytes "
                    f"(n / copy.rows); allowed: 0 (the row) or at least {row:,}")
        if p.descriptor_bytes % row:
            raise DspsimInputError(
                f"copy.descriptor_bytes = {p.descriptor_bytes:,} with rows of {row:,} bytes: "
                f"a 2-D descriptor moves whole rows; allowed: 0 (one descriptor) or a "
                f"multiple of {row:,}")
        pl = plan(model, p, n)
        for key, where, span in (("copy.src", p.src, pl.src_bytes),
                                 ("copy.dst", p.dst, pl.dst_bytes)):
            room = free_bank_bytes(model) if where == TCM else \
                _bounds.memory_of(model, where).size_bytes
            if span > room:
                raise DspsimInputError(
                    f"copy of {p.rows:,} rows of {row:,} bytes: the 2-D block at {key} = "
                    f"{where} spans {span:,} bytes, more than its {room:,}; allowed: smaller "
                    f"pitches or fewer bytes")

    def _check_keys(self, p: Any, variant: str) -> None:
        """Refuse a core copy's key set where it cannot act (the loop's in memcpy, a flush in
        idma)."""
        for key in (*_LOOP_KEYS, "copy.flush_destination"):  # a run's own choice
            # (the memcpy keys and the DMA driver's cache sync are the platform's: a model
            # file gives them for every variant, and they act in theirs only)
            if variant not in self.key_variants(key) and \
                    getattr(p, key[5:]) != PARAMS.key(key[5:]).default:
                raise DspsimInputError(f"{key} does not act in copy {variant}; allowed: "
                                       f"--variant {' or '.join(self.key_variants(key))}, or "
                                       f"leave {key} unset")

    @staticmethod
    def _check_loop(model: Any, n: int, k: int, key: str = "copy.access_bytes") -> None:
        """The loop variant (or a memcpy run as a loop): an access the core can issue, whole
        iterations in the copy and in each piece into a TCM ring."""
        core = model.core
        if k == 32 and core.lanes_f32 * 4 < 16 or k != 32 and k > core.vector_bytes:
            raise DspsimInputError(
                f"{key} = {k}: this core's vector loads are {core.vector_bytes} "
                f"bytes (32 needs 16-byte vector loads); allowed: 1, 2, 4 ... up to "
                f"{core.vector_bytes}{', 32' if core.lanes_f32 * 4 >= 16 else ''}")
        if n % k:
            what = "memcpy" if key == "copy.memcpy_access_bytes" else "loop"
            raise DspsimInputError(f"copy {what} of {n:,} bytes with {key} = {k}: "
                                   f"n must be a whole number of iterations; allowed: n a "
                                   f"multiple of {k}")
        pl = plan(model, model.copy, n)
        piece = pl.piece_bytes
        if not pl.one_call and piece % k:  # one call: the pieces are the DMA's only
            raise DspsimInputError(f"copy.descriptor_bytes = {piece:,}: a loop's piece must be "
                                   f"a whole number of iterations; allowed: a multiple of {k}")

    def param_block(self, variant: str, shape: tuple[int, ...], input_addr: int) -> Any:
        code = _VARIANT_CODE[DMA_ALIASES.get(variant, variant)]
        return hbDSPCopyParam(int(shape[0]), input_addr, code)

    def handler(self, dsp: Any, input: Any, output: Any, tm: Any) -> Proc:
        return hb_dsp_copy(dsp, input, output, tm)

    # ------------------------------------------------------------------ checks and bounds
    def reference(self, x: np.ndarray, params: Any) -> np.ndarray:
        return x

    def output_summary(self, out: np.ndarray, x: np.ndarray, params: Any) -> dict[str, Any]:
        wrong = int(np.count_nonzero(out != x))
        return {"bytes": int(out.size), "mismatch_count": wrong, "exact": wrong == 0}

    def bounds(self, model: Any, variant: str, shape: tuple[int, ...]) -> Bounds:
        variant = self.check_variant(variant)
        d = _bounds.bounds(model, DMA_ALIASES.get(variant, variant),
                           self.shape_of(shape=shape))
        # the study's fields: the binding bound (with the timed prologue) is the copy's port or
        # compute bound, the lower bound the largest
        binding = "compute" if d.get("binding_bound") == "compute" else "dma"
        # the traffic of the host's memory, as the run counts it on its port
        host = {way: d["traffic_bytes"][f"{model.host.memory}_{way}"]
                for way in ("read", "write")}
        return Bounds.of({**NO_BOUND, f"{binding}_bound_cycles": d["lower_bound_cycles"],
                          "ddr_read_bytes": host["read"], "ddr_write_bytes": host["write"],
                          **d})

    def run_report(self, r: Any) -> dict[str, float]:
        """What a copy benchmark reports besides its cycles: its throughput."""
        n = r.shape[0]
        return {"bytes_per_cycle": n / r.cycles, "mb_per_s": n / r.time_us}


def _check_engine(model: Any, variant: str) -> None:
    """An iDMA copy needs an external end (two where the platform allows them); a core's copy
    raises no completion interrupt."""
    p = model.copy
    if variant != "idma":
        if p.completion_interrupt:
            raise DspsimInputError(f"copy {variant} with copy.completion_interrupt = true: a "
                                   "core's copy raises no completion interrupt; allowed: "
                                   "--variant idma, or copy.completion_interrupt = false")
    elif p.src == TCM and p.dst == TCM:
        raise DspsimInputError(
            "copy idma from tcm to tcm: an iDMA transfer between DataRAMs is not "
            "modelled; allowed: copy.src or copy.dst an external memory, or --variant "
            "memcpy")
    elif TCM not in (p.src, p.dst) and model.idma.tcm_end_required:
        raise DspsimInputError(
            f"copy idma from {p.src} to {p.dst}: on this platform one end of every "
            "iDMA transfer must be TCM (idma.tcm_end_required = true); allowed: "
            "copy.src = tcm or copy.dst = tcm, or --variant memcpy")


def _check_space(model: Any, n: int) -> None:
    """The copy's ends hold its bytes: a DataRAM's free space (a ring's two slots, a
    descriptor) at a TCM end, the memory's size at an external one."""
    p, free = model.copy, free_bank_bytes(model)
    if p.src == TCM and n > free:
        raise DspsimInputError(
            f"copy of {n:,} bytes from tcm: the source must fit one DataRAM's free space "
            f"({free:,} bytes: tcm.bank_bytes - tcm.reserved_bytes); allowed: n up to "
            f"{free:,}")
    if p.dst == TCM and not p.descriptor_bytes and n > free and free < RING_MIN_BYTES:
        raise DspsimInputError(
            f"copy of {n:,} bytes into tcm: a DataRAM ring needs at least "
            f"{RING_MIN_BYTES} free bytes (two {RING_MIN_BYTES // 2}-byte slots); this "
            f"platform has {free:,} (tcm.bank_bytes - tcm.reserved_bytes); allowed: n up "
            f"to {free:,}, copy.descriptor_bytes 4 to {free:,}, or a larger DataRAM")
    if p.dst == TCM and p.descriptor_bytes > free:
        raise DspsimInputError(
            f"copy.descriptor_bytes = {p.descriptor_bytes:,}: a descriptor into tcm must "
            f"fit one DataRAM's free space ({free:,} bytes); allowed: 4 to {free:,}")
    if p.src == TCM and p.dst == TCM and model.tcm.banks < 2 and 2 * n > free:
        raise DspsimInputError(
            f"copy of {n:,} bytes from tcm to tcm with one DataRAM: source and destination "
            f"must fit its {free:,} free bytes together")
    for key, where in (("copy.src", p.src), ("copy.dst", p.dst)):
        mem = _bounds.memory_of(model, where)
        name = model.host.memory if where == HOST else where
        if mem is not None and n > mem.size_bytes:
            raise DspsimInputError(f"copy of {n:,} bytes: {key} = {where} ({name}) "
                                   f"holds {mem.size_bytes:,} bytes")


COPY = register_op(Copy())
