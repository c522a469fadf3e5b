"""The player's path: a plain guess POST answered in one Redis call (``lua/post_guess.lua``).

:class:`~codemojex.web.admission.Admission` hands every ``POST /api/rounds/<RND>/guesses`` to
:meth:`GuessPath.post` before the rate limiter. A *plain* guess (a JSON body ``{"guess": ...}`` with no
locks asked, no ``Idempotency-Key``, a well-formed player token, a guess that parses onto the round's
keyboard as this host has it cached) is answered here: the guess class's rate limits, the token, the
round's keyboard check, the player's locks and the admission (``submit.lua``'s own, shared as
``lua/includes/admit_guess.lua``) are one script, so the guess costs one round trip, and nothing is built
per request that can be built once (keys and prefixes per game and per round, the round's parsed
keyboard, learnt after the routes' path admitted a guess in it). Anything else, and a round whose keyboard
differs from the cached one, takes the routes' path
(:mod:`codemojex.web.player_api`), with the same answers: :data:`NOT_MINE` (the rate limiter has not run)
or :data:`CHARGED` (the script took the buckets' tokens already: the limiter must not run again).

Every answer is the route's: 202 with the submission, 401 for a token that names nobody, 429
``rate_limited`` with ``Retry-After``, a refusal with its status and the job id, 503 ``unavailable`` when
Redis cannot be reached (fail closed, as the limiter does for guesses). A refusal changes nothing but the
rate-limit buckets, as on the routes' path.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from starlette.types import Send

from codemojex.codes import parse_guess
from codemojex.errors import CodemojexError, InvalidGuess, InvalidId
from codemojex.game import Game, encode_prices, translate_errors
from codemojex.guesses import Refusal
from codemojex.keyboard import Keyboard
from codemojex.keys import GUESS, JOB, PLAYER, ROUND, check_id
from codemojex.payload import decode_payload
from codemojex.players import MAX_TOKEN, token_digest
from codemojex.rounds import keyboard_of
from codemojex.web import buckets
from codemojex.web.buckets import Rate
from codemojex.web.problems import REFUSAL_STATUS, body
from echomq import ids

log = logging.getLogger("codemojex.web.guess_path")

ANSWERED, CHARGED, NOT_MINE = "answered", "charged", "not_mine"
ADDRESSES_KEPT = 4096  # client addresses whose bucket key is kept built
SHAPES_KEPT = 64  # rounds whose keyboard a host keeps parsed (a round is played for minutes to hours)
_DUMMY = "PLR" + "0" * 23  # well-formed ids and digest, to cut a key builder's prefix from its key
_DUMMY_JOB, _DUMMY_GUESS, _DUMMY_DIGEST = "JOB" + "0" * 23, "GES" + "0" * 23, "0" * 64
_JSON = b"application/json"
_REFUSALS = {refusal.value for refusal in Refusal} - {Refusal.BAD_GUESS.value}
_UNAUTHORIZED = "that token names no player (expired, revoked or rotated): join again for a new one"


def _prefix(key: str) -> str:
    assert key.endswith(_DUMMY), key
    return key[: -len(_DUMMY)]


@dataclass(frozen=True, slots=True)
class _Round:
    """What a round's guesses share: its parsed keyboard and post_guess.lua's ARGV[2], built once."""

    keyboard: Keyboard
    length: int
    key: str
    fields: str


class GuessPath:
    """The one-call guess POST of one host (its cached rounds and per-game constants)."""

    def __init__(self, per_address: Rate, per_player: Rate) -> None:
        self.per_address = per_address
        self.per_player = per_player
        self.rounds: OrderedDict[str, _Round] = OrderedDict()
        self.addresses: dict[str, str] = {}  # client address -> its guess bucket's key
        self.game: Game | None = None
        self.fields = ""  # post_guess.lua's ARGV[1]
        self.job_prefix = self.guess_prefix = self.token_prefix = self.bucket_prefix = ""

    def _constants(self, game: Game) -> None:
        keys, bus_keys, settings, rates = (
            game.keys,
            game.bus.keys,
            game.settings,
            (self.per_address, self.per_player),
        )
        fields: list[object] = [keys.tokens, bus_keys.ring, bus_keys.delayed, bus_keys.wake, bus_keys.stats]
        fields += [bus_keys.waiting, keys.trial]
        fields += [
            _prefix(bus_keys.lane(_DUMMY)),
            *(_prefix(build(_DUMMY)) for build in (keys.player, keys.wallet, keys.ledger)),
        ]
        fields += [settings.max_attempts, game.bus.settings.wake_cap, settings.max_queued]
        fields += [encode_prices(settings.allowance), settings.ledger_kept]
        fields += [rates[0].capacity, rates[0].period_ms, rates[1].capacity, rates[1].period_ms]
        fields += [keys.player_buckets(buckets.GUESS)]
        assert not any("\n" in str(field) for field in fields)
        self.fields = "\n".join(map(str, fields))
        self.job_prefix = bus_keys.job(_DUMMY_JOB)[: -len(_DUMMY_JOB)]
        self.guess_prefix = keys.guess(_DUMMY_GUESS)[: -len(_DUMMY_GUESS)]
        self.token_prefix = keys.token(_DUMMY_DIGEST)[: -len(_DUMMY_DIGEST)]
        self.bucket_prefix = keys.bucket(buckets.GUESS, "p", _DUMMY_DIGEST)[: -len(_DUMMY_DIGEST)]
        self.game = game
        self.addresses.clear()
        self.rounds.clear()

    def _address_bucket(self, address: str) -> str:
        key = self.addresses.get(address)
        if key is None:
            assert self.game is not None
            key = self.game.keys.bucket(buckets.GUESS, "a", buckets.digest(address))
            if len(self.addresses) >= ADDRESSES_KEPT:
                self.addresses.clear()  # a bound, not a policy: rebuilt at the next request
            self.addresses[address] = key
        return key

    def knows(self, round_id: str) -> bool:
        return round_id in self.rounds

    async def learn(self, game: Game, round_id: str) -> None:
        """Keep the round's keyboard, after a guess in it was admitted by the routes' path: only a round
        that admits guesses is read, so requests naming made-up rounds cost no read before the limiter."""
        if round_id in self.rounds:
            return
        if self.game is not game:
            self._constants(game)
        try:
            check_id(round_id, ROUND)
            with translate_errors():
                keyboard, length = await game.redis.hmget(game.keys.round(round_id), "keyboard", "length")
        except (InvalidId, CodemojexError):  # Redis unreachable: learnt at another guess
            return
        if keyboard is None or length is None:
            return
        keys = game.keys
        fields = [
            round_id,
            keys.quota(round_id),
            keys.charges(round_id),
            keys.standing(round_id),
            keys.allowances(round_id),
            _prefix(keys.submitted(round_id, _DUMMY)),
            _prefix(keys.locks(round_id, _DUMMY)),
            bytes(keyboard).decode(),
            bytes(length).decode(),
            f'","round":"{round_id}","v":1}}',
        ]
        if any("\n" in field for field in fields):
            return
        shape = _Round(keyboard_of(keyboard), int(length), keys.round(round_id), "\n".join(fields))
        self.rounds[round_id] = shape
        while len(self.rounds) > SHAPES_KEPT:
            self.rounds.popitem(last=False)

    async def post(
        self, game: Game, scope: Any, data: bytes | None, *, address: str, round_id: str, send: Send
    ) -> str:
        """Answer a guess POST in one call (:data:`ANSWERED`), or leave it to the routes (see the module)."""
        plain = _plain(scope, data)
        if plain is None:
            return NOT_MINE
        if self.game is not game:
            self._constants(game)
        token, guess = plain
        shape = self.rounds.get(round_id)
        if shape is None:
            return NOT_MINE
        try:
            parsed = parse_guess(guess, shape.keyboard, None, length=shape.length)
        except InvalidGuess:
            return NOT_MINE
        job = ids.mint(JOB)
        tokens = token_digest(token)
        typed = json.dumps(guess, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        call_keys = [
            self._address_bucket(address),
            self.bucket_prefix + tokens,
            self.token_prefix + tokens,
            self.job_prefix + job,
            shape.key,
            self.guess_prefix + GUESS + job[len(JOB) :],  # guess_of(job), of a job minted here
        ]
        args = [
            self.fields,
            shape.fields,
            job,
            '{"guess":' + typed + ',"player":"',
            json.dumps(parsed, ensure_ascii=False),
            tokens,
        ]
        try:
            reply = await game.run("post_guess", call_keys, args)
        except CodemojexError as exc:  # fail closed, as the limiter does for guesses
            log.warning("a guess POST failed (%s): refusing it", exc)
            await _problem(send, 503, "unavailable", "Redis is unavailable: try again")
            return ANSWERED
        if int(reply[0]) == -7:
            return CHARGED
        await _reply(send, reply, job, round_id)
        return ANSWERED


def _plain(scope: Any, data: bytes | None) -> tuple[str, Any] | None:
    """The token and the guess of a plain guess POST (see the module), or None."""
    token = None
    for name, value in scope["headers"]:
        if name == b"authorization" and token is None:
            scheme, _, rest = value.decode("latin-1").partition(" ")
            token = rest.strip() if scheme.lower() == "bearer" else ""
        elif name == b"idempotency-key" or (name == b"content-type" and value != _JSON):
            return None
    if data is None or not token or not 20 <= len(token) <= MAX_TOKEN or not token.isascii():
        return None
    try:
        request = json.loads(data)
    except (ValueError, RecursionError):  # nested past the parser's depth: the routes refuse it (422)
        return None
    if not isinstance(request, dict) or "guess" not in request or request.keys() - {"guess", "locks"}:
        return None
    guess = request["guess"]
    if request.get("locks") or not (
        isinstance(guess, str) or (isinstance(guess, list) and all(isinstance(key, str) for key in guess))
    ):
        return None
    return token, guess


async def _reply(send: Send, reply: list[Any], job: str, round_id: str) -> None:
    code = int(reply[0])
    if code == -9:
        retry_s = max(1, -(-int(reply[1]) // 1000))
        scope = "address" if int(reply[2]) == 1 else "player"
        message = f"too many guess requests from this {scope}: retry in {retry_s} s"
        await _problem(send, 429, "rate_limited", message, retry_after=retry_s)
        return
    if code == -8:
        await _problem(send, 401, "unauthorized", _UNAUTHORIZED)
        return
    player, admission, admitted = bytes(reply[1]).decode(), reply[2], bytes(reply[3])
    outcome = int(admission[0])
    if outcome == 1:
        currency, amount = bytes(admission[2]).split(b"=", 1)
        data = b'{"job_id":"%s","status":"admitted","charged":{"currency":"%s","amount":%s},"guess":%s}' % (
            job.encode(),
            currency,
            amount,
            admitted,
        )
        await _send(send, 202, data)
        return
    if outcome == 0:  # a fresh job id is never a duplicate; answered as the route would all the same
        name, price = bytes(admission[2]).decode().split("=", 1)
        was = decode_payload(admission[3]).guess if admission[3] else json.loads(admitted)
        view = {
            "job_id": job,
            "status": "duplicate",
            "charged": {"currency": name, "amount": int(price)},
        }
        await _send(send, 202, json.dumps({**view, "guess": list(was)}, ensure_ascii=False).encode())
        return
    if outcome == -1:
        used = bytes(admission[1]) == b"used"
        detail = "this job id was already used" if used else "was admitted with another guess or player"
        await _problem(send, 409, Refusal.IDEMPOTENCY_CONFLICT.value, f"job {job}: {detail}", job_id=job)
        return
    reason = bytes(admission[1]).decode()
    if reason == "unknown_player":
        await _problem(send, 404, reason, f"no player {check_id(player, PLAYER)}")
    elif reason == "unknown_round":
        await _problem(send, 404, reason, f"no round {round_id}")
    elif reason in _REFUSALS:
        refusal = Refusal(reason)
        status = REFUSAL_STATUS[refusal]
        await _problem(send, status, reason, reason.replace("_", " "), job_id=job)
    else:
        await _problem(send, 500, "script_error", f"post_guess.lua answered {reply!r}")


async def _problem(
    send: Send, status: int, code: str, message: str, retry_after: int = 1, **extra: Any
) -> None:
    headers = [(b"www-authenticate", b"Bearer")] if status == 401 else []
    if status in (429, 503):
        headers.append((b"retry-after", str(retry_after).encode()))
    data = json.dumps(body(status, code, message, **extra), ensure_ascii=False, separators=(",", ":"))
    await _send(send, status, data.encode(), headers)


async def _send(send: Send, status: int, data: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-length", str(len(data)).encode()), (b"content-type", _JSON), *(extra or ())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
