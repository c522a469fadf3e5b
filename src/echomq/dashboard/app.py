"""The dashboard's web app (Starlette): one page of the queue, its JSON, and the two actions on a dead
letter, retry and delete.

Routes
======
* ``GET /``: the page, rendered on the server (:mod:`echomq.dashboard.view` reads the bus); a little
  script (``static/board.js``) swaps in ``GET /?fragment=1`` every few seconds. Without script the page
  still works: it is fresh at each load, and the actions are plain forms.
* ``GET /api/board``: the same data as JSON.
* ``POST /dead/<JOB>/retry`` and ``POST /dead/<JOB>/delete``: a form with the page's token; on success a
  303 back to the page, which says what was done.

Security
========
The dashboard has no login: serve it on a loopback address (the default) or behind a proxy that
authenticates. Within that, a page of another site cannot act on it: a POST must carry the token of
this process's pages (a page of another origin cannot read it) and, when the browser sends them, an
``Origin`` of this very origin and ``Sec-Fetch-Site: same-origin``; and the Host header must name the
address served or localhost (or an ``allowed_hosts`` entry), so a DNS-rebound name is refused before
it can read a token. Every response forbids framing and carries a Content-Security-Policy without inline
script or style. With ``read_only`` the buttons are not shown and both actions answer 403.

Hostile input: an ill-formed job id answers 400, an unknown one 404, a job that is not dead 409, a bad
token or origin 403; in each case nothing changed.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from echomq import ids
from echomq.dashboard.headers import SecurityHeaders
from echomq.dashboard.view import Throughput, read_board
from echomq.errors import EchoMQError, InvalidInput, InvalidOption, RedisUnavailable, UnknownJob
from echomq.keyspace import JOB_BRAND
from echomq.partitions import AnyBus
from echomq.states import Deletion

HERE = Path(__file__).parent
MAX_FORM = 4096  # bytes of a form body: a token, nothing else
DONE_MESSAGES = {
    "retried": "{job} is back in its lane.",
    "deleted": "{job} was deleted.",
    "already": "{job} was deleted already.",
}


class Refused(Exception):
    """A request refused before anything changed: its status and the reason shown."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _left(ms: int) -> str:
    return f"in {ms / 1000:.1f} s" if ms >= 0 else f"expired {-ms / 1000:.1f} s ago"


def _rate(value: float | None) -> str:
    return "\u2013" if value is None else f"{value:.1f}"  # an en dash: not read yet


class Dashboard:
    """The app's state: the bus, the page's token, the throughput's reads, the templates."""

    def __init__(self, bus: AnyBus, *, read_only: bool, refresh_s: float) -> None:
        self.bus = bus
        self.read_only = read_only
        self.refresh_ms = int(refresh_s * 1000)
        self.token = secrets.token_urlsafe(32)
        self.throughput = Throughput()
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True)
        )
        self.templates.filters.update(when=_when, left=_left, rate=_rate)

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.update(read_only=self.read_only, csrf=self.token, refresh_ms=self.refresh_ms)
        return HTMLResponse(self.templates.get_template(name).render(**context), status_code=status)

    async def page(self, request: Request) -> Response:
        board = await read_board(self.bus, self.throughput)
        if request.query_params.get("fragment") == "1":
            return self.render("board.html", board=board)
        return self.render("page.html", board=board, message=_message(request))

    async def board_json(self, request: Request) -> Response:
        return JSONResponse((await read_board(self.bus, self.throughput)).as_dict())

    async def retry(self, request: Request) -> Response:
        return await self.act(request, "retry")

    async def delete(self, request: Request) -> Response:
        return await self.act(request, "delete")

    async def act(self, request: Request, action: str) -> Response:
        if self.read_only:
            raise Refused(403, "This dashboard is read-only: retry and delete are off.")
        await self._check_origin(request)
        job = ids.check(request.path_params["job"], JOB_BRAND)
        if action == "retry":
            if await self.bus.retry_dead(job):
                return _back("retried", job)
        else:
            outcome = await self.bus.delete_dead(job)
            if outcome is not Deletion.REFUSED:
                return _back("deleted" if outcome is Deletion.DELETED else "already", job)
        state = (await self.bus.inspect(job)).state.value
        raise Refused(409, f"{job} is not dead (it is {state}): nothing changed.")

    async def _check_origin(self, request: Request) -> None:
        """Refuse a POST that is not this dashboard's own form (see the module doc)."""
        own = f"{request.url.scheme}://{request.url.netloc}"
        origin = request.headers.get("origin")
        if origin is not None and origin != own:
            raise Refused(403, "Refused: the request came from another site.")
        if request.headers.get("sec-fetch-site", "same-origin") != "same-origin":
            raise Refused(403, "Refused: the request came from another site.")
        if (
            request.headers.get("content-type", "").split(";")[0].strip()
            != "application/x-www-form-urlencoded"
        ):
            raise Refused(400, "Refused: the action is a form post.")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM:
                raise Refused(400, "Refused: the form is too large.")
        fields = urllib.parse.parse_qs(body.decode("latin-1"), max_num_fields=8)
        token = (fields.get("csrf") or [""])[0]
        if not hmac.compare_digest(token.encode("latin-1"), self.token.encode()):
            raise Refused(403, "Refused: the page's token is missing or stale; reload the page.")


