"""The web fixtures: the real app served by uvicorn on a free port (real HTTP), a real score worker
process, and helpers that speak the API the way a client does.

``served`` starts the app in a thread of its own (its own event loop), on the session's redis-server under
the test's own tag, so every request goes through a socket, uvicorn, the middleware and the routes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import uvicorn

from codemojex import faults, proof
from codemojex.game import GameSettings
from codemojex.keys import GameKeys
from codemojex.web import HostConfig, create_app
from echomq.testing.server import free_port

ROOT = Path(__file__).resolve().parents[2]
OPERATOR = "operator-token-of-the-tests"
FRUIT = ["🍎", "🍌", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥"]


class Served:
    """The app on 127.0.0.1:``port``, served by uvicorn in a background thread."""

    def __init__(self, config: HostConfig) -> None:
        self.config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(config)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                lifespan="on",
                proxy_headers=False,  # as serve: the ASGI peer is the client (admission trusts proxies)
                timeout_graceful_shutdown=2,  # an event stream a test left open
            )
        )
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def start(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        assert not self.thread.is_alive(), "the app did not stop"

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=10, **kwargs)


@pytest.fixture
def host_config(redis_server, tag) -> HostConfig:
    """The app's configuration for this test: its own tag, the operator token, the proof and its crash
    button on (the demo bus of the proof is ``<tag>.proof``: :func:`codemojex.proof.demo_tag`)."""
    return HostConfig(
        redis_url=redis_server.url,
        tag=tag,
        operator_token=OPERATOR,
        proof=True,
        proof_crash=True,
        sample_every_s=0.2,
    )


@pytest.fixture
def serve_app() -> Iterator[Callable[[HostConfig], Served]]:
    """Serve an app of a given configuration (stopped at the end of the test)."""
    started: list[Served] = []

    def serve(config: HostConfig) -> Served:
        served = Served(config).start()
        started.append(served)
        return served

    yield serve
    for served in started:
        served.stop()


@pytest.fixture
def served(serve_app, host_config) -> Served:
    return serve_app(host_config)


@pytest.fixture
def anon(served) -> Iterator[httpx.Client]:
    with served.client() as client:
        yield client


@pytest.fixture
def operator(served) -> Iterator[httpx.Client]:
    with served.client(OPERATOR) as client:
        yield client


def with_settings(config: HostConfig, **settings: Any) -> HostConfig:
    return dataclasses.replace(config, settings=GameSettings(**settings))


@pytest.fixture
def join(served) -> Iterator[Callable[..., tuple[str, httpx.Client]]]:
    """Register a player: ``join(name)`` gives their id and a client that sends their token (closed at
    the end of the test); ``join(name, served=other)`` on another served app."""
    clients: list[httpx.Client] = []

    def register(name: str = "Ada", *, on: Served | None = None) -> tuple[str, httpx.Client]:
        target = on or served
        with target.client() as client:
            reply = client.post("/api/players", json={"name": name})
        assert reply.status_code == 201, reply.text
        body = reply.json()
        clients.append(target.client(body["token"]))
        return body["player_id"], clients[-1]

    yield register
    for client in clients:
        client.close()


def open_round(operator: httpx.Client, **spec: Any) -> dict[str, Any]:
    spec.setdefault("keyboard", FRUIT)
    reply = operator.post("/api/operator/rounds", json=spec)
    assert reply.status_code == 201, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def demo_round(url: str, tag: str) -> str:
    """Open the proof's demo round beside the game of ``tag`` (as ``codemojex serve`` does); its id."""
    async with proof.demo_game(url, tag) as demo:
        return (await proof.ensure_round(demo)).id


def open_demo_round(url: str, tag: str) -> str:
    """:func:`demo_round`, run on a loop of its own."""
    result: str = run(demo_round(url, tag))
    return result


def secret_of(sync_redis: redis.Redis, tag: str, round_id: str) -> list[str]:
    """The test peeks at the secret (the host never does while the round is open)."""
    raw = sync_redis.get(GameKeys(tag).secret(round_id))
    assert raw is not None
    value: list[str] = json.loads(raw)
    return value


def error_code(reply: httpx.Response) -> str:
    code: str = reply.json()["error"]["code"]
    return code


def wait_until(predicate: Callable[[], Any], timeout: float = 20, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.05)


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a setup coroutine (a Bus or Game call) on a loop of its own."""
    return asyncio.run(coroutine)


def worker_process(
    url: str,
    tag: str,
    *,
    armed: bool = False,
    lease_ms: int = 1500,
    url_in_env: bool = False,
    partitions: int = 0,
    cluster: bool = False,
) -> subprocess.Popen[str]:
    """A real ``codemojex worker`` process; ``armed`` arms the proof's requested crash; ``url_in_env``
    gives it the URL (with a password) as ``REDIS_URL``, not on its command line, as serve does;
    ``partitions``: the worker of a spread game of that many partitions (``cluster``: on a cluster)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop(faults.ENV, None)
    if armed:
        env[faults.ENV] = faults.REQUESTED
    argv = [sys.executable, "-m", "codemojex.cli", "--tag", tag, "--log-level", "WARNING"]
    argv += ["--cluster"] if cluster else []
    if url_in_env:
        env["REDIS_URL"] = url
    else:
        argv[3:3] = ["--redis-url", url]
    argv += [
        "worker",
        "--concurrency",
        "4",
        "--lease-ms",
        str(lease_ms),
        "--sweep-every",
        "0.3",
        "--grace",
        "2",
        *(["--partitions", str(partitions)] if partitions else []),
    ]
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_worker(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
    process.communicate(timeout=10)


@pytest.fixture
def score_worker(redis_server, tag) -> Iterator[subprocess.Popen[str]]:
    """One real score worker process on the test's tag."""
    process = worker_process(redis_server.url, tag)
    yield process
    stop_worker(process)


@pytest.fixture
def demo_worker(redis_server, tag) -> Iterator[subprocess.Popen[str]]:
    """One real score worker process on the proof's demo bus (not armed to crash)."""
    process = worker_process(redis_server.url, proof.demo_tag(tag))
    yield process
    stop_worker(process)


def game_state(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A key snapshot without the admission bookkeeping every request moves (the rate limits' buckets):
    what a request changed of the game's state is what is left."""
    return {key: value for key, value in snapshot.items() if ":bucket:" not in key}


async def dead_letter(url: str, tag: str, round_id: str, player_id: str, job_id: str, error: str) -> None:
    """Put one guess job of ``player_id`` in ``round_id`` on the dead-letter list (enqueued, claimed and
    failed for good with ``error``), as the score worker would after its last try."""
    from codemojex.payload import encode_payload  # noqa: PLC0415
    from echomq import Bus  # noqa: PLC0415

    async with Bus.from_url(url, tag) as bus:
        await bus.enqueue(job_id, lane=player_id, payload=encode_payload(round_id, player_id, ["🍎"] * 6))
        [claim] = await bus.claim(1)
        await bus.fail(claim, error, retryable=False)
