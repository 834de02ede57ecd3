"""The gateway's WebSocket channels (docs/gateway.md): the handshake they share (a refusal is the API's error
envelope, raised as ComputerError), screen frames as an async iterator, and events that resume from their
cursor after a cut connection."""
from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from websockets.legacy.client import WebSocketClientProtocol, connect
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed

from ._errors import ComputerError, error_from_body

T = TypeVar("T")

# Close codes (shared/schemas/gateway.ts CLOSE_CODES).
NORMAL = frozenset({1000, 1001, 1005})
FINAL = frozenset({4401, 4403, 4404})
MAX_MESSAGE = 64 * 1024 * 1024
MAX_REFUSAL = 64 * 1024


class ChannelClosedError(Exception):
    """The socket closed other than normally (4401 revoked key, 4404 deleted machine, 4503 unreachable, or a
    cut connection: 1006)."""

    def __init__(self, close_code: int, reason: str = "") -> None:
        super().__init__(reason or f"the channel closed ({close_code})")
        self.close_code = close_code


class _Protocol(WebSocketClientProtocol):
    """Reads the body of a refused handshake, so the refusal is raised as the envelope it carries."""

    async def read_http_response(self) -> tuple[int, Headers]:
        status, headers = await super().read_http_response()
        if status != 101:
            length = int(headers.get("Content-Length", "0") or "0")
            body = await asyncio.wait_for(self.reader.readexactly(length), 30) if 0 < length <= MAX_REFUSAL else b""
            raise error_from_body(status, body)
        return status, headers


def _protocol(*args: Any, **kw: Any) -> WebSocketClientProtocol:
    return _Protocol(*args, **kw)


async def open_channel(url: str, headers: Mapping[str, str]) -> WebSocketClientProtocol:
    ws: WebSocketClientProtocol = await connect(url, extra_headers=dict(headers), compression=None, max_size=MAX_MESSAGE, create_protocol=_protocol)
    return ws


def close_error(e: ConnectionClosed) -> ChannelClosedError | None:
    code = e.rcvd.code if e.rcvd is not None else 1006
    return None if code in NORMAL else ChannelClosedError(code, e.rcvd.reason if e.rcvd is not None else "")


