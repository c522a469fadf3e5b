"""The economy's rule, pure: what a player gets to play with, and what their next guess costs.

The rule (README, "The economy"; SECURITY.md, "Throwaway accounts"):

* **Nothing at sign-up** (``GameSettings.grant`` is empty by default): an account that never played
  holds nothing, so creating accounts stores no value.
* **A per-round allowance, topped up, not added**: at a player's first *admitted* guess of a round,
  ``submit.lua`` raises each balance of ``GameSettings.allowance`` (default 3 tickets and 50 coins) to
  its level, never lowering one above it, in the same atomic step as the admission and its charge, with
  one ledger entry ``allowance`` per currency it raised, naming the round; a marker
  (``allowances:<RND>``, player -> the JOB that took it) makes it once per (player, round), whatever the
  retries or concurrent first guesses. A refused guess takes nothing. So a broke player always gets on,
  at the latest at their first guess of the next round, and nobody can hoard allowances.
* **A reward for solving** (``GameSettings.solve_reward``, default 25 coins): ``score.lua`` credits it in
  the step that writes the guess record that leaves the player solved, once per (player, round)
  (``rewards:<RND>``), whatever the order or number of deliveries. Rewards above the allowance's level
  carry over: solving is what makes a wallet grow.

A new account is therefore never better off than an old one: after its first guess of a round it holds
exactly the allowance less the price, which is what a broke old account holds at that point, and an
account above the level keeps its surplus. Nothing moves between accounts (there are no transfers), so
a throwaway's allowance pays only for the throwaway's own guesses.

These functions are the pure copy of what the scripts do, for the pages and the API to show *before*
the player types (the scripts remain the authority).
"""

from __future__ import annotations

from collections.abc import Mapping

Amounts = tuple[tuple[str, int], ...]  # (currency, amount) pairs, as a price list


def top_up(allowance: Amounts, balances: Mapping[str, int]) -> Amounts:
    """What the allowance adds to ``balances``: each currency up to its level, in the allowance's order;
    nothing for a currency at or above its level."""
    return tuple(
        (currency, level - balances.get(currency, 0))
        for currency, level in allowance
        if balances.get(currency, 0) < level
    )


def after(balances: Mapping[str, int], credit: Amounts) -> dict[str, int]:
    """``balances`` with ``credit`` added."""
    result = dict(balances)
    for currency, amount in credit:
        result[currency] = result.get(currency, 0) + amount
    return result


def next_price(prices: Amounts, balances: Mapping[str, int], pending: Amounts = ()) -> tuple[str, int] | None:
    """The first ``(currency, amount)`` of ``prices`` that ``balances`` plus the ``pending`` top-up (the
    allowance a first guess of the round would take first) can pay, or None: what ``submit.lua`` charges."""
    held = after(balances, pending)
    for currency, amount in prices:
        if held.get(currency, 0) >= amount:
            return currency, amount
    return None
