"""The dashboard served for real: ``echomq.dashboard.app`` on uvicorn in a thread of its own (its own
event loop, where its bus lives and is closed), on a free loopback port."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import uvicorn

from echomq import Bus, PartitionedBus
from echomq.dashboard.app import create_app
from echomq.testing.server import free_port


class ServedDashboard:
    """The dashboard of the bus ``tag`` on ``url`` at ``self.url`` (``partitions``: a partitioned bus)."""

    def __init__(self, redis_url: str, tag: str, *, partitions: int = 0, **options: Any) -> None:
        bus = (
            PartitionedBus.from_url(redis_url, tag=tag, partitions=partitions)
            if partitions
            else Bus.from_url(redis_url, tag=tag)
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(bus, owns_bus=True, **options)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="dashboard", daemon=True)

    @property
    def token(self) -> str:
        """The token the pages carry (what a same-origin form posts)."""
        return str(self.app.state.dashboard.token)

    def start(self) -> ServedDashboard:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the dashboard did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        assert not self.thread.is_alive(), "the dashboard did not stop"

    def client(self, **options: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=10, **options)
