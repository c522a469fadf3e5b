"""The Game: the bus it runs on, its keys, its scripts and settings.

A thin facade, like :class:`echomq.Bus`: the behaviour lives in the role modules (:mod:`codemojex.rounds`,
:mod:`codemojex.players`, :mod:`codemojex.wallet`, :mod:`codemojex.locks`, :mod:`codemojex.guesses`,
:mod:`codemojex.leaderboard`, :mod:`codemojex.score_worker`), each taking a Game first.

**Failover.** Redis replicates asynchronously, so a master's failover (its replica promoted) can lose
what the master acknowledged in the last instant before it died, always whole scripts, never half of
one (a script's writes replicate as one unit, in order). Without durable admission that is:

* an admission (``submit.lua``, ``post_guess.lua``): the charge and the job together, never one without
  the other. A player told "admitted" may find neither; their retry with the same job id admits it anew
  and charges once (a retry without one is a new guess).
* a scored effect (``score.lua``): the GES record, the attempt, the board and the job's completion
  together. The job is then active (or queued) again on the promoted replica, its lease runs out, and
  it is scored again, once, under the new attempts token; the late finish of the first delivery is
  refused as stale. Never counted twice.

With the bus's ``Settings(wait_replicas=n)`` the admissions go through the bus's durable wire
(:mod:`echomq.durable`): each is answered only once ``n`` replicas hold it (and everything the master
wrote before it), else it raises :class:`~codemojex.errors.NotDurable`, an
:class:`~codemojex.errors.Unavailable` (answered 503 ``unavailable`` by the host): retry it with the same
job id, a duplicate charged nothing. So an acknowledged guess survives the failover and is scored exactly
once. Scoring is not waited for: a lost score is redone, as above.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis.exceptions

from codemojex.errors import (
    CodemojexError,
    InvalidId,
    InvalidInput,
    InvalidOption,
    NotDurable,
    ScriptError,
    Unavailable,
    UnknownJob,
)
from codemojex.keys import GameKeys
from codemojex.placement import HOME, Place
from echomq import Bus, Settings
from echomq import errors as bus_errors
from echomq.scripts import AsyncScripts, Library

# Each game script and the number of KEYS it declares (a unit test checks the headers).
KEY_COUNTS: dict[str, int] = {
    "register": 7,
    "open_round": 4,
    "close_round": 3,
    "credit": 4,
    "submit": 18,
    "score": 19,
    "lock": 4,
    "refund": 10,
    "admit": 3,
    "idempotency": 1,
    "token": 6,
    "expire": 10,
    "rebuild_board": 3,
    "retire": 7,
    "schedule_round": 6,
    "conclude_round": 13,
    "recovery": 5,
    "post_guess": 6,
    "conclude_whole": 3,
}
LIBRARY = Library("codemojex", KEY_COUNTS)
# The admissions: with the bus's Settings.wait_replicas, acknowledged once that many replicas hold them.
DURABLE_SCRIPTS = frozenset({"submit", "post_guess"})

_CURRENCY = re.compile(r"[a-z]{1,16}")
MAX_AMOUNT = 1_000_000
DAY_MS = 24 * 3600 * 1000


def check_currency(name: object) -> str:
    """Return ``name`` if it is 1-16 lower-case letters, else raise :class:`InvalidOption`."""
    if not isinstance(name, str) or not _CURRENCY.fullmatch(name):
        raise InvalidOption(f"a currency is 1-16 lower-case letters a-z, got {name!r}")
    return name


def check_int(name: str, value: object, low: int, high: int) -> int:
    """Return ``value`` if it is an int (not a bool) in ``[low, high]``, else raise :class:`InvalidOption`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidOption(f"{name} is an int in [{low}, {high}], got {value!r}")
    return value


def check_amount(name: str, value: object, low: int = 1) -> int:
    return check_int(name, value, low, MAX_AMOUNT)


Prices = tuple[tuple[str, int], ...]


def check_prices(prices: object, *, what: str = "price list") -> Prices:
    """A non-empty list of ``(currency, amount)`` pairs, currencies distinct, amounts >= 1."""
    if isinstance(prices, Mapping):
        prices = list(prices.items())
    if isinstance(prices, str | bytes) or not isinstance(prices, Sequence) or not prices:
        raise InvalidOption(f"a {what} is a non-empty list of (currency, amount), got {prices!r}")
    checked: list[tuple[str, int]] = []
    for pair in prices:
        if not isinstance(pair, Sequence) or isinstance(pair, str | bytes) or len(pair) != 2:
            raise InvalidOption(f"a {what} entry is (currency, amount), got {pair!r}")
        checked.append((check_currency(pair[0]), check_amount("an amount", pair[1])))
    if len({currency for currency, _ in checked}) != len(checked):
        raise InvalidOption(f"a {what} names each currency once, got {prices!r}")
    if len(checked) > 8:
        raise InvalidOption(f"a {what} has at most 8 currencies")
    return tuple(checked)


def check_amounts(amounts: object, *, what: str) -> Prices:
    """Like :func:`check_prices`, but an empty list is allowed (no grant, no allowance, no reward)."""
    if isinstance(amounts, Sequence) and not isinstance(amounts, str | bytes) and not amounts:
        return ()
    return check_prices(amounts, what=what)


def encode_prices(prices: Prices) -> str:
    """``ticket=1;coin=5``: the form the scripts parse (validated names and amounts only)."""
    return ";".join(f"{currency}={amount}" for currency, amount in prices)


def decode_prices(text: str) -> Prices:
    pairs = [item.split("=", 1) for item in text.split(";") if item]
    return tuple((currency, int(amount)) for currency, amount in pairs)


