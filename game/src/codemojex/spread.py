"""One game spread over the partitions of an :class:`echomq.PartitionedBus`: on a Redis Cluster, over
every master, with each script still run whole in one slot.

**Layout.** Partition ``i`` is a whole game keyspace on the tag ``<tag>.<i>`` (``cmx:{<tag>.<i>}:...``
beside its bus ``emq:{<tag>.<i>}:...``), held by a :class:`~codemojex.game.Game` of its own. A player
lives in exactly one partition, with everything a script touches with their guesses: their lane (the
player id), record, wallet, ledger, locks, standing, records and stats. So ``submit.lua`` still
validates, charges and admits in one script and ``score.lua`` still applies the effect and completes in
one, and every guarantee of the one-slot game holds in each partition, so for the whole game.

**Which partition.** The one the player's *name* hashes to (CRC-32 of its look-alike skeleton,
:func:`codemojex.names.skeleton`, modulo P), and their id is minted until its lane hashes there too
(:func:`echomq.partitions.partition_of`: about P tries, all local). So the partition's ``names`` hash
sees every name that looks like theirs and a look-alike is :class:`~codemojex.errors.NameTaken` across
the whole game, in register.lua's one step; and the queue routes their guesses by lane to the same
partition.

**Rounds** (:mod:`codemojex.spread_rounds`, whose calls this module names too). A round is written to
every partition when it opens: the same id, keyboard, prices, guess
limit, secret (for the score workers of each partition), opening and closing instants. The instants are
absolute, read once from one server's clock; each partition's scripts then decide open
or closed by their own server clock against them, so every partition closes at the same instant (to the
agreement of the servers' clocks: the same on one machine, NTP's on several). Opening is P idempotent
scripts (``open_round.lua`` with a given id): after a lost reply or a crash midway, :func:`open_round`
again with the same ``round_id`` and arguments writes the partitions not reached yet and changes none
already written; until then such a partition refuses the round's guesses as
:class:`~codemojex.errors.UnknownRound` (nothing charged).

**The board** of each partition ranks its own players; :func:`read_board` merges the partitions' pages
on read (a k-way merge by :func:`codemojex.ranking.sort_key`, a total order), so the merged board is the
ranking of every partition's records (:func:`scored_records`, :func:`codemojex.leaderboard.recompute`),
whichever worker scored what, in whatever order and however often.

**Growing P** (see :mod:`echomq.partitions`): a spread game keeps its P; a new P is a new game tag whose
rounds open with it, while the old one's rounds end and conclude.

Around it: the score worker's handler and the operator's round jobs (:mod:`codemojex.spread_jobs`), the
schedule, the conclusion into one summary of the whole game and the retention
(:mod:`codemojex.spread_upkeep`), and the web host (``HostConfig.partitions``: tokens minted to hash to
their player's partition, :mod:`codemojex.placement`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import zlib
from collections.abc import Sequence
from typing import Any

from codemojex import leaderboard, placement, players, ranking
from codemojex.errors import InvalidOption, NameTaken
from codemojex.game import Game, GameSettings, check_int, translate_errors
from codemojex.guesses import GuessRecord, Submission
from codemojex.guesses import submit as submit_one
from codemojex.keys import PLAYER, check_id
from codemojex.names import check_name, skeleton, variants
from codemojex.players import Player
from codemojex.spread_rounds import close_round, open_round, reveal_closed
from echomq import ids
from echomq.core import Settings
from echomq.partitions import PartitionedBus, partition_of

__all__ = [
    "MINT_TRIES", "SpreadGame", "close_round", "mint_player_id", "new_token", "open_round", "read_board",
    "register", "reveal_closed", "scored_records", "submit", "suggest_name", "token_partition",
]  # fmt: skip

MINT_TRIES = 100_000  # ids minted to land one in a partition: about P are needed, P <= 1024


class SpreadGame:
    """The game over ``pbus``'s partitions (see the module doc)."""

    def __init__(self, pbus: PartitionedBus, settings: GameSettings | None = None) -> None:
        self.pbus = pbus
        self.settings = settings or GameSettings()
        size = len(pbus.partitions)
        self.games = [Game(bus, self.settings, (i, size)) for i, bus in enumerate(pbus.partitions)]

    @classmethod
    def from_url(
        cls,
        url: str,
        tag: str = "cm",
        partitions: int = 3,
        settings: GameSettings | None = None,
        bus_settings: Settings | None = None,
        *,
        cluster: bool = False,
        max_connections: int | None = None,
    ) -> SpreadGame:
        """A game over ``partitions`` tags of a new client for ``url`` (``cluster=True`` for a cluster)."""
        pbus = PartitionedBus.from_url(
            url, tag, partitions, bus_settings, cluster=cluster, max_connections=max_connections
        )
        return cls(pbus, settings)

    async def check_layout(self) -> None:
        """Refuse a game opened with another P than its partitions were made with (InvalidOption;
        :meth:`echomq.partitions.PartitionedBus.check_layout`), once per object."""
        with translate_errors():
            await self.pbus.check_layout()

    def partition_of_player(self, player_id: str) -> int:
        return partition_of(check_id(player_id, PLAYER), len(self.games))

    def game_of(self, player_id: str) -> Game:
        """The partition's game that holds ``player_id``."""
        return self.games[self.partition_of_player(player_id)]

    def partition_of_name(self, name: str) -> int:
        """The partition a player called ``name`` lives in (the name checked: InvalidName)."""
        return zlib.crc32(skeleton(check_name(name)).encode()) % len(self.games)

    async def aclose(self) -> None:
        await self.pbus.aclose()

    async def __aenter__(self) -> SpreadGame:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def mint_player_id(partition: int, partitions: int) -> str:
    """A fresh player id whose lane falls in ``partition`` of ``partitions``."""
    for _ in range(MINT_TRIES):
        player_id = ids.mint(PLAYER)
        if partition_of(player_id, partitions) == partition:
            return player_id
    raise AssertionError(f"no id of partition {partition} of {partitions} in {MINT_TRIES} tries")


