"""More host processes on one port: ``codemojex serve --hosts N`` runs N - 1 ``python -m codemojex.web
--fd <FD>`` beside its own, each accepting on serve's listening socket (the kernel hands each connection
to one of them), so the web tier uses more than one core.

Each extra host gets what serve's own host has: the host's Redis user (``$CODEMOJEX_HOST_URL``, never on
a command line), the operator token (``$CODEMOJEX_OPERATOR_TOKEN``), the tag, the proof switches and the
admission limits (``$CODEMOJEX_LIMITS``, :func:`limits_json`). It dies with serve (``PR_SET_PDEATHSIG``)
and serve stops it (SIGTERM, then SIGKILL after a grace) before the workers and Redis. What each process
keeps for itself: its Redis pool, its in-flight and stream caps (per process, as SECURITY.md says of
hosts), and the proof's demo worker's status (only serve's own host reports it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

from codemojex.web.admission_limits import Limits
from codemojex.web.buckets import Rate
from echomq.testing.server import die_with_parent

LIMITS_ENV = "CODEMOJEX_LIMITS"
STOP_GRACE_S = 10.0


def limits_json(limits: Limits) -> str:
    """``limits`` as JSON, for :func:`limits_of` in another process."""
    fields = {f.name: getattr(limits, f.name) for f in dataclasses.fields(limits) if f.init}
    return json.dumps({k: dataclasses.asdict(v) if isinstance(v, Rate) else v for k, v in fields.items()})


def limits_of(text: str) -> Limits:
    """The :class:`Limits` of :func:`limits_json`'s text."""
    data: dict[str, Any] = json.loads(text)
    rates = {f.name for f in dataclasses.fields(Limits) if f.type in ("Rate", Rate)}
    values: dict[str, Any] = {
        k: Rate(**v) if k in rates else (tuple(v) if isinstance(v, list) else v) for k, v in data.items()
    }
    return Limits(**values)


def start(
    count: int,
    fd: int,
    *,
    redis_url: str,
    operator_token: str | None,
    tag: str,
    limits: Limits,
    partitions: int = 1,
    rounds_by_worker: bool,
    proof: bool,
    proof_crash: bool,
    limit_concurrency: int,
    keep_alive_s: int,
) -> list[subprocess.Popen[bytes]]:
    """``count`` host processes accepting on the listening socket ``fd``."""
    env = dict(os.environ, CODEMOJEX_HOST_URL=redis_url)
    env[LIMITS_ENV] = limits_json(limits)
    env.pop("REDIS_URL", None)
    if operator_token:
        env["CODEMOJEX_OPERATOR_TOKEN"] = operator_token
    argv = [sys.executable, "-m", "codemojex.web", "--fd", str(fd), "--tag", tag]
    argv += ["--partitions", str(partitions)]
    argv += ["--rounds-by-worker" if rounds_by_worker else "--no-rounds-by-worker"]
    argv += ["--limit-concurrency", str(limit_concurrency), "--keep-alive", str(keep_alive_s)]
    argv += ["--proof"] if proof else []
    argv += ["--proof-crash"] if proof and proof_crash else []
    return [
        subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=(fd,),
            preexec_fn=die_with_parent,  # noqa: PLW1509  (only prctl)
        )
        for _ in range(count)
    ]


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each (uvicorn finishes the requests in flight), SIGKILL one that outlives the grace."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
