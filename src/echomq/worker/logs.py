"""Structured logs: one list of emitted events, and a small key=value (logfmt) formatter.

Every log record EchoMQ emits names an event from :data:`EVENTS` and carries its fields as attributes
(``record.event``, ``record.fields``), so a JSON handler can use them as they are; the message text is
the same event and fields in logfmt, e.g. ``job.completed job=JOB0... lane=PLR0... attempt=1``.
:class:`LogfmtFormatter` prefixes the time, level and logger. :func:`configure` installs it on the
``echomq`` logger for the CLI and the demo; a library user keeps their own logging set-up.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO

# Every event EchoMQ logs, with its level. One place, so dashboards and alerts can rely on the names.
EVENTS: tuple[str, ...] = (
    "worker.started",  # INFO   run() began: owner, concurrency, lease, sweep period
    "worker.stopping",  # INFO   stop() or a signal: claiming stopped, in-flight jobs get the grace period
    "worker.stopped",  # INFO   run() returned: counts of the run
    "worker.redis_error",  # WARNING a Redis call of the loop failed; the loop backs off and retries
    "worker.partition_error",  # WARNING a partition's call failed; it rests, the others go on (rotation)
    "worker.layout_unchecked",  # WARNING the start's layout check could not reach Redis (rotation checks)
    "worker.token_lost",  # WARNING a wake token popped while busy could not be pushed back (rotation)
    "worker.swept",  # DEBUG  a sweep ran (INFO when it reclaimed or dead-lettered jobs)
    "claim.unanswered",  # WARNING a stopping worker could not learn what its unanswered claim took
    "redis.eviction_policy",  # WARNING maxmemory-policy is not noeviction: eviction can drop leases
    "redis.config_unavailable",  # DEBUG  CONFIG GET is disabled or refused; the policy is not checked
    "job.claimed",  # DEBUG  a job moved to active under this worker
    "job.completed",  # DEBUG  complete() succeeded, or the handler finished the job itself (Finish.DONE)
    "job.failed",  # WARNING the handler raised or timed out; the job retries (outcome=retrying) or is dead
    "job.timeout",  # WARNING the handler exceeded job_timeout_s; job.failed follows
    "job.dead_hook_failed",  # ERROR  the worker's on_dead hook raised after a dead-letter (logged only)
    "job.stale",  # WARNING a finish was refused: the lease was no longer this worker's
    "job.released",  # INFO   graceful shutdown handed the job back to its lane
    "job.unfinished",  # ERROR  a finish could not reach Redis; the sweep returns the job after its lease
    "lease.revoked",  # WARNING the lease was reaped: job.revoked is set, an async handler is cancelled
    "lease.error",  # WARNING a lease extension round failed; it is retried at the next tick
    "periodic.started",  # INFO   a Scheduler's run() began (echomq.periodic)
    "periodic.tick",  # INFO   a tick submitted and admitted (DEBUG when a duplicate, ERROR when a conflict)
    "periodic.skipped",  # WARNING ticks of the catch-up window past max_catch_up, never enqueued here
    "periodic.refused",  # WARNING a tick id this host's clock may not admit (clock far off the server's)
    "periodic.redis_error",  # WARNING a step could not reach Redis; the next step submits its ticks again
    "periodic.stopped",  # INFO   a Scheduler's run() returned
)

_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    # Any other control or separator (NUL, ESC, U+2028, ...) would break or garble the one-line record.
    return char if char.isprintable() else f"\\u{ord(char):04x}"


def _value(value: object) -> str:
    text = value if isinstance(value, str) else repr(value) if isinstance(value, bytes) else str(value)
    if text == "" or any(c in text for c in ' ="\\') or not text.isprintable():
        return '"' + "".join(_escape(c) for c in text) + '"'
    return text


def logfmt(fields: dict[str, object]) -> str:
    """``key=value`` pairs separated by spaces; values with spaces, quotes or ``=`` are quoted."""
    return " ".join(f"{key}={_value(value)}" for key, value in fields.items())


def emit(logger: logging.Logger, level: int, event: str, **fields: object) -> None:
    """Log ``event`` (one of :data:`EVENTS`) with ``fields``; cheap when the level is disabled."""
    if not logger.isEnabledFor(level):
        return
    assert event in EVENTS, event
    message = f"{event} {logfmt(fields)}" if fields else event
    logger.log(level, "%s", message, extra={"event": event, "fields": fields})


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=... logger=... event=... key=value ...`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        head: dict[str, object] = {
            "ts": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        event = getattr(record, "event", None)
        fields = getattr(record, "fields", None)
        if isinstance(event, str) and isinstance(fields, dict):
            line = logfmt({**head, "event": event, **fields})
        else:
            extra = {k: v for k, v in record.__dict__.items() if k not in _RESERVED}
            line = logfmt({**head, "msg": record.getMessage(), **extra})
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: int | str = logging.INFO, stream: IO[str] | None = None) -> logging.Handler:
    """Send the ``echomq`` logger's records to ``stream`` (default stderr) in logfmt."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    logger = logging.getLogger("echomq")
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
