"""The proof's demonstration game: its own bus, its own round, its own players, isolated from the real game.

The proof page (:mod:`codemojex.web.proof_api`) shows at-least-once delivery over an effect deduped on a
branded id with real jobs, a real worker that really dies, and a real stale finisher. None of it runs on
the real game: the proof has a bus and game keys of its own, under the tag :func:`demo_tag` (``cm`` ->
``cm.proof``, so ``emq:{cm.proof}:*`` and ``cmx:{cm.proof}:*``), a round of its own (its own secret,
drawn by the process that opens it, never the live round's), and a score worker process of its own
(started by ``codemojex serve`` only when the proof is on; its crash fault is armed only there, and only
with ``--proof-crash``).

So a proof job costs a real player nothing and grants nothing: the caller is authenticated as a real
player (a registered token), but plays as their *demo player*, a player of the demo game with the same
``PLR`` id (:func:`ensure_player`), whose wallet holds only the demo currency ``proof``
(:data:`DEMO_GRANT`). No proof call reads or writes a key of the real game but the token lookup, so a
proof job never appears in the real round, board, ledger, events or latency figures.

Caps, so that the proof cannot be used to load the host (the host's general rate limits are separate):

* per caller: at most ``caller_cap`` demo jobs waiting on their lane (``GameSettings.max_queued`` of the
  demo game, enforced atomically by ``submit.lua``: ``too_many_queued``);
* in total: at most ``total_cap`` demo jobs pending (queued, delayed or active) on the demo bus
  (:func:`pending_total`, checked before the submit: concurrent requests may pass it by their number);
* per caller and demo round: at most :data:`ROUND_GUESSES` demo guesses (the round's ``max_guesses``);
  the demo round lasts :data:`ROUND_S`, then the next one is opened (``codemojex serve``'s
  :class:`~codemojex.supervisor.ProofRunner` keeps one open).

Memory stays flat however long the proof runs (:mod:`codemojex.proof_retention`): the ProofRunner
deletes each demo round closed for ``GRACE_S`` (1 h) with all its keys (its secret under ``cmxs:``
included, so it runs as the worker's Redis user), deletes the demo players who stopped playing (their next
proof call registers them again: :func:`submit`) and trims the ledgers of the others; the demo bus keeps
finished jobs for :data:`DEMO_BUS`'s short windows. Only a demo tag is ever purged.
"""

from __future__ import annotations

from codemojex import guesses, rounds
from codemojex.errors import InvalidOption, ScriptError, UnknownPlayer
from codemojex.game import Game, GameSettings, translate_errors
from codemojex.guesses import Submission
from codemojex.keys import PLAYER, check_id
from codemojex.players import register_args, register_keys
from echomq import Settings
from echomq.keyspace import check_tag

DEMO_SUFFIX = ".proof"
DEMO_CURRENCY = "proof"
DEMO_GRANT = ((DEMO_CURRENCY, 1_000_000),)  # worthless: it buys demo guesses on the demo round only
DEMO_PRICES = ((DEMO_CURRENCY, 1),)
CALLER_CAP = 3  # demo jobs waiting on one caller's lane
TOTAL_CAP = 50  # demo jobs pending on the demo bus
ROUND_GUESSES = 200  # demo guesses per caller and demo round
ROUND_S = 3600.0  # a demo round's life
ROUND_OVERLAP_MS = 120_000  # the next demo round opens this long before the current one ends
DEMO_POOL = 32  # the host's connections to the demo bus
# The demo bus's retention (the host's and the demo worker's): a finished demo job is kept whole 10 min,
# absorbs duplicates 1 h, a dead one is kept 1 day; then its row is gone (the bus trims as it finishes).
DEMO_BUS = Settings(result_ttl_ms=600_000, dedup_window_ms=3_600_000, dead_ttl_ms=86_400_000)


def demo_tag(tag: str) -> str:
    """The demo bus's tag for the real game's ``tag``: ``<tag>.proof`` (at most 32 characters)."""
    check_tag(tag)
    demo = f"{tag}{DEMO_SUFFIX}"
    if len(demo) > 32:
        most = 32 - len(DEMO_SUFFIX)
        raise InvalidOption(f"the proof needs a tag of at most {most} characters, got {tag!r}")
    return demo