def _message(request: Request) -> str | None:
    """The message of a 303 back from an action (``?did=retried&job=JOB...``), or None: only the fixed
    sentences, naming only a well-formed id, so a link cannot make the page say anything else."""
    did, job = request.query_params.get("did"), request.query_params.get("job", "")
    if did not in DONE_MESSAGES or not ids.is_valid(job, JOB_BRAND):
        return None
    return DONE_MESSAGES[did].format(job=job)


def _back(did: str, job: str) -> Response:
    return RedirectResponse(f"/?did={did}&job={job}", status_code=303)


def create_app(
    bus: AnyBus,
    *,
    read_only: bool = False,
    allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost", "[::1]"),
    refresh_s: float = 2.0,
    owns_bus: bool = False,
) -> Starlette:
    """The dashboard of ``bus`` as an ASGI app (serve it with uvicorn, or with
    :func:`echomq.dashboard.serve.serve`). ``allowed_hosts``: the Host names accepted (see the module
    doc). With ``owns_bus`` the app closes the bus when it shuts down (in the event loop that served it)."""
    if not 0.2 <= refresh_s <= 3600:
        raise InvalidOption(f"refresh_s is 0.2 to 3600 seconds, got {refresh_s!r}")
    board = Dashboard(bus, read_only=read_only, refresh_s=refresh_s)

    async def on_error(request: Request, exc: Exception) -> Response:
        status, reason = _status_of(exc)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": reason}, status_code=status)
        return board.render("error.html", status=status, reason=reason)

    routes = [
        Route("/", board.page),
        Route("/api/board", board.board_json),
        Route("/dead/{job}/retry", board.retry, methods=["POST"]),
        Route("/dead/{job}/delete", board.delete, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if owns_bus:
            await bus.aclose()

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
            Middleware(SecurityHeaders),
        ],
        exception_handlers={Refused: on_error, EchoMQError: on_error},
    )
    app.state.dashboard = board
    return app


def _status_of(exc: Exception) -> tuple[int, str]:
    if isinstance(exc, Refused):
        return exc.status, exc.reason
    if isinstance(exc, InvalidInput):
        return 400, f"Refused: {exc}. Nothing changed."
    if isinstance(exc, UnknownJob):
        return 404, f"{exc}. Nothing changed."
    if isinstance(exc, RedisUnavailable):
        return 503, f"Redis cannot be reached now: {exc}"
    return 500, f"{type(exc).__name__}: {exc}"
