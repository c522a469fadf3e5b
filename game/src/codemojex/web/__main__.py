"""``python -m codemojex.web``: the web host alone (no worker, no embedded Redis), as a deployment runs
it behind a balancer, with workers started apart (``codemojex worker``). ``codemojex serve`` is the
one-command local run; this is the piece to run many of.

``--hosts N`` runs N processes on one port (uvicorn's workers); ``--fd`` serves on a socket inherited
from ``codemojex serve --hosts N`` (:mod:`codemojex.web.hosts`, which passes serve's limits in
``$CODEMOJEX_LIMITS``).

Its Redis URL: ``$CODEMOJEX_HOST_URL`` (the host's least-privilege user, :mod:`codemojex.access`; then
the operator's open and close go to the workers, ``--rounds-by-worker``), else ``$REDIS_URL``. Keep a
password out of ``--redis-url``: a command line is visible to every local user (``ps``)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import uvicorn
from fastapi import FastAPI

from codemojex.game import GameSettings
from codemojex.web import hosts
from codemojex.web.admission_limits import Limits
from codemojex.web.app import create_app
from codemojex.web.buckets import Rate
from codemojex.web.host import HostConfig
from echomq import Settings
from echomq.cli.env import DEFAULT_URL
from echomq.partitions import MAX_PARTITIONS

ARGV_ENV = "CODEMOJEX_WEB_ARGV"  # the command line, for each process of --hosts N (uvicorn's workers)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m codemojex.web", description=__doc__)
    host_url = os.environ.get("CODEMOJEX_HOST_URL")
    parser.add_argument("--redis-url", default=host_url or os.environ.get("REDIS_URL", DEFAULT_URL))
    parser.add_argument(
        "--rounds-by-worker",
        action=argparse.BooleanOptionalAction,
        default=bool(host_url),
        help="open and close rounds through the score worker (a host user that may not touch secrets)",
    )
    parser.add_argument("--tag", default="cm")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        metavar="P",
        help="one game spread over tags <tag>.0 ... <tag>.<P-1> (codemojex.spread; default 1: one game)",
    )
    parser.add_argument("--max-queued", type=int, default=GameSettings().max_queued)
    parser.add_argument("--max-attempts", type=int, default=GameSettings().max_attempts)
    parser.add_argument(
        "--wait-replicas",
        type=int,
        default=0,
        metavar="N",
        help="answer a guess once N replicas hold it (durable admission; default 0: when the master ran it)",
    )
    parser.add_argument("--wait-timeout-ms", type=int, default=Settings().wait_timeout_ms, metavar="MS")
    parser.add_argument("--proof", action="store_true", help="the proof endpoints (off by default here)")
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="believe X-Forwarded-For from this balancer address or network (repeatable; README: Limits)",
    )
    parser.add_argument(
        "--unlimited",
        action="store_true",
        help="lift the rate limits and the per-address caps (a benchmark on a private host; never in public)",
    )
    parser.add_argument(
        "--hosts",
        type=int,
        default=1,
        metavar="N",
        help="host processes sharing the port (uvicorn's workers; default 1): use more cores",
    )
    parser.add_argument(
        "--fd",
        type=int,
        default=None,
        help="accept on this inherited listening socket, not --host/--port (codemojex serve --hosts N)",
    )
    parser.add_argument("--proof-crash", action="store_true", help="the proof's crash button (serve's)")
    parser.add_argument("--limit-concurrency", type=int, default=None, metavar="N")
    parser.add_argument("--keep-alive", type=int, default=5, metavar="S")
    return parser


def _config(args: argparse.Namespace) -> HostConfig:
    limits = Limits(trusted_proxies=tuple(args.trusted_proxy))
    if os.environ.get(hosts.LIMITS_ENV):  # serve's own limits, for its --hosts N
        limits = hosts.limits_of(os.environ[hosts.LIMITS_ENV])
    if args.unlimited:
        lifted = Rate(1_000_000_000, 1)
        limits = Limits(
            signup_per_address=lifted,
            guess_per_address=lifted,
            guess_per_player=lifted,
            read_per_address=lifted,
            read_per_player=lifted,
            inflight_per_address=1_000_000,
            streams_per_address=1_000_000,
            trusted_proxies=limits.trusted_proxies,
        )
    return HostConfig(
        redis_url=args.redis_url,
        tag=args.tag,
        cluster=args.cluster,
        partitions=args.partitions,
        operator_token=os.environ.get("CODEMOJEX_OPERATOR_TOKEN") or None,
        proof=args.proof,
        proof_crash=args.proof and args.proof_crash,
        rounds_by_worker=args.rounds_by_worker,
        settings=GameSettings(max_queued=args.max_queued, max_attempts=args.max_attempts),
        limits=limits,
        bus_settings=Settings(wait_replicas=args.wait_replicas, wait_timeout_ms=args.wait_timeout_ms)
        if args.wait_replicas
        else None,
    )


def app_from_env() -> FastAPI:
    """The app of one of ``--hosts N``'s processes: the command line comes in ``$CODEMOJEX_WEB_ARGV``."""
    return create_app(_config(_parser().parse_args(json.loads(os.environ[ARGV_ENV]))))


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.hosts < 1:
        parser.error("--hosts is at least 1")
    if not 1 <= args.partitions <= MAX_PARTITIONS:
        parser.error(f"--partitions is 1 to {MAX_PARTITIONS}")
    # loop="asyncio", not uvloop: see codemojex.serve (uvloop's closed-transport RuntimeError is not a
    # ConnectionError to redis-py, so a Redis restart would answer 500 instead of 503).
    options: dict[str, object] = {
        "log_level": "warning",
        "timeout_keep_alive": args.keep_alive,
        "limit_concurrency": args.limit_concurrency,
        "access_log": False,
        "loop": "asyncio",
        "proxy_headers": False,  # the peer is the client unless --trusted-proxy (codemojex.web.admission)
    }
    options |= {"fd": args.fd} if args.fd is not None else {"host": args.host, "port": args.port}
    if args.hosts == 1:
        uvicorn.run(create_app(_config(args)), **options)  # type: ignore[arg-type]
        return
    # N processes accept on one listening socket (uvicorn's supervisor; SIGINT / SIGTERM stop them all).
    # Each builds its own app, Redis pool and caches: the in-flight and stream caps are per process.
    os.environ[ARGV_ENV] = json.dumps(sys.argv[1:] if argv is None else argv)
    uvicorn.run("codemojex.web.__main__:app_from_env", factory=True, workers=args.hosts, **options)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
