"""The blocking client: a thin wrapper that runs the asyncio client on a private event loop in a daemon
thread. One implementation of every behaviour (retries, renewal, resume) serves both; and the loop keeps
running while the caller's thread blocks, so a sync caller's lease is renewed and its event stream keeps
receiving between calls. Not for use from inside a running event loop: use AsyncComputer there."""
from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, Literal, TypeVar

import httpx

from . import _config
from ._channels import EventDelivery, EventStream, ScreenFrame, ScreenStream, _Pull
from ._client import DEFAULT_DOWNLOAD_CAP, AsyncComputer, AsyncLease, AsyncMachine, Progress, User
from ._models import (
    CreateMachineRequest,
    ExecRequest,
    ExecResult,
    ForkMachineRequest,
    InputResult,
    Machine as MachineRecord,
    MachinesToolsAnthropicBody,
    MachinesToolsAnthropicResponse,
    MachinesToolsOpenaiBody,
    MachinesToolsOpenaiResponse,
    MachineSecretList,
    Preview,
    PreviewPage,
    PtyOpen,
    PublishPortRequest,
    Secret,
    Session,
    Snapshot,
    Terminal as TerminalRecord,
    WriteResult,
)
from ._operations import SyncOperations
from ._terminal import TerminalStream
from ._transport import DEFAULT_MAX_BACKOFF, DEFAULT_RETRIES

T = TypeVar("T")
I = TypeVar("I")


class _Loop:
    """An event loop on a daemon thread; `run()` blocks the caller until a coroutine finishes there."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="computer-sdk", daemon=True)
        self.thread.start()

    def run(self, aw: Awaitable[T]) -> T:
        async def wrap() -> T:
            return await aw

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class Computer(SyncOperations):
    """`with Computer(api_key=..., base_url=...) as cx:`; `Computer.from_env()` finds the credentials as the
    CLI does. Every /v1 operation is a method (`cx.machines_list()`); `cx.machine(id)` adds the helpers."""

    _async: AsyncComputer

    def __init__(self, *, api_key: str, base_url: str = _config.DEFAULT_BASE_URL, retries: int = DEFAULT_RETRIES, max_backoff: float = DEFAULT_MAX_BACKOFF, timeout: float | None = None, http: httpx.AsyncClient | None = None) -> None:
        self._loop = _Loop()
        self._async = AsyncComputer(api_key=api_key, base_url=base_url, retries=retries, max_backoff=max_backoff, timeout=timeout, http=http)

    @classmethod
    def from_env(cls, **kw: Any) -> Computer:
        base_url, api_key = _config.resolve()
        return cls(api_key=api_key, base_url=base_url, **kw)

    @property
    def base_url(self) -> str:
        return self._async.base_url

    @property
    def aio(self) -> AsyncComputer:
        """The async client underneath; its coroutines must run on this client's loop: `cx.run(cx.aio.…)`."""
        return self._async

    def _run(self, aw: Awaitable[T]) -> T:
        return self._loop.run(aw)

    def run(self, aw: Awaitable[T]) -> T:
        """Runs an awaitable of `aio` (or of a handle's `aio`) on this client's loop; answers its result."""
        return self._loop.run(aw)

    def close(self) -> None:
        self._loop.run(self._async.aclose())
        self._loop.stop()

    def __enter__(self) -> Computer:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def machine(self, machine_id: str) -> Machine:
        return Machine(self, self._async.machine(machine_id))

    def create_machine(self, body: CreateMachineRequest | None = None) -> Machine:
        return Machine(self, self._run(self._async.create_machine(body)))

    def create_snapshot(self, machine_id: str, *, name: str | None = None, wait: bool = True) -> Snapshot:
        return self._run(self._async.create_snapshot(machine_id, name=name, wait=wait))


