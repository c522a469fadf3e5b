"""Admission control: who may start a request now, before a route (or Redis) sees it.

:class:`Admission` is an ASGI middleware (inside the security headers, outside the body limit). For each
HTTP request it:

1. finds the client's address: the ASGI peer, or, only when the peer is one of
   :attr:`Limits.trusted_proxies`, the right-most address of ``X-Forwarded-For`` that is not a trusted
   proxy (:func:`client_address`). Serve the app with uvicorn's own ``proxy_headers`` off (serve does).
   Limits count per *client*, :func:`limit_key` of the address: an IPv6 address's /64 (one host is
   routinely given a whole /64, so counting each address alone would let one client sign up without
   limit), an IPv4-mapped IPv6 address as its IPv4 address.
2. caps the requests in flight per address (:attr:`Limits.inflight_per_address`; over it: 429
   ``too_many_requests``) and in all (:attr:`Limits.inflight_total`, below the Redis pool's size so one
   client cannot take every pooled connection: over it a request waits up to
   :attr:`Limits.queue_timeout_s` for a slot, then 503 ``busy``). An event stream counts until it starts
   streaming; then the hub's stream caps take over (:mod:`codemojex.web.hub`: a stream holds no pooled
   connection while it streams).
3. takes a token from the request class's buckets (:mod:`codemojex.web.buckets`); over: 429
   ``rate_limited`` with ``Retry-After``. The operator token is exempt. When the limiter fails, reads
   are let through (fail open: the in-process caps above still hold) and sign-ups, recovery-code
   sign-ins and guesses, which mint currency or tokens or spend currency, are refused with 503
   ``unavailable`` and ``Retry-After`` (fail closed). Never a 500.
4. answers a plain guess POST in one Redis call, rate limits included (:mod:`codemojex.web.guess_path`),
   else leaves it to the routes (with its buckets already charged when the call ran).
5. bounds how long the request body may take to arrive (:attr:`Limits.body_timeout_s`; then 408
   ``request_timeout``), and reads it (up to ``body_limit`` bytes, the size the inner
   :class:`~codemojex.web.limits.BodyLimit` allows) *before* taking a slot under ``inflight_total``: a
   request waiting for its body uses no Redis connection, so slow uploads from a few addresses, each
   under its own cap, cannot hold every slot while other clients wait (the 2nd step's per-address cap
   is taken first and still bounds them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemojex.errors import CodemojexError
from codemojex.game import Game
from codemojex.web import buckets
from codemojex.web.admission_limits import Limits, client_address, limit_key
from codemojex.web.buckets import Rate
from codemojex.web.guess_path import ANSWERED, CHARGED, GuessPath
from codemojex.web.limits import read_ahead, timed
from codemojex.web.problems import body

log = logging.getLogger("codemojex.web.admission")

__all__ = ["Admission", "Limits", "client_address", "limit_key", "send_problem"]

_GUESS_PATH = re.compile(r"/api/rounds/[^/]+/guesses/?")
_PLAIN_GUESS = re.compile(r"/api/rounds/([^/]+)/guesses")  # the one-call path's (codemojex.web.guess_path)
_LIMITED_PATHS = ("/api/", "/metrics", "/healthz")
EVENTS_PATH = "/api/events"


def _bearer(scope: Scope) -> str | None:
    """The bearer token of the *first* ``Authorization`` header, the one the routes read (Starlette's
    ``Headers.get``): a second header must not buy a fresh per-player bucket."""
    header = next((v for k, v in scope["headers"] if k == b"authorization"), b"").decode("latin-1")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def send_problem(send: Send, status: int, code: str, message: str, retry_after: int | None) -> None:
    data = json.dumps(body(status, code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class Admission:
    def __init__(
        self,
        app: ASGIApp,
        limits: Limits,
        pool_size: int,
        operator_token: str | None,
        body_limit: int = 8192,
    ) -> None:
        self.app = app
        self.body_limit = body_limit
        self.limits = limits
        self.operator_token = operator_token
        self.total = asyncio.Semaphore(limits.total_for(pool_size))
        self.inflight: dict[str, int] = {}
        self.paths: dict[int, GuessPath] = {}  # a spread game's partition -> its one-call path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        address = limit_key(client_address(scope, self.limits))
        scope.setdefault("state", {})["client_address"] = address
        path: str = scope["path"]
        if self.inflight.get(address, 0) >= self.limits.inflight_per_address:
            await send_problem(send, 429, "too_many_requests", "too many requests in flight from you", 1)
            return
        self.inflight[address] = self.inflight.get(address, 0) + 1
        held = False

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self.total.release()
            if address in self.inflight:
                left = self.inflight[address] - 1
                if left:
                    self.inflight[address] = left
                else:
                    del self.inflight[address]

        # An event stream holds its slots until it starts streaming, then the hub's caps take over
        # (a stream holds no pooled connection: codemojex.web.hub).
        streaming = path == EVENTS_PATH and scope["method"] == "GET"
        released = False

        async def send_then_release(message: Message) -> None:
            nonlocal released
            if message["type"] == "http.response.start" and not released:
                released = True
                release()
            await send(message)

        try:
            body = await read_ahead(scope, timed(receive, self.limits.body_timeout_s), self.body_limit)
            try:
                if self.total.locked():  # wait for a slot (a free one is taken at once, no timer)
                    async with asyncio.timeout(self.limits.queue_timeout_s):
                        await self.total.acquire()
                else:
                    await self.total.acquire()
                held = True
            except TimeoutError:
                await send_problem(send, 503, "busy", "the host is busy: try again shortly", 1)
                return
            plain = _PLAIN_GUESS.fullmatch(path) if scope["method"] == "POST" else None
            if plain is not None and not self._by_operator(scope):
                game = scope["app"].state.host.game_of_token(_bearer(scope))  # the player's partition
                guesses = self._path(game)
                done = await guesses.post(
                    game, scope, body.body, address=address, round_id=plain.group(1), send=send
                )
                if done == ANSWERED:
                    return
                if done == CHARGED:  # its buckets are charged: the routes' path without the limiter
                    await self.app(scope, body, send)
                    return
                if not guesses.knows(plain.group(1)) and await self._allowed(scope, send, address, path):
                    await self._learning(scope, body, send, game, plain.group(1))
                    return
            if await self._allowed(scope, send, address, path):
                await self.app(scope, body, send_then_release if streaming else send)
        finally:
            if not released:
                released = True
                release()

    def _path(self, game: Game) -> GuessPath:
        """The one-call path of ``game`` (each partition's keys and rounds cached apart)."""
        path = self.paths.get(game.place[0])
        if path is None:
            path = self.paths[game.place[0]] = GuessPath(
                self.limits.guess_per_address, self.limits.guess_per_player
            )
        return path

    async def _learning(self, scope: Scope, receive: Receive, send: Send, game: Game, round_id: str) -> None:
        """The routes' path for a guess in a round the one-call path does not know yet: once a guess
        in it is admitted (202), the round's keyboard is kept (:meth:`GuessPath.learn`), before the answer
        is sent, so the client's next guess finds it."""

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 202:
                await self._path(game).learn(game, round_id)  # before the answer
            await send(message)

        await self.app(scope, receive, watch)

    def _by_operator(self, scope: Scope) -> bool:
        token, operator = _bearer(scope), self.operator_token
        if token is None or not operator:
            return False
        return secrets.compare_digest(token.encode(), operator.encode())

    async def _allowed(self, scope: Scope, send: Send, address: str, path: str) -> bool:
        """Take a token from the request's buckets; False once a refusal is sent."""
        if not path.startswith(_LIMITED_PATHS):
            return True
        if self._by_operator(scope):
            return True
        token = _bearer(scope)
        limits, method = self.limits, scope["method"]
        if method == "POST" and path.rstrip("/") == "/api/players":
            kind, per_address, per_player = buckets.SIGNUP, limits.signup_per_address, None
        elif method == "POST" and path.rstrip("/") == "/api/recover":
            kind, per_address, per_player = buckets.RECOVER, limits.recover_per_address, None
        elif method == "POST" and _GUESS_PATH.fullmatch(path):
            kind, per_address, per_player = buckets.GUESS, limits.guess_per_address, limits.guess_per_player
        else:
            kind, per_address, per_player = buckets.READ, limits.read_per_address, limits.read_per_player
        try:
            host = scope["app"].state.host
            theirs = None if host.spread is None else host.game_of_token(token)  # the player's partition
            refused = await self._take(
                host.game, theirs, kind, address, per_address, token=token, per_player=per_player
            )
        except CodemojexError as exc:
            if kind == buckets.READ:
                log.warning("rate limiter failed (%s): letting a read through", exc)
                return True
            log.warning("rate limiter failed (%s): refusing a %s", exc, kind)
            await send_problem(send, 503, "unavailable", "the rate limiter is unavailable: try again", 1)
            return False
        if refused is None:
            return True
        message = f"too many {kind} requests from this {refused.scope}: retry in {refused.retry_after_s} s"
        await send_problem(send, 429, "rate_limited", message, refused.retry_after_s)
        return False

    @staticmethod
    async def _take(
        home: Game,
        theirs: Game | None,
        kind: str,
        address: str,
        per_address: Rate,
        *,
        token: str | None,
        per_player: Rate | None,
    ) -> buckets.Refused | None:
        """The request's buckets. On a spread host (``theirs``: the token's partition) the address's is
        in the ``home`` game whatever bearer header comes with it (else a made-up token of each
        partition's digest buys a fresh one in each: P times the limit), and the player's in their
        partition, taken first, so that a request the player's bucket refuses costs the address nothing
        (one call more than on one game). A guess's are both in the player's partition, as the one-call
        path's (README "Limits")."""
        if theirs is None or token is None or per_player is None:
            return await buckets.take(home, kind, address, per_address, token=token, per_player=per_player)
        if kind == buckets.GUESS:
            return await buckets.take(theirs, kind, address, per_address, token=token, per_player=per_player)
        refused = await buckets.take(theirs, kind, address, None, token=token, per_player=per_player)
        return refused or await buckets.take(home, kind, address, per_address)
