"""Workload specs the workload tests build: one softmax ping-pong stream with the file's
defaults, and a workload of such streams."""

from dspsim.study.workload import parse_workload


def stream_spec(name: str, defaults: tuple[int, float, int], **kw) -> dict:
    """A stream ``name`` of ``defaults`` = (n, period_us, count) unless ``kw`` says else."""
    n, period_us, count = defaults
    base = {"name": name, "op": "softmax", "variant": "pingpong", "n": n,
            "period_us": period_us, "count": count}
    if "shape" in kw:
        del base["n"]
    return base | kw


def workload(*streams, seed=1):
    return parse_workload({"seed": seed, "stream": list(streams)})
