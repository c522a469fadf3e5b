"""Helpers for the worker tests: run a Worker in the test's loop, poll for an outcome, start subprocesses.

Nothing here measures time for an assertion: :func:`eventually` only bounds how long a test waits for
something that must happen.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from echomq import Bus, SweepReport, Worker

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    """Run ``worker`` in the background for the block, then stop it and wait for run() to return."""
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], timeout: float = 20.0, what: str = ""
) -> None:
    """Poll ``check`` (plain or async) until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await _truth(check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what or check}")
        await asyncio.sleep(0.05)


async def _truth(value: bool | Awaitable[bool]) -> bool:
    return await value if inspect.isawaitable(value) else bool(value)


async def job_state(bus: Bus, job: str) -> str:
    return (await bus.inspect(job)).state.value


async def state_is(bus: Bus, job: str, state: str) -> bool:
    return await job_state(bus, job) == state


class Sweeper:
    """Another actor sweeping the bus every 50 ms from its own thread and event loop (as another process
    would), so a lease that is not renewed is reclaimed even while the worker's loop is blocked."""

    def __init__(self, url: str, tag: str, *, cluster: bool = False) -> None:
        self.url = url
        self.tag = tag
        self.cluster = cluster
        self.reports: list[SweepReport] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        async with Bus.from_url(self.url, tag=self.tag, cluster=self.cluster) as bus:
            while not self._stop.is_set():
                self.reports.append(await bus.sweep())
                await asyncio.sleep(0.05)

    def __enter__(self) -> Sweeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    @property
    def reclaimed(self) -> int:
        return sum(report.reclaimed for report in self.reports)


def cli(
    url: str, *args: str, markers: Path | None = None, env_extra: dict[str, str] | None = None, **kwargs
) -> subprocess.Popen[str]:
    """Start ``python -m echomq.cli ARGS`` against ``url`` from the repository root (``env_extra`` added
    to its environment, e.g. a fault point)."""
    env = dict(os.environ, REDIS_URL=url, PYTHONUNBUFFERED="1", **(env_extra or {}))
    if markers is not None:
        env["ECHOMQ_TEST_MARKERS"] = str(markers)
    return subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def run_cli(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion and return its exit code and output."""
    env = dict(os.environ, REDIS_URL=url)
    return subprocess.run(
        [sys.executable, "-m", "echomq.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def wait_for_marker(path: Path, proc: subprocess.Popen[str] | None = None, timeout: float = 30) -> None:
    """Wait until ``path`` exists (a handler in another process reached that point)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"worker exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"no {path.name} within {timeout} s")
        await asyncio.sleep(0.05)


def stop_process(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs, and reap it (test clean-up)."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=10)
