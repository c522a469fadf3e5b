"""The one JSON error shape of the API, and the HTTP status of every error and refusal.

``{"error": {"code": "...", "message": "...", "status": 402}}``, with extra fields where they help
(``problem`` for a bad guess, ``errors`` for a malformed body). The ``code`` is stable: it is the
:class:`~codemojex.errors.CodemojexError` ``code``, or the :class:`~codemojex.guesses.Refusal` value,
or one of the host's own (``unauthorized``, ``forbidden``, ``body_too_large``, ``malformed_body``,
``no_open_round``, ``not_found``).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from codemojex import errors
from codemojex.game import translate_errors
from codemojex.guesses import Refusal

# The status of each error class; the first match in this order wins (subclasses first).
_ERROR_STATUS: tuple[tuple[type[errors.CodemojexError], int], ...] = (
    (errors.InvalidInput, 400),
    (errors.NotProven, 400),
    (errors.NotFound, 404),
    (errors.RoundClosed, 409),
    (errors.NameTaken, 409),
    (errors.Unavailable, 503),
    (errors.ScriptError, 500),
)

REFUSAL_STATUS: dict[Refusal, int] = {
    Refusal.BAD_GUESS: 400,
    Refusal.INSUFFICIENT_FUNDS: 402,
    Refusal.ROUND_CLOSED: 409,
    Refusal.ROUND_NOT_OPEN: 409,
    Refusal.ALREADY_SOLVED: 409,
    Refusal.MAX_GUESSES: 409,
    Refusal.IDEMPOTENCY_CONFLICT: 409,
    Refusal.TOO_MANY_QUEUED: 429,
}


class Problem(Exception):
    """An API error: raised by a route, answered as the JSON error shape with ``status``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


class FieldError(BaseModel):
    loc: list[str] = Field(description="where: body, query or path, then the field")
    msg: str


class ErrorDetail(BaseModel):
    """The error: a stable ``code``, a sentence for people, the status again; a few errors add fields."""

    model_config = ConfigDict(extra="allow")
    code: str = Field(description="stable, machine-readable: what went wrong")
    message: str
    status: int
    problem: str | None = Field(default=None, description="a bad guess: which rule it broke")
    errors: list[FieldError] | None = Field(default=None, description="a malformed request: each field")
    job_id: str | None = Field(default=None, description="a refused guess: the job id it would have had")
    suggestion: str | None = Field(default=None, description="a name taken: a similar one nobody holds")


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer of the API has this shape."""

    error: ErrorDetail


RETRY_AFTER = {
    "Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}
}

DESCRIBED: dict[int, tuple[str, bool]] = {  # status -> (what it means, whether Retry-After is sent)
    400: ("invalid input: an id, a guess, a name or a parameter the game refuses", False),
    401: ("no token, or a token that names nobody (WWW-Authenticate: Bearer)", False),
    402: ("the wallet cannot pay the round's price", False),
    403: ("a player token on an operator route, or a feature off on this host", False),
    404: ("no such round, job or player of yours (another player's look the same as none)", False),
    409: (
        "the state refuses it: round closed or not open, solved already, a name taken, a key reused",
        False,
    ),
    408: ("the request body did not arrive in time (a slow client)", False),
    413: ("the request body is over the host's limit", False),
    422: ("the request is malformed: not UTF-8 JSON, or not the shape this endpoint takes", False),
    429: ("too many: a rate limit, requests in flight, event streams, or your guesses queued", True),
    503: (
        "Redis is unavailable, or the host is busy: nothing was changed, or the call is safe to retry",
        True,
    ),
}


def answers(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route that can answer ``statuses``, each with the error shape, for the
    OpenAPI schema. 422, 429 and 503 are added: any route checks its parameters (FastAPI would otherwise
    publish its own 422 shape), is admitted by :mod:`codemojex.web.admission` (rate limits, requests in
    flight) and may meet Redis down; a route with a body (413) can also time out receiving it (408)."""
    documented: dict[int | str, dict[str, Any]] = {}
    timed = {408} if 413 in statuses else set()
    for status in sorted({*statuses, *timed, 422, 429, 503}):
        description, retry = DESCRIBED[status]
        documented[status] = {"model": ErrorBody, "description": description}
        if retry:
            documented[status]["headers"] = RETRY_AFTER
    return documented


def body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, **extra}}


RETRY_AFTER_S = 1  # a 503 (Redis unreachable, its scripts not loaded yet): ask again in a second


def respond(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if status in (429, 503):  # both pass: say when to try again (DESCRIBED says which send it)
        headers["Retry-After"] = str(RETRY_AFTER_S)
    return JSONResponse(body(status, code, message, **extra), status_code=status, headers=headers)


def status_of(error: errors.CodemojexError) -> int:
    for kind, status in _ERROR_STATUS:
        if isinstance(error, kind):
            return status
    return 500


def from_error(error: errors.CodemojexError) -> Problem:
    extra: dict[str, Any] = {}
    if isinstance(error, errors.InvalidGuess):
        extra["problem"] = error.problem
    if isinstance(error, errors.NameTaken) and error.suggestion:
        extra["suggestion"] = error.suggestion
    return Problem(status_of(error), error.code, str(error), **extra)


async def on_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return respond(exc.status, exc.code, exc.message, **exc.extra)


async def on_game_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.CodemojexError)
    problem = from_error(exc)
    return respond(problem.status, problem.code, problem.message, **problem.extra)


async def on_malformed(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"loc": [str(part) for part in item.get("loc", ())], "msg": str(item.get("msg", ""))}
        for item in exc.errors()
    ]
    return respond(422, "malformed_body", "the request is not what this endpoint takes", errors=details)


_HTTP_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "body_too_large",
}


async def on_http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI's only 400: a body it could not decode (not UTF-8, not JSON)
        details = [{"loc": ["body"], "msg": str(exc.detail)}]
        return respond(422, "malformed_body", "the request body is not UTF-8 JSON", errors=details)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return respond(exc.status_code, code, str(exc.detail))


def translated(exc: Exception) -> errors.CodemojexError:
    """An EchoMQ or redis-py error as the game's (see :func:`codemojex.game.translate_errors`)."""
    try:
        with translate_errors():
            raise exc
    except errors.CodemojexError as game_error:
        return game_error


async def on_foreign_error(request: Request, exc: Exception) -> JSONResponse:
    return await on_game_error(request, translated(exc))
