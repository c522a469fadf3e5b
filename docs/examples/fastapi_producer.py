"""A FastAPI producer: one Bus for the app's life, opened in its lifespan and closed at shutdown.

``POST /reports`` admits a job under the client's ``Idempotency-Key`` (a JOB id), or a fresh id: a
client that lost the answer sends the same request again and gets the same job (``duplicate``), never a
second one. ``GET /reports/{job}`` tells the job's state. Run it with
``REDIS_URL=redis://127.0.0.1:6379/0 uvicorn fastapi_producer:app``, and a worker of the same tag.
(``tests/docs/test_fastapi_recipe.py`` runs this file against a real redis-server.)
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import FastAPI, Header, HTTPException, Request

from echomq import Admission, Bus, InvalidInput, RedisUnavailable, UnknownJob, ids

LANE = "reports"


def create_app(redis_url: str, tag: str = "app") -> FastAPI:
    """The app, its bus on ``redis_url`` under ``tag`` (a worker of the same tag runs the jobs)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with Bus.from_url(redis_url, tag=tag) as bus:  # one client and pool for the app's life
            app.state.bus = bus
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/reports", status_code=202)
    async def request_report(
        request: Request, idempotency_key: Annotated[str | None, Header()] = None
    ) -> dict[str, str]:
        bus: Bus = request.app.state.bus
        job = idempotency_key or ids.mint("JOB")  # a client's retry reuses its key
        try:
            admission = await bus.enqueue(job, lane=LANE, payload=await request.body())
        except InvalidInput as exc:  # a bad key or payload: nothing was sent
            raise HTTPException(400, str(exc)) from exc
        except RedisUnavailable as exc:  # it may have run: the client sends the same request again
            raise HTTPException(503, "queue unavailable; send the same request again") from exc
        if admission is Admission.CONFLICT:  # that key was used for another request
            raise HTTPException(409, "Idempotency-Key reused for another request")
        return {"job": job, "admission": admission.value}  # admitted or duplicate: queued once

    @app.get("/reports/{job}")
    async def report_state(request: Request, job: str) -> dict[str, str]:
        bus: Bus = request.app.state.bus
        try:
            info = await bus.inspect(job)
        except InvalidInput as exc:
            raise HTTPException(400, str(exc)) from exc
        except UnknownJob as exc:  # never admitted, or trimmed after the dedup window
            raise HTTPException(404, "no such report") from exc
        return {"job": job, "state": info.state.value}

    return app


app = create_app(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
