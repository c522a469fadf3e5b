"""The score worker's upkeep, each sweep period: the script cache and the revealed secrets.

* **Scripts.** The web host's Redis user may run the game's and EchoMQ's scripts by ``EVALSHA`` but may
  not load them (:mod:`codemojex.access`), so a Redis that lost its script cache (a restart, a
  ``SCRIPT FLUSH``, a new node) leaves the host answering 503 until someone loads them. The worker checks
  the cache with ``SCRIPT EXISTS`` and loads what is missing (:func:`codemojex.access.load_scripts`),
  so the host recovers within one period.
* **Reveals.** A round closed by its close time (no call closed it) gets its secret copied to its
  revealed key, which the host shows (:func:`codemojex.rounds.reveal_closed`).

Either failing (Redis unreachable, a user without the rights) is logged; the next period tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from codemojex import rounds
from codemojex.access import load_scripts
from codemojex.errors import CodemojexError
from codemojex.game import Game

log = logging.getLogger("codemojex.upkeep")


class Upkeep:
    """One pass now and every ``every_s`` (see the module doc)."""

    def __init__(self, game: Game, every_s: float) -> None:
        self.game = game
        self.every_s = every_s

    async def run_pass(self) -> None:
        loaded = await load_scripts(self.game.redis)
        if loaded:
            log.info("loaded %s scripts into the server's cache", loaded)
        revealed = await rounds.reveal_closed(self.game)
        if revealed:
            log.info("revealed the secrets of closed rounds %s", ", ".join(revealed))

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.run_pass()
            except CodemojexError as exc:
                log.warning("upkeep pass failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.every_s)
