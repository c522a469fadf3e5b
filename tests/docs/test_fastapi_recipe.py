"""The FastAPI recipe of the documentation site (docs/examples/fastapi_producer.py, shown by
docs/site/recipes/fastapi.md) runs as written: its app, in its own lifespan, against a real redis-server,
over httpx. A retried request is one job, a reused key is refused, bad input changes nothing, a worker's
claim gets the job, and an unreachable Redis is a 503 whose retry is answered truthfully."""

import importlib.util
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from echomq import Bus, ids
from echomq.testing.server import RedisProcess

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "fastapi_producer.py"


def load_recipe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_producer", RECIPE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def post(client, body: bytes, key: str | None = None) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return await client.post("/reports", content=body, headers=headers)


async def test_a_retried_request_is_one_job_that_a_worker_claims(redis_server, tag, bus):
    """The same request twice (a client that lost the answer) is admitted, then duplicate: one job."""
    app = load_recipe().create_app(redis_server.url, tag=tag)
    key = ids.mint("JOB")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://recipe") as client:
            first = await post(client, b"monthly", key)
            again = await post(client, b"monthly", key)
            assert (first.status_code, first.json()) == (202, {"job": key, "admission": "admitted"})
            assert (again.status_code, again.json()) == (202, {"job": key, "admission": "duplicate"})
            assert (await client.get(f"/reports/{key}")).json() == {"job": key, "state": "queued"}

            claims = await bus.claim(count=10, lease_ms=10_000)
            assert [(c.job, c.lane, c.payload) for c in claims] == [(key, "reports", b"monthly")]
            assert (await client.get(f"/reports/{key}")).json() == {"job": key, "state": "active"}


async def test_a_request_without_a_key_gets_a_fresh_job_each_time(redis_server, tag, bus):
    """Without an Idempotency-Key each request is a job of its own, under a minted JOB id."""
    app = load_recipe().create_app(redis_server.url, tag=tag)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://recipe") as client:
            jobs = [(await post(client, b"weekly")).json()["job"] for _ in range(3)]
    assert len(set(jobs)) == 3
    assert all(ids.is_valid(job, "JOB") for job in jobs)
    assert (await bus.stats()).queued == 3


async def test_a_reused_key_and_bad_input_are_refused_and_change_nothing(redis_server, tag, bus):
    """A key reused for another body is 409, an ill-formed key 400, an unknown job 404; the queue holds
    only the first job, unchanged."""
    app = load_recipe().create_app(redis_server.url, tag=tag)
    key = ids.mint("JOB")
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://recipe") as client:
            assert (await post(client, b"monthly", key)).status_code == 202
            assert (await post(client, b"yearly", key)).status_code == 409
            assert (await post(client, b"monthly", "not-a-job-id")).status_code == 400
            assert (await client.get("/reports/not-a-job-id")).status_code == 400
            assert (await client.get(f"/reports/{ids.mint('JOB')}")).status_code == 404
    assert (await bus.stats()).queued == 1
    assert (await bus.inspect(key)).payload == b"monthly"


async def test_an_unreachable_redis_is_a_503_and_the_request_sent_again_is_one_job(tag):
    """With Redis down the POST answers 503 and changes nothing; sent again once Redis is back it admits
    the job, and once more it is a duplicate: one job."""
    server = RedisProcess(appendonly=True, appendfsync="always")
    server.start()
    try:
        app = load_recipe().create_app(server.url, tag=tag)
        key = ids.mint("JOB")
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://recipe") as client:
                server.stop()
                down = await post(client, b"monthly", key)
                assert down.status_code == 503
                server.start()
                back = await post(client, b"monthly", key)
                assert (back.status_code, back.json()["admission"]) == (202, "admitted")
                again = await post(client, b"monthly", key)
                assert (again.status_code, again.json()["admission"]) == (202, "duplicate")
        async with Bus.from_url(server.url, tag=tag) as bus:
            assert (await bus.stats()).queued == 1
    finally:
        server.close()


@pytest.mark.parametrize("name", ["fastapi_producer.py", "django_producer.py"])
def test_each_recipe_page_shows_its_example_file(name):
    """The recipe pages include the example files themselves (pymdownx.snippets), not a copy."""
    pages = Path(__file__).resolve().parents[2] / "docs" / "site" / "recipes"
    assert any(f'--8<-- "{name}"' in page.read_text() for page in pages.glob("*.md"))
