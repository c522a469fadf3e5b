"""Handler starts: the part of a run's history that only the worker processes can write.

A claim can run in Redis and its reply never reach the worker (a Redis pause past the socket timeout, a
cut, a crash): the job is then *claimed* but no handler ever *received* it. Redis cannot tell the two
apart, so each worker of the harness (:mod:`.worker`) appends one line per handler start to
``starts-<pid>.log``::

    <JOB> <attempts token> <claimed at, server ms> <pid>

The claim's server time is its lease deadline less the lease (both from the claim reply), so it is on
the same clock as every time Redis records (due times, deaths), whatever the worker's own clock says.
A line is one ``write(2)`` on an ``O_APPEND`` descriptor: it survives a SIGKILL that follows it.
Probe jobs of the punctuality phase run on lanes named :data:`PROBE_LANE` ``.<n>``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

PROBE_LANE = "conformance.probe"


def is_probe(lane: str) -> bool:
    return lane.startswith(PROBE_LANE)


class _Job(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def claim(self) -> _Claim: ...


class _Claim(Protocol):
    @property
    def deadline_ms(self) -> int: ...


class StartLog:
    """The writer a worker process keeps open: one line per handler start."""

    def __init__(self, folder: str | Path, lease_ms: int) -> None:
        self.path = Path(folder) / f"starts-{os.getpid()}.log"
        self.lease_ms = lease_ms
        self._fd = -1

    def __enter__(self) -> StartLog:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def ready(self) -> None:
        """The process is about to start claiming (the harness waits for this before relying on it)."""
        os.write(self._fd, f"ready - - {os.getpid()}\n".encode())

    def record(self, job: _Job) -> None:
        claimed = job.claim.deadline_ms - self.lease_ms
        os.write(self._fd, f"{job.id} {job.attempt} {claimed} {os.getpid()}\n".encode())


@dataclass(frozen=True, slots=True)
class Start:
    job: str
    token: int
    claimed_ms: int  # server clock
    pid: int


@dataclass
class Starts:
    """Every handler start of a run, read from the workers' files."""

    by_job: dict[str, list[Start]]
    ready: set[int]  # pids that reached the claiming loop

    def ran(self, job: str) -> bool:
        return job in self.by_job

    def first_after(self, job: str, at_ms: int, *, token_above: int = 0) -> Start | None:
        """The earliest start of ``job`` claimed at or after ``at_ms`` with a token above ``token_above``."""
        later = [s for s in self.by_job.get(job, ()) if s.claimed_ms >= at_ms and s.token > token_above]
        return min(later, key=lambda s: s.claimed_ms) if later else None


def is_ready(folder: str | Path, pid: int) -> bool:
    """Whether worker ``pid`` reached its claiming loop (its file's first line says so)."""
    try:
        with (Path(folder) / f"starts-{pid}.log").open() as file:
            return file.readline().startswith("ready ")
    except FileNotFoundError:
        return False


def read_starts(folder: str | Path, pids: Iterable[int] | None = None) -> Starts:
    """The starts of every worker of the run (or only of ``pids``)."""
    by_job: defaultdict[str, list[Start]] = defaultdict(list)
    ready: set[int] = set()
    paths = (
        sorted(Path(folder).glob("starts-*.log"))
        if pids is None
        else [Path(folder) / f"starts-{pid}.log" for pid in pids]
    )
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) != 4:
                continue
            if parts[0] == "ready":
                ready.add(int(parts[3]))
                continue
            job, token, claimed, pid = parts
            by_job[job].append(Start(job, int(token), int(claimed), int(pid)))
    return Starts(dict(by_job), ready)
