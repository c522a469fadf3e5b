"""The round schedule ``codemojex serve`` keeps, and how long closed rounds keep their per-guess data.

:class:`RoundSettings` is kept in Redis (``cmx:{t}:round_settings``), written by ``serve`` at its start
from its flags (``--round-duration``, ``--round-gap``, ``--no-schedule``, ``--retention``), so every
score worker of the game reads the same values on each upkeep pass (:mod:`codemojex.upkeep`). No key:
no schedule, and the default retention.

**The schedule.** While it is on, the game always has a round of its own running: when the schedule's
last round closes (by its close time on the server clock, or by the operator's close), the next one is
opened at once, to open ``gap_s`` after that close and to close ``duration_s`` after it opens
(``schedule_round.lua``). Opening writes a secret, so it is the worker's step (its Redis user may; the
web host's may not, :mod:`codemojex.access`), run each upkeep pass by :func:`step`, and by ``serve`` once
at its start (as its admin user) so the first round is there when the page loads.

*Two workers* read the schedule's state (its slot count) and race to open the next slot: the script
opens a round only if the state is still what its caller read, so one of them opens it and the other
changes nothing. *A lost reply*: :func:`step` runs the same call once more (same slot, same round id),
which answers the round that call opened, or changes nothing; the next pass reads the state anew. No
slot ever gets two rounds, and a pass that fails leaves the next one to open the round.

Rounds the operator opens are beside the schedule, not in it: the lobby lists every open round.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from codemojex import codes, rounds
from codemojex import keyboard as kb
from codemojex.engine import LENGTH
from codemojex.errors import InvalidOption, ScriptError, Unavailable, UnknownRound
from codemojex.game import Game, encode_prices, translate_errors
from codemojex.keys import ROUND, check_id
from echomq import ids

DAY_S = 24 * 3600
DEFAULT_DURATION_S = 300.0
DEFAULT_GAP_S = 10.0
DEFAULT_RETENTION_S = 7 * DAY_S
MAX_S = float(rounds.MAX_DURATION_S)


@dataclass(frozen=True, slots=True)
class RoundSettings:
    """The schedule (``on``, each round's ``duration_s``, the ``gap_s`` before the next) and the
    ``retention_s`` of a closed round's per-guess data (:mod:`codemojex.retention`)."""

    on: bool = False
    duration_s: float = DEFAULT_DURATION_S
    gap_s: float = DEFAULT_GAP_S
    retention_s: float = DEFAULT_RETENTION_S

    def __post_init__(self) -> None:
        for name, low in (("duration_s", 1.0), ("gap_s", 0.0), ("retention_s", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= MAX_S:
                raise InvalidOption(f"{name} is a number of seconds in [{low}, {MAX_S:.0f}], got {value!r}")


async def write_settings(game: Game, settings: RoundSettings) -> None:
    """Keep ``settings`` for every worker of the game (``serve`` does at its start)."""
    with translate_errors():
        await game.redis.hset(
            game.keys.round_settings,
            mapping={
                "on": int(settings.on),
                "duration_ms": int(settings.duration_s * 1000),
                "gap_ms": int(settings.gap_s * 1000),
                "retention_ms": int(settings.retention_s * 1000),
            },
        )


async def read_settings(game: Game) -> RoundSettings:
    """The settings kept (the defaults, schedule off, when none are)."""
    with translate_errors():
        row: dict[bytes, bytes] = await game.redis.hgetall(game.keys.round_settings)
    if not row:
        return RoundSettings()

    def seconds(field: bytes, default: float) -> float:
        return int(row[field]) / 1000 if field in row else default

    return RoundSettings(
        on=row.get(b"on") == b"1",
        duration_s=seconds(b"duration_ms", DEFAULT_DURATION_S),
        gap_s=seconds(b"gap_ms", DEFAULT_GAP_S),
        retention_s=seconds(b"retention_ms", DEFAULT_RETENTION_S),
    )


async def scheduled_round(game: Game) -> str | None:
    """The last round the schedule opened, if any."""
    with translate_errors():
        raw = await game.redis.hget(game.keys.schedule, "round")
    return raw.decode() if raw is not None else None


async def step(game: Game, settings: RoundSettings | None = None) -> str | None:
    """Open the schedule's next round if the schedule is on and its last round is closed; the id opened
    now, else None (see the module doc: safe beside another worker, and after a lost reply)."""
    settings = settings or await read_settings(game)
    if not settings.on:
        return None
    keys = game.keys
    with translate_errors():
        slot_raw, last_raw = await game.redis.hmget(keys.schedule, "slot", "round")
    slot = int(slot_raw or 0)
    last = last_raw.decode() if last_raw is not None else None
    if last is not None:  # most passes: the round is still running, nothing to draw
        now = await rounds.server_ms(game)
        try:
            if (await rounds.get_round(game, last)).status_at(now) is not rounds.RoundStatus.CLOSED:
                return None
        except UnknownRound:  # purged: counts as closed
            pass
    return await open_slot(game, slot, last, settings)


async def open_slot(
    game: Game, slot: int, last: str | None, settings: RoundSettings, round_id: str | None = None
) -> str | None:
    """Run ``schedule_round.lua`` for the state (``slot``, ``last``) the caller read: the id of the round
    it opened, or None (the last round is still running, or the state moved: another worker's)."""
    keys = game.keys
    board = kb.random_keyboard(game.settings.keyboard_size)
    secret = codes.draw_secret(board, LENGTH)
    round_id = ids.mint(ROUND) if round_id is None else check_id(round_id, ROUND)
    call_keys = [
        keys.schedule,
        keys.round(last) if last is not None else keys.round(round_id),
        keys.round(round_id),
        keys.secret(round_id),
        keys.rounds,
        keys.live,
    ]
    args = [
        slot,
        round_id,
        json.dumps(list(board.keys), ensure_ascii=False),
        LENGTH,
        encode_prices(game.settings.prices),
        int(settings.duration_s * 1000),
        int(settings.gap_s * 1000),
        0,
        json.dumps(list(secret), ensure_ascii=False),
    ]
    try:
        reply = await game.run("schedule_round", call_keys, args)
    except Unavailable:  # the reply may be lost: the same call once more answers what the first did
        reply = await game.run("schedule_round", call_keys, args)
    code = int(reply[0])
    if code == 1:
        return round_id
    if code in (0, 2):
        return None
    raise ScriptError(f"schedule_round.lua answered {reply!r}")
