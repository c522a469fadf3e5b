"""The score worker of a spread game (:mod:`codemojex.spread`): ``codemojex worker --partitions P``.

One :class:`echomq.Worker` on the game's partitioned bus claims across every partition (rotating, and
blocking on every partition's wake list at once: :mod:`echomq.worker.rotation`), and
:class:`~codemojex.spread.SpreadScoreWorker` scores each guess in its lane's partition, so each guess is
scored and completed by one ``score.lua`` in one slot, as on one game. Beside it, for every partition:
the refunds of dead guesses (a dead job is refunded in its own partition), the expiry of players who
never played, and the upkeep's script cache and reveals of closed rounds. The rounds' conclusion,
schedule and retention are not spread yet (each would act on one partition's players alone), so they
do not run here.
"""

from __future__ import annotations

import asyncio

from codemojex.refunds import Refunder
from codemojex.spread import SpreadGame, SpreadScoreWorker
from codemojex.trials import Expirer
from codemojex.upkeep import Upkeep
from echomq import Job, Worker
from echomq.partitions import partition_of


class _PartitionUpkeep(Upkeep):
    """The script cache and the reveals, in one partition (see the module doc)."""

    async def rounds_pass(self) -> None:
        return None


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
        *(_PartitionUpkeep(game, every_s=sweep_every_s).run(stopping) for game in spread.games),
    ]
    tasks = [asyncio.create_task(work) for work in beside]
    try:
        await worker.run(handle_signals=True)
    finally:
        stopping.set()
        await asyncio.gather(*tasks)
    return worker
