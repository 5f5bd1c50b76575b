"""The Op contract: what every op must give (checked at registration), the optional hooks'
defaults, the Bounds every reader takes, and the keys the generic tests derive from each op."""

import numpy as np
import pytest

from dspsim.ops import get_op, op_names, register_op
from dspsim.ops.base import REQUIRED, Bounds, Op
from dspsim.ops.layernorm import LayerNorm
from tests.op_keys import choice_settings, tile_keys


def test_an_op_missing_what_it_must_give_is_refused():
    class Half(Op):
        name = "half"
        doc = "no handler"
        cmd = 0x7FFF
        variants = {"only": "-"}
        default_variant = "only"
        params = LayerNorm.params
        ndim = 1
        default_shape = (8,)

    with pytest.raises(ValueError, match="does not give param_block, handler, reference, "
                       "default_input"):
        register_op(Half())
    assert "half" not in op_names()
    assert set(REQUIRED) >= {"param_block", "handler", "requirements", "reference",
                             "default_input"}


def test_bounds_read_as_fields_and_as_the_ops_mapping(j6):
    for name in op_names():
        op = get_op(name)
        for variant in op.variants:
            b = op.bounds(j6, variant, op.default_shape)
            assert isinstance(b, Bounds)
            assert b.lower_bound_cycles == max(b.dma_bound_cycles, b.latency_bound_cycles,
                                               b.compute_bound_cycles)
            assert b.estimate_cycles >= b.lower_bound_cycles
            assert b["estimate_cycles"] == b.estimate_cycles and dict(b)["binding_bound"]
            # traffic, unless the op runs on TCM alone (a kernel microbenchmark: compute-bound)
            assert b.ddr_read_bytes + b.ddr_write_bytes > 0 or (
                dict(b)["binding_bound"] == "compute" and b.dma_bound_cycles == 0)


def test_the_default_output_summary_is_chunked_by_rows(j6):
    """The base Op's summary (a row-wise reference) equals the whole-array one."""
    op = get_op("layernorm")
    assert type(op).output_summary is Op.output_summary
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(700, 513)) * 3 + 40).astype(np.float32)
    out = (op.reference(x, j6.params("layernorm")) * (1 + 1e-6)).astype(np.float32)
    from dspsim.ops import base

    got = op.output_summary(out, x, j6.params("layernorm"))
    whole = base.error_summary(out, op.reference(x, j6.params("layernorm")), floor=1e-6)
    assert {k: got[k] for k in whole} == whole and got["within_tolerance"]


def test_the_generic_tests_derive_every_ops_keys(j6):
    """Every op with a TCM variant names its tile key, and optimize searches it."""
    assert tile_keys() == [get_op(n).tile_key for n in op_names() if get_op(n).tile_key]
    for name in op_names():
        op = get_op(name)
        keys = {k.name for k in op.params.keys}
        searched = set()
        for variant in op.variants:
            searched |= set(op.search_space(j6, variant, op.default_shape))
        assert searched <= keys
        assert (op.tile_key in searched) == (op.tile_key is not None)
    assert set(choice_settings(np.random.default_rng(0))) >= {"softmax.schedule"}


def test_every_ops_default_variant_is_the_first_it_lists():
    """The README and `run --help` say --variant defaults to the op's first variant: `dspsim ops`
    listed the kernel op's fc_s8 first, but a run without --variant ran memcpy."""
    for name in op_names():
        op = get_op(name)
        assert next(iter(op.variants)) == op.default_variant, name
    # an op file's too: ["direct", "pingpong"] defaults to pingpong, which it lists first
    from pathlib import Path

    from dspsim.ops.fileop import FileOp
    from dspsim.ops.fileop.spec import read_spec
    path = Path(__file__).resolve().parents[1] / "examples" / "ops" / "scale_bias.toml"
    text = path.read_text().replace('"scale_bias"', '"scale_bias_dp"').replace(
        'variants = ["pingpong", "direct", "nbuffer"]', 'variants = ["direct", "pingpong"]'
        ).replace("buffers = {", "# buffers = {")
    op = FileOp(read_spec(path, {}, text))  # not registered, nor its kernel
    assert op.default_variant == "pingpong" and list(op.variants) == ["pingpong", "direct"]
