"""The ``codemojex`` sub-commands that run processes until stopped: ``serve`` (the web host, a score
worker and an embedded Redis: ``make run``) and ``conformance`` (the fault-injection suite); their
options, with the argument types of :mod:`codemojex.cli.arguments`."""

from __future__ import annotations

import argparse
import ipaddress
from typing import Any

from codemojex.cli.arguments import count, port, seconds
from codemojex.conformance import KINDS
from echomq.partitions import MAX_PARTITIONS


def _network(text: str) -> str:
    """An IP address or network (``10.0.0.0/8``), as argparse checks a ``--trusted-proxy``."""
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an IP address or network: {text!r}") from None
    return text


def add_serve(sub: Any, common: argparse.ArgumentParser) -> None:
    """``codemojex serve``: its options, rounds and limits groups (README: Rounds, Limits)."""
    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="the web host, a score worker and (without REDIS_URL) an embedded Redis: `make run`",
    )
    serve.set_defaults(run=None)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port, default=8000, help="default 8000; 0 picks a free one")
    serve.add_argument(
        "--data-dir", default=".codemojex-data", metavar="DIR", help="the embedded Redis's data and AOF"
    )
    serve.add_argument("--concurrency", type=count(1), default=8, help="the score worker's job slots")
    serve.add_argument(
        "--hosts",
        type=count(1),
        default=1,
        metavar="N",
        help="web host processes sharing the port (default 1): more cores for the web tier",
    )
    serve.add_argument(
        "--partitions",
        type=count(1, MAX_PARTITIONS),
        default=1,
        metavar="P",
        help="one game spread over tags <tag>.0 ... <tag>.<P-1> (README: Scaling out; default 1)",
    )
    serve.add_argument(
        "--no-proof",
        dest="proof",
        action="store_false",
        help="turn the proof page off (it runs on its own demo bus, round and worker process)",
    )
    serve.add_argument(
        "--proof-crash",
        action="store_true",
        help="turn the proof page's crash button on (it kills the demo worker, never the real one)",
    )
    serve.add_argument(
        "--operator-token",
        default=None,
        metavar="TOKEN",
        help="default $CODEMOJEX_OPERATOR_TOKEN, else one kept in the data folder",
    )

    lifecycle = serve.add_argument_group("rounds", "the round schedule and retention (README: Rounds)")
    lifecycle.add_argument(
        "--round-duration", type=seconds, default=300.0, metavar="S", help="a scheduled round's length"
    )
    lifecycle.add_argument(
        "--round-gap", type=seconds, default=10.0, metavar="S", help="from a close to the next round"
    )
    lifecycle.add_argument(
        "--no-schedule",
        dest="schedule",
        action="store_false",
        help="open no round on a clock (serve opens one without a time limit if none is open)",
    )
    lifecycle.add_argument(
        "--retention",
        type=seconds,
        default=7 * 24 * 3600.0,
        metavar="S",
        help="a closed round's guesses are kept this long (default 7 days); its summary for good",
    )

    limits = serve.add_argument_group("limits", "admission control (README: Limits)")
    limits.add_argument(
        "--trusted-proxy",
        action="append",
        type=_network,
        default=[],
        metavar="ADDR",
        help="believe X-Forwarded-For from this proxy address or network (repeatable; default none)",
    )
    limits.add_argument("--inflight-per-address", type=count(1), default=32, metavar="N")
    limits.add_argument(
        "--inflight", type=count(1), default=None, metavar="N", help="default: 3/4 of the pool"
    )
    limits.add_argument("--streams-per-player", type=count(1), default=3, metavar="N")
    limits.add_argument("--streams-per-address", type=count(1), default=12, metavar="N")
    limits.add_argument("--streams", type=count(1), default=1000, metavar="N", help="event streams in all")
    limits.add_argument("--signups-per-hour", type=count(1), default=10, metavar="N", help="per address")
    limits.add_argument("--limit-concurrency", type=count(1), default=2000, metavar="N", help="connections")
    limits.add_argument("--keep-alive", type=count(1), default=5, metavar="S", help="idle keep-alive, s")
    limits.add_argument("--body-timeout", type=count(1), default=10, metavar="S", help="a body's upload, s")


def add_conformance(sub: Any, common: argparse.ArgumentParser) -> None:
    """``codemojex conformance``: the run's size, faults, timings and report (README: conformance)."""
    conformance = sub.add_parser(
        "conformance",
        parents=[common],
        help="the fault-injection suite: play under crashes, then check no guess is lost or scored twice",
    )
    conformance.set_defaults(run=None)
    conformance.add_argument("--guesses", type=count(1), default=2000)
    conformance.add_argument("--players", type=count(1), default=20)
    conformance.add_argument("--workers", type=count(1), default=3, help="worker processes")
    conformance.add_argument("--concurrency", type=count(1), default=8, help="job slots of each worker")
    conformance.add_argument("--appendfsync", choices=["always", "everysec"], default="always")
    conformance.add_argument("--seed", type=int, default=1)
    conformance.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"fault kinds, comma-separated (default all: {','.join(KINDS)})",
    )
    conformance.add_argument("--fault-every", type=seconds, default=0.4, metavar="SECONDS")
    conformance.add_argument("--boundary-rate", type=float, default=0.01, metavar="P")
    conformance.add_argument("--lease-ms", type=count(100), default=1000)
    conformance.add_argument(
        "--max-attempts", type=count(1), default=25, help="of each guess (1: a lost claim is a dead letter)"
    )
    conformance.add_argument(
        "--socket-timeout",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="of every Redis client of the run (a pause lasts 1.5 times it)",
    )
    conformance.add_argument(
        "--sweep-every", type=seconds, default=0.3, metavar="SECONDS", help="the workers' sweep period"
    )
    conformance.add_argument(
        "--fail-rate", type=float, default=0.02, metavar="P", help="first deliveries whose handler fails"
    )
    conformance.add_argument("--backoff-base-ms", type=count(1), default=400, metavar="MS")
    conformance.add_argument(
        "--result-ttl-ms", type=count(0), default=None, metavar="MS", help="the bus's (default 1 h)"
    )
    conformance.add_argument(
        "--dedup-window-ms", type=count(0), default=None, metavar="MS", help="the bus's (default 24 h)"
    )
    conformance.add_argument(
        "--no-quiet",
        dest="quiet",
        action="store_false",
        help="skip the quiet phase after the drain (punctuality with idle workers)",
    )
    conformance.add_argument(
        "--flow",
        action="store_true",
        help="EchoMQ's gates on (every lane capped at 1 active job, the bus at --flow-rate claims a second, "
        "checked from the events stream) and --tasks named tasks served beside the guesses",
    )
    conformance.add_argument("--flow-rate", type=count(1), default=400, metavar="N")
    conformance.add_argument("--tasks", type=count(0), default=60, metavar="N")
    conformance.add_argument("--report", default=None, metavar="PATH", help="also write the report as JSON")
