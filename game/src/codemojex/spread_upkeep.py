"""The upkeep of a spread game (:mod:`codemojex.spread`): the round schedule, the rounds' conclusion and
the retention, over every partition, run by the spread worker's upkeep pass
(:mod:`codemojex.spread_worker`) and by ``codemojex serve --partitions P`` at its start.

**The schedule** is the one game's (:mod:`codemojex.schedule`), kept by the home partition (0): its
settings, its state and ``schedule_round.lua``, which opens the next slot's round there once (two
workers, a lost reply: as on one game). :func:`copy_round` then writes that round to every partition
that lacks it, from the home partition's stored row and secret verbatim (``open_round.lua`` with the
same keyboard, prices, limit, secret, opening instant and duration), so every partition opens and closes
it at the same instants (a round the home closed early is copied closed at the home's instant); each
pass copies every round of the home's ``live`` index where it is missing (:func:`copy_live`), so a
worker, or an operator's open, that died between the home and the copies leaves them to the next pass,
however many rounds opened since (until then that partition answers the round's guesses
``UnknownRound``, nothing charged: the round opens ``gap_s`` after the last one closed, and a pass runs
every few seconds). The conclusion copies a missing round first too, so a round is never left
unconcluded for a partition the opening did not reach.

**The conclusion.** A round is concluded once it is closed in every partition: each partition's
``conclude_round.lua`` concludes its own part (its players' counts, the top of its own board, its
reveal, its retention entry, waiting for its queued guesses as on one game). When every part is there,
the parts are merged (the boards k-way by :mod:`codemojex.ranking`'s order, which is the members' byte
order; the counts summed) into the **whole game's summary**, which ``conclude_whole.lua`` writes once in
the home partition, apart from its own part (``whole_summaries``, ``whole_history``), with one
``concluded`` entry on the home partition's stream of the round (the web host's ``closed`` event). The
web host reads history and summaries there (``history.read_summary(..., whole=True)``). A worker that
dies between the parts and the whole leaves a round the next pass finds closed with no whole summary:
the parts answer what they wrote, and the same merge is written.

**The retention** purges each partition's own per-guess data past the home settings' retention, of
the rounds whose whole summary is written only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from codemojex import history, retention, rounds, schedule
from codemojex.access import load_scripts
from codemojex.errors import CodemojexError, RoundClosed, ScriptError, UnknownRound
from codemojex.game import Game, translate_errors
from codemojex.spread import SpreadGame, close_round, open_round

log = logging.getLogger("codemojex.upkeep")

ROW = ("keyboard", "length", "prices", "max_guesses", "opens", "closes", "closed")


async def copy_round(spread: SpreadGame, round_id: str) -> int:
    """Write the home partition's round ``round_id`` to every partition that lacks it (see the module
    doc); the number written. A copy of a round the home closed early is written closed at the home's
    close instant in the same script (``open_round.lua``'s closed-at), so no copy admits a guess after
    it; and a close at home that lands while the copies are written closes them once written (read
    again after). UnknownRound when the home has no such round (purged, or never opened)."""
    home = spread.games[0]
    keys = home.keys
    with translate_errors():
        row = await home.redis.hmget(keys.round(round_id), *ROW)
        secret = await home.redis.get(keys.secret(round_id))
        there = [await game.redis.exists(game.keys.round(round_id)) for game in spread.games[1:]]
    if row[0] is None or secret is None:
        raise UnknownRound(f"no round {round_id} in the home partition")
    keyboard, length, prices, max_guesses, opens, closes, closed = (_text(value) for value in row)
    lasted = int(closes) - int(opens) if int(closes or 0) > 0 else 0
    missing = [game for game, held in zip(spread.games[1:], there, strict=True) if not held]
    for game in missing:
        args = [round_id, keyboard, length, prices, 0, lasted, max_guesses, _text(secret), opens, closed or 0]
        gkeys = game.keys
        reply = await game.run(
            "open_round", [gkeys.round(round_id), gkeys.secret(round_id), gkeys.rounds, gkeys.live], args
        )
        if int(reply[0]) != 1:
            raise ScriptError(f"partition {game.bus.tag} holds round {round_id} with other settings")
    if missing and not closed:
        with translate_errors():
            closed_now = await home.redis.hget(keys.round(round_id), "closed")
        if closed_now is not None:  # closed at home while the copies were written: they close too
            with contextlib.suppress(RoundClosed):
                await close_round(spread, round_id)
    return len(missing)


async def copy_live(spread: SpreadGame) -> int:
    """:func:`copy_round` for every round of the home partition's ``live`` index (open, opening later,
    or closed and not concluded yet), so a round written at home alone (a worker or an operator's call
    that died between the home and the copies, however many rounds opened since) is copied by the next
    pass; the number of copies written."""
    written = 0
    for the_round in await rounds.live_rounds(spread.games[0]):
        with contextlib.suppress(UnknownRound):  # purged meanwhile: nothing to copy
            written += await copy_round(spread, the_round.id)
    return written


def _text(value: Any) -> str:
    return "" if value is None else value.decode() if isinstance(value, bytes) else str(value)


async def schedule_step(spread: SpreadGame, settings: schedule.RoundSettings | None = None) -> str | None:
    """:func:`codemojex.schedule.step` in the home partition, then every live round copied where it is
    missing (:func:`copy_live`); the id opened now, else None."""
    home = spread.games[0]
    settings = settings or await schedule.read_settings(home)
    opened = await schedule.step(home, settings)
    await copy_live(spread)
    return opened


async def pending_guesses(spread: SpreadGame, round_id: str) -> int:
    """Guesses of the round admitted and not settled yet, in every partition."""
    return sum(await asyncio.gather(*(history.pending_guesses(g, round_id) for g in spread.games)))


async def conclude_round(spread: SpreadGame, round_id: str) -> tuple[bool, history.Summary | None]:
    """Conclude ``round_id`` in every partition and write the whole game's summary (see the module
    doc): (written by this call, the whole summary); (False, None) while a partition has not concluded
    its part yet. Safe to call again, from any number of workers."""
    home = spread.games[0]
    with translate_errors():
        written = await home.redis.hget(home.keys.whole_summaries, round_id)
    if written is not None:
        return False, history.parse_summary(written)
    await copy_round(spread, round_id)  # a partition never reached by the opening: written now
    now = await rounds.server_ms(home)
    found = [await rounds.get_round(game, round_id) for game in spread.games]
    if any(part.status_at(now) is not rounds.RoundStatus.CLOSED for part in found):
        return False, None  # never a partition's reveal while another still takes guesses
    parts = []
    for game in spread.games:
        _, part = await history.conclude_round(game, round_id)
        if part is None:
            return False, None
        parts.append(await _raw_summary(game, round_id))
    whole = merge_parts(parts)
    reply = await home.run(
        "conclude_whole",
        [home.keys.whole_summaries, home.keys.whole_history, home.keys.events(round_id)],
        [round_id, json.dumps(whole, ensure_ascii=False), whole["closed_ms"], home.settings.events_cap],
    )
    return int(reply[0]) == 1, history.parse_summary(reply[1])


async def _raw_summary(game: Game, round_id: str) -> dict[str, Any]:
    with translate_errors():
        raw = await game.redis.hget(game.keys.summaries, round_id)
    found: dict[str, Any] = json.loads(raw)
    return found


def merge_parts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole game's summary of the partitions' parts (``conclude_round.lua``'s JSON): the first's
    round (keyboard, secret, instants; the latest close), the counts summed, the boards merged by their
    members' byte order (:func:`codemojex.ranking.board_member`'s, which is the ranking's) to the top
    :data:`codemojex.history.WINNERS`."""
    boards = [part.get("board") for part in parts]
    entries = [entry for board in boards if isinstance(board, list) for entry in board]  # {}: empty
    merged = sorted(entries, key=lambda entry: str(entry[0]).encode())[: history.WINNERS]
    whole = dict(parts[0])
    whole["closed_ms"] = max(int(part["closed_ms"]) for part in parts)
    whole["players"] = sum(int(part["players"]) for part in parts)
    whole["guesses"] = sum(int(part["guesses"]) for part in parts)
    whole["board"] = merged
    whole["partitions"] = len(parts)
    return whole


