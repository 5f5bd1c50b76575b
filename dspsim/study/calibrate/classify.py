"""What binds a fit: which resource a measured run's time is made of, under fitted values.

The op's closed-form bounds (:meth:`~dspsim.ops.base.Op.bounds`) at the fitted values give four
lower bounds on a run's cycles: **port** bandwidth (``dma_bound_cycles``: bytes / the port's
bytes per cycle); **outstanding** requests (the op's ``latency_bound_cycles`` scaled by
``(L + b / B) / L``, ``b`` the mean bytes per request: a request holds its slot for its round
trip *and* its own transfer, so requests x (L + b / B) / window); **descriptor** overhead (what
``idma.setup_cycles`` adds to ``compute_bound_cycles``); **compute** (the rest of it, the core's
kernels). A run is bound by the largest of port, outstanding and core (descriptor + compute:
one core does both), a binding core being *descriptor* when that part is at least the kernels';
``unknown`` when the op gives no bounds. A fit's *reading* is the tuple of its measurements'
binding resources; fits with the same reading form a family."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dspsim.config import HardwareModel
from dspsim.errors import ConfigError
from dspsim.ops import get_op
from dspsim.study.calibrate.measure import Measurement, is_int_key

RESOURCES = {
    "port": "port bandwidth",
    "outstanding": "outstanding requests",
    "descriptor": "descriptor overhead",
    "compute": "compute",
    "unknown": "unknown (the op gives no bounds)",
}
SETUP_KEY = "idma.setup_cycles"


@dataclass(frozen=True)
class Binding:
    """What binds one measured run under one set of values."""

    measurement: str  # the measurement's label
    resource: str  # a key of RESOURCES
    bounds: Mapping[str, float]  # cycles per resource: port, outstanding, descriptor, compute
    share: float  # the binding resource's bound / the measured cycles
    window: float | None  # requests in flight the outstanding bound assumes
    margin: float = math.inf  # the binding bound / the next largest of port, outstanding, core

    def to_json(self) -> dict[str, Any]:
        return {
            "measurement": self.measurement,
            "binding": self.resource,
            "binding_name": RESOURCES[self.resource],
            "share_of_cycles": self.share,
            "bound_cycles": {k: round(v) for k, v in self.bounds.items()},
            "requests_in_flight": self.window,
            "margin": self.margin if math.isfinite(self.margin) else None,
        }


def model_at(model: HardwareModel, values: Mapping[str, float], m: Measurement | None = None
             ) -> HardwareModel:
    """``model`` with the fitted ``values``, then the measurement's own settings."""
    vals = {k: (int(round(v)) if is_int_key(k) else float(v)) for k, v in values.items()}
    return model.with_overrides({**vals, **(m.settings if m else {})})


def resource_bounds(model: HardwareModel, m: Measurement) -> tuple[dict[str, float], float | None]:
    """The four resources' lower bounds on ``m``'s cycles under ``model`` (empty if the op
    gives none), and the requests in flight the outstanding bound assumes."""
    op = get_op(m.op)
    b = op.bounds(model, m.variant, m.shape)
    if b is None:
        return {}, None
    policy = model.host_memory.policy  # what a request costs (dspsim.hw.policy)
    lat = policy.mean_latency(b.ddr_read_bytes, b.ddr_write_bytes)
    bw = policy.bytes_per_cycle
    requests = b.ddr_requests or 0
    nbytes = b.ddr_read_bytes + b.ddr_write_bytes
    latency_bound = float(b.latency_bound_cycles or 0.0)
    window = b.outstanding_requests  # the op's own, else what its latency bound implies
    if window is None and latency_bound > 0:
        window = requests * lat / latency_bound
    per_request = nbytes / requests if requests else 0.0
    outstanding = latency_bound * (1.0 + per_request / (bw * lat)) if lat > 0 else 0.0
    core = float(b.compute_bound_cycles or 0.0)
    descriptor = 0.0
    if model.idma.setup_cycles > 0 and core > 0:
        try:
            bare = op.bounds(model.with_overrides({SETUP_KEY: 0.0}), m.variant, m.shape)
            bare_core = bare.compute_bound_cycles if bare is not None else 0.0
            descriptor = max(0.0, core - float(bare_core or 0.0))
        except ConfigError:
            descriptor = 0.0
    return {"port": float(b.dma_bound_cycles), "outstanding": outstanding,
            "descriptor": descriptor, "compute": core - descriptor}, window


