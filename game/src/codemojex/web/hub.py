"""The events hub: one reader for every watched round fans scored guesses and leaderboard changes out.

``score.lua`` appends one entry to the round's stream ``cmx:{t}:events:<RND>`` for each guess it scores
(only when it writes the record, so a redelivery adds none). The :class:`Hub` follows every round that
has subscribers with one blocking ``XREAD`` over all their streams, on one dedicated connection of its
own (not the request pool: a thousand streams on a thousand rounds hold one connection, not a thousand).
A round joins the read from the entry that was last when its first subscriber came, so nothing scored
after a subscription is missed. Entries fan out as a ``scored`` event to the guess's own player, then one
``leaderboard`` event with the new top of the board to everyone watching the round (one pooled read),
then a ``solved`` notice to everyone watching for each player whose standing an entry turned solved
(``score.lua`` marks that one record ``newly``, so a redelivery or a second solving guess adds none):
the solver's name, attempts and rank, never their guesses.

Admission (:mod:`codemojex.web.admission`): the hub caps the streams per player, per client address and
in all (:class:`TooManyStreams`, answered 429 ``too_many_streams``). Each subscriber has a bounded queue:
one that falls behind is dropped to a single ``resync`` (the page refetches); a client that reads nothing
at all is ended by the stream's send timeout (:mod:`codemojex.web.events`).

The close: the score worker concludes a closed round once (:mod:`codemojex.history`) and appends one
``closed`` entry with the round's summary to its stream; the hub sends it to everyone watching the round
as a ``closed`` event (the secret, the winners: the top of the final board, the counts) and their streams
end. Every few seconds the hub also checks the rounds it follows: a closed one whose entry it missed gets
the same event from the summary, and one closed :data:`CLOSE_WAIT_MS` ago without a summary (no worker
running; plus the conclusion's grace while guesses are queued) a bare ``closed``.

Revocation: each subscriber keeps the SHA-256 of the token its stream was opened with (the ticket's
asking token, or the bearer token). At the same check (:attr:`~codemojex.web.admission.Limits.
stream_check_s`) the hub asks Redis, in one pipeline for all its subscribers (one ``GET`` of the token
key and one ``HGET`` of the legacy ``tokens`` hash per distinct token, never per event), whom each token
names now; a stream whose token no longer names its player (a logout, a rotation, an expiry) gets a last
``revoked`` event and ends. The page then asks for a new ticket only if its token still works (its own
rotation), else it shows the join form.

A spread game (:mod:`codemojex.spread`): each partition's ``score.lua`` appends to that partition's
stream of the round, so the hub follows a round in every partition, one ``XREAD`` per partition (on a
cluster the partitions' streams are in different slots), each on its own connection; the board is the
merged one (:func:`codemojex.spread.read_board`), a token is checked in its own partition, and the
``closed`` event is the whole game's summary (:mod:`codemojex.spread_upkeep`), which the home
partition's stream carries as its ``concluded`` entry (a partition's own ``closed`` entry only makes
the hub look for it at once; the periodic check finds it otherwise). A round closed at home and not yet
in another partition (an early close cut off midway) is still open there: its streams go on until it
is closed in every partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from codemojex import history, leaderboard, placement, rounds, tokens
from codemojex.errors import CodemojexError, NotFound
from codemojex.game import Game, translate_errors
from codemojex.rounds import RoundStatus
from codemojex.spread import SpreadGame, read_board
from codemojex.spread_rounds import closed_in
from codemojex.web.admission_limits import Limits
from codemojex.web.notices import board_event, closed_event, scored_event, solved_event
from codemojex.web.subscribers import Event, Subscriber, TooManyStreams

log = logging.getLogger("codemojex.web.hub")

BLOCK_MS = 1000  # under redis-py's default socket timeout (5 s); a new round joins the read within it
BOARD_SHOWN = 20
CLOSE_WAIT_MS = 5000  # after a close (and the conclusion's grace, with guesses queued), streams end anyway
SOLVERS_READ = 1000  # the board read for a solve notice whose solver is past the shown top


def _bump(counts: dict[str, int], key: str, delta: int) -> None:
    value = counts.get(key, 0) + delta
    if value > 0:
        counts[key] = value
    else:
        counts.pop(key, None)


class Hub:
    """``game`` serves the board reads (pooled); ``reader`` (a Game on a one-connection pool) the XREAD.
    On a spread game (``spread``), ``readers`` has one such Game per partition (see the module doc)."""

    def __init__(
        self,
        game: Game,
        reader: Game | None = None,
        limits: Limits | None = None,
        *,
        spread: SpreadGame | None = None,
        readers: list[Game] | None = None,
    ) -> None:
        self.game = game
        self.spread = spread
        self.games = [game] if spread is None else spread.games
        self.readers = readers or [reader or game]
        if len(self.readers) != len(self.games):
            raise ValueError("a spread game's hub needs one reader per partition")
        self.limits = limits or Limits()
        self.rounds: dict[str, set[Subscriber]] = {}
        self.positions: dict[str, list[str]] = {}  # round -> the last stream entry read, per partition
        self._look: set[str] = set()  # rounds a partition's closed entry asks to look at now
        self.per_player: dict[str, int] = {}
        self.per_address: dict[str, int] = {}
        self.total = 0
        self.closed = False
        self._task: asyncio.Task[None] | None = None

    def check(self, player_id: str, address: str) -> None:
        """Raise :class:`TooManyStreams` if one more stream of this player and address is over a cap."""
        if self.total >= self.limits.streams_total:
            raise TooManyStreams("host")
        if self.per_player.get(player_id, 0) >= self.limits.streams_per_player:
            raise TooManyStreams("player")
        if self.per_address.get(address, 0) >= self.limits.streams_per_address:
            raise TooManyStreams("address")

    async def subscribe(
        self, round_id: str, player_id: str, address: str = "", token_digest: str | None = None
    ) -> Subscriber:
        self.check(player_id, address)
        subscriber = Subscriber(round_id, player_id, address, token_digest)
        if self.closed:
            subscriber.end()
            return subscriber
        last = None if round_id in self.positions else await self._last_entries(round_id)
        self.check(player_id, address)  # again: others may have subscribed meanwhile
        self.total += 1
        _bump(self.per_player, player_id, 1)
        _bump(self.per_address, address, 1)
        self.rounds.setdefault(round_id, set()).add(subscriber)
        if last is not None:
            self.positions.setdefault(round_id, last)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._read(), name="events-reader")
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        watching = self.rounds.get(subscriber.round_id)
        if watching is None or subscriber not in watching:
            return
        watching.discard(subscriber)
        self.total -= 1
        _bump(self.per_player, subscriber.player_id, -1)
        _bump(self.per_address, subscriber.address, -1)
        if not watching:
            self.rounds.pop(subscriber.round_id, None)
            self.positions.pop(subscriber.round_id, None)

    async def _last_entries(self, round_id: str) -> list[str]:
        async def last(game: Game) -> str:
            newest = await game.redis.xrevrange(game.keys.events(round_id), count=1)
            return newest[0][0].decode() if newest else "0-0"

        with translate_errors():
            return list(await asyncio.gather(*(last(game) for game in self.games)))

    async def _read(self) -> None:
        """Follow every watched round (one loop per partition) and check them every period. Ends only
        when nothing is watched once its partitions' loops are gone (no await between that check and
        the end, so a stream that came meanwhile finds this task done and starts another)."""
        while self.positions and not self.closed:
            await self._read_all()

    async def _read_all(self) -> None:
        loop = asyncio.get_running_loop()
        checked = loop.time()
        period = self.limits.stream_check_s
        block = max(1, min(BLOCK_MS, int(period * 1000)))
        follows: dict[int, asyncio.Task[None]] = {}
        try:
            while self.positions and not self.closed:
                for p in range(1, len(self.games)):  # a loop that saw nothing watched for a moment ended
                    if p not in follows or follows[p].done():
                        follows[p] = asyncio.create_task(self._follow(p, block))
                try:
                    await self._read_once(0, block)
                    if loop.time() - checked >= period or self._look:
                        checked = loop.time()
                        await self._end_closed()
                        await self._end_revoked()
                except CodemojexError as exc:
                    log.warning("events reader: %s; retrying", exc)
                    await asyncio.sleep(1.0)
        finally:
            for task in follows.values():
                task.cancel()
            await asyncio.gather(*follows.values(), return_exceptions=True)

    async def _follow(self, p: int, block: int) -> None:
        """Partition ``p``'s read (a spread game's partitions but the first)."""
        while self.positions and not self.closed:
            try:
                await self._read_once(p, block)
            except CodemojexError as exc:
                log.warning("events reader of partition %s: %s; retrying", p, exc)
                await asyncio.sleep(1.0)

    async def _read_once(self, p: int, block: int) -> None:
        game = self.games[p]
        streams = {game.keys.events(rid): last[p] for rid, last in self.positions.items()}
        if not streams:
            return
        with translate_errors():
            reply = await self.readers[p].redis.xread(streams, count=100, block=block)
        for key, entries in reply or ():
            round_id = (key.decode() if isinstance(key, bytes) else key).rsplit(":", 1)[1]
            if round_id in self.positions and entries:
                self.positions[round_id][p], solvers = self._publish(round_id, p, entries)
                await self._publish_board(round_id, solvers)

    async def _end_closed(self) -> None:
        self._look.clear()
        now = await rounds.server_ms(self.game)
        for round_id in list(self.positions):
            try:
                the_round = await rounds.get_round(self.game, round_id)
            except NotFound:
                the_round = None
            if the_round is not None and the_round.status_at(now) is not RoundStatus.CLOSED:
                continue
            if (
                the_round is not None
                and not all(  # a spread round: until closed in every partition
                    await asyncio.gather(*(closed_in(game, round_id) for game in self.games[1:]))
                )
            ):
                continue
            summary = await history.read_summary(self.game, round_id, whole=self.spread is not None)
            if summary is not None:
                self._announce(round_id, closed_event(summary))
                continue
            ended = the_round.closed_ms or the_round.closes_ms if the_round else None
            if ended is not None:
                waits = CLOSE_WAIT_MS
                pending = await asyncio.gather(*(history.pending_guesses(g, round_id) for g in self.games))
                if sum(pending) > 0:
                    waits += history.SETTLE_GRACE_MS  # the worker waits for them before concluding
                if now < ended + waits:
                    continue  # the worker concludes it soon: its closed entry comes on the stream
            for subscriber in list(self.rounds.get(round_id, ())):
                subscriber.end(("closed", {"round_id": round_id}))

    def _announce(self, round_id: str, event: Event) -> None:
        for subscriber in list(self.rounds.get(round_id, ())):
            subscriber.finish(event)

    async def _end_revoked(self) -> None:
        """End the streams whose token no longer names their player: one pipeline for all of them."""
        checked = [sub for watching in self.rounds.values() for sub in watching if sub.token_digest]
        digests = sorted({sub.token_digest for sub in checked if sub.token_digest})
        if not digests:
            return
        by_game: dict[int, list[str]] = {}
        for digest in digests:
            by_game.setdefault(placement.partition_of_digest(digest, len(self.games)), []).append(digest)
        names: dict[str, str | None] = {}
        for p, some in by_game.items():
            names.update(await tokens.holders(self.games[p], some))
        for subscriber in checked:
            if names.get(subscriber.token_digest or "") != subscriber.player_id:
                subscriber.end(("revoked", {"round_id": subscriber.round_id}))

    def _publish(
        self, round_id: str, p: int, entries: list[tuple[bytes, dict[bytes, bytes]]]
    ) -> tuple[str, dict[str, int]]:
        """Fan the scored entries out to their players; the last entry id, and the players whose
        standing these entries turned solved (score.lua's ``newly``) with their attempts then."""
        last = self.positions[round_id][p]
        solvers: dict[str, int] = {}
        for entry_id, fields in entries:
            last = entry_id.decode()
            if fields.get(b"kind") == b"concluded" and b"summary" in fields:  # a spread game's whole
                self._announce(round_id, closed_event(history.parse_summary(fields[b"summary"])))
                continue
            if fields.get(b"kind") == b"closed" and b"summary" in fields:
                if self.spread is None:
                    self._announce(round_id, closed_event(history.parse_summary(fields[b"summary"])))
                else:  # a partition's own part: the whole round's summary is read from the home game
                    self._look.add(round_id)
                continue
            if fields.get(b"kind") != b"scored":
                continue
            if fields.get(b"newly") == b"1":
                solvers[fields[b"player"].decode()] = int(fields.get(b"attempts", b"0"))
            event = scored_event(round_id, fields)
            player = fields[b"player"].decode()
            for subscriber in list(self.rounds.get(round_id, ())):
                if subscriber.player_id == player:
                    subscriber.offer(event)
        return last, solvers

    async def _board(self, round_id: str, limit: int) -> list[leaderboard.Entry]:
        if self.spread is not None:
            return await read_board(self.spread, round_id, limit)
        return await leaderboard.read_board(self.game, round_id, limit)

    async def _publish_board(self, round_id: str, solvers: dict[str, int] | None = None) -> None:
        entries = await self._board(round_id, BOARD_SHOWN)
        event = board_event(round_id, entries)
        for subscriber in list(self.rounds.get(round_id, ())):
            subscriber.offer(event)
        if solvers:
            await self._publish_solved(round_id, solvers, entries)

    async def _publish_solved(
        self, round_id: str, solvers: dict[str, int], entries: list[leaderboard.Entry]
    ) -> None:
        """One ``solved`` notice a new solver to everyone watching: name, attempts and rank, nothing of
        the guess. Solvers rank first (by solve time), so a board past the shown top is read only when
        more players solved than it holds."""
        if not solvers.keys() <= {entry.standing.player for entry in entries}:
            entries = await self._board(round_id, SOLVERS_READ)
        found = {entry.standing.player: entry for entry in entries}
        for player, attempts in solvers.items():
            notice = solved_event(round_id, player, attempts, found.get(player))
            for subscriber in list(self.rounds.get(round_id, ())):
                subscriber.offer(notice)

    async def close(self) -> None:
        """End every stream (the host is stopping) and the reader."""
        if self.closed:
            return
        self.closed = True
        for watching in self.rounds.values():
            for subscriber in watching:
                subscriber.end()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for reader in self.readers:
            if reader is not self.game:
                await reader.aclose()
