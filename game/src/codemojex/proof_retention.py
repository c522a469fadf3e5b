"""Bounded retention for the proof's demonstration game (:mod:`codemojex.proof`): its memory stays flat.

Every demo guess leaves a guess record, a ledger entry and per-round state, and a new demo round opens
every :data:`~codemojex.proof.ROUND_S`; the real game keeps its rounds for good, the demo game must not.
:func:`purge` (run by ``codemojex serve``'s :class:`~codemojex.supervisor.ProofRunner` with each round
check, as the worker's Redis user: a round's secret is under ``cmxs:``, which the host's user may not
touch, :mod:`codemojex.access`) deletes each demo round closed for :data:`GRACE_S` or more, oldest first,
at most ``limit`` rounds a pass, in bounded steps of ``batch`` keys or members:

0. its secret (``cmxs:``), so that a user that may not touch it is refused before any change;
1. its guess records (``guess:<GES>``, listed by ``scored:<RND>``, which shrinks as they go);
2. per player of its quota (``quota:<RND>``, which shrinks as they go): ``submitted``, ``played``,
   ``proven`` and ``locks``, and the player is *retired* (below);
3. in one transaction: ``charges``, ``refunds``, ``standing``, ``board``, ``events``, ``revealed``,
   ``quota``, the round's hash, its ``rounds`` and ``live`` entries and its summary and ``history`` /
   ``retained`` entries (:mod:`codemojex.history`: unlike the real game's, a demo round keeps no
   summary), so a pass cut short is taken up by the next one (the round is still listed until this last
   step). The large ones go by ``UNLINK`` (freed off Redis's main thread).

**Demo players** (``retire.lua``): a player of the purged round who is in no kept round's quota and has
no ledger entry since the pass listed the rounds (decided atomically against ``submit.lua``) is deleted
whole: record, wallet, ledger, name; their next proof call registers them again with a fresh demo grant
(:func:`codemojex.proof.ensure_player`). A player still playing keeps their wallet, and their ledger is
trimmed to its :data:`LEDGER_KEPT` newest entries (after a ``carry`` entry per currency, so it still
reconciles). A demo player never admitted is on trial and expires with it (:mod:`codemojex.trials`).

So the demo game holds about the open round, the rounds closed within the grace, and the players of
those rounds, whatever the number of rounds played. The grace (1 h) is far longer than a demo job can
stay pending (10 attempts, leases of seconds, backoff capped well below), so no job of a purged round is
scored after it; one that were would find no round and be dead-lettered, its refund finding no charge.

**Only the demo game.** :func:`purge` refuses a game whose tag is not a demo tag (``<tag>.proof``,
:func:`~codemojex.proof.demo_tag`): :class:`~codemojex.errors.InvalidOption`, nothing read or changed.
The real game's rounds, records and players are never deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from codemojex import retention, rounds
from codemojex.errors import InvalidOption, ScriptError
from codemojex.game import Game, translate_errors
from codemojex.players import holdings_keys
from codemojex.proof import DEMO_SUFFIX, ROUND_GUESSES

GRACE_S = 3600.0  # a closed demo round's keys are kept this long after its close
BATCH = 200  # keys or members per step
ROUNDS_PER_PASS = 20
LEDGER_KEPT = 2 * ROUND_GUESSES  # newest ledger entries kept of a demo player still playing


@dataclass(frozen=True, slots=True)
class Purge:
    """What one :func:`purge` pass did."""

    rounds: tuple[str, ...]  # demo rounds deleted
    retired: int  # demo players deleted
    trimmed: int  # ledger entries dropped


def check_demo(game: Game) -> None:
    """Raise :class:`InvalidOption` unless ``game`` is a proof's demo game (its tag ``<tag>.proof``)."""
    if not game.keys.tag.endswith(DEMO_SUFFIX):
        raise InvalidOption(f"retention deletes the proof's demo game only, not the one on {game.keys.tag!r}")


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _due(row: dict[bytes, bytes], round_id: str, now_ms: int, grace_ms: int) -> bool:
    if not row:  # a pass cut short after the round's hash went: finish it
        return True
    the_round = rounds.round_from_row(round_id, row)
    ended = the_round.closed_ms or the_round.closes_ms
    return (
        the_round.status_at(now_ms) is rounds.RoundStatus.CLOSED
        and ended is not None
        and (ended + grace_ms <= now_ms)
    )


async def purge(
    demo: Game,
    *,
    grace_s: float = GRACE_S,
    limit: int = ROUNDS_PER_PASS,
    batch: int = BATCH,
    ledger_kept: int = LEDGER_KEPT,
) -> Purge:
    """Delete the demo rounds closed ``grace_s`` ago or more (at most ``limit``), and bound their players
    (see the module doc). Safe to run again after a pass was cut short; one runner at a time."""
    check_demo(demo)
    keys = demo.keys
    now = await rounds.server_ms(demo)
    with translate_errors():
        listed = [_text(raw) for raw in await demo.redis.zrange(keys.rounds, 0, -1)]
        async with demo.redis.pipeline(transaction=False) as pipe:
            for round_id in listed:
                pipe.hgetall(keys.round(round_id))
            rows = await pipe.execute()
    grace_ms = int(grace_s * 1000)
    due = [rid for rid, row in zip(listed, rows, strict=True) if _due(row, rid, now, grace_ms)][:limit]
    kept = [round_id for round_id in listed if round_id not in due]
    retired = trimmed = 0
    for round_id in due:
        gone, dropped = await _purge_round(demo, round_id, kept, now, batch=batch, ledger_kept=ledger_kept)
        retired, trimmed = retired + gone, trimmed + dropped
    return Purge(tuple(due), retired, trimmed)


async def _purge_round(
    demo: Game, round_id: str, kept: list[str], listed_at: int, *, batch: int, ledger_kept: int
) -> tuple[int, int]:
    """The round's keys (:func:`codemojex.retention.purge_round`, its summary too: the demo worker's
    upkeep concludes demo rounds, and a demo keeps no history), each of its players retired or trimmed
    on the way; (players retired, ledger entries dropped)."""
    counts = [0, 0]

    async def retire(player_id: str) -> None:
        gone, dropped = await _retire(demo, player_id, kept, listed_at, ledger_kept)
        counts[0] += gone
        counts[1] += dropped

    await retention.purge_round(demo, round_id, batch=batch, on_player=retire, forget_summary=True)
    return counts[0], counts[1]


async def _retire(
    demo: Game, player_id: str, kept: list[str], listed_at: int, ledger_kept: int
) -> tuple[int, int]:
    """retire.lua for a player of a purged round: deleted if idle (in no kept round, no entry since
    ``listed_at``), else their ledger trimmed; (1, 0) or (0, entries dropped)."""
    keys = demo.keys
    playing = False
    if kept:
        with translate_errors():
            async with demo.redis.pipeline(transaction=False) as pipe:
                for round_id in kept:
                    pipe.hexists(keys.quota(round_id), player_id)
                playing = any(await pipe.execute())
    reply = await demo.run(
        "retire",
        holdings_keys(demo, player_id),
        [player_id, 0 if playing else listed_at, ledger_kept],
    )
    code = int(reply[0])
    if code == 1:
        # The demo player's stats (score.lua's results:<PLR>) go too: a player registered again starts
        # anew. Apart from retire.lua's step: a demo proof's stats are shown nowhere.
        with translate_errors():
            await demo.redis.delete(keys.results(player_id))
        return 1, 0
    if code == 2:
        return 0, int(reply[1])
    if code == -1:
        return 0, 0
    raise ScriptError(f"retire.lua answered {reply!r}")
