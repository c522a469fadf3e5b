"""The score worker's upkeep, each sweep period: the script cache, the revealed secrets, the rounds'
lifecycle (the schedule, the conclusion of closed rounds, the retention of their per-guess data).

* **Scripts.** The web host's Redis user may run the game's and EchoMQ's scripts by ``EVALSHA`` but may
  not load them (:mod:`codemojex.access`), so a Redis that lost its script cache (a restart, a
  ``SCRIPT FLUSH``, a new node) leaves the host answering 503 until someone loads them. The worker checks
  the cache with ``SCRIPT EXISTS`` and loads what is missing (:func:`codemojex.access.load_scripts`),
  so the host recovers within one period.
* **Reveals.** A round closed by its close time (no call closed it) gets its secret copied to its
  revealed key, which the host shows (:func:`codemojex.rounds.reveal_closed`).
* **Conclusions.** A closed round gets its summary, its history entry and its ``closed`` event with the
  winners, once (:func:`codemojex.history.conclude_closed`).
* **Schedule.** With the schedule on, the next round opens when the schedule's last one closed
  (:func:`codemojex.schedule.step`).
* **Retention.** Concluded rounds closed longer ago than the retention lose their per-guess data, a
  bounded number a pass (:func:`codemojex.retention.purge`).

Each is safe beside another worker's pass and after a lost reply (see each module). A step failing (Redis
unreachable, a user without the rights, a round that cannot be concluded) is logged and the others
still run; the next period tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TypeVar

from codemojex import history, retention, rounds, schedule
from codemojex.access import load_scripts
from codemojex.errors import CodemojexError
from codemojex.game import Game

log = logging.getLogger("codemojex.upkeep")

T = TypeVar("T")


class Upkeep:
    """One pass now and every ``every_s`` (see the module doc)."""

    def __init__(self, game: Game, every_s: float) -> None:
        self.game = game
        self.every_s = every_s

    async def run_pass(self) -> None:
        """Each step on its own: one that fails (Redis unreachable, a user without the rights, a round
        that cannot be read) is logged, and the others still run."""
        game = self.game
        loaded = await self._step("scripts", load_scripts(game.redis))
        if loaded:
            log.info("loaded %s scripts into the server's cache", loaded)
        revealed = await self._step("reveals", rounds.reveal_closed(game))
        if revealed:
            log.info("revealed the secrets of closed rounds %s", ", ".join(revealed))
        await self.rounds_pass()

    async def rounds_pass(self) -> None:
        """Conclude the closed rounds, keep the schedule, purge past the retention."""
        game = self.game
        settings = await self._step("settings", schedule.read_settings(game))
        concluded = await self._step("conclusions", history.conclude_closed(game))
        if concluded:
            log.info("concluded closed rounds %s", ", ".join(concluded))
        if settings is None:
            return
        opened = await self._step("schedule", schedule.step(game, settings))
        if opened:
            log.info("the schedule opened round %s", opened)
        purged = await self._step("retention", retention.purge(game, retention_s=settings.retention_s))
        if purged:
            log.info("purged the per-guess data of rounds %s", ", ".join(purged))

    @staticmethod
    async def _step(name: str, work: Awaitable[T]) -> T | None:
        try:
            return await work
        except CodemojexError as exc:
            log.warning("upkeep %s failed: %s", name, exc)
            return None

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.run_pass()
            except Exception:
                log.exception("upkeep pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.every_s)