class _Pull(Generic[T]):
    """The pull side both iterators share: `_take()` hands over what waits; `_finish()` ends the iteration
    (raising `error`, or a plain end) once nothing waits any more. `async with` closes it on the way out."""

    def __init__(self) -> None:
        self._wake = asyncio.Event()
        self._ended = False
        self._error: BaseException | None = None

    def _take(self) -> T | None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def _finish(self, error: BaseException | None) -> None:
        if not self._ended:
            self._ended, self._error = True, error
        self._wake.set()

    def __aiter__(self) -> _Pull[T]:
        return self

    async def __anext__(self) -> T:
        while True:
            v = self._take()
            if v is not None:
                return v
            if self._ended:
                if self._error is not None:
                    raise self._error
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()

    async def __aenter__(self) -> _Pull[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(frozen=True)
class ScreenFrame:
    image: bytes
    """One complete encoded image."""
    format: Literal["jpeg", "webp"]
    width: int
    height: int


class ScreenStream(_Pull[ScreenFrame]):
    """Screen frames. Only the newest unread frame waits for a slow consumer (older ones are replaced and
    counted in `dropped`), so a loop sees the current screen, never a backlog. `status` is the last status
    message (desktop up/down, size). Ends on `aclose()` or a normal close; any other close (a cut
    connection too) raises ChannelClosedError."""

    def __init__(self, ws: WebSocketClientProtocol, on_status: Callable[[dict[str, Any]], None] | None = None) -> None:
        super().__init__()
        self.ws = ws
        self.status: dict[str, Any] | None = None
        self.dropped = 0
        self._pending: ScreenFrame | None = None
        self._on_status = on_status
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if isinstance(msg, bytes):
                    if self.status is None:
                        continue
                    if self._pending is not None:
                        self.dropped += 1
                    self._pending = ScreenFrame(msg, self.status["format"], int(self.status["width"]), int(self.status["height"]))
                else:
                    m = _parse(msg)
                    if m is None or m.get("type") != "status":
                        continue
                    self.status = m
                    if self._on_status:
                        self._on_status(m)
                self._wake.set()
            self._finish(None)
        except ConnectionClosed as e:
            self._finish(close_error(e))

    def _take(self) -> ScreenFrame | None:
        f, self._pending = self._pending, None
        return f

    async def aclose(self) -> None:
        self._finish(None)
        await self.ws.close(1000)
        await self._reader


@dataclass(frozen=True)
class EventDelivery:
    cursor: str
    """Pass as `cursor` to a later `events()` to resume right after this event."""
    event: dict[str, Any]


class EventStream(_Pull[EventDelivery]):
    """A machine's events that survive dropped connections: every reconnect resumes from the cursor of the
    last event received, so nothing is skipped or repeated (the server delivers from its log, in order).
    Events wait in memory until read. Started without a cursor it yields events appended after the first
    connection. Gives up (raises) on a refused handshake (the envelope as ComputerError, except 503), on
    close codes 4401/4403/4404 and after `max_reconnects` consecutive failed attempts."""

    def __init__(self, url: Callable[[str | None], str], headers: Mapping[str, str], *, cursor: str | None = None, max_reconnects: int = 10, backoff: float = 0.25) -> None:
        super().__init__()
        self.cursor = cursor
        """The cursor of the last event handed to the consumer."""
        self.reconnects = 0
        self._received = cursor
        self._queue: deque[EventDelivery] = deque()
        self._url, self._headers = url, headers
        self._max_reconnects, self._backoff = max_reconnects, backoff
        self._ws: WebSocketClientProtocol | None = None
        self._task: asyncio.Future[None] | None = None

    async def start(self) -> EventStream:
        self._ws = await open_channel(self._url(self._received), self._headers)
        self._task = asyncio.ensure_future(self._run(self._ws))
        return self

    async def _run(self, ws: WebSocketClientProtocol) -> None:
        while not self._ended:
            try:
                async for msg in ws:
                    m = _parse(msg) if isinstance(msg, str) else None
                    if m is None or m.get("type") != "event" or not isinstance(m.get("cursor"), str) or not isinstance(m.get("event"), dict):
                        continue
                    self._received = m["cursor"]
                    self._queue.append(EventDelivery(m["cursor"], m["event"]))
                    self._wake.set()
                code = ws.close_code or 1006
            except ConnectionClosed as e:
                code = e.rcvd.code if e.rcvd is not None else 1006
            if self._ended:
                return
            if code in FINAL:
                return self._finish(ChannelClosedError(code, ws.close_reason or ""))
            next_ws = await self._reconnect()
            if next_ws is None:
                return
            ws = self._ws = next_ws

    async def _reconnect(self) -> WebSocketClientProtocol | None:
        for attempt in range(self._max_reconnects):
            await asyncio.sleep(min(8.0, self._backoff * 2**attempt))
            if self._ended:
                return None
            try:
                ws = await open_channel(self._url(self._received), self._headers)
                self.reconnects += 1
                return ws
            except ComputerError as e:
                if e.status != 503:
                    self._finish(e)
                    return None
            except (OSError, asyncio.TimeoutError, ConnectionClosed):
                pass
        self._finish(ChannelClosedError(1006, f"events: gave up after {self._max_reconnects} reconnection attempts"))
        return None

    def _take(self) -> EventDelivery | None:
        if not self._queue:
            return None
        d = self._queue.popleft()
        self.cursor = d.cursor
        return d

    async def aclose(self) -> None:
        self._finish(None)
        if self._task is not None:
            self._task.cancel()  # it may be waiting out a reconnection backoff
            await asyncio.gather(self._task, return_exceptions=True)
        if self._ws is not None:
            await self._ws.close(1000)


def _parse(msg: str | bytes) -> dict[str, Any] | None:
    try:
        m = json.loads(msg)
    except ValueError:
        return None
    return m if isinstance(m, dict) else None

