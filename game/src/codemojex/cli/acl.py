"""``codemojex acl``: the game's Redis users (:mod:`codemojex.access`) for a deployment on its own Redis.

``codemojex acl`` prints the ``ACL SETUSER`` commands of the game on ``--tag`` (passwords as SHA-256,
from ``--passwords FILE``, made there with mode 0600 if it does not exist). ``codemojex acl --apply``
runs them over ``--redis-url`` (a user allowed ``ACL``, e.g. ``default`` or an admin) and loads the
scripts; then give each process its URL (the passwords are in FILE)::

    REDIS_URL=redis://<admin>@host:6379/0                      # codemojex serve itself, the operator's tools
    CODEMOJEX_HOST_URL=redis://cmx-host-cm:<pw>@host:6379/0     # the web host
    CODEMOJEX_WORKER_URL=redis://cmx-worker-cm:<pw>@host:6379/0 # the score worker (in its environment)

On a cluster, apply on each node (``ACL SETUSER`` is not propagated). A game spread over P partitions
(``--partitions P``, :mod:`codemojex.spread`): the users' keys are those of the tags ``<tag>.0`` ...
``<tag>.<P-1>``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from codemojex import access
from codemojex.cli.arguments import count
from codemojex.cli.commands import Result
from codemojex.game import Game
from echomq.partitions import MAX_PARTITIONS


async def acl_run(game: Game, args: argparse.Namespace) -> Result:
    passwords = access.passwords_at(Path(args.passwords))
    tag = game.bus.tag
    commands = [
        ["ACL", "SETUSER", rule.user, *rule.setuser_args(passwords[role])]
        for role, rule in ((role, access.rules(role, tag, args.partitions)) for role in access.ROLES)
    ]
    applied: list[str] = []
    if args.apply:
        applied = await access.provision(game.redis, tag, passwords, args.partitions)
        await access.load_scripts(game.redis)
    users = {role: access.user_name(role, tag) for role in access.ROLES}
    shown = [" ".join(command) for command in commands]
    data = {
        "tag": tag,
        "partitions": args.partitions,
        "users": users,
        "passwords_file": str(args.passwords),
        "applied": bool(applied),
    }
    data["commands"] = shown
    lines = list(shown) if not applied else [f"set up {', '.join(applied)} on bus {tag}"]
    lines.append(f"# passwords (role -> password) in {args.passwords}, mode 0600")
    return Result(data, lines)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    command = sub.add_parser(
        "acl", parents=[common], help="print or apply the game's Redis users (least privilege)"
    )
    command.set_defaults(run=acl_run)
    command.add_argument("--apply", action="store_true", help="run ACL SETUSER over --redis-url (an admin)")
    command.add_argument(
        "--passwords",
        default="redis-users.json",
        metavar="FILE",
        help="the users' passwords (JSON, role -> password), made with mode 0600 if missing",
    )
    command.add_argument(
        "--partitions",
        type=count(1, MAX_PARTITIONS),
        default=1,
        metavar="P",
        help="the game is spread over tags <tag>.0 ... <tag>.<P-1> (codemojex.spread; default 1)",
    )
