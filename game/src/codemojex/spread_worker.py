"""The score worker of a spread game (:mod:`codemojex.spread`): ``codemojex worker --partitions P``.

One :class:`echomq.Worker` on the game's partitioned bus claims across every partition (rotating, and
blocking on every partition's wake list at once: :mod:`echomq.worker.rotation`), and
:class:`~codemojex.spread.SpreadScoreWorker` scores each guess in its lane's partition, so each guess is
scored and completed by one ``score.lua`` in one slot, as on one game. Beside it, for every partition:
the refunds of dead guesses (a dead job is refunded in its own partition), the expiry of players who
never played, the upkeep's script cache, and the reveal of a round's secret once the round is closed
in every partition (:func:`codemojex.spread.reveal_closed`; never while one still takes guesses); and,
by the first partition's upkeep, the rounds' conclusion (the whole game's summary), the schedule and
the retention of every partition (:mod:`codemojex.spread_upkeep`).
"""

from __future__ import annotations

import asyncio
import logging

from codemojex import schedule, spread_upkeep
from codemojex.access import load_scripts
from codemojex.game import Game
from codemojex.refunds import Refunder
from codemojex.spread import SpreadGame, reveal_closed
from codemojex.spread_jobs import SpreadScoreWorker
from codemojex.trials import Expirer
from codemojex.upkeep import Upkeep
from echomq import Job, Worker
from echomq.partitions import partition_of

log = logging.getLogger("codemojex.upkeep")


class _PartitionUpkeep(Upkeep):
    """The script cache of one partition, and (the first partition's, given ``spread``) the spread
    reveals, conclusions, schedule and retention."""

    def __init__(self, game: Game, every_s: float, spread: SpreadGame | None) -> None:
        super().__init__(game, every_s)
        self.spread = spread

    async def run_pass(self) -> None:
        loaded = await self._step("scripts", load_scripts(self.game.redis))
        if loaded:
            log.info("loaded %s scripts into the server's cache", loaded)
        if self.spread is not None:  # a secret shows once its round is closed in every partition
            revealed = await self._step("reveals", reveal_closed(self.spread))
            if revealed:
                log.info("revealed the secrets of closed rounds %s", ", ".join(revealed))
            await self.rounds_pass()

    async def rounds_pass(self) -> None:
        """The whole game's conclusions, schedule and retention (:mod:`codemojex.spread_upkeep`)."""
        spread = self.spread
        if spread is None:
            return
        settings = await self._step("settings", schedule.read_settings(self.game))
        concluded = await self._step("conclusions", spread_upkeep.conclude_closed(spread))
        if concluded:
            log.info("concluded closed rounds %s", ", ".join(concluded))
        if settings is None:
            return
        opened = await self._step("schedule", spread_upkeep.schedule_step(spread, settings))
        if opened:
            log.info("the schedule opened round %s", opened)
        purged = await self._step("retention", spread_upkeep.purge(spread, settings.retention_s))
        if purged:
            log.info("purged the per-guess data of rounds %s", ", ".join(purged))


async def run_spread_worker(
    spread: SpreadGame, *, concurrency: int, lease_ms: int, sweep_every_s: float, grace_s: float
) -> Worker:
    """The spread game's score worker until SIGTERM / SIGINT, with each partition's refunds, expiry and
    upkeep beside it. Returns the stopped worker."""
    refunders = [Refunder(game, every_s=sweep_every_s) for game in spread.games]

    async def on_dead(job: Job) -> None:
        await refunders[partition_of(job.lane, len(refunders))].on_dead(job)

    worker = Worker(
        spread.pbus,
        SpreadScoreWorker(spread).handle,
        concurrency=concurrency,
        lease_ms=lease_ms,
        sweep_every_s=sweep_every_s,
        grace_s=grace_s,
        on_dead=on_dead,
    )
    stopping = asyncio.Event()
    beside = [
        *(refunder.run(stopping) for refunder in refunders),
        *(Expirer(game).run(stopping) for game in spread.games),
        *(
            _PartitionUpkeep(game, sweep_every_s, spread if i == 0 else None).run(stopping)
            for i, game in enumerate(spread.games)
        ),
    ]
    tasks = [asyncio.create_task(work) for work in beside]
    try:
        await worker.run(handle_signals=True)
    finally:
        stopping.set()
        await asyncio.gather(*tasks)
    return worker
