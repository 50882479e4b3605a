"""Bytes over RPC: a counting TCP relay in front of each server, and the benchmark's fields.

The benchmark's engine connects to a local relay instead of the server; the relay copies
both directions unchanged (TCP_NODELAY on both legs, as llama.cpp sets it) and counts the
bytes. ``attach`` wraps a ``Bench``'s engine ``prepare`` and its from-scratch recompute,
so each event line can say what its restore sent over the network, and what a recompute
of the same prompt on the same split would have sent.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Traffic:
    sent: int = 0
    """Bytes from this machine to the servers (weights, restored state, activations)."""
    received: int = 0

    def __sub__(self, other: Traffic) -> Traffic:
        return Traffic(self.sent - other.sent, self.received - other.received)


class CountingRelay:
    """Listens on 127.0.0.1 and relays every connection to ``upstream``, counting bytes."""

    def __init__(self, upstream: str):
        host, _, port = upstream.partition(":")
        self.upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._sent = self._received = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def totals(self) -> Traffic:
        with self._lock:
            return Traffic(self._sent, self._received)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, outgoing: bool) -> None:
        try:
            while data := src.recv(1 << 20):
                dst.sendall(data)
                with self._lock:
                    if outgoing:
                        self._sent += len(data)
                    else:
                        self._received += len(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()


class RpcTraffic:
    """Relays for a list of servers, and the per-event figures of the benchmark."""

    def __init__(self, upstreams: list[str]):
        self.relays = [CountingRelay(u) for u in upstreams]
        self.prepare = Traffic()
        self.scratch = Traffic()

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(r.endpoint for r in self.relays)

    def totals(self) -> Traffic:
        sent = sum(r.totals().sent for r in self.relays)
        return Traffic(sent, sum(r.totals().received for r in self.relays))

    def attach(self, bench) -> None:
        """Count the bytes of each ``prepare`` of the bench's engine and of its recomputes."""
        engine, scratch = bench.ctl.engine, bench.scratch

        def prepare(*args, **kwargs):
            before = self.totals()
            try:
                return type(engine).prepare(engine, *args, **kwargs)
            finally:
                self.prepare = self.totals() - before

        def recompute(leaf_id: int):
            before = self.totals()
            try:
                return scratch(leaf_id)
            finally:
                self.scratch = self.totals() - before

        engine.prepare = prepare
        bench.scratch = recompute

    def fields(self) -> dict:
        """What the last reply's prepare and the last recompute sent and received."""
        return {"rpc_prepare_bytes_sent": self.prepare.sent, "rpc_prepare_bytes_received": self.prepare.received,
                "rpc_scratch_bytes_sent": self.scratch.sent, "rpc_scratch_bytes_received": self.scratch.received}

    def close(self) -> None:
        for relay in self.relays:
            relay.close()
