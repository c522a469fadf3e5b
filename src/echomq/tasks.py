"""Tasks by name: one worker serves many kinds of job, as a Celery app, an RQ function or an arq task.

A :class:`Tasks` registry maps names to functions (``@tasks.task`` or a mapping given to it); its
:meth:`~Tasks.handler` is the handler a :class:`~echomq.Worker` runs for every job of the bus. A job's
kind travels in the job itself: the payload is a task message, JSON ``{"task": name, "args": [...],
"kwargs": {...}}`` (plus ``"trace"``, the trace context, when tracing is on: :mod:`echomq.tracing`), so
producers and workers share nothing but the names.

* **Sending.** ``await send_email.enqueue(bus, "ada@example.com", subject="hi")`` admits one job and
  returns its id; :meth:`Task.enqueue_with` takes the options (an id of the caller's for an idempotent
  send, the lane, a delay, the priority, the attempts); :meth:`Task.enqueue_sync` does the same on a
  :class:`~echomq.SyncBus`. Arguments must be JSON: anything else is refused with
  :class:`~echomq.errors.InvalidPayload` before anything is sent.
* **Running.** The handler reads the message, finds the task by name and calls it with the arguments
  (awaited when it is a coroutine function, otherwise in a daemon thread of the registry's own pool, with
  the caller's context (so a span it opens is a child of the task's), as the worker runs a plain
  handler: a hung task never keeps the process from exiting, and a few hung tasks never hold back the
  others, since a thread is made whenever none is idle, up to :data:`MAX_THREADS` at once; with
  ``bind=True`` the :class:`~echomq.Job` comes first, for its ``revoked`` event and its attempts token).
  Its return value, as JSON, is the job's result (:meth:`Task.result` reads it back).
* **Unknown kinds.** A message naming a task this worker does not know, or a payload that is not a task
  message, can never succeed here: the handler raises :class:`~echomq.errors.Permanent`, so the job is
  dead-lettered at once with a reason naming the kind (``unknown task 'x'``); retry it from the dead set
  once a worker that knows it runs.
* **The guarantees are the queue's**: a crashed worker's job runs again (at least once), its stale finish
  is refused, an idempotent send (the same id) admits one job however often it is sent.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from echomq import ids, tracing
from echomq._validate import check_int
from echomq.errors import InvalidOption, InvalidPayload, Permanent
from echomq.jobs import MAX_ATTEMPTS_LIMIT, PRIORITY_LIMIT
from echomq.keyspace import JOB_BRAND, check_lane
from echomq.worker.threads import DaemonThreads

if TYPE_CHECKING:
    from echomq.partitions import AnyBus
    from echomq.states import Admission
    from echomq.sync import SyncBus
    from echomq.worker.handler import Job

_NAME_LIMIT = 200
MAX_THREADS = 256  # plain-function tasks of one registry running at once (each in a daemon thread)


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= _NAME_LIMIT or not name.isprintable():
        raise InvalidOption(f"a task name is 1-{_NAME_LIMIT} printable characters, got {name!r}")
    return name


def message(name: str, args: Any, kwargs: Any, trace: dict[str, str]) -> bytes:
    """The payload of a task message (JSON, compact); raises InvalidPayload for arguments JSON cannot hold
    (and for ``args`` that is not a sequence, ``kwargs`` that is not a mapping)."""
    if isinstance(args, str | bytes) or not isinstance(args, list | tuple):
        raise InvalidPayload(f"task {name!r}: args is a list or tuple, got {type(args).__name__}")
    if not isinstance(kwargs, Mapping):
        raise InvalidPayload(f"task {name!r}: kwargs is a mapping, got {type(kwargs).__name__}")
    body: dict[str, Any] = {"task": name, "args": list(args), "kwargs": dict(kwargs)}
    if trace:
        body["trace"] = trace
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"task {name!r}: its arguments must be JSON ({exc})") from exc


def read_message(payload: bytes) -> tuple[str, list[Any], dict[str, Any], dict[str, str]]:
    """Name, args, kwargs and trace context of a task message; Permanent when it is not one."""
    try:
        body = json.loads(payload)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Permanent(f"not a task message: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("task"), str):
        raise Permanent("not a task message: no task name")
    args, kwargs, trace = body.get("args", []), body.get("kwargs", {}), body.get("trace", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(trace, dict):
        raise Permanent(f"not a task message for {body['task']!r}: args, kwargs or trace malformed")
    return body["task"], args, kwargs, trace


@dataclass(frozen=True, slots=True)
class Sent:
    """What one send did: the job's id, and whether it was admitted now or was there already."""

    job: str
    admission: Admission


