"""``python -m codemojex.web``: the web host alone (no worker, no embedded Redis), as a deployment runs
it behind a balancer, with workers started apart (``codemojex worker``). ``codemojex serve`` is the
one-command local run; this is the piece to run many of.

Its Redis URL: ``$CODEMOJEX_HOST_URL`` (the host's least-privilege user, :mod:`codemojex.access`; then
the operator's open and close go to the workers, ``--rounds-by-worker``), else ``$REDIS_URL``. Keep a
password out of ``--redis-url``: a command line is visible to every local user (``ps``)."""

from __future__ import annotations

import argparse
import os

import uvicorn

from codemojex.game import GameSettings
from codemojex.web.admission import Limits
from codemojex.web.app import create_app
from codemojex.web.buckets import Rate
from codemojex.web.host import HostConfig
from echomq.cli.env import DEFAULT_URL


def main(argv: list[str] | None = None) -> None:
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
    parser.add_argument("--max-queued", type=int, default=GameSettings().max_queued)
    parser.add_argument("--max-attempts", type=int, default=GameSettings().max_attempts)
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
    args = parser.parse_args(argv)
    limits = Limits(trusted_proxies=tuple(args.trusted_proxy))
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
    config = HostConfig(
        redis_url=args.redis_url,
        tag=args.tag,
        cluster=args.cluster,
        operator_token=os.environ.get("CODEMOJEX_OPERATOR_TOKEN") or None,
        proof=args.proof,
        rounds_by_worker=args.rounds_by_worker,
        settings=GameSettings(max_queued=args.max_queued, max_attempts=args.max_attempts),
        limits=limits,
    )
    # loop="asyncio", not uvloop: see codemojex.serve (uvloop's closed-transport RuntimeError is not a
    # ConnectionError to redis-py, so a Redis restart would answer 500 instead of 503).
    uvicorn.run(
        create_app(config),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        loop="asyncio",
        proxy_headers=False,  # the peer is the client unless --trusted-proxy (codemojex.web.admission)
    )


if __name__ == "__main__":
    main()