async def conclude_closed(spread: SpreadGame, limit: int = history.CHECKED) -> list[str]:
    """Conclude every closed round of the home partition's listings with no whole summary yet (its
    ``live`` index and the ``limit`` newest rounds); the ids concluded now."""
    home = spread.games[0]
    now = await rounds.server_ms(home)
    listed = await rounds.live_rounds(home) + await rounds.list_rounds(home, limit)
    closed = list(dict.fromkeys(r.id for r in listed if r.status_at(now) is rounds.RoundStatus.CLOSED))
    if not closed:
        return []
    with translate_errors():
        there = await home.redis.hmget(home.keys.whole_summaries, closed)
    concluded = []
    for round_id in (rid for rid, summary in zip(closed, there, strict=True) if summary is None):
        try:
            now_done, _ = await conclude_round(spread, round_id)
        except UnknownRound:  # purged meanwhile, or never copied to a partition
            continue
        except CodemojexError as exc:  # this round only: the others are still concluded
            log.warning("round %s cannot be concluded: %s", round_id, exc)
            continue
        if now_done:
            concluded.append(round_id)
    return concluded


async def ensure_round(
    url: str, tag: str, partitions: int, settings: schedule.RoundSettings, *, say: Callable[[str], None]
) -> rounds.Round | None:
    """``codemojex serve --partitions P`` at its start, as its admin user: the layout checked, the
    scripts loaded (the host's user may not), the settings in the home partition, and the schedule's
    round (with the schedule off, an open round) in every partition; the open round, if any."""
    async with SpreadGame.from_url(url, tag, partitions) as game:
        await game.check_layout()
        home = game.games[0]
        await load_scripts(home.redis)
        await schedule.write_settings(home, settings)
        if settings.on:
            if opened_id := await schedule_step(game, settings):
                say(f"the schedule opened round {opened_id} ({settings.duration_s:g} s) in every partition")
            return await rounds.current_round(home)
        current = await rounds.current_round(home)
        if current is not None:
            return current
        opened = await open_round(game)
        say(f"opened round {opened.id} in {partitions} partitions")
        return opened


async def purge(spread: SpreadGame, retention_s: float) -> list[str]:
    """:func:`codemojex.retention.purge` in every partition, of the rounds whose whole summary is
    written only (a partition's part purged before the whole would leave a round no pass can conclude:
    the merge reads every part's round); the rounds purged (each named once)."""
    home = spread.games[0]

    async def whole_written(round_id: str) -> bool:
        with translate_errors():
            return bool(await home.redis.hexists(home.keys.whole_summaries, round_id))

    purged: list[str] = []
    for game in spread.games:
        purged += await retention.purge(game, retention_s=retention_s, only=whole_written)
    return list(dict.fromkeys(purged))
