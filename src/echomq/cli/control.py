"""The command line's control of a bus: events, pause and resume, cancel and revoke, lane caps and rates.

Each command is one call of :class:`echomq.Bus` (so it is answered, and retried, as that call is): see
:mod:`echomq.events`, :mod:`echomq.flow` and :mod:`echomq.control`. ``events --follow`` prints one JSON
line per event until interrupted.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from echomq.bus import Bus
from echomq.cli.env import redis_url
from echomq.flow import Rate
from echomq.states import Control


def _bus(args: argparse.Namespace) -> Bus:
    return Bus.from_url(redis_url(), tag=args.tag, cluster=args.cluster)


def _rate(text: str) -> Rate:
    count, _, per_ms = text.partition("/")
    try:
        return Rate(int(count), int(per_ms))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"a rate is COUNT/MS, e.g. 100/1000, got {text!r}") from exc


async def follow_events(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        if args.on is not None:
            await bus.set_events(args.on)
            print(f"events on: about {args.on} kept")
            return 0
        if args.off:
            await bus.set_events(None)
            print("events off")
            return 0
        async for event in bus.events(since=args.since, follow=args.follow):
            fields: dict[str, Any] = {
                "id": event.id,
                "event": event.kind,
                "job": event.job,
                "lane": event.lane,
            }
            if event.attempt:
                fields["attempt"] = event.attempt
            if event.text:
                fields["text"] = event.text
            print(json.dumps(fields), flush=True)
    return 0


async def pause(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        if args.command == "pause":
            await bus.pause(args.lane)
        else:
            await bus.resume(args.lane)
    print(f"{args.command}d {'lane ' + args.lane if args.lane else 'the bus'}")
    return 0


async def end_job(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        call = bus.cancel if args.command == "cancel" else bus.revoke
        outcome = await call(args.job, args.reason)
    print(f"{args.command} {args.job}: {outcome.value}")
    return 0 if outcome is Control.DONE else 1


async def set_cap(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        await bus.set_lane_cap(args.lane, None if args.clear else args.cap)
        settings = await bus.flow_settings()
    print(json.dumps({"caps": settings.caps}))
    return 0


async def set_rate(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        await bus.set_rate_limit(None if args.clear else args.rate, lane=args.lane)
        settings = await bus.flow_settings()
    shown: dict[str, Any] = {lane: f"{r.count}/{r.per_ms}" for lane, r in settings.rates.items()}
    if settings.rate is not None:
        shown[""] = f"{settings.rate.count}/{settings.rate.per_ms}"
    print(json.dumps({"rates": shown}))
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser, job_arg: Any) -> None:
    """Add the control commands to the ``echomq`` parser's subcommands ``sub``."""
    events = sub.add_parser("events", parents=[common], help="lifecycle and progress events (JSON lines)")
    events.add_argument("--follow", action="store_true", help="wait for more until interrupted")
    events.add_argument("--since", default="0", help="a stream id; 0 the oldest kept, $ only new ones")
    events.add_argument("--on", type=int, default=None, metavar="MAXLEN", help="turn the stream on")
    events.add_argument("--off", action="store_true", help="turn the stream off")
    events.set_defaults(run=follow_events)
    for name in ("pause", "resume"):
        gate = sub.add_parser(name, parents=[common], help=f"{name} the bus, or one lane")
        gate.add_argument("lane", nargs="?", default=None)
        gate.set_defaults(run=pause)
    for name, what in (("cancel", "a queued or delayed job"), ("revoke", "an active job")):
        end = sub.add_parser(name, parents=[common], help=f"{name} {what}: dead-lettered")
        end.add_argument("job", type=job_arg, metavar="JOB")
        end.add_argument("--reason", default="", help="kept in the dead letter's error")
        end.set_defaults(run=end_job)
    cap = sub.add_parser("cap", parents=[common], help="at most K active jobs of a lane ('*': every lane)")
    cap.add_argument("lane")
    which = cap.add_mutually_exclusive_group(required=True)
    which.add_argument("cap", nargs="?", type=int, metavar="K")
    which.add_argument("--clear", action="store_true")
    cap.set_defaults(run=set_cap)
    rate = sub.add_parser(
        "rate", parents=[common], help="at most COUNT claims in any MS of a lane or the bus"
    )
    rate.add_argument("--lane", default=None, help="a lane, '*' every lane; the bus when left out")
    which = rate.add_mutually_exclusive_group(required=True)
    which.add_argument("rate", nargs="?", type=_rate, metavar="COUNT/MS")
    which.add_argument("--clear", action="store_true")
    rate.set_defaults(run=set_rate)
