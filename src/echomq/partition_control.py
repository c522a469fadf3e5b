"""Control, flow gates, results and events of a :class:`~echomq.partitions.PartitionedBus`.

Each call goes where its subject lives: a lane's gate to the partition that holds the lane
(:meth:`~echomq.partitions.PartitionedBus.route`), a job's cancel, revoke or result to the partition
that holds its row (asked in turn, as ``inspect`` does), a setting of every lane (``"*"``), a pause of the
whole bus and the events switch to every partition. So each keeps the guarantee it has on one bus.

What has no exact meaning across partitions is refused rather than approximated: a rate limit of the
whole bus (each partition's claim sees only its own window) raises :class:`~echomq.errors.InvalidOption`;
set it per partition (``pbus.partitions[i].set_rate_limit(...)``) if a per-partition limit is what you
want. Events stay per partition (``pbus.partitions[i].events()``): each stream is in order, the
partitions' streams are not ordered with each other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from echomq.errors import InvalidOption, ResultExpired, UnknownJob
from echomq.flow import Rate
from echomq.states import Control

if TYPE_CHECKING:
    from echomq.bus import Bus
    from echomq.jobs import Claim

T = TypeVar("T")


class PartitionControl:
    """The calls above, for a class with ``partitions``, ``route`` and ``_each`` (PartitionedBus)."""

    partitions: list[Bus]
    tag: str

    def route(self, lane: str) -> Bus:
        raise NotImplementedError

    async def _each(self, call: Callable[[Bus], Awaitable[T]]) -> list[T]:
        raise NotImplementedError

    async def _holder(self, job: str, call: Callable[[Bus], Awaitable[T]]) -> T:
        """``call`` on the partition that holds ``job``'s row (asked in turn)."""
        for bus in self.partitions:
            try:
                return await call(bus)
            except ResultExpired:
                raise
            except UnknownJob:
                continue
        raise UnknownJob(f"no partition of {self.tag} holds {job}")

    async def cancel(self, job: str, reason: str = "") -> Control:
        """:meth:`echomq.Bus.cancel` on the partition that holds the job."""
        return await self._holder(job, lambda bus: bus.cancel(job, reason))

    async def revoke(self, job: str, reason: str = "") -> Control:
        """:meth:`echomq.Bus.revoke` on the partition that holds the job."""
        return await self._holder(job, lambda bus: bus.revoke(job, reason))

    async def result(self, job: str, *, timeout: float) -> bytes:  # noqa: ASYNC109 (bus.result's)
        """:meth:`echomq.Bus.result` on the partition that holds the job (the others answer at once)."""
        return await self._holder(job, lambda bus: bus.result(job, timeout=timeout))

    async def pause(self, lane: str | None = None) -> None:
        """Pause one lane (its partition), or the whole bus (every partition)."""
        if lane is None:
            await self._each(lambda bus: bus.pause())
        else:
            await self.route(lane).pause(lane)

    async def resume(self, lane: str | None = None) -> None:
        if lane is None:
            await self._each(lambda bus: bus.resume())
        else:
            await self.route(lane).resume(lane)

    async def set_lane_cap(self, lane: str, cap: int | None) -> None:
        """A lane's cap on its partition; ``"*"``: on every partition (each lane is in one)."""
        if lane == "*":
            await self._each(lambda bus: bus.set_lane_cap("*", cap))
        else:
            await self.route(lane).set_lane_cap(lane, cap)

    async def set_rate_limit(self, rate: Rate | None, *, lane: str | None = None) -> None:
        """A lane's rate on its partition; ``"*"``: every partition. A whole bus's rate is refused."""
        if lane is None:
            raise InvalidOption(
                "a rate of the whole partitioned bus has no exact meaning (each partition sees only its own "
                "claims): set it per partition, pbus.partitions[i].set_rate_limit(...), or per lane"
            )
        if lane == "*":
            await self._each(lambda bus: bus.set_rate_limit(rate, lane="*"))
        else:
            await self.route(lane).set_rate_limit(rate, lane=lane)

    async def set_events(self, maxlen: int | None) -> None:
        """The events stream of every partition on (about ``maxlen`` kept each) or off."""
        await self._each(lambda bus: bus.set_events(maxlen))

    async def progress(self, claim: Claim, text: str) -> bool:
        """:meth:`echomq.Bus.progress` on the claim's partition."""
        return await self.route(claim.lane).progress(claim, text)
