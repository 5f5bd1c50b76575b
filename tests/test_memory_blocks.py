"""A memory's blocks: first fit, which places every block where a bump allocator would while
nothing is freed, and reuses freed space."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dspsim.errors import AllocationError
from dspsim.hw.memory import Memory, Ptr

BASE = 0x1000_0000


def _memory(size_bytes: int = 1 << 20) -> Memory:
    return Memory("m", "memory", BASE, size_bytes, data=False)


@given(st.lists(st.tuples(st.integers(1, 5000), st.sampled_from([1, 4, 64, 128, 4096])),
                max_size=40))
def test_without_frees_blocks_go_where_a_bump_allocator_puts_them(requests):
    m = _memory()
    cursor = BASE
    for size, align in requests:
        start = -(-cursor // align) * align
        if start + size > BASE + m.size_bytes:
            with pytest.raises(AllocationError, match="does not fit m"):
                m.add_block(size, align)
            continue
        assert m.add_block(size, align).addr == start
        cursor = start + size


def test_freed_space_holds_a_later_block_and_the_top_comes_back():
    m = _memory(1024)
    a, b, c = (m.add_block(256, 128) for _ in range(3))
    assert (a.addr, b.addr, c.addr) == (BASE, BASE + 256, BASE + 512)
    m.free_block(b)
    assert m.add_block(200, 128).addr == BASE + 256  # the hole, first fit
    m.free_block(c)
    assert m.add_block(512, 128).addr == BASE + 512  # the top, given back
    with pytest.raises(AllocationError, match="does not fit m"):
        m.add_block(1, 1)


@pytest.mark.parametrize("where", [BASE + 4, BASE + 600])
def test_a_free_of_what_is_not_a_block_is_refused(where):
    m = _memory(1024)
    m.add_block(256, 128)
    with pytest.raises(AllocationError, match="not a block of m"):
        m.free_block(Ptr(m, where))
    with pytest.raises(AllocationError, match="not a block of m"):
        m.free_block(Ptr(_memory(), BASE))


@given(st.lists(st.tuples(st.booleans(), st.integers(1, 300), st.sampled_from([1, 4, 128]),
                          st.integers(0, 1000)), max_size=60))
def test_blocks_never_overlap_and_freed_space_is_all_given_back(ops):
    m = _memory(4096)
    live: list[tuple[int, int]] = []
    for alloc, size, align, pick in ops:
        if alloc or not live:
            try:
                p = m.add_block(size, align)
            except AllocationError:
                continue
            assert p.addr % align == 0 and BASE <= p.addr and p.addr + size <= BASE + 4096
            live.append((p.addr, size))
        else:
            addr, _ = live.pop(pick % len(live))
            m.free_block(Ptr(m, addr))
        spans = sorted(live)
        assert all(a + s <= b for (a, s), (b, _) in zip(spans, spans[1:]))  # no overlap
    for addr, _ in live:
        m.free_block(Ptr(m, addr))
    assert m.add_block(4096, 1).addr == BASE  # everything freed: the whole memory again


@pytest.mark.parametrize("order", [(1, 2), (2, 1)])
def test_neighbouring_freed_blocks_hold_one_block_as_large_as_both(order):
    m = _memory(4096)
    blocks = [m.add_block(256, 128) for _ in range(4)]  # the last keeps the top up
    for k in order:
        m.free_block(blocks[k])
    assert m.add_block(512, 128).addr == BASE + 256
