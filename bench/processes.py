"""Worker processes of the benchmarks: stopping them, and the CPU they used."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every process (a graceful shutdown), then reap each; one that lingers 15 s is killed."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its children, living ones (uvicorn's workers)."""
    total = 0.0
    pids = [pid]
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
    for each in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total
