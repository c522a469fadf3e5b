"""The ``pause`` fault: the Redis server stops (SIGSTOP) for longer than its clients' socket timeout, then
resumes (SIGCONT), as under a slow fsync or a swapped host.

Every client gives up on its reply, yet each command already sent is in the server's socket buffer and
runs when it resumes: a claim then moves jobs to ``active`` under a worker that never saw them, a
complete finishes a job whose worker thinks it failed. The invariant this fault exercises
(:func:`codemojex.conformance.invariants.dead_unhandled`): no job is dead-lettered unless a handler ran
it, or the worker that held it last died or was stopped.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess


async def pause(process: subprocess.Popen[bytes], seconds: float) -> None:
    """SIGSTOP ``process`` for ``seconds``, then SIGCONT it (also when cancelled)."""
    process.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        process.send_signal(signal.SIGCONT)
