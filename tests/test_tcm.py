"""The tile manager's allocator."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dspsim.errors import AllocationError
from dspsim.hw.tcm import TileManager


@pytest.fixture
def tm(j6):
    return TileManager(j6.tcm, data=False)


def test_buffers_land_in_their_colour_and_alignment(tm, j6):
    a = tm.allocate(1000, 0, 128)
    b = tm.allocate(1000, 0, 128)
    c = tm.allocate(4096, 1, 128)
    assert a.mem is tm.banks[0] and c.mem is tm.banks[1]
    assert a.addr % 128 == 0 and b.addr % 128 == 0 and b.addr >= a.addr + 1000


def test_a_buffer_that_does_not_fit_fails_clearly(tm, j6):
    free = j6.tcm.bank_bytes - j6.tcm.reserved_bytes  # the firmware keeps the rest
    tm.allocate(free - 4096, 0, 128)
    with pytest.raises(AllocationError, match="does not fit DataRAM colour 0"):
        tm.allocate(8192, 0, 128)
    tm.allocate(8192, 1, 128)  # the other bank is unaffected


def test_free_makes_room_again(tm, j6):
    free = j6.tcm.bank_bytes - j6.tcm.reserved_bytes
    big = tm.allocate(free, 0, 128)
    with pytest.raises(AllocationError):
        tm.allocate(4, 0, 4)
    tm.free(big)
    tm.allocate(free, 0, 128)
    with pytest.raises(AllocationError, match="not a buffer"):
        tm.free(big.__class__(big.mem, big.addr + 4))


@pytest.mark.parametrize("colour, size, align", [(2, 64, 128), (-1, 64, 128), (0, 0, 128),
                                                 (0, 64, 96)])
def test_bad_requests(tm, colour, size, align):
    with pytest.raises(AllocationError):
        tm.allocate(size, colour, align)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40_000), st.sampled_from([4, 64, 128, 256]),
                          st.booleans()), max_size=30))
def test_live_buffers_never_overlap(j6, requests):
    tm = TileManager(j6.tcm, data=False)
    live = []
    for size, align, free_one in requests:
        if free_one and live:
            tm.free(live.pop(0)[0])
        try:
            ptr = tm.allocate(size, 0, align)
        except AllocationError:
            continue
        assert ptr.addr % align == 0
        assert ptr.addr + size <= tm.banks[0].base + j6.tcm.bank_bytes
        for other, osize in live:
            assert ptr.addr + size <= other.addr or other.addr + osize <= ptr.addr
        live.append((ptr, size))
