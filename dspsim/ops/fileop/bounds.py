"""An op file's closed forms: traffic, lower bounds, an estimate, the tiles that fit, and the
search space of its tile, buffer and block_cols keys.

``direct``: the kernels' walk over the host memory (:func:`~dspsim.kernels.cached.
direct_bounds`); ``pingpong`` of a 2-D op: the row-wise ops' bounds (:func:`~dspsim.ops.
rowwise.rowwise_bounds`), or with 2-D blocks :func:`block_bounds`. Otherwise, per frame: its
bytes over the port (**DMA**), its bursts' round trips over ``min(m, C k)`` in flight through
``C`` channels (**latency**), the kernels' TCM cycles plus ``idma.setup_cycles`` per
descriptor (**compute**); the estimate is the seed frame's (:func:`~dspsim.ops.pingpong_bounds.
ping_pong_pass_cycles`) summed over the frames. The ping-pong frame waits for its last output
only: the last frame's other-buffer tile is left out of the DMA and latency bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dspsim.hw.policy import engine_paced_cycles
from dspsim.kernels.cached import direct_bounds
from dspsim.ops.base import Bounds, Op
from dspsim.ops.fileop.program import block_shape, blocks, buffer_banks, pass_kernels, uses_blocks
from dspsim.ops.pingpong_bounds import Tiling, ping_pong_pass_cycles
from dspsim.ops.rowwise import bounds_with_binding, rowwise_bounds
from dspsim.ops.softmax.layout import fits, free_bank_bytes

if TYPE_CHECKING:
    from dspsim.config import HardwareModel
    from dspsim.ops.fileop.spec import OpSpec, PassSpec

# a frame: (elements, tile elements, writes back, kernel cycles of a tile of s elements)
Frame = tuple[int, int, bool, Callable[[int], float]]


def largest_tile(model: HardwareModel, per_bank: int) -> int:
    """The largest multiple of 4 of which ``per_bank`` buffers fit one DataRAM."""
    lo, hi = 0, free_bank_bytes(model) // 4
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(model, per_bank, 4 * mid) else (lo, mid - 1)
    return 4 * lo


def per_bank_buffers(op: Op, model: HardwareModel, variant: str) -> int:
    """The most buffers the variant puts in one DataRAM."""
    count = model.params(op.name).buffers if variant == "nbuffer" else 2
    banks = buffer_banks(variant, count, model.tcm.banks)
    return max(banks.count(b) for b in set(banks))


def _block_cols(op: Op, model: HardwareModel) -> int:
    return model.params(op.name).block_cols if op.spec.block_cols is not None else 0


def _block_refusal(op: Op, model: HardwareModel, variant: str, shape: tuple[int, ...]
                   ) -> str | None:
    """Why a 2-D block schedule cannot run (one line), None when it can."""
    name, cols, halo = op.name, _block_cols(op, model), op.spec.halo
    key = f"{name}.block_cols"
    if variant == "nbuffer":
        return (f"{name} nbuffer runs whole-row tiles; {key} = {cols} asks for 2-D "
                f"blocks; allowed: the pingpong variant, or {key} = 0")
    if op.spec.shifts and 0 < cols < shape[1]:
        return (f"{name} pingpong: {key} = {cols} cuts its rows, and a pass reads along "
                f"the row (shift); allowed: {key} = 0 or >= {shape[1]} (whole rows)")
    tile = model.params(name).tile_bytes
    out_rows, width = block_shape(tile, shape[1], cols, halo)
    if out_rows >= 1:
        return None
    need = 4 * width * (1 + 2 * halo)
    return (f"{name} pingpong: {name}.tile_bytes = {tile} holds no block of {width} "
            f"columns with {halo} row(s) of halo above and below ({need} bytes); allowed: "
            f"{name}.tile_bytes >= {need}, or fewer {key}")


def tile_refusal(op: Op, model: HardwareModel, variant: str, shape: tuple[int, ...]
                 ) -> str | None:
    """Why the variant's tiles do not fit (one line, with what is allowed), None if they do."""
    key = f"{op.name}.tile_bytes"
    tile = model.params(op.name).tile_bytes
    per_bank = per_bank_buffers(op, model, variant)
    largest = largest_tile(model, per_bank)
    free = free_bank_bytes(model)
    if not fits(model, per_bank, tile):
        more = f", fewer {op.name}.buffers or more tcm.banks" if variant == "nbuffer" else ""
        return (f"{op.name} {variant} puts {per_bank} tile(s) of {key} = {tile} in one "
                f"DataRAM, whose free space is {free} bytes (tcm.bank_bytes - "
                f"tcm.reserved_bytes); allowed: {key} <= {largest}{more}")
    if len(shape) == 2 and uses_blocks(op.spec, _block_cols(op, model)):
        return _block_refusal(op, model, variant, shape)
    row = 4 * shape[-1]
    if len(shape) != 2 or tile >= row:
        return None
    blocks = (f", or {op.name}.block_cols > 0 (2-D blocks, pingpong)"
              if op.spec.block_cols is not None else "")
    if row > largest:
        return (f"{op.name} {variant}: a row of {shape[-1]} float32 ({row} bytes) does not fit "
                f"a DataRAM's tile (at most {largest} bytes); allowed: the direct variant"
                + blocks)
    return (f"{op.name} {variant}: {key} = {tile} does not hold a row of {shape[-1]} "
            f"float32 ({row} bytes); allowed: {key} from {row} to {largest}, the direct "
            f"variant{blocks}")


