"""The worker's structured logs: one logfmt line per event, whatever text a handler's error holds."""

from __future__ import annotations

import io
import logging

from echomq import Worker, ids
from echomq.worker import logs
from tests.support.workers import eventually, running, state_is


async def test_a_handler_error_with_control_characters_stays_on_one_log_line(bus):
    """An error text holding CR, LF, NUL or U+2028 is escaped: each event is one line of logfmt."""

    async def handler(job):
        raise RuntimeError("upstream said:\r\nHTTP/1.1 502\r\x00\u2028end")

    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p", max_attempts=1)
    stream = io.StringIO()
    handler_ = logs.configure(logging.INFO, stream)
    try:
        async with running(Worker(bus, handler)):
            await eventually(lambda: state_is(bus, job, "dead"), 20, "the job dead-lettered")
    finally:
        logging.getLogger("echomq").removeHandler(handler_)
    lines = stream.getvalue().splitlines()  # splits on CR, U+2028 and the rest, not only on LF
    failed = [line for line in lines if "event=job.failed" in line]
    assert len(failed) == 1
    assert all(line.startswith("ts=") for line in lines), lines
    assert "upstream said:\\r\\nHTTP/1.1 502\\r" in failed[0]
