"""The gateway's terminal channel (docs/gateway.md) as an async byte stream: `write()` goes to the pty as
binary messages, `read()` answers what the pty printed, unmodified (no text decoding anywhere)."""
from __future__ import annotations

import asyncio
import json

from websockets.legacy.client import WebSocketClientProtocol
from websockets.exceptions import ConnectionClosed

REASONS = {
    4409: "the terminal already has a client attached",
    4404: "the terminal does not exist or has exited",
    4503: "the machine's agent is unreachable (stopped, restarting or restored)",
    4401: "the credential is no longer valid",
    4403: "permission denied",
    1001: "the server is shutting down",
}


class TerminalClosedError(Exception):
    """The socket closed without the pty exiting (4409 another client, 4503 machine unreachable, 4404 gone …)."""

    def __init__(self, close_code: int, reason: str = "") -> None:
        super().__init__(reason or REASONS.get(close_code, f"the terminal channel closed ({close_code})"))
        self.close_code = close_code


class TerminalStream:
    """A pty attached over the gateway. `read()` answers b"" at the end; `wait()` the remote program's exit
    status (None when it ended without one, e.g. killed) or raises TerminalClosedError for any other close;
    `detach()` leaves the pty running (it replays later output to the next client)."""

    def __init__(self, ws: WebSocketClientProtocol) -> None:
        self.ws = ws
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._exit_code: int | None = None
        self._exited = False
        self._outcome: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        # A caller reading only the output must not get an 'exception never retrieved' warning.
        self._outcome.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        code, reason = 1006, ""
        try:
            async for msg in self.ws:
                if isinstance(msg, bytes):
                    self._chunks.put_nowait(msg)
                    continue
                try:
                    m = json.loads(msg)
                except ValueError:
                    continue
                if isinstance(m, dict) and m.get("type") == "exit":
                    self._exited = True
                    self._exit_code = m["exit_code"] if isinstance(m.get("exit_code"), int) else None
            code, reason = self.ws.close_code or 1000, self.ws.close_reason or ""
        except ConnectionClosed as e:
            code, reason = (e.rcvd.code, e.rcvd.reason) if e.rcvd is not None else (1006, "")
        finally:
            self._chunks.put_nowait(b"")
            if code == 1000 and self._exited:
                self._outcome.set_result(self._exit_code)
            else:
                self._outcome.set_exception(TerminalClosedError(code, reason))

    async def read(self) -> bytes:
        """The next output chunk as it arrived; b"" once the channel has closed."""
        chunk = await self._chunks.get()
        if chunk == b"":
            self._chunks.put_nowait(b"")
        return chunk

    def __aiter__(self) -> TerminalStream:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.read()
        if chunk == b"":
            raise StopAsyncIteration
        return chunk

    async def write(self, data: bytes | str) -> None:
        await self.ws.send(data.encode() if isinstance(data, str) else data)

    async def resize(self, cols: int, rows: int) -> None:
        await self.ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    async def wait(self) -> int | None:
        return await asyncio.shield(self._outcome)

    async def detach(self) -> None:
        await self.ws.close(1000)
        await self._reader
