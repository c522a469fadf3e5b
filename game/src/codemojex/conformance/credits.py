"""The conformance check of the economy's credits (:mod:`codemojex.economy`) in one round.

At most one ``allowance`` entry per currency per player, only with the round's marker
(``allowances:<RND>``), naming a job the player had admitted, each raising its balance exactly to the
allowance's level (topped up, never added); at most one ``reward`` entry per currency, only for a
solved player and with its marker (``rewards:<RND>``), of the reward's amount; and, given the game's
settings, every admitted player took the allowance and every solved player was rewarded. With
:func:`codemojex.conformance.invariants.wallets` (balances = ledger replay) each credit is once per
(player, round), whatever the retries, faults and delivery order.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from codemojex import ranking, wallet
from codemojex.game import GameSettings
from codemojex.keys import GameKeys
from codemojex.wallet import LedgerEntry

Client = Any  # a blocking redis.Redis (decode_responses=False)


class RoundState(Protocol):
    """What the check reads of :class:`codemojex.conformance.invariants.GameState`."""

    @property
    def submitted(self) -> dict[str, set[str]]: ...  # player -> JOB ids admitted in the round

    @property
    def standings(self) -> dict[str, ranking.Standing]: ...


def _ledger(client: Client, keys: GameKeys, player: str) -> list[LedgerEntry]:
    return [wallet.parse_entry(raw) for raw in client.lrange(keys.ledger(player), 0, -1)]


def economy(
    client: Client,
    keys: GameKeys,
    round_id: str,
    state: RoundState,
    settings: GameSettings | None = None,
) -> list[str]:
    """The round's allowances and solve rewards, each once per player (see the module doc)."""
    problems = []
    taken = {p.decode(): j.decode() for p, j in client.hgetall(keys.allowances(round_id)).items()}
    paid = {p.decode(): j.decode() for p, j in client.hgetall(keys.rewards(round_id)).items()}
    level = dict(settings.allowance) if settings else None
    reward = dict(settings.solve_reward) if settings else None
    for player, admitted in state.submitted.items():
        mine = [entry for entry in _ledger(client, keys, player) if entry.round == round_id]
        allowances = Counter(entry.currency for entry in mine if entry.reason == "allowance")
        rewards = Counter(entry.currency for entry in mine if entry.reason == "reward")
        problems += [
            f"{player} took the {currency} allowance of {round_id} {n} times"
            for currency, n in allowances.items()
            if n > 1
        ]
        problems += [
            f"{player} was rewarded {currency} {n} times in {round_id}"
            for currency, n in rewards.items()
            if n > 1
        ]
        if allowances and player not in taken:
            problems.append(f"{player} has an allowance of {round_id} without its marker")
        if player in taken and taken[player] not in admitted:
            problems.append(f"{player}'s allowance of {round_id} names {taken[player]}, not an admitted job")
        if rewards and player not in paid:
            problems.append(f"{player} has a reward of {round_id} without its marker")
        standing = state.standings.get(player)
        solved = standing is not None and standing.solved
        if player in paid and not solved:
            problems.append(f"{player} was rewarded in {round_id} but has not solved it")
        if level is not None:
            if level and admitted and player not in taken:
                problems.append(f"{player} was admitted in {round_id} but never took its allowance")
            problems += [
                f"{player}'s {entry.currency} allowance of {round_id} left {entry.balance}, not the level"
                for entry in mine
                if entry.reason == "allowance"
                and (entry.balance != level.get(entry.currency) or entry.delta <= 0)
            ]
        if reward is not None:
            if reward and solved and player not in paid:
                problems.append(f"{player} solved {round_id} but was never rewarded")
            problems += [
                f"{player}'s {entry.currency} reward of {round_id} is {entry.delta},"
                f" not {reward.get(entry.currency)}"
                for entry in mine
                if entry.reason == "reward" and entry.delta != reward.get(entry.currency)
            ]
    return problems
