"""An op file declares no temporary array: a TCM temporary (role = "temp", memory = "tcm", a
pass writing an undeclared array) is one line saying why and what to write instead; the
alternative, the intermediate written to the output in place, keeps a 2-D op's intermediate
in the TCM tile (one read of the input, one write of the output)."""

from __future__ import annotations

import numpy as np
import pytest

from dspsim import simulate
from dspsim.errors import DspsimInputError
from dspsim.ops.fileop import load_op_file, unload_op_file
from tests.fileop_helpers import op_text

OP = op_text("sq_share", """[[pass]]
name = "square"
reads = "x"
writes = "y"
value = "x * x"
loop = { loads = 1, stores = 1, alu = 1 }

[[pass]]
name = "total"
reads = "y"
reduce = { op = "sum", into = "s" }
value = "y"
loop = { loads = 1, alu = 1 }

[[pass]]
name = "share"
reads = "y"
writes = "y"
value = "y / s"
loop = { loads = 1, stores = 1, alu = 2 }

[schedules]
variants = ["pingpong", "direct"]
""", default_shape=(16, 256))

TEMP_ARRAY = '''
[[array]]
name = "t"
shape = ["rows", "cols"]
role = "temp"
'''


@pytest.mark.parametrize("text, table", [
    (OP.replace('[[pass]]\nname = "square"', TEMP_ARRAY + '[[pass]]\nname = "square"', 1),
     '[[array]] 3 "t"'),
    (OP.replace('role = "output"', 'role = "output"\nmemory = "tcm"'), '[[array]] 2 "y"'),
    (OP.replace('writes = "y"\nvalue = "x * x"', 'writes = "t"\nvalue = "x * x"'),
     '[[pass]] 1 "square"'),
])
def test_a_tcm_temporary_is_one_line_saying_what_to_write_instead(tmp_path, text, table):
    path = tmp_path / "temp.toml"
    path.write_text(text)
    with pytest.raises(DspsimInputError) as e:
        load_op_file(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and table in msg
    assert "no temporary arrays" in msg and "written to the output" in msg


def test_an_intermediate_written_to_the_output_stays_in_the_tile(j6, tmp_path):
    """x^2 / sum(x^2) per row through the output in place: the values are numpy's, and
    pingpong moves the input in once and the output out once (the intermediate never leaves
    TCM)."""
    path = tmp_path / "sq_share.toml"
    path.write_text(OP)
    name = load_op_file(path)
    try:
        x = np.random.default_rng(7).standard_normal((16, 256)).astype(np.float32)
        r = simulate(j6, name, "pingpong", x=x)
        sq = x.astype(np.float64) ** 2
        np.testing.assert_allclose(r.output_array, sq / sq.sum(axis=1, keepdims=True),
                                   rtol=1e-5, atol=1e-9)
        assert r.bytes["ddr_read"] == r.bytes["ddr_write"] == x.nbytes
    finally:
        unload_op_file(path)
