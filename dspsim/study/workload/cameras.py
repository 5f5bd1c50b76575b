"""The camera workload the studies and the benchmark share: ``cameras`` 30-fps cameras, each
submitting a 100,000-element softmax (the seed's) every frame (priority 0, backend ``any``,
deadline: the next frame; releases staggered evenly over a period and jittered by up to
0.5 ms), and one high-priority model submitting a LayerNorm (1024 x 256, priority 200, backend
``any``, deadline 100 ms) at 10 Hz."""

from __future__ import annotations

from dspsim.study.workload.spec import Workload, parse_workload

N = 100_000  # the seed's softmax
PERIOD_US = 1e6 / 30  # 30 fps
JITTER_US = 500.0
HP = {"name": "hp_layernorm", "op": "layernorm", "variant": "pingpong", "shape": [1024, 256],
      "priority": 200, "backend": "any", "period_us": 100_000.0, "deadline_us": 100_000.0,
      "start_us": 1_000.0}
SEED = 1


def frames_of(seconds: float) -> int:
    """Each camera's tasks over ``seconds``."""
    return max(3, round(seconds * 1e6 / PERIOD_US))


def hp_tasks_of(seconds: float) -> int:
    """The LayerNorm stream's tasks over ``seconds``."""
    return max(2, round(seconds * 1e6 / HP["period_us"]))


def tasks_of(cameras: int, seconds: float) -> int:
    """The tasks of the workload with ``cameras`` cameras over ``seconds``."""
    return cameras * frames_of(seconds) + hp_tasks_of(seconds)


def camera_workload(cameras: int, seconds: float, variant: str = "pingpong") -> Workload:
    """``cameras`` cameras (softmax ``variant``) and the LayerNorm stream over ``seconds``."""
    return parse_workload(camera_spec(cameras, seconds, variant), f"{cameras} cameras")


def camera_spec(cameras: int, seconds: float, variant: str = "pingpong") -> dict:
    """The tables of :func:`camera_workload` (what a workload file holds)."""
    frames = frames_of(seconds)
    streams = [
        {"name": f"cam{k}", "op": "softmax", "variant": variant, "n": N, "priority": 0,
         "backend": "any", "period_us": PERIOD_US, "count": frames,
         "start_us": k * PERIOD_US / cameras, "jitter_us": JITTER_US, "deadline_us": PERIOD_US}
        for k in range(cameras)
    ]
    hp = HP | {"count": hp_tasks_of(seconds)}
    return {"seed": SEED, "stream": streams + [hp]}
