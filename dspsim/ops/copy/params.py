"""The copy microbenchmark's parameters: the ``[copy]`` table of a model file.

``src`` and ``dst`` name where the bytes come from and go to: ``host`` (the memory the host
allocates from, ``host.memory``), ``tcm`` (a DataRAM of the core) or any memory table of the
model (``psram``, ``sram``, ``ddr``). Which names exist is checked against the platform when a
run starts (:meth:`dspsim.ops.copy.Copy.check_run`), not here: a model file's ``[copy]`` table
is read before anything is known of the run.
"""

from __future__ import annotations

from typing import Any

from dspsim.ops.base import HOST, TCM, check_memory_key
from dspsim.schema import Key, OpSchema, Params


def _check(p: Params, model: Any) -> None:
    for key in ("src", "dst"):
        check_memory_key(f"copy.{key}", getattr(p, key), model)


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
    check=_check,
)
