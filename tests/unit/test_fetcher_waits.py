"""The fetcher's wait for the first of several things (a wake-up, stop, a timer) leaves nothing behind."""

from __future__ import annotations

import asyncio
import gc
import logging

from echomq.worker.fetcher import first_of


async def _pickup_closed_under_it() -> bool:
    """A BLPOP whose connection the stopping worker closes as the call is cancelled."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        raise ConnectionError("Connection closed by server.") from None
    return True


async def test_a_wait_cancelled_into_an_error_is_not_reported_as_never_retrieved(caplog):
    """Stop wins; the pickup, cancelled, ends in an error of its own: nobody awaits it, and the event
    loop must not log it as a task exception never retrieved (a traceback in a clean shutdown's log)."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    stopping = asyncio.Event()
    stopping.set()
    await first_of([_pickup_closed_under_it(), stopping.wait()], None)
    for _ in range(3):
        await asyncio.sleep(0)  # the cancellation lands; the pickup ends in its ConnectionError
    gc.collect()
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


async def test_the_first_thing_done_ends_the_wait_and_the_rest_are_cancelled():
    """first_of returns when one is done and cancels the others (a wait that outlives it would block
    Redis or the loop for nothing)."""
    slow = asyncio.ensure_future(asyncio.sleep(60))
    await first_of([slow, asyncio.sleep(0)], None)
    await asyncio.sleep(0)
    assert slow.cancelled()
