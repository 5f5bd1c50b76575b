"""Workload specs the workload tests build: one softmax ping-pong stream with the file's
defaults, and a workload of such streams."""

from dspsim.study.workload import parse_workload


def stream_spec(name: str, n: int, period_us: float, count: int, **kw) -> dict:
    base = {"name": name, "op": "softmax", "variant": "pingpong", "n": n,
            "period_us": period_us, "count": count}
    if "shape" in kw:
        del base["n"]
    return base | kw


def workload(*streams, seed=1):
    return parse_workload({"seed": seed, "stream": list(streams)})