@dataclass(frozen=True, slots=True)
class GameSettings:
    """Per-game defaults. Every process of one game should use the same values."""

    # The economy (codemojex.economy): nothing at sign-up, a per-round allowance topped up at a player's
    # first admitted guess of each round, a reward for solving; each once per (player, round).
    grant: Prices = ()  # what a new player starts with
    allowance: Prices = (("ticket", 3), ("coin", 50))  # each balance raised to this level, once a round
    solve_reward: Prices = (("coin", 25),)  # credited once per (player, round) at the solve
    prices: Prices = (("ticket", 1), ("coin", 5))  # a guess's price list, in order of preference
    keyboard_size: int = 8
    max_attempts: int = 10  # deliveries of one guess job before it is dead-lettered
    max_queued: int = 100  # a player's guesses waiting to be scored, at most (then: too_many_queued)
    events_cap: int = 1000  # entries kept in a round's event stream
    token_lifetime_ms: int = 30 * DAY_MS  # an API token's life from its issue (codemojex.tokens)
    trial_ms: int = DAY_MS  # a player with no admitted guess this long after joining is deleted (trials)
    results_kept: int = 64  # a player's latest played rounds kept one by one for stats (player_stats)
    # A player's ledger entries, at most (about): an admission finding this many keeps the newest half
    # after one 'carry' entry per currency dropped (codemojex.wallet; lua/includes/ledger.lua).
    ledger_kept: int = 1000

    def __post_init__(self) -> None:
        check_amounts(self.grant, what="grant")
        check_amounts(self.allowance, what="allowance")
        check_amounts(self.solve_reward, what="solve reward")
        check_prices(self.prices)
        for name, low, high in (
            ("keyboard_size", 2, 32),
            ("max_attempts", 1, 1000),
            ("max_queued", 1, 1_000_000),
            ("events_cap", 1, 1_000_000),
            ("token_lifetime_ms", 100, 366 * DAY_MS),
            ("trial_ms", 100, 366 * DAY_MS),
            ("results_kept", 1, 10_000),
            ("ledger_kept", 10, 10_000_000),
        ):
            check_int(name, getattr(self, name), low, high)


_TRANSLATED: tuple[tuple[type[Exception], type[CodemojexError]], ...] = (
    (bus_errors.NotDurable, NotDurable),
    (bus_errors.InvalidId, InvalidId),
    (bus_errors.InvalidInput, InvalidInput),
    (bus_errors.UnknownJob, UnknownJob),
    (bus_errors.RedisUnavailable, Unavailable),
    (bus_errors.EchoMQError, ScriptError),
)
_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    # A slot being resharded refused the call (TRYAGAIN) until the cluster client's redirections ran
    # out ("TTL exhausted"): nothing was done, try again (as echomq.errors translates them).
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterError,
)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Raise EchoMQ's and redis-py's errors as Codemojex's (one tree for the game's callers)."""
    try:
        yield
    except CodemojexError:
        raise
    except _UNREACHABLE as exc:
        raise Unavailable(str(exc) or type(exc).__name__) from exc
    except AttributeError as exc:  # redis-py's connection closed under the call (echomq.errors)
        if not bus_errors.closed_under_call(exc):
            raise
        raise Unavailable(str(exc)) from exc
    except redis.exceptions.RedisError as exc:
        if bus_errors.script_not_loadable(exc):  # an empty script cache; the worker reloads it
            raise Unavailable(f"the server's scripts are not loaded yet: {exc}") from exc
        raise ScriptError(str(exc)) from exc
    except bus_errors.EchoMQError as exc:
        for source, target in _TRANSLATED:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise  # pragma: no cover  (EchoMQError is the last entry)


class Game:
    """The game on ``bus``: its keys ``cmx:{tag}:...`` share the bus's hash tag. ``place``: (its
    partition, P) in a spread game (:mod:`codemojex.placement`; one game is ``(0, 1)``)."""

    def __init__(self, bus: Bus, settings: GameSettings | None = None, place: Place = HOME) -> None:
        self.bus = bus
        self.place = place
        self.keys = GameKeys(bus.tag)
        self.settings = settings or GameSettings()
        self.scripts = AsyncScripts(bus.redis, LIBRARY)

    @classmethod
    def from_url(
        cls,
        url: str,
        tag: str = "cm",
        settings: GameSettings | None = None,
        bus_settings: Settings | None = None,
        *,
        cluster: bool = False,
        max_connections: int | None = None,
    ) -> Game:
        """A game on a new bus for ``url``; ``cluster=True`` for a Redis Cluster (every key of one game
        shares the bus's hash tag, so each script runs on the node owning that slot). ``max_connections``
        sizes the pool (see :meth:`echomq.Bus.from_url`); a score worker needs about two per slot."""
        bus = Bus.from_url(url, tag, bus_settings, cluster=cluster, max_connections=max_connections)
        return cls(bus, settings)

    @property
    def redis(self) -> Any:
        return self.bus.redis

    async def run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run game script ``name``, errors translated. An admission (:data:`DURABLE_SCRIPTS`) on a bus
        with ``wait_replicas`` goes through the bus's durable wire: answered once the replicas hold it,
        else :class:`~codemojex.errors.NotDurable` (see the module doc)."""
        with translate_errors():
            if self.bus.durable is None or name not in DURABLE_SCRIPTS:
                return await self.scripts.run(name, keys, args)
            [reply] = await self.bus.durable.run(name, [(keys, args)], self.scripts)
            if isinstance(reply, Exception):  # an error reply, raised as the plain call raises it
                raise reply
            return reply

    async def aclose(self) -> None:
        await self.bus.aclose()

    async def __aenter__(self) -> Game:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
