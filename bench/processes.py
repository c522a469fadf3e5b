"""Worker processes of the benchmarks."""

from __future__ import annotations

import subprocess


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
