"""The app: routers, error handlers, the body limit, the pages, and a lifespan that owns the Game.

The three pages are Jinja2 templates (``templates/``) that extend one ``base.html`` (head, nav, main
column); their scripts and the style sheet are served as they are from ``static/``. Every answer carries
the browser hardening headers of :mod:`codemojex.web.headers` (a strict CSP: no inline script or style).

``create_app(HostConfig(redis_url=...))`` is all a deployment needs (``uvicorn`` runs it); the Game's
client, the events hub and the throughput sampler are created in the lifespan, on the server's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import redis.exceptions
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from codemojex import proof
from codemojex.errors import CodemojexError, Unavailable
from codemojex.game import Game, translate_errors
from codemojex.spread import SpreadGame
from codemojex.web import (
    account_api,
    events,
    history_api,
    metrics,
    operator_api,
    player_api,
    problems,
    proof_api,
    recovery_api,
    schemas,
    token_api,
)
from codemojex.web.admission import Admission
from codemojex.web.headers import SecurityHeaders, add_docs
from codemojex.web.host import Host, HostConfig, host_of
from codemojex.web.hub import Hub
from codemojex.web.limits import BodyLimit
from codemojex.web.throughput import Sampler
from echomq.errors import EchoMQError

__all__ = ["HostConfig", "create_app"]

log = logging.getLogger("codemojex.web")

STATIC = Path(str(resources.files("codemojex.web") / "static"))
TEMPLATES = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(str(resources.files("codemojex.web") / "templates"))),
        autoescape=True,
        keep_trailing_newline=True,  # a page ends with its newline, as its file does
    )
)
PAGES = {
    "/": "play.html",
    "/history": "history.html",
    "/proof": "proof.html",
    "/dashboard": "dashboard.html",
}  # each extends base.html


def create_app(config: HostConfig) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        spread, game, readers = _games(config)
        demo = None
        if config.proof:  # the proof's own demo game: its own bus, round and worker (codemojex.proof)
            demo = proof.demo_game(
                config.redis_url, config.tag, caller_cap=config.proof_caller_cap, cluster=config.cluster
            )
        hub = Hub(game, limits=config.limits, spread=spread, readers=readers)  # streams on their own
        host = Host(
            config,
            game,
            hub,
            Sampler(game, config.sample_every_s, spread.pbus if spread else None),
            demo,
            spread,
        )
        app.state.host = host
        try:
            if spread is not None:
                await _check_layout(spread)
            host.sampler.start()
            yield
        finally:
            await host.hub.close()
            await host.sampler.stop()
            await (game if spread is None else spread).aclose()
            if demo is not None:
                await demo.aclose()

    app = FastAPI(
        title="Codemojex",
        summary="Crack the six-emoji code: a game on EchoMQ, exactly once in effect.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served by headers.add_docs, from the package, no CDN
        redoc_url=None,  # ReDoc styles itself with inline <style> elements: not under the strict CSP
    )
    app.add_middleware(BodyLimit, limit=config.body_limit)
    app.add_middleware(  # rates, requests in flight, body upload time
        Admission,
        limits=config.limits,
        pool_size=config.max_connections,
        operator_token=config.operator_token,
        body_limit=config.body_limit,
    )
    app.add_middleware(SecurityHeaders)  # added last, so outermost: its headers are on every answer
    app.add_exception_handler(problems.Problem, problems.on_problem)
    app.add_exception_handler(CodemojexError, problems.on_game_error)
    app.add_exception_handler(EchoMQError, problems.on_foreign_error)
    app.add_exception_handler(redis.exceptions.RedisError, problems.on_foreign_error)
    app.add_exception_handler(RequestValidationError, problems.on_malformed)
    app.add_exception_handler(StarletteHTTPException, problems.on_http)
    for router in (
        account_api.router,
        player_api.router,
        operator_api.router,
        proof_api.router,
        events.router,
        metrics.router,
        token_api.router,
        history_api.router,
        recovery_api.router,
    ):
        app.include_router(router)

    @app.get("/healthz", tags=["health"], response_model=schemas.HealthOut, responses=problems.answers())
    async def healthz(request: Request) -> dict[str, Any]:
        with translate_errors():
            await host_of(request).game.redis.ping()
        return {"ok": True}

    for path, page in PAGES.items():
        app.add_api_route(path, _page(page), include_in_schema=False, methods=["GET"])
    app.mount("/static", _Static(directory=STATIC), name="static")
    add_docs(app)
    return app


def _games(config: HostConfig) -> tuple[SpreadGame | None, Game, list[Game]]:
    """The spread game (None for one game), the home game, and the hub's readers: one Game on a
    one-connection pool per partition (every event stream read on one connection of its own)."""
    spread = None
    if config.partitions > 1:
        spread = SpreadGame.from_url(
            config.redis_url, config.tag, config.partitions, config.settings, config.bus_settings,
            cluster=config.cluster, max_connections=config.max_connections,
        )  # fmt: skip
        game = spread.games[0]
    else:
        game = Game.from_url(
            config.redis_url, config.tag, config.settings, config.bus_settings,
            cluster=config.cluster, max_connections=config.max_connections,
        )  # fmt: skip
    tags = [config.tag] if spread is None else [part.bus.tag for part in spread.games]
    readers = [
        Game.from_url(config.redis_url, tag, cluster=config.cluster, max_connections=1) for tag in tags
    ]
    return spread, game, readers


async def _check_layout(spread: SpreadGame) -> None:
    """A host of another P than the game's partitions were made with does not start (InvalidOption); one
    whose Redis cannot be reached yet starts (its sign-ups and rounds check the layout first)."""
    try:
        await spread.check_layout()
    except Unavailable as exc:
        log.warning("the partitions' layout could not be checked at start: %s", exc)


class _Static(StaticFiles):
    """The pages' scripts and styles, revalidated on each load (ETag), so an upgrade is seen at once."""

    def file_response(self, *args: Any, **kwargs: Any) -> Any:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


def _page(name: str) -> Any:
    async def page(request: Request) -> HTMLResponse:
        return TEMPLATES.TemplateResponse(request, name, headers={"Cache-Control": "no-cache"})

    page.__name__ = f"page_{name.split('.', maxsplit=1)[0]}"
    return page
