"""The dashboard's throughput: the host samples the bus's counters every few seconds and keeps the
last ten minutes, so the chart has history the moment the page opens. Samples are per host process
and start when it starts (the counters themselves live in Redis and never reset)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from dataclasses import dataclass

from codemojex.errors import CodemojexError
from codemojex.game import Game, translate_errors
from codemojex.rounds import server_ms
from echomq.partitions import AnyBus

log = logging.getLogger("codemojex.web.throughput")

WINDOW_S = 600


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int
    admitted: int  # in the interval that ends at at_ms
    completed: int


class Sampler:
    """Samples ``bus`` (a spread game's partitioned bus: every partition's counters summed), else the
    game's own."""

    def __init__(self, game: Game, every_s: float, bus: AnyBus | None = None) -> None:
        self.game = game
        self.bus = bus or game.bus
        self.every_s = every_s
        self.samples: deque[Sample] = deque(maxlen=max(2, int(WINDOW_S / every_s)))
        self._last: tuple[int, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def sample(self) -> None:
        """Take one sample (the first only sets the baseline)."""
        with translate_errors():
            stats = await self.bus.stats(lanes=0)
        now = await server_ms(self.game)
        counts = (stats.counters["admitted"], stats.counters["completed"])
        if self._last is not None:
            self.samples.append(Sample(now, counts[0] - self._last[0], counts[1] - self._last[1]))
        self._last = counts

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.sample()
            except CodemojexError as exc:  # Redis away for a moment: the chart has a gap, the host goes on
                log.warning("throughput sample failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.every_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="throughput-sampler")

    async def stop(self) -> None:
        """Stop sampling; the loop ends at its next turn (no cancel: a cancel that lands inside a
        redis-py call can be swallowed there)."""
        self._stop.set()
        if self._task is not None:
            await self._task
