"""Browser hardening: every answer carries the security headers, and /docs is served without a CDN."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import httpx
import pytest

from codemojex.web.headers import STRICT_CSP, SecurityHeaders
from tests.support.web import ROOT, error_code, run

HARDENING = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def assert_hardened(reply, csp: str = STRICT_CSP) -> None:
    for name, value in HARDENING.items():
        assert reply.headers.get(name) == value, name
    assert reply.headers.get("content-security-policy") == csp


def directives(csp: str) -> dict[str, str]:
    return dict(part.strip().split(" ", 1) for part in csp.split(";"))


def test_the_strict_policy_allows_no_inline_script_or_style_and_no_framing():
    policy = directives(STRICT_CSP)
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["default-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["object-src"] == "'none'"
    assert "unsafe" not in STRICT_CSP


@pytest.mark.parametrize("path", ["/", "/proof", "/dashboard"])
def test_every_page_is_hardened(anon, path):
    reply = anon.get(path)
    assert reply.status_code == 200
    assert_hardened(reply)
    assert "style=" not in reply.text  # style-src 'self' refuses style attributes
    assert not re.search(r"<script(?![^>]*\bsrc=)", reply.text)  # no inline script


def test_an_api_answer_an_error_answer_and_a_static_file_are_hardened(anon, join):
    _, ada = join("Ada")
    assert_hardened(ada.get("/api/me"))
    missing = anon.get("/api/rounds/RND00000000000000000000000")
    assert missing.status_code == 404
    assert_hardened(missing)
    unauthorized = anon.get("/api/me")
    assert unauthorized.status_code == 401
    assert_hardened(unauthorized)
    no_route = anon.get("/no/such/path")
    assert error_code(no_route) == "not_found"
    assert_hardened(no_route)
    for asset in ("/static/style.css", "/static/play.js"):
        reply = anon.get(asset)
        assert reply.status_code == 200
        assert_hardened(reply)


def test_a_body_over_the_limit_is_refused_with_the_headers_too(anon):
    reply = anon.post("/api/players", content=b"x" * 100_000, headers={"content-type": "application/json"})
    assert reply.status_code == 413
    assert_hardened(reply)


def test_the_docs_load_only_same_origin_urls_and_each_answers(anon, served):
    reply = anon.get("/docs")
    assert reply.status_code == 200
    html = reply.text
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html) + re.findall(r"url: '([^']+)'", html)
    assert urls
    for url in urls:
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("", ""), url  # same origin: a path, no host
        assert anon.get(url).status_code == 200, url
    policy = directives(reply.headers["content-security-policy"])
    assert re.fullmatch(r"'self' 'sha256-[A-Za-z0-9+/]+=*'", policy["script-src"])  # its one inline script
    assert policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    for name, value in HARDENING.items():
        assert reply.headers[name] == value


def test_redoc_is_not_served_since_it_needs_inline_styles(anon):
    assert anon.get("/redoc").status_code == 404


def test_the_api_document_states_the_policy_the_host_sends():
    assert f"`{STRICT_CSP}`" in (ROOT / "docs" / "http-api.md").read_text()


def test_an_unexpected_500_is_hardened_too():
    async def broken(scope, receive, send):
        raise RuntimeError("a bug")

    async def get():
        transport = httpx.ASGITransport(app=SecurityHeaders(broken), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://host") as client:
            return await client.get("/")

    reply = run(get())
    assert reply.status_code == 500
    assert_hardened(reply)
