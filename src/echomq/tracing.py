"""OpenTelemetry spans from the send of a task to its handler, the trace context carried in the job.

Optional: with ``opentelemetry-api`` installed (``pip install echomq[otel]``) and a tracer provider
configured by the application, :meth:`echomq.tasks.Task.enqueue_with` runs the admission inside a
``send <task>`` span (kind PRODUCER) and writes its context into the task message (``"trace"``, W3C
trace context through the configured propagator), and :meth:`echomq.tasks.Tasks.handler` runs the task
inside a ``process <task>`` span (kind CONSUMER) whose parent is that context, so one trace shows the
request that sent the job, the wait in the queue and the run, across processes and hosts. Each
delivery of a job is a span of its own (a crashed worker's run and its rerun both appear, with
``messaging.echomq.attempt``). Without the package, or without a provider, nothing is recorded and
nothing is carried.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echomq.worker.handler import Job

SYSTEM = "echomq"


@cache
def _otel() -> tuple[ModuleType, ModuleType, ModuleType] | None:
    try:
        from opentelemetry import context, propagate, trace  # noqa: PLC0415 (optional extra)
    except ImportError:
        return None
    return context, propagate, trace


@contextlib.contextmanager
def sending(task: str, job: str) -> Iterator[dict[str, str]]:
    """A PRODUCER span around one send; yields the carrier (trace context) to put in the message."""
    otel = _otel()
    if otel is None:
        yield {}
        return
    _, propagate, trace = otel
    tracer = trace.get_tracer(SYSTEM)
    attributes = {"messaging.system": SYSTEM, "messaging.operation.type": "send", "messaging.message.id": job}
    with tracer.start_as_current_span(f"send {task}", kind=trace.SpanKind.PRODUCER, attributes=attributes):
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield carrier


@contextlib.contextmanager
def running(task: str, job: Job, carrier: dict[str, Any]) -> Iterator[None]:
    """A CONSUMER span around one run of ``job``, a child of the context its sender carried."""
    otel = _otel()
    if otel is None:
        yield
        return
    _, propagate, trace = otel
    parent = propagate.extract({str(k): str(v) for k, v in carrier.items()})
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.message.id": job.id,
        "messaging.destination.name": job.lane,
        "messaging.echomq.attempt": job.attempt,
    }
    tracer = trace.get_tracer(SYSTEM)
    with tracer.start_as_current_span(
        f"process {task}", context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes
    ):
        yield
