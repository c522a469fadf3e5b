"""The wallet: balances per currency and an append-only ledger that always reconciles with them.

* Balances never go negative: a guess is charged inside ``submit.lua``, which charges the first
  currency of the round's price list the player can pay, in the same atomic step as the admission (so
  there is no charge without an admission, and no admission without its charge). Concurrent submits are
  serialized by Redis; none can spend a balance another already spent. The only other debit is a
  ``recharge`` in ``score.lua``, and only of what the wallet holds (:mod:`codemojex.refunds`).
* A guess that can never be scored (dead-lettered) is refunded once (``refund``, in ``refund.lua``);
  one retried after its refund pays again before it is scored (``recharge``), or is not scored at all.
* The economy's credits (:mod:`codemojex.economy`): the round's ``allowance``, topped up in
  ``submit.lua`` at a player's first admitted guess of a round, and the solve ``reward`` in
  ``score.lua``, each once per (player, round). :func:`read_offer` says what they will be before the
  player types.
* Every debit and credit appends one ledger entry naming its currency, delta, the balance after it, its
  reason (``grant``, ``guess``, ``refund``, ``recharge``, ``allowance``, ``reward``, ``carry``, or a
  credit's reason), its JOB id (empty for a grant, an allowance, a reward or a carry) and, for the
  game's own entries, its round. Replaying the ledger gives the balances: :func:`reconcile` checks it.
* The ledger is bounded (``GameSettings.ledger_kept``, :class:`codemojex.game.GameSettings`): an
  admission (``submit.lua``) or a :func:`credit` (``credit.lua``) that finds it holding that many
  entries or more first keeps its newest half, after one ``carry`` entry per currency dropped whose
  delta and balance are that currency's balance before its first kept entry
  (``lua/includes/ledger.lua``). Replaying from zero still gives every entry's balance and the
  wallet's balances, so :func:`reconcile` is unchanged; the balances are never touched. The bound:
  after an admission the ledger holds fewer than ``ledger_kept`` + the allowance's currencies + 1
  entries, after a credit at most ``ledger_kept``; in between it grows only by entries each tied to an
  admitted guess (its reward, refund or recharge; at most ``max_queued`` guesses wait at once). A trim
  is amortized (the next one is about ``ledger_kept / 2`` appends away); a duplicate or refused
  submit and a retried credit never trim; a trim drops only entries whose effect a carry holds. The
  proof's demo game trims its players' ledgers further (``retire.lua``, the same include).
* A credit applies once per operation id (:func:`credit`), so a retried call, by the caller or by
  redis-py after a timeout, never credits twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from codemojex.errors import InvalidOption, UnknownPlayer
from codemojex.game import Game, Prices, check_amount, check_currency, translate_errors
from codemojex.keys import JOB, OPERATION, check_id
from echomq import ids

_REASON = re.compile(r"[a-z_]{1,32}")
# Written only by the game's scripts (a caller writing one could forge a refill the invariants count).
# ``carry`` heads a trimmed ledger (``carried``: its name in ledgers the proof's retention trimmed before).
_RESERVED = frozenset({"guess", "refund", "recharge", "allowance", "reward", "carry", "carried"})
MAX_LEDGER = 10_000


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    at_ms: int
    currency: str
    delta: int
    balance: int  # after this entry
    reason: str
    job: str  # the JOB id, or "" for a grant
    operation: str = ""  # the OPR id of a credit (empty for a grant or a guess's debit)
    round: str = ""  # the RND of a guess's debit, an allowance or a reward (else empty)


@dataclass(frozen=True, slots=True)
class Wallet:
    player: str
    balances: dict[str, int]
    ledger: tuple[LedgerEntry, ...]  # the newest entries, oldest first
    ledger_total: int = -1  # entries the ledger holds in all; -1: ``ledger`` is all of it


def choose_price(prices: Prices, balances: Mapping[str, int]) -> tuple[str, int] | None:
    """The first ``(currency, amount)`` of ``prices`` that ``balances`` can pay, or None (what
    ``submit.lua`` charges; this pure copy lets a page show the next guess's price)."""
    for currency, amount in prices:
        if balances.get(currency, 0) >= amount:
            return currency, amount
    return None


def parse_entry(raw: bytes) -> LedgerEntry:
    """One ledger entry as stored (JSON): the wallet's reader and the conformance checks read it so."""
    data = json.loads(raw)
    return LedgerEntry(
        at_ms=int(data["at"]),
        currency=str(data["currency"]),
        delta=int(data["delta"]),
        balance=int(data["balance"]),
        reason=str(data["reason"]),
        job=str(data["job"]),
        operation=str(data.get("op", "")),
        round=str(data.get("round", "")),
    )


async def read_wallet(game: Game, player_id: str, *, ledger_limit: int = MAX_LEDGER) -> Wallet:
    """Balances and the newest ``ledger_limit`` entries (oldest first); :class:`UnknownPlayer` if none."""
    check_amount("ledger_limit", ledger_limit)
    keys = game.keys
    with translate_errors():
        async with game.redis.pipeline(transaction=True) as pipe:
            pipe.exists(keys.player(player_id))
            pipe.hgetall(keys.wallet(player_id))
            pipe.lrange(keys.ledger(player_id), -ledger_limit, -1)
            pipe.llen(keys.ledger(player_id))
            exists, balances, entries, total = await pipe.execute()
    if not exists:
        raise UnknownPlayer(f"no player {player_id}")
    return Wallet(
        player=player_id,
        balances={k.decode(): int(v) for k, v in sorted(balances.items())},
        ledger=tuple(parse_entry(raw) for raw in entries),
        ledger_total=int(total),
    )


async def credit(
    game: Game,
    player_id: str,
    currency: str,
    amount: int,
    *,
    reason: object = "credit",
    job: str = "",
    operation: str | None = None,
) -> int:
    """Add ``amount`` of ``currency`` (a prize, a top-up, a grant); the balance after it. The reasons of
    the game's own entries (``guess``, ``refund``, ``recharge``, ``allowance``, ``reward``, ``carry``)
    are refused:
    a dead guess's refund is :func:`codemojex.refunds.refund`, once; the economy's credits are the
    scripts' own (:mod:`codemojex.economy`).

    The credit applies once per ``operation`` (an ``OPR`` id; one is minted per call when none is
    given). A lost reply: the credit may or may not have applied; call again with the same
    ``operation`` (redis-py's own retry of the command after a timeout does exactly that) and it
    applies at most once in all, answering the balance it produced. Reusing an operation id for another
    currency or amount raises :class:`InvalidOption` and changes nothing."""
    check_currency(currency)
    check_amount("amount", amount)
    if not isinstance(reason, str) or not _REASON.fullmatch(reason) or reason in _RESERVED:
        raise InvalidOption(
            f"a reason is 1-32 characters of [a-z_], not {'/'.join(sorted(_RESERVED))}, got {reason!r}"
        )
    if job:
        check_id(job, JOB)
    op = ids.mint(OPERATION) if operation is None else check_id(operation, OPERATION)
    keys = game.keys
    reply = await game.run(
        "credit",
        [keys.player(player_id), keys.wallet(player_id), keys.ledger(player_id), keys.credits(player_id)],
        [currency, amount, reason, job, op, game.settings.ledger_kept],
    )
    if int(reply[0]) == -1:
        raise UnknownPlayer(f"no player {player_id}")
    if int(reply[0]) == -2:
        raise InvalidOption(f"operation {op} made another credit already")
    return int(reply[1])


def reconcile(wallet: Wallet) -> list[str]:
    """What does not reconcile (empty when all is well): replaying the ledger must give every entry's
    balance and the wallet's balances, and no balance may ever be negative. A whole ledger is replayed
    from zero; a partial one (the newest entries only) from the balance before its first entry of each
    currency."""
    problems: list[str] = []
    running: dict[str, int] = {}
    if 0 <= wallet.ledger_total != len(wallet.ledger):
        for entry in reversed(wallet.ledger):
            running[entry.currency] = entry.balance - entry.delta
    for number, entry in enumerate(wallet.ledger):
        running[entry.currency] = running.get(entry.currency, 0) + entry.delta
        if running[entry.currency] != entry.balance:
            problems.append(
                f"entry {number}: balance {entry.balance}, replay gives {running[entry.currency]}"
            )
        if entry.balance < 0:
            problems.append(f"entry {number}: {entry.currency} went negative ({entry.balance})")
    for currency in sorted(set(running) | set(wallet.balances)):
        held, replayed = wallet.balances.get(currency, 0), running.get(currency, 0)
        if held != replayed:
            problems.append(f"{currency}: balance {held}, ledger gives {replayed}")
    return problems
