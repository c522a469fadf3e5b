"""Browser hardening: the security headers of every answer, and the API docs served without a CDN.

:class:`SecurityHeaders` (a pure ASGI middleware) adds to every response, pages, API answers, errors and
``/static`` alike:

* ``Content-Security-Policy``: :data:`STRICT_CSP`. Scripts and styles only from this origin (no inline
  ``<script>``, no ``style="..."`` attribute), no plugins, no ``<base>``, and ``frame-ancestors 'none'``;
* ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer``.

``/docs`` is Swagger UI 5 from the files of the installed ``fastapi-offline`` package (its JS and CSS
under ``/docs/assets``; ``swagger-ui-bundle`` ships Swagger UI 4, which cannot render OpenAPI 3.1),
started by the one inline script of FastAPI's ``get_swagger_ui_html``: that page, and only it, has a CSP
that also allows that one script by its SHA-256 hash (:func:`docs_policy`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DOCS = "/docs"
DOCS_ASSETS = "/docs/assets"
# Swagger UI's files (and ReDoc's, unused: it styles itself with inline <style>) in fastapi-offline.
SWAGGER_UI = Path(str(resources.files("fastapi_offline") / "static"))

_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",  # data: for the pages' empty favicon and Swagger UI's icons
    "connect-src": "'self'",
    "font-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def policy(**override: str) -> str:
    """The CSP header value: :data:`_POLICY` with some directives replaced (``script_src=...``)."""
    directives = _POLICY | {name.replace("_", "-"): value for name, value in override.items()}
    return "; ".join(f"{name} {value}" for name, value in directives.items())


STRICT_CSP = policy()
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)


class SecurityHeaders:
    """Adds :data:`HEADERS` and a CSP (:data:`STRICT_CSP` unless the route set its own) to every answer.

    An exception no handler answered gets its 500 here, with the headers (Starlette's own 500 is sent
    outside every middleware), and goes on up to be logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [
                    (name, value) for name, value in message.get("headers", []) if name.lower() not in _SET
                ]
                has_csp = any(name.lower() == b"content-security-policy" for name, _ in headers)
                headers += HEADERS
                if not has_csp:
                    headers.append((b"content-security-policy", _STRICT_CSP))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            if not started:
                await PlainTextResponse("Internal Server Error", 500)(scope, receive, send_with_headers)
            raise


_SET = {name for name, _ in HEADERS}
_STRICT_CSP = STRICT_CSP.encode()


def script_hash(html: str) -> str:
    """The CSP source of the page's one inline script: ``'sha256-<base64>'``."""
    inline = re.findall(r"<script>(.*?)</script>", html, flags=re.DOTALL)
    if len(inline) != 1:
        raise RuntimeError(f"the Swagger UI page has {len(inline)} inline scripts, expected 1")
    digest = hashlib.sha256(inline[0].encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def docs_policy(html: str) -> str:
    return policy(script_src=f"'self' {script_hash(html)}")


def add_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the package, same-origin only (the app is made with ``docs_url=None``)."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=SWAGGER_UI), name="docs-assets")

    @app.get(DOCS, include_in_schema=False)
    async def docs() -> HTMLResponse:
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} · API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )
        html = bytes(page.body).decode().replace("<html>", '<html lang="en">', 1)  # for screen readers
        headers = {"Content-Security-Policy": docs_policy(html), "Cache-Control": "no-cache"}
        return HTMLResponse(html, headers=headers)
