"""The one error tree of Codemojex.

Every exception Codemojex raises derives from :class:`CodemojexError`, and each class carries a stable
``code`` (the web host answers it in its JSON errors)::

    CodemojexError                          code
    ├── InvalidInput (also ValueError)      invalid_input     bad input from a caller; nothing changed
    │   ├── InvalidGuess                    invalid_guess     not six keys of the round's keyboard
    │   ├── InvalidKeyboard                 invalid_keyboard  not a set of distinct emoji
    │   ├── InvalidName                     invalid_name      a display name that cannot be shown
    │   ├── InvalidId                       invalid_id        an ill-formed RND / PLR / JOB / GES id
    │   ├── InvalidOption                   invalid_option    an option out of its documented range
    │   └── InvalidPayload                  invalid_payload   a job payload the score worker cannot read
    ├── NotFound (also LookupError)         not_found
    │   ├── UnknownRound                    unknown_round
    │   ├── UnknownPlayer                   unknown_player
    │   └── UnknownJob                      unknown_job       no guess job with that JOB id
    ├── NameTaken                           name_taken        another player holds a name that looks the same
    ├── RoundClosed                         round_closed      the round does not take this call any more
    ├── NotProven                           not_proven        a lock on a position no scored guess proved
    ├── Unavailable (also ConnectionError)  unavailable       Redis could not be reached; effect unknown
    │   └── NotDurable                      unavailable       admitted on the master, no replica known to
    │                                                         hold it (durable admission); retry, same id
    └── ScriptError                         script_error      a script answered outside its contract

A refused guess (closed round, insufficient funds, the guess limit, an idempotency conflict) is *not* an
error: :func:`codemojex.guesses.submit` answers it as a :class:`~codemojex.guesses.Refusal` value, having
charged nothing and enqueued nothing.

This module imports nothing, so the pure game modules (engine, keyboard, ranking) can raise these.
"""

from __future__ import annotations


class CodemojexError(Exception):
    """Root of every error Codemojex raises."""

    code = "codemojex_error"


class InvalidInput(CodemojexError, ValueError):
    """The caller passed something ill-formed. Nothing was changed."""

    code = "invalid_input"


class InvalidGuess(InvalidInput):
    """A guess is not exactly six keys of the round's keyboard; ``problem`` names what is wrong."""

    code = "invalid_guess"

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


class InvalidKeyboard(InvalidInput):
    """A keyboard is not a set of distinct single emoji of an allowed size."""

    code = "invalid_keyboard"


class InvalidName(InvalidInput):
    """A display name is empty or invisible, too long, holds control characters or stacks marks."""

    code = "invalid_name"


class InvalidId(InvalidInput):
    """A branded id is ill-formed or has the wrong brand."""

    code = "invalid_id"


class InvalidOption(InvalidInput):
    """An option (price list, times, guess limit, count...) is out of its documented range."""

    code = "invalid_option"


class InvalidPayload(InvalidInput):
    """A guess job's payload is not what the host writes; the score worker dead-letters it."""

    code = "invalid_payload"


class NotFound(CodemojexError, LookupError):
    """No such thing exists."""

    code = "not_found"


class UnknownRound(NotFound):
    code = "unknown_round"


class UnknownPlayer(NotFound):
    code = "unknown_player"


class UnknownJob(NotFound):
    code = "unknown_job"


class NameTaken(CodemojexError):
    """Another player's name looks the same as this one (see :func:`codemojex.names.skeleton`);
    ``suggestion`` is a free name like it, or None."""

    code = "name_taken"

    def __init__(self, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.suggestion = suggestion


class RoundClosed(CodemojexError):
    """The round is closed (or not yet open) for this call: closing twice, revealing early, locking late."""

    code = "round_closed"


class NotProven(CodemojexError):
    """A lock asked for a position that none of the player's scored guesses proved a hit."""

    code = "not_proven"


class Unavailable(CodemojexError, ConnectionError):
    """Redis could not be reached, or the call timed out. The call's effect is unknown."""

    code = "unavailable"


class NotDurable(Unavailable):
    """A durable admission (the bus's ``Settings.wait_replicas``) ran on the master, but fewer replicas
    than asked acknowledged it in time: retry it with the same job id (it answers DUPLICATE, charging
    nothing, once it was admitted). Its code is ``unavailable``: to a client, one more reason to retry."""


class ScriptError(CodemojexError):
    """A Lua script answered outside its contract (a bug, or a foreign key under the game's prefix)."""

    code = "script_error"