def demo_settings(caller_cap: int = CALLER_CAP) -> GameSettings:
    """The demo game's settings: the demo currency, and ``caller_cap`` jobs waiting per caller."""
    # No economy in the demo game: its one currency is the worthless demo grant (no allowance, no reward).
    return GameSettings(
        grant=DEMO_GRANT, allowance=(), solve_reward=(), prices=DEMO_PRICES, max_queued=caller_cap
    )


def demo_game(
    url: str,
    tag: str,
    *,
    caller_cap: int = CALLER_CAP,
    cluster: bool = False,
    max_connections: int = DEMO_POOL,
) -> Game:
    """The demo game beside the real game of ``tag`` (on the same Redis, under :func:`demo_tag`)."""
    return Game.from_url(
        url,
        demo_tag(tag),
        demo_settings(caller_cap),
        DEMO_BUS,
        cluster=cluster,
        max_connections=max_connections,
    )


async def current_round(demo: Game) -> rounds.Round | None:
    """The demo round open now, or None (``codemojex serve`` opens one; see :func:`ensure_round`). Only
    the two newest demo rounds are read (they overlap by :data:`ROUND_OVERLAP_MS` at most): the page
    polls this every second."""
    now = await rounds.server_ms(demo)
    for candidate in await rounds.list_rounds(demo, 2):
        if candidate.status_at(now) is rounds.RoundStatus.OPEN:
            return candidate
    return None


async def ensure_round(demo: Game, duration_s: float = ROUND_S) -> rounds.Round:
    """The demo round open now, else a new one (a random keyboard and secret, ``duration_s`` long,
    :data:`ROUND_GUESSES` guesses per player), opened :data:`ROUND_OVERLAP_MS` (at most a quarter of
    ``duration_s``) before the current one ends (``codemojex serve`` checks every 30 s). Only a process
    allowed to write secrets calls this."""
    overlap = min(ROUND_OVERLAP_MS, int(duration_s * 250))
    current = await current_round(demo)
    if current is not None and (
        current.closes_ms is None or current.closes_ms - await rounds.server_ms(demo) > overlap
    ):
        return current
    # None open, or the open one ends within the overlap: the next one opens now, so there is always one.
    return await rounds.open_round(demo, duration_s=duration_s, max_guesses=ROUND_GUESSES)


def demo_name(player_id: str) -> str:
    """The demo player's display name: ``demo-`` and the id's body (unique as the id is)."""
    return f"demo-{check_id(player_id, PLAYER)[len(PLAYER) :].lower()}"


async def ensure_player(demo: Game, player_id: str) -> None:
    """Register the caller's demo player (the same ``PLR`` id in the demo game, with the demo grant);
    once: a second call is register.lua's retry of the same registration and changes nothing."""
    name = demo_name(player_id)
    reply = await demo.run("register", register_keys(demo, player_id), register_args(demo, player_id, name))
    if int(reply[0]) != 1:
        raise ScriptError(f"register.lua answered {reply!r} for the demo player {player_id}")


async def submit(demo: Game, round_id: str, player_id: str, guess: list[str], job_id: str) -> Submission:
    """A demo guess of the caller's demo player (registered first, :func:`ensure_player`). The demo's
    retention deletes an idle demo player (:mod:`codemojex.proof_retention`): one deleted between the
    registration and the submit (``UnknownPlayer``, nothing charged) is registered again, once."""
    await ensure_player(demo, player_id)
    try:
        return await guesses.submit(demo, round_id, player_id, guess, job_id=job_id)
    except UnknownPlayer:
        await ensure_player(demo, player_id)
        return await guesses.submit(demo, round_id, player_id, guess, job_id=job_id)


async def pending_total(demo: Game) -> int:
    """Demo jobs queued, delayed or active on the demo bus."""
    with translate_errors():
        stats = await demo.bus.stats(lanes=0)
    return stats.queued + stats.delayed + stats.active