@dataclass(eq=False)
class Task:
    """A function registered under ``name``, with the defaults its jobs are sent with."""

    name: str
    fn: Callable[..., Any]
    lane: str = "default"
    max_attempts: int = 5
    priority: int = 0
    bind: bool = False
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        check_lane(self.lane)
        check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        check_int("priority", self.priority, -PRIORITY_LIMIT, PRIORITY_LIMIT)
        if not callable(self.fn):
            raise InvalidOption(f"task {self.name!r} is not callable")
        self.is_async = inspect.iscoroutinefunction(self.fn)
        # Name and doc only: merging the function's __dict__ would let its attributes (a function with
        # a `name`, or a Task registered again under another name) overwrite this task's fields.
        functools.update_wrapper(self, self.fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function here, now (not through the queue)."""
        return self.fn(*args, **kwargs)

    async def enqueue(self, bus: AnyBus, *args: Any, **kwargs: Any) -> str:
        """Send one job of this task with these arguments; its id (see :meth:`enqueue_with`)."""
        return (await self.enqueue_with(bus, args, kwargs)).job

    async def enqueue_with(
        self,
        bus: AnyBus,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        job: str | None = None,
        lane: str | None = None,
        delay_ms: int = 0,
        priority: int | None = None,
        max_attempts: int | None = None,
    ) -> Sent:
        """Send one job with options: ``job`` (an id of the caller's makes the send idempotent: sent again,
        it answers DUPLICATE and admits nothing), ``lane``, ``delay_ms``, ``priority``, ``max_attempts``
        (the task's defaults otherwise). Lost reply: send again with the same ``job``."""
        job_id = ids.mint(JOB_BRAND) if job is None else job
        with tracing.sending(self.name, job_id) as trace:
            admission = await bus.enqueue(
                job_id,
                lane=self.lane if lane is None else lane,
                payload=message(self.name, args, {} if kwargs is None else kwargs, trace),
                max_attempts=self.max_attempts if max_attempts is None else max_attempts,
                priority=self.priority if priority is None else priority,
                delay_ms=delay_ms,
            )
        return Sent(job_id, admission)

    def enqueue_sync(self, bus: SyncBus, *args: Any, **kwargs: Any) -> str:
        """:meth:`enqueue` on a blocking :class:`~echomq.SyncBus`."""
        job_id = ids.mint(JOB_BRAND)
        with tracing.sending(self.name, job_id) as trace:
            payload = message(self.name, args, kwargs, trace)
            bus.enqueue(
                job_id,
                lane=self.lane,
                payload=payload,
                max_attempts=self.max_attempts,
                priority=self.priority,
            )
        return job_id

    async def result(self, bus: AnyBus, job: str, *, timeout: float) -> Any:  # noqa: ASYNC109 (bus.result's)
        """The value the task returned for ``job`` (JSON decoded), waiting up to ``timeout`` s
        (:meth:`echomq.Bus.result`: JobDead, ResultTimeout, ResultExpired)."""
        return json.loads(await bus.result(job, timeout=timeout) or b"null")


class Tasks:
    """A registry of tasks by name, and the handler that runs them (see the module doc).

    ``tasks`` registers a mapping of names to functions at once; ``lane`` and ``max_attempts`` are the
    defaults of the tasks registered here."""

    def __init__(
        self,
        tasks: Mapping[str, Callable[..., Any]] | None = None,
        *,
        lane: str = "default",
        max_attempts: int = 5,
    ) -> None:
        self.lane = check_lane(lane)
        self.max_attempts = check_int("max_attempts", max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        self._tasks: dict[str, Task] = {}
        self._threads = DaemonThreads(MAX_THREADS, name="echomq-task")
        for name, fn in (tasks or {}).items():
            self.register(name, fn)

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        lane: str | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        bind: bool = False,
    ) -> Task:
        """Register ``fn`` under ``name``; a name registered twice is refused (InvalidOption)."""
        if _check_name(name) in self._tasks:
            raise InvalidOption(f"a task named {name!r} is registered already")
        task = Task(
            name,
            fn,
            lane=self.lane if lane is None else lane,
            max_attempts=self.max_attempts if max_attempts is None else max_attempts,
            priority=priority,
            bind=bind,
        )
        self._tasks[name] = task
        return task

    def task(
        self,
        name: str | None = None,
        *,
        lane: str | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        bind: bool = False,
    ) -> Callable[[Callable[..., Any]], Task]:
        """Decorator: ``@tasks.task()`` registers the function under its qualified name, or ``name``."""

        def register(fn: Callable[..., Any]) -> Task:
            return self.register(
                name or f"{fn.__module__}.{fn.__qualname__}",
                fn,
                lane=lane,
                max_attempts=max_attempts,
                priority=priority,
                bind=bind,
            )

        return register

    def __getitem__(self, name: str) -> Task:
        return self._tasks[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    @property
    def names(self) -> list[str]:
        return sorted(self._tasks)

    async def handler(self, job: Job) -> bytes:
        """The worker's handler: run the task the job names (see the module doc)."""
        name, args, kwargs, trace = read_message(job.payload)
        task = self._tasks.get(name)
        if task is None:
            raise Permanent(f"unknown task {name!r}: this worker serves {', '.join(self.names) or 'none'}")
        call_args = (job, *args) if task.bind else tuple(args)
        with tracing.running(name, job, trace):
            if task.is_async:
                value = await task.fn(*call_args, **kwargs)
            else:  # a daemon thread of our own, in this context (see the module doc)
                call = functools.partial(contextvars.copy_context().run, task.fn, *call_args, **kwargs)
                value = await self._threads.submit(call)
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise Permanent(f"task {name!r} returned what JSON cannot hold: {exc}") from exc