def classify_run(model: HardwareModel, values: Mapping[str, float], m: Measurement) -> Binding:
    """The binding resource of measurement ``m`` with ``values`` (see the module's rules)."""
    bounds, window = resource_bounds(model_at(model, values, m), m)
    if not bounds:
        return Binding(m.label(), "unknown", {}, math.nan, None)
    core = bounds["descriptor"] + bounds["compute"]
    ranked = sorted((("port", bounds["port"]), ("outstanding", bounds["outstanding"]),
                     ("core", core)), key=lambda kv: -kv[1])
    (resource, top), (_, second) = ranked[0], ranked[1]
    if resource == "core":
        resource = "descriptor" if bounds["descriptor"] >= bounds["compute"] else "compute"
    margin = top / second if second > 0 else math.inf
    return Binding(m.label(), resource, bounds, top / m.cycles, window, margin)


def classify(model: HardwareModel, values: Mapping[str, float],
             measurements: Sequence[Measurement]) -> tuple[Binding, ...]:
    """Every measurement's :class:`Binding` under ``values``."""
    return tuple(classify_run(model, values, m) for m in measurements)


def reading_of(bindings: Sequence[Binding]) -> tuple[str, ...]:
    """The family key: each measurement's binding resource, in order."""
    return tuple(b.resource for b in bindings)


def reading_name(reading: Sequence[str], labels: Sequence[str]) -> str:
    """``port-bandwidth-bound`` when every run agrees, else each run's, e.g.
    ``descriptor-overhead-bound (pingpong,n=100000), outstanding-requests-bound
    (direct,n=100000)``."""

    def bound(r: str) -> str:
        return RESOURCES[r].replace(" ", "-") + "-bound"

    if len(set(reading)) == 1:
        return bound(reading[0])
    return ", ".join(f"{bound(r)} ({lab})" for lab, r in zip(labels, reading))


def physical_reading(model: HardwareModel, values: Mapping[str, float],
                     bindings: Sequence[Binding]) -> list[str]:
    """What each binding resource means at ``values`` in physical units, one line per distinct
    phrase naming the runs it binds, e.g. ``port bandwidth: 0.3881 B/cycle, 388 MB/s at 1000
    MHz (pingpong,n=100000; direct,n=100000)``."""
    m = model_at(model, values)
    clock = m.core.clock_mhz
    phrases: dict[str, list[str]] = {}
    for b in bindings:
        if b.resource == "port":
            text = (f"{m.host_memory.bytes_per_cycle:.4g} B/cycle, "
                    f"{m.host_memory.bytes_per_cycle * clock:.0f} MB/s at {clock:g} MHz")
        elif b.resource == "outstanding":
            w = b.window if b.window is not None else math.nan
            lat = m.host_memory.policy.latency(False)
            text = (f"{w:.3g} request(s) in flight, each a {lat:.0f}-cycle round "
                    f"trip ({lat / clock * 1000:.0f} ns at {clock:g} MHz; "
                    f"idma.max_outstanding = {m.idma.max_outstanding} per channel, "
                    f"{m.host.memory}.max_outstanding = {m.host_memory.max_outstanding})")
        elif b.resource == "descriptor":
            text = (f"{m.idma.setup_cycles:.0f} cycles per descriptor, "
                    f"{m.idma.setup_cycles / clock:.3g} us at {clock:g} MHz")
        elif b.resource == "compute":
            text = f"the core's kernels, {b.bounds['compute']:,.0f} cycles"
        else:
            text = "no closed-form bounds"
        phrases.setdefault(f"{RESOURCES[b.resource]}: {text}", []).append(b.measurement)
    return [f"{text} ({'; '.join(runs)})" for text, runs in phrases.items()]