class Machine:
    """The blocking twin of AsyncMachine (same methods, same behaviour)."""

    def __init__(self, client: Computer, inner: AsyncMachine) -> None:
        self.client, self.aio = client, inner
        self.id, self.record = inner.id, inner.record
        self._run = client._run

    def get(self) -> MachineRecord:
        return self._run(self.aio.get())

    def start(self) -> MachineRecord:
        return self._run(self.aio.start())

    def stop(self) -> MachineRecord:
        return self._run(self.aio.stop())

    def delete(self) -> None:
        self._run(self.aio.delete())

    def exec(self, command: list[str] | ExecRequest, **options: Any) -> ExecResult:
        return self._run(self.aio.exec(command, **options))

    def screenshot(self, *, format: Literal["png", "jpeg", "webp"] | None = None, quality: int | None = None) -> bytes:
        return self._run(self.aio.screenshot(format=format, quality=quality))

    def write_file(self, path: str, content: bytes | str, *, user: User | None = None, append: bool = False, mode: str | None = None) -> WriteResult:
        return self._run(self.aio.write_file(path, content, user=user, append=append, mode=mode))

    def upload_file(self, path: str, data: bytes, *, user: User | None = None, mode: str | None = None, on_progress: Progress | None = None) -> None:
        self._run(self.aio.upload_file(path, data, user=user, mode=mode, on_progress=on_progress))

    def read_file(self, path: str, *, max_bytes: int = DEFAULT_DOWNLOAD_CAP, user: User | None = None, on_progress: Progress | None = None) -> bytes:
        return self._run(self.aio.read_file(path, max_bytes=max_bytes, user=user, on_progress=on_progress))

    def open_session(self, type: Literal["agent", "human"] = "agent") -> Session:
        return self._run(self.aio.open_session(type))

    def acquire_lease(self, session_id: str, ttl_seconds: int = 60) -> Lease:
        return Lease(self.client, self._run(self.aio.acquire_lease(session_id, ttl_seconds)))

    def control(self, ttl_seconds: int = 60) -> Lease:
        return Lease(self.client, self._run(self.aio.control(ttl_seconds)))

    def fork(self, body: ForkMachineRequest | None = None) -> Machine:
        return Machine(self.client, self._run(self.aio.fork(body)))

    def restore(self, snapshot_id: str) -> MachineRecord:
        return self._run(self.aio.restore(snapshot_id))

    def snapshot(self, *, name: str | None = None, wait: bool = True) -> Snapshot:
        return self._run(self.aio.snapshot(name=name, wait=wait))

    def list_ports(self) -> PreviewPage:
        return self._run(self.aio.list_ports())

    def publish_port(self, body: PublishPortRequest) -> Preview:
        return self._run(self.aio.publish_port(body))

    def unpublish_port(self, preview_id: str) -> None:
        self._run(self.aio.unpublish_port(preview_id))

    def list_secrets(self) -> MachineSecretList:
        return self._run(self.aio.list_secrets())

    def set_secret(self, name: str, value: str) -> Secret:
        return self._run(self.aio.set_secret(name, value))

    def delete_secret(self, name: str) -> None:
        self._run(self.aio.delete_secret(name))

    def open_terminal(self, body: PtyOpen | None = None) -> TerminalRecord:
        return self._run(self.aio.open_terminal(body))

    def kill_terminal(self, term_id: str) -> None:
        self._run(self.aio.kill_terminal(term_id))

    def attach_terminal(self, term_id: str) -> Terminal:
        return Terminal(self.client, self._run(self.aio.attach_terminal(term_id)))

    def screen_frames(self, *, format: Literal["jpeg", "webp"] | None = None, quality: int | None = None, fps: int | None = None, on_status: Callable[[dict[str, Any]], None] | None = None) -> Frames[ScreenFrame, ScreenStream]:
        return Frames(self.client, self._run(self.aio.screen_frames(format=format, quality=quality, fps=fps, on_status=on_status)))

    def events(self, *, cursor: str | None = None, max_reconnects: int = 10) -> Frames[EventDelivery, EventStream]:
        return Frames(self.client, self._run(self.aio.events(cursor=cursor, max_reconnects=max_reconnects)))


class Lease:
    """The input lease; its renewal runs on the client's loop thread while the caller blocks."""

    def __init__(self, client: Computer, inner: AsyncLease) -> None:
        self.aio = inner
        self.session_id = inner.session_id
        self._run = client._run

    @property
    def fence(self) -> int:
        return self.aio.fence

    @property
    def renewals(self) -> int:
        return self.aio.renewals

    @property
    def last_error(self) -> BaseException | None:
        return self.aio.last_error

    def headers(self) -> dict[str, str]:
        return self.aio.headers()

    def type(self, text: str) -> InputResult:
        return self._run(self.aio.type(text))

    def key(self, key: str, repeat: int = 1) -> InputResult:
        return self._run(self.aio.key(key, repeat))

    def click(self, x: int, y: int, button: Literal["left", "middle", "right"] = "left", count: int = 1) -> InputResult:
        return self._run(self.aio.click(x, y, button, count))

    def anthropic(self, body: MachinesToolsAnthropicBody) -> MachinesToolsAnthropicResponse:
        return self._run(self.aio.anthropic(body))

    def openai(self, body: MachinesToolsOpenaiBody) -> MachinesToolsOpenaiResponse:
        return self._run(self.aio.openai(body))

    def release(self) -> None:
        self._run(self.aio.release())

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


P = TypeVar("P", bound=_Pull[Any])


class Frames(Generic[I, P]):
    """A blocking iterator over a screen or event stream (`with m.events() as ev: for d in ev: …`); the
    async stream is `aio` (its `status`, `dropped`, `cursor`, `reconnects`)."""

    def __init__(self, client: Computer, inner: P) -> None:
        self.aio = inner
        self._run = client._run

    def __iter__(self) -> Frames[I, P]:
        return self

    def __next__(self) -> I:
        async def step() -> tuple[bool, Any]:
            try:
                return True, await self.aio.__anext__()
            except StopAsyncIteration:
                return False, None

        ok, value = self._run(step())
        if not ok:
            raise StopIteration
        item: I = value
        return item

    def close(self) -> None:
        self._run(self.aio.aclose())

    def __enter__(self) -> Frames[I, P]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Terminal:
    """The blocking twin of TerminalStream."""

    def __init__(self, client: Computer, inner: TerminalStream) -> None:
        self.aio = inner
        self._run = client._run

    def read(self) -> bytes:
        return self._run(self.aio.read())

    def __iter__(self) -> Terminal:
        return self

    def __next__(self) -> bytes:
        chunk = self.read()
        if not chunk:
            raise StopIteration
        return chunk

    def write(self, data: bytes | str) -> None:
        self._run(self.aio.write(data))

    def resize(self, cols: int, rows: int) -> None:
        self._run(self.aio.resize(cols, rows))

    def wait(self) -> int | None:
        return self._run(self.aio.wait())

    def detach(self) -> None:
        self._run(self.aio.detach())

