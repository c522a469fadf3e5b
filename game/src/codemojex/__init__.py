"""Codemojex: a competition to crack a six-emoji code, built on EchoMQ.

The host admits guesses (:mod:`codemojex.guesses`) and never scores; the score worker
(:mod:`codemojex.score_worker`) is the one authority. The pure game rules live in
:mod:`codemojex.engine`, :mod:`codemojex.emoji`, :mod:`codemojex.keyboard`, :mod:`codemojex.codes` and
:mod:`codemojex.ranking`, which import neither Redis nor the queue.

The public names below are imported lazily (on first use), so importing a pure module such as
``codemojex.engine`` loads neither Redis nor EchoMQ.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemojex.engine import Feedback, Mark, score
    from codemojex.errors import (
        CodemojexError,
        InvalidGuess,
        InvalidId,
        InvalidInput,
        InvalidKeyboard,
        InvalidName,
        InvalidOption,
        InvalidPayload,
        NameTaken,
        NotFound,
        NotProven,
        RoundClosed,
        ScriptError,
        Unavailable,
        UnknownJob,
        UnknownPlayer,
        UnknownRound,
    )
    from codemojex.game import Game, GameSettings
    from codemojex.guesses import GuessRecord, Outcome, PlayerGuess, Refusal, Submission, submit
    from codemojex.keyboard import Keyboard
    from codemojex.players import Player
    from codemojex.ranking import Standing
    from codemojex.rounds import Round, RoundStatus
    from codemojex.score_worker import ScoreWorker, handle
    from codemojex.wallet import LedgerEntry, Wallet

_HOMES = {
    "codemojex.engine": ("Feedback", "Mark", "score"),
    "codemojex.errors": (
        "CodemojexError",
        "InvalidGuess",
        "InvalidId",
        "InvalidInput",
        "InvalidKeyboard",
        "InvalidName",
        "InvalidOption",
        "InvalidPayload",
        "NameTaken",
        "NotFound",
        "NotProven",
        "RoundClosed",
        "ScriptError",
        "Unavailable",
        "UnknownJob",
        "UnknownPlayer",
        "UnknownRound",
    ),
    "codemojex.game": ("Game", "GameSettings"),
    "codemojex.guesses": ("GuessRecord", "Outcome", "PlayerGuess", "Refusal", "Submission", "submit"),
    "codemojex.keyboard": ("Keyboard",),
    "codemojex.players": ("Player",),
    "codemojex.ranking": ("Standing",),
    "codemojex.rounds": ("Round", "RoundStatus"),
    "codemojex.score_worker": ("ScoreWorker", "handle"),
    "codemojex.wallet": ("LedgerEntry", "Wallet"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "CodemojexError",
    "Feedback",
    "Game",
    "GameSettings",
    "GuessRecord",
    "InvalidGuess",
    "InvalidId",
    "InvalidInput",
    "InvalidKeyboard",
    "InvalidName",
    "InvalidOption",
    "InvalidPayload",
    "Keyboard",
    "LedgerEntry",
    "Mark",
    "NameTaken",
    "NotFound",
    "NotProven",
    "Outcome",
    "Player",
    "PlayerGuess",
    "Refusal",
    "Round",
    "RoundClosed",
    "RoundStatus",
    "ScoreWorker",
    "ScriptError",
    "Standing",
    "Submission",
    "Unavailable",
    "UnknownJob",
    "UnknownPlayer",
    "UnknownRound",
    "Wallet",
    "handle",
    "score",
    "submit",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'codemojex' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