def _pass_calls(spec: OpSpec, p: PassSpec) -> list[tuple[Any, bool]]:
    """(loop shape, writes) of a pass's kernels."""
    return [(k.shape, k.writes) for k in pass_kernels(spec, p)]


def _direct_calls(spec: OpSpec) -> tuple[tuple[Any, str, str | None], ...]:
    calls = []
    for p in spec.passes:
        src = p.reads
        for shape, writes in _pass_calls(spec, p):
            calls.append((shape, src, spec.output if writes else None))
            if writes:
                src = spec.output
    return tuple(calls)


def array_memories(op: Op, model: HardwareModel) -> set[str]:
    """The memories the op's arrays live in (the host's by its own name)."""
    p = model.params(op.name)
    names = {getattr(p, f"{a}_memory") for a in (op.spec.input, op.spec.output)}
    return {model.host.memory if m == "host" else m for m in names}


def bounds(op: Op, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> Bounds:
    """The bounds on the memory the arrays live in (as if it were the host's). Arrays in two
    memories: the compute bound alone bounds the run below (one port's bandwidth bounds its
    own bytes only), the estimate the larger of the two memories' as if they held both."""
    mems = sorted(array_memories(op, model))
    if len(mems) == 1:
        at = model if mems[0] == model.host.memory else model.with_overrides(
            {"host.memory": mems[0]})
        return _bounds(op, at, variant, shape)
    each = [_bounds(op, model.with_overrides({"host.memory": m}), variant, shape)
            for m in mems]
    out = {k: 0.0 for k in ("dma_bound_cycles", "latency_bound_cycles")}
    out["compute_bound_cycles"] = min(b["compute_bound_cycles"] for b in each)
    out["memories"] = ", ".join(mems)
    return bounds_with_binding(out, max(b["estimate_cycles"] for b in each))


def _bounds(op: Op, model: HardwareModel, variant: str, shape: tuple[int, ...]) -> Bounds:
    spec = op.spec
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape
    if variant == "direct":
        out = direct_bounds(model, _direct_calls(spec), cols, rows)
        return bounds_with_binding(out, out.pop("estimate_cycles"))
    row_calls = tuple(c for p in spec.passes for c in _pass_calls(spec, p))
    tile = model.params(op.name).tile_bytes
    if variant == "pingpong" and uses_blocks(spec, _block_cols(op, model)):
        out = block_bounds(model, spec, (rows, cols), _tile_cost(row_calls, model.core))
        return bounds_with_binding(out, out.pop("estimate_cycles"))
    if variant == "pingpong" and spec.ndim == 2:
        return rowwise_bounds(model, variant, (rows, cols), row_calls, tile)
    core = model.core
    if spec.ndim == 2:
        per_tile = max(1, tile // (4 * cols))
        row = _tile_cost(row_calls, core)(cols)
        frames: list[Frame] = [(rows * cols, per_tile * cols, True,
                                lambda s: s // cols * row)]
    else:
        frames = [(cols, max(1, tile // 4), bool(p.writes),
                   _tile_cost(_pass_calls(spec, p), core)) for p in spec.passes]
    return _tiled(model, variant, frames)


def block_bounds(model: HardwareModel, spec: OpSpec, shape: tuple[int, int],
                 row_cycles: Any) -> dict[str, Any]:
    """Traffic and lower bounds of the blocks (``row_cycles(n)``: the passes' kernel cycles on
    a row of ``n`` in TCM): every input (halo included) and output row over the port; their
    bursts, cut at row ends, over ``min(m, 2k)`` in flight; the passes on every input row plus
    two descriptors a block. The estimate: the larger of the port busy throughout but for the
    last block and the engine's fetch of the first and last copies, and the schedule followed
    block by block (:func:`_block_schedule`)."""
    rows, cols = shape
    mem, idma = model.host_memory, model.idma
    policy, burst = mem.policy, idma.burst_bytes  # what a request costs (dspsim.hw.policy)
    p = model.params(spec.name)
    out_rows, width = block_shape(p.tile_bytes, cols, p.block_cols, spec.halo)
    todo = blocks(rows, cols, out_rows, width, spec.halo)
    read = sum(4 * (b.a1 - b.a0) * b.cols for b in todo)
    write = 4 * rows * cols
    per_row = {b.cols: -(-4 * b.cols // burst) for b in todo}
    reads = sum(per_row[b.cols] * (b.a1 - b.a0) for b in todo)
    writes = sum(per_row[b.cols] * (b.r1 - b.r0) for b in todo)
    work = [(b.a1 - b.a0) * row_cycles(b.cols) for b in todo]
    window = min(mem.max_outstanding, 2 * idma.max_outstanding)
    dma = policy.data_cycles(read + write)
    compute = sum(work) + 2 * len(todo) * idma.setup_cycles
    # the port busy but for the last block and the engine's fetch of the first and last copies
    estimate = max(dma + work[-1] + idma.setup_cycles + 2 * idma.descriptor_cycles,
                   _block_schedule(model, todo, work))
    return {"ddr_read_bytes": read, "ddr_write_bytes": write,
            "dma_bound_cycles": dma,
            "latency_bound_cycles": policy.latency_total(reads, writes) / window,
            "compute_bound_cycles": compute,
            "blocks": len(todo), "block_rows": out_rows, "block_cols": width,
            "halo_rows": spec.halo, "estimate_cycles": estimate}


def _block_schedule(model: HardwareModel, todo: list[Any], work: list[float]) -> float:
    """When the core and both channels are done with ``program.run_blocks``' schedule: the core
    programs two inputs, then per block waits for its input, runs its passes (``work``),
    programs its output and the input two blocks on; block i's copies go on channel i % 2 in
    turn, each alone on the port and paced by the engine (:func:`~dspsim.hw.policy.
    engine_paced_cycles`)."""
    mem, idma = model.host_memory, model.idma
    policy, setup = mem.policy, idma.setup_cycles
    window = min(idma.max_outstanding, mem.max_outstanding)
    free, ready, core = [0.0, 0.0], [0.0] * len(todo), 0.0

    def copy(i: int, t: float, rows: int, write: bool) -> float:  # programmed at t, done then
        n, row = 4 * rows * todo[i].cols, 4 * todo[i].cols
        moved = policy.transfer_cycles(n, idma.burst_bytes, window, write)
        free[i % 2] = max(t, free[i % 2]) + engine_paced_cycles(
            idma, n, row, moved, lambda b: policy.request_cycles(b, write))
        return free[i % 2]

    for i in range(min(2, len(todo))):
        core += setup
        ready[i] = copy(i, core, todo[i].a1 - todo[i].a0, False)
    for i, b in enumerate(todo):
        core = max(core, ready[i]) + work[i] + setup
        copy(i, core, b.r1 - b.r0, True)
        if i + 2 < len(todo):
            core += setup
            ready[i + 2] = copy(i + 2, core, todo[i + 2].a1 - todo[i + 2].a0, False)
    return max(core, *free)


def _tile_cost(calls: Sequence[tuple[Any, bool]], core: Any) -> Callable[[int], float]:
    """The kernel cycles of ``calls`` on ``n`` elements in TCM."""
    return lambda s: sum(shape.tcm_cycles(s, core) for shape, _ in calls)


def _tiled(model: HardwareModel, variant: str, frames: list[Frame]) -> Bounds:
    mem, idma = model.host_memory, model.idma
    policy, burst = mem.policy, idma.burst_bytes  # what a request costs (dspsim.hw.policy)
    read = write = requests = write_requests = descriptors = 0
    compute = estimate = 0.0
    for i, (length, block, writes, cost) in enumerate(frames):
        tiles = Tiling.of(length, block)
        copies = 2 if writes else 1
        read += 4 * length
        write += 4 * length if writes else 0
        bursts = tiles.total(lambda s: -(-4 * s // burst))
        requests += copies * bursts
        write_requests += bursts if writes else 0
        descriptors += copies * tiles.count
        compute += tiles.total(cost)
        estimate += ping_pong_pass_cycles(model, tiles, cost, writes,
                                          stops_timer=i == len(frames) - 1)
    last_len, last_block, last_writes, _ = frames[-1]
    last = Tiling.of(last_len, last_block)
    unwaited = (4 * last.at(last.count - 2) if variant == "pingpong" and last_writes
                and last.count >= 2 else 0)
    channels = 2 if variant == "pingpong" else idma.channels
    window = min(mem.max_outstanding, channels * idma.max_outstanding)
    return bounds_with_binding({
        "ddr_read_bytes": read,
        "ddr_write_bytes": write,
        "dma_bound_cycles": policy.data_cycles(read + write - unwaited),
        "latency_bound_cycles": policy.latency_total(
            requests - write_requests, write_requests - -(-unwaited // burst)) / window,
        "compute_bound_cycles": compute + descriptors * idma.setup_cycles,
        "tiles": Tiling.of(frames[0][0], frames[0][1]).count,
    }, estimate)


def search_space(op: Op, model: HardwareModel, variant: str, shape: tuple[int, ...]
                 ) -> dict[str, list]:
    """``<op>.tile_bytes``: the powers of two from 1 KiB whose buffers fit (and hold a row of
    a 2-D op, or its narrowest 2-D block with the halo), and the model's own; ``<op>.buffers``:
    its declared range (``nbuffer``); ``<op>.block_cols`` (``pingpong``): :func:`_block_widths`
    (a setting that does not fit is refused by ``check_run`` and skipped). ``direct``:
    nothing."""
    if variant == "direct":
        return {}
    space: dict[str, list] = {}
    params = model.params(op.name)
    if variant == "nbuffer":
        b = op.spec.buffers
        space[f"{op.name}.buffers"] = sorted({*range(b.lo, b.hi + 1), params.buffers})
    per_bank = per_bank_buffers(op, model, variant)
    row = 4 * shape[-1] if len(shape) == 2 else 4
    widths = _block_widths(op, model, shape, per_bank) if variant == "pingpong" else []
    if widths:
        space[f"{op.name}.block_cols"] = widths
    if len(shape) == 2 and (widths or uses_blocks(op.spec, _block_cols(op, model))):
        cols = min(w or shape[1] for w in widths or [_block_cols(op, model)])
        row = 4 * min(shape[1], cols) * (1 + 2 * op.spec.halo)  # a block, halo too
    tiles, t = set(), 1024
    lo, hi = op.spec.tile.lo, op.spec.tile.hi
    while fits(model, per_bank, t) and t <= hi:
        if t >= max(row, lo):
            tiles.add(t)
        t *= 2
    if fits(model, per_bank, params.tile_bytes) and params.tile_bytes >= row:
        tiles.add(params.tile_bytes)
    if tiles:
        space[f"{op.name}.tile_bytes"] = sorted(tiles)
    return space


def _block_widths(op: Op, model: HardwareModel, shape: tuple[int, ...], per_bank: int
                  ) -> list[int]:
    """``<op>.block_cols`` of a 2-D op that declares it: 0 (whole rows), the powers of two from
    a burst's columns and below the row whose one-row block with its halo fits a buffer (none
    when a pass reads along the row), and the model's own; within the declared range."""
    given = op.spec.block_cols
    if len(shape) != 2 or given is None:
        return []
    widths, w = {0, _block_cols(op, model)}, max(1, model.idma.burst_bytes // 4)
    while not op.spec.shifts and w < shape[1] and fits(model, per_bank,
                                                       4 * w * (1 + 2 * op.spec.halo)):
        widths.add(w)
        w *= 2
    return sorted(x for x in widths if given.lo <= x <= given.hi)
