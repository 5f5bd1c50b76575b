"""Random mutations of valid op files (a key dropped, added, or given a value of another type
or another table's value) either load or are refused in one line naming the file: never a
traceback of another kind."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dspsim.errors import DspsimInputError
from dspsim.kernels.registry import KERNELS
from dspsim.ops.fileop import build_op
from dspsim.ops.fileop.spec import parse_spec
from dspsim.ops.registry import OPS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "ops"
VALID = {p.stem: tomllib.loads(p.read_text()) for p in sorted(EXAMPLES.glob("*.toml"))}

scalars = st.one_of(
    st.integers(-2**40, 2**40), st.floats(allow_nan=True), st.booleans(),
    st.text(max_size=12), st.sampled_from(["x", "y", "n", "m", "max", "vecsum", "exp(x)",
                                           "x.y", "__import__('os')", "rows", "host", ""]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every (container path, key or index) of a parsed file."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for k, v in items:
        out.append((prefix, k))
        out += _paths(v, prefix + (k,))
    return out


def _at(raw: Any, path: tuple) -> Any:
    for k in path:
        raw = raw[k]
    return raw


@st.composite
def mutated(draw) -> dict[str, Any]:
    raw = copy.deepcopy(VALID[draw(st.sampled_from(sorted(VALID)))])
    raw["op"]["name"] = "mutant"
    for _ in range(draw(st.integers(1, 3))):
        where, key = draw(st.sampled_from(_paths(raw)))
        parent = _at(raw, where)
        how = draw(st.sampled_from(["drop", "replace", "add"]))
        if how == "drop":
            del parent[key]
        elif how == "replace":
            parent[key] = draw(values)
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(values)
        else:
            parent.append(draw(values))
        if not _paths(raw):
            break
    return raw


@pytest.fixture
def kernels_kept():
    saved = dict(KERNELS)
    yield
    KERNELS.clear()
    KERNELS.update(saved)


@settings(max_examples=300, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(raw=mutated())
def test_a_mutated_file_loads_or_is_one_line(raw, kernels_kept):
    try:
        build_op(parse_spec(raw, "mutant.toml", OPS))
    except DspsimInputError as e:
        msg = str(e)
        assert msg.startswith("op file mutant.toml: ") and "\n" not in msg, msg
    finally:
        for name in [k for k in KERNELS if k.startswith("mutant.")]:
            del KERNELS[name]
