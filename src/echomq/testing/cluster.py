"""A real Redis Cluster on loopback, of :class:`~echomq.testing.server.RedisProcess` nodes, for the tests, the
benchmark and the conformance suite."""

from __future__ import annotations

import time
from typing import Any

import redis

from echomq.testing.server import START_TIMEOUT_S, RedisProcess, ServerError, free_port


def _cluster(client: redis.Redis, *args: object) -> Any:
    return client.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]


class RedisClusterProcesses:
    """A real Redis Cluster of ``size`` primaries on loopback, slots split evenly, no replicas.

    Every node is a :class:`RedisProcess` with ``cluster-enabled yes``; the slots are assigned and the
    nodes introduced with CLUSTER ADDSLOTS and CLUSTER MEET, so no redis-cli is needed.
    """

    def __init__(self, size: int = 3) -> None:
        ports: list[int] = []
        while len(ports) < size:  # distinct nodes, and no node on another node's cluster-bus port
            port = free_port(highest=55535)
            if not {port, port + 10000} & {p for q in ports for p in (q, q + 10000)}:
                ports.append(port)
        self.nodes = [
            RedisProcess(
                port=port,
                appendonly=False,
                extra=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            )
            for port in ports
        ]

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def start(self) -> RedisClusterProcesses:
        """Start the nodes, split the 16384 slots among them, and wait until the cluster is ok."""
        for node in self.nodes:
            node.start()
        try:
            self._form()
        except BaseException:
            self.close()
            raise
        return self

    def _form(self) -> None:
        clients = [redis.Redis(port=port) for port in self.ports]
        try:
            share = 16384 // len(clients)
            for i, client in enumerate(clients):
                last = 16383 if i == len(clients) - 1 else (i + 1) * share - 1
                _cluster(client, "ADDSLOTS", *range(i * share, last + 1))
                # Distinct config epochs from the start, as redis-cli --cluster create sets them: left
                # at 0, the nodes settle their collision by gossip after cluster_state:ok, and a slot
                # moved meanwhile can fall back to its old owner (the target did not outrank it).
                _cluster(client, "SET-CONFIG-EPOCH", i + 1)
            for client in clients[1:]:
                _cluster(client, "MEET", "127.0.0.1", self.ports[0])
            deadline = time.monotonic() + START_TIMEOUT_S * 3
            while not all(b"cluster_state:ok" in _cluster(client, "INFO") for client in clients):
                if time.monotonic() > deadline:
                    raise ServerError("the cluster did not reach cluster_state:ok in time")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> RedisClusterProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
