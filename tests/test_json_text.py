"""``dspsim ... --json`` output: long lists of records one a line, the same values."""

import json
import random

from dspsim.cli.common import LONG_LIST, json_text


def _records(n: int, rng: random.Random) -> list[dict]:
    return [{"name": rng.choice(["max", "exp", 'a "quoted" name', "\u00e9"]),
             "start_cycle": rng.random() * 1e9, "end_cycle": rng.randrange(10**12),
             "nested": {"k": [1, 2.5, None]}} for _ in range(n)]


def test_values_survive_and_long_lists_are_one_record_a_line():
    rng = random.Random(7)
    for n in (0, 1, LONG_LIST, LONG_LIST + 1, 1000):
        obj = {"passes": _records(n, rng), "deep": {"list": _records(n, rng), "x": 1.5},
               "scalars": list(range(n)), "empty": {}, "none": None}
        text = json_text(obj)
        assert json.loads(text) == obj
        lines = text.splitlines()
        if n > LONG_LIST:
            # each record of a long list on a line of its own, indented under its key
            assert sum(line.startswith('    {"name"') for line in lines) == n  # passes
            assert sum(line.startswith('      {"name"') for line in lines) == n  # deep.list
        else:
            assert text == json.dumps(obj, indent=2)


def test_a_value_like_a_placeholder_stays_a_value():
    obj = {"passes": [{"i": i} for i in range(LONG_LIST + 1)],
           "name": "\0records 0\0", "other": ["\0records 0 x\0"] * 3}
    assert json.loads(json_text(obj)) == obj


def test_a_cycle_is_named_as_json_names_it():
    import pytest

    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        json_text({"passes": loop})