def new_token(spread: SpreadGame, name: str) -> str:
    """A fresh API token (:func:`codemojex.players.new_token`) for the player called ``name``: its
    digest hashes to the name's partition (about P tries, local), where the token key lives."""
    return placement.mint(
        players.new_token, players.token_digest, spread.games[spread.partition_of_name(name)].place
    )


def token_partition(token: str, partitions: int) -> int:
    """The partition of a player token (:mod:`codemojex.placement`)."""
    return placement.partition_of_digest(players.token_digest(players.check_token(token)), partitions)


async def register(spread: SpreadGame, name: str, *, token: str | None = None) -> Player:
    """:func:`codemojex.players.register` in the partition of ``name`` (see the module doc); the same
    errors, NameTaken across the whole game. A ``token`` must be one :func:`new_token` minted for that
    name (its digest hashes to the same partition, so one token can name one player only, in one
    place), else InvalidOption. A lost reply: as there (a new call registers anew)."""
    partition = spread.partition_of_name(name)
    if token is not None and token_partition(token, len(spread.games)) != partition:
        raise InvalidOption("a token of a spread game is minted for the player's name: spread.new_token")
    player_id = mint_player_id(partition, len(spread.games))
    await spread.check_layout()
    try:
        return await players.register(spread.games[partition], name, token=token, player_id=player_id)
    except NameTaken:  # its suggestion was looked up in this partition: ask each variant's own
        display = check_name(name)
        suggestion = await suggest_name(spread, display)
        raise NameTaken(
            f"another player is called {display!r} or a name that looks the same: pick another"
            + (f", e.g. {suggestion!r}" if suggestion else ""),
            suggestion=suggestion,
        ) from None


async def suggest_name(spread: SpreadGame, display: str) -> str | None:
    """A name like ``display`` that nobody holds now, each variant looked up in its own partition (see
    :func:`codemojex.players.suggest_name`), or None."""

    async def holder(candidate: str) -> Any:
        game = spread.games[spread.partition_of_name(candidate)]
        return await game.redis.hget(game.keys.names, skeleton(candidate))

    candidates = variants(display)
    with translate_errors():
        holders = await asyncio.gather(*(holder(candidate) for candidate in candidates))
    return next((name for name, held in zip(candidates, holders, strict=True) if held is None), None)


async def submit(
    spread: SpreadGame,
    round_id: str,
    player_id: str,
    guess: str | Sequence[str | None],
    *,
    job_id: str | None = None,
) -> Submission:
    """:func:`codemojex.guesses.submit` in the player's partition: one script, the same answers."""
    await spread.check_layout()
    return await submit_one(spread.game_of(player_id), round_id, player_id, guess, job_id=job_id)


async def read_board(spread: SpreadGame, round_id: str, limit: int = 100) -> list[leaderboard.Entry]:
    """The top ``limit`` of the round over every partition: each partition's top ``limit``, merged."""
    check_int("limit", limit, 1, 10_000)
    pages = await asyncio.gather(*(leaderboard.read_board(game, round_id, limit) for game in spread.games))
    merged = heapq.merge(*pages, key=lambda entry: ranking.sort_key(entry.standing))
    return [
        leaderboard.Entry(rank, entry.standing, entry.name)
        for rank, entry in enumerate(itertools.islice(merged, limit), start=1)
    ]


async def scored_records(spread: SpreadGame, round_id: str) -> list[GuessRecord]:
    """Every GES record of the round in every partition, in admission order (GES id order)."""
    parts = await asyncio.gather(*(leaderboard.scored_records(game, round_id) for game in spread.games))
    return sorted((record for part in parts for record in part), key=lambda record: record.id)
