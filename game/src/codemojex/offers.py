"""What a player's wallet offers in a round, read before they type: the next guess's price, the round's
allowance still to come (or taken), the solve reward, and what the next round's first guess would add.

The scripts are the authority (``submit.lua`` tops up and charges, ``score.lua`` rewards); this reads the
same keys and applies the pure rule of :mod:`codemojex.economy`, so a page can show the price and
disable its submit button when the server would refuse the guess for funds. A guess racing this read
(another tab) may still be refused; the refusal stays typed and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex import economy
from codemojex.economy import Amounts
from codemojex.errors import UnknownPlayer, UnknownRound
from codemojex.game import Game, decode_prices, translate_errors
from codemojex.keys import PLAYER, ROUND, check_id


@dataclass(frozen=True, slots=True)
class Offer:
    round: str
    balances: dict[str, int]
    taken: bool  # the round's allowance was taken (by the player's first admitted guess of the round)
    top_up: Amounts  # what the first admitted guess of this round will add first (empty once taken)
    next_price: tuple[str, int] | None  # what the next guess of this round costs (None: cannot pay)
    rewarded: bool  # the solve reward of this round was paid
    next_round_top_up: Amounts  # what the first guess of a next round would add, at today's balances
    allowance: Amounts  # the levels
    solve_reward: Amounts


async def read_offer(game: Game, round_id: str, player_id: str) -> Offer:
    """The player's :class:`Offer` in ``round_id``; :class:`UnknownRound` / :class:`UnknownPlayer`."""
    keys = game.keys
    check_id(round_id, ROUND)
    check_id(player_id, PLAYER)
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            pipe.exists(keys.player(player_id))
            pipe.hget(keys.round(round_id), "prices")
            pipe.hgetall(keys.wallet(player_id))
            pipe.hexists(keys.allowances(round_id), player_id)
            pipe.hexists(keys.rewards(round_id), player_id)
            exists, prices, raw, taken, rewarded = await pipe.execute()
    if not exists:
        raise UnknownPlayer(f"no player {player_id}")
    if prices is None:
        raise UnknownRound(f"no round {round_id}")
    settings = game.settings
    balances = {k.decode(): int(v) for k, v in sorted(raw.items())}
    level = settings.allowance
    pending = () if taken else economy.top_up(level, balances)
    return Offer(
        round=round_id,
        balances=balances,
        taken=bool(taken),
        top_up=pending,
        next_price=economy.next_price(decode_prices(prices.decode()), balances, pending),
        rewarded=bool(rewarded),
        next_round_top_up=economy.top_up(level, balances),
        allowance=level,
        solve_reward=settings.solve_reward,
    )
