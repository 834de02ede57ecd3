"""Test helpers: `until` (bounded polling) and a TCP relay on 127.0.0.1 whose `drop()` cuts every connection it carries, as a network failure would
(tests the events stream's resume). Runs on its own loop thread, so sync and async tests can use it."""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from computer import ComputerError

T = TypeVar("T")


class Relay:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.accepted = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        self._server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop).result()
        self.port: int = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def drop(self) -> None:
        """Aborts every connection (RST, no close handshake)."""

        def abort() -> None:
            for w in self._writers:
                w.transport.abort()
            self._writers.clear()

        self._loop.call_soon_threadsafe(abort)

    def close(self) -> None:
        self.drop()
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)

def until(what: str, fn: Callable[[], T | None], tries: int = 240, every: float = 0.5) -> T:
    """Polls `fn` until it answers non-None (bounded: tries x every seconds)."""
    for _ in range(tries):
        try:
            v = fn()
        except ComputerError:
            v = None
        if v is not None:
            return v
        time.sleep(every)
    raise AssertionError(f"gave up waiting for {what}")
