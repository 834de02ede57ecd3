"""The asyncio client: every /v1 operation (generated, `_operations.py`) plus what an SDK adds, on machine
handles: downloads looped to `eof` under a cap, chunked uploads, snapshot creation that waits, the input
lease renewed at half its ttl, screen frames, terminals and events over the gateway."""
from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote, urlencode

import httpx

from . import _config
from ._channels import EventStream, ScreenStream, open_channel
from ._errors import ComputerError
from ._models import (
    CreateMachineRequest,
    ExecRequest,
    ExecResult,
    ForkMachineRequest,
    InputResult,
    LeaseGrant,
    MachinesToolsAnthropicBody,
    MachinesToolsAnthropicResponse,
    MachinesToolsOpenaiBody,
    MachinesToolsOpenaiResponse,
    Machine,
    MachineSecretList,
    PtyOpen,
    PublishPortRequest,
    Preview,
    PreviewPage,
    Secret,
    Session,
    Snapshot,
    Terminal,
    WriteResult,
)
from ._operations import AsyncOperations, Query
from ._terminal import TerminalStream
from ._transport import DEFAULT_MAX_BACKOFF, DEFAULT_RETRIES, Transport

DEFAULT_DOWNLOAD_CAP = 64 * 1024 * 1024
"""readFile refuses files larger than this unless `max_bytes` raises it."""
UPLOAD_CHUNK = 4 * 1024 * 1024
"""4 MiB of bytes (about 5.4 MiB of base64) per write, well under the write route's body limit."""

Progress = Callable[[int, "int | None"], None]
"""Bytes moved so far and the total when known."""
User = Literal["agent", "root"]


class AsyncComputer(AsyncOperations):
    """`async with AsyncComputer(api_key=..., base_url=...) as cx:`; `AsyncComputer.from_env()` finds the
    credentials as the CLI does. `compute_unavailable` (503) is retried up to `retries` attempts, waiting
    Retry-After when given, else 0.25 s doubling up to `max_backoff` seconds. `timeout` bounds each read
    (None: no bound, as an exec or a waited snapshot may take long); connecting is bounded to 30 s."""

    def __init__(self, *, api_key: str, base_url: str = _config.DEFAULT_BASE_URL, retries: int = DEFAULT_RETRIES, max_backoff: float = DEFAULT_MAX_BACKOFF, timeout: float | None = None, http: httpx.AsyncClient | None = None) -> None:
        self._t = Transport(base_url, api_key, retries=max(1, retries), max_backoff=max_backoff, timeout=timeout, client=http)

    @classmethod
    def from_env(cls, **kw: Any) -> AsyncComputer:
        base_url, api_key = _config.resolve()
        return cls(api_key=api_key, base_url=base_url, **kw)

    @property
    def base_url(self) -> str:
        return self._t.base_url

    async def _request(self, method: str, path: str, *, query: Query | None = None, body: object = None, headers: Mapping[str, str] | None = None) -> Any:
        return await self._t.request(method, path, query=query, body=body, headers=headers)

    def gateway_url(self, path: str, query: dict[str, str] | None = None) -> str:
        base = "ws" + self._t.base_url[4:] if self._t.base_url.startswith("http") else self._t.base_url
        return base + path + (f"?{urlencode(query)}" if query else "")

    def gateway_headers(self) -> dict[str, str]:
        return self._t.auth_headers()

    async def aclose(self) -> None:
        await self._t.aclose()

    async def __aenter__(self) -> AsyncComputer:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    # --- what the SDK adds -----------------------------------------------------------------------
    def machine(self, machine_id: str) -> AsyncMachine:
        return AsyncMachine(self, machine_id)

    async def create_machine(self, body: CreateMachineRequest | None = None) -> AsyncMachine:
        """`await cx.create_machine({"name": "demo"})`: the new machine's handle (`record` is its answer)."""
        m = await self.machines_create(body or {})
        return AsyncMachine(self, m["id"], m)

    async def create_snapshot(self, machine_id: str, *, name: str | None = None, wait: bool = True) -> Snapshot:
        """Waits for the capture by default (`?wait=true`): answers a ready snapshot."""
        body: Any = {"machine_id": machine_id, **({"name": name} if name is not None else {})}
        return await self.snapshots_create(body, wait=wait)


class AsyncMachine:
    """One machine. Methods without a helper of their own are on the client (`cx.machines_*(id, …)`)."""

    def __init__(self, client: AsyncComputer, machine_id: str, record: Machine | None = None) -> None:
        self.client, self.id, self.record = client, machine_id, record

    def path(self, rest: str = "") -> str:
        return f"/v1/machines/{quote(self.id, safe='')}{rest}"

    async def get(self) -> Machine:
        return await self.client.machines_get(self.id)

    async def start(self) -> Machine:
        return await self.client.machines_start(self.id)

    async def stop(self) -> Machine:
        return await self.client.machines_stop(self.id)

    async def delete(self) -> None:
        await self.client.machines_delete(self.id)

    async def exec(self, command: list[str] | ExecRequest, **options: Any) -> ExecResult:
        """`await m.exec(["ls", "-la"], cwd="/tmp")` or with a whole ExecRequest."""
        body: Any = {"command": command, **options} if isinstance(command, list) else command
        return await self.client.machines_exec(self.id, body)

    async def screenshot(self, *, format: Literal["png", "jpeg", "webp"] | None = None, quality: int | None = None) -> bytes:
        """The screen's encoded image bytes (PNG by default)."""
        r = await self.client.machines_screenshot(self.id, format=format, quality=quality)
        return base64.b64decode(r["image"])

    async def write_file(self, path: str, content: bytes | str, *, user: User | None = None, append: bool = False, mode: str | None = None) -> WriteResult:
        text = isinstance(content, str)
        body: Any = {
            "content": content if isinstance(content, str) else base64.b64encode(content).decode(),
            "encoding": "utf8" if text else "base64",
            "append": append,
            **({"user": user} if user else {}),
            **({"mode": mode} if mode else {}),
        }
        return await self.client.machines_files_write(self.id, body, path=path)

    async def upload_file(self, path: str, data: bytes, *, user: User | None = None, mode: str | None = None, on_progress: Progress | None = None) -> None:
        """Writes any number of bytes in 4 MiB chunks: the first replaces the file, later ones append. Not
        atomic: an interrupted upload leaves a prefix."""
        off = 0
        while True:
            chunk = data[off : off + UPLOAD_CHUNK]
            await self.write_file(path, chunk, user=user, mode=mode, append=off > 0)
            off += len(chunk)
            if on_progress:
                on_progress(off, len(data))
            if off >= len(data):
                return

    async def read_file(self, path: str, *, max_bytes: int = DEFAULT_DOWNLOAD_CAP, user: User | None = None, on_progress: Progress | None = None) -> bytes:
        """A whole file, read by ranges until `eof`. Refuses past `max_bytes` (64 MiB by default; raise it
        for bigger files) rather than buffering without bound: ComputerError 413 `invalid_request`."""
        parts: list[bytes] = []
        offset = 0
        while True:
            r = await self.client.machines_files_read(self.id, path=path, offset=offset, encoding="base64", user=user)
            chunk = base64.b64decode(r["content"])
            offset += len(chunk)
            if offset > max_bytes:
                raise ComputerError(413, "invalid_request", f"{path} is larger than the download cap of {max_bytes} bytes; raise max_bytes.")
            parts.append(chunk)
            if on_progress:
                on_progress(offset, r["size"] if r["size"] > 0 else None)
            if r["eof"] or not chunk:
                return b"".join(parts)

    async def open_session(self, type: Literal["agent", "human"] = "agent") -> Session:
        return await self.client.sessions_create({"machine_id": self.id, "type": type})

    async def acquire_lease(self, session_id: str, ttl_seconds: int = 60) -> AsyncLease:
        """The input lease for `session_id`, renewed at half its ttl until `release()`."""
        grant = await self.client.input_lease_acquire(self.id, {"session_id": session_id, "ttl_seconds": ttl_seconds})
        return AsyncLease(self, session_id, ttl_seconds, grant)

    async def control(self, ttl_seconds: int = 60) -> AsyncLease:
        """Opens an agent session and takes the input lease with it (renewed until `release()`)."""
        return await self.acquire_lease((await self.open_session("agent"))["id"], ttl_seconds)

    async def fork(self, body: ForkMachineRequest | None = None) -> AsyncMachine:
        """A new machine from one of this machine's snapshots (`{"snapshot_id": …}`), or its disk as it is."""
        m = await self.client.machines_fork(self.id, body or {})
        return AsyncMachine(self.client, m["id"], m)

    async def restore(self, snapshot_id: str) -> Machine:
        return await self.client.machines_restore(self.id, {"snapshot_id": snapshot_id})

    async def snapshot(self, *, name: str | None = None, wait: bool = True) -> Snapshot:
        return await self.client.create_snapshot(self.id, name=name, wait=wait)

    async def list_ports(self) -> PreviewPage:
        return await self.client.ports_list(self.id)

    async def publish_port(self, body: PublishPortRequest) -> Preview:
        """The answer carries `secret`/`access_url` of a private preview once; later reads do not."""
        return await self.client.ports_publish(self.id, body)

    async def unpublish_port(self, preview_id: str) -> None:
        await self.client.ports_unpublish(self.id, preview_id)

    async def list_secrets(self) -> MachineSecretList:
        return await self.client.secrets_list(self.id)

    async def set_secret(self, name: str, value: str) -> Secret:
        return await self.client.secrets_put(self.id, {"name": name, "value": value})

    async def delete_secret(self, name: str) -> None:
        await self.client.secrets_delete(self.id, name)

    async def open_terminal(self, body: PtyOpen | None = None) -> Terminal:
        """A pty in the machine (the login shell unless `command`); attach with `attach_terminal`."""
        return await self.client.machines_terminals_open(self.id, body or {})

    async def kill_terminal(self, term_id: str) -> None:
        await self.client.machines_terminals_kill(self.id, term_id)

    async def attach_terminal(self, term_id: str) -> TerminalStream:
        """The terminal channel as a byte stream; a refused handshake raises the envelope's ComputerError."""
        url = self.client.gateway_url(self.path(f"/terminals/{quote(term_id, safe='')}/attach"))
        return TerminalStream(await open_channel(url, self.client.gateway_headers()))

    async def screen_frames(self, *, format: Literal["jpeg", "webp"] | None = None, quality: int | None = None, fps: int | None = None, on_status: Callable[[dict[str, Any]], None] | None = None) -> ScreenStream:
        """Screen frames as an async iterator (`async with … as frames: async for f in frames`)."""
        q = {k: str(v) for k, v in (("format", format), ("quality", quality), ("fps", fps)) if v is not None}
        ws = await open_channel(self.client.gateway_url(self.path("/screen"), q), self.client.gateway_headers())
        return ScreenStream(ws, on_status)

    async def events(self, *, cursor: str | None = None, max_reconnects: int = 10) -> EventStream:
        """Live events as an async iterator that reconnects by itself and resumes from the last event it
        received (no gap, no repeat). `cursor` starts after a known event; without it, events from now on."""
        url = lambda c: self.client.gateway_url(self.path("/events/live"), {"cursor": c} if c else None)  # noqa: E731
        return await EventStream(url, self.client.gateway_headers(), cursor=cursor, max_reconnects=max_reconnects).start()


class AsyncLease:
    """The input lease, renewed at half its ttl by a task on the running loop until `release()`. `renewals`
    counts renewals; `last_error` holds the error that stopped them (the lease then lapses at its ttl)."""

    def __init__(self, machine: AsyncMachine, session_id: str, ttl_seconds: int, grant: LeaseGrant) -> None:
        self.machine, self.session_id, self.ttl_seconds, self.grant = machine, session_id, ttl_seconds, grant
        self._m, self._c = machine, machine.client
        self.renewals = 0
        self.last_error: BaseException | None = None
        self._task = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_seconds / 2)
            try:
                self.grant = await self._c.input_lease_acquire(self._m.id, {"session_id": self.session_id, "ttl_seconds": self.ttl_seconds})
                self.renewals += 1
            except Exception as e:  # noqa: BLE001 - kept for the caller, renewal stops
                self.last_error = e
                return

    @property
    def fence(self) -> int:
        return self.grant["fence"]

    def headers(self) -> dict[str, str]:
        """Headers an input call carries while holding the lease."""
        return {"x-session-id": self.session_id, "x-lease-fence": str(self.grant["fence"])}

    async def type(self, text: str) -> InputResult:
        """Types text on the focused window (any Unicode; a newline is not Enter: use `key("Return")`).
        Any other input operation takes the lease as `headers=lease.headers()`."""
        return await self._c.machines_keyboard_type(self._m.id, {"text": text}, headers=self.headers())

    async def key(self, key: str, repeat: int = 1) -> InputResult:
        """Presses a key (X keysym name: `Return`, `Tab`, …)."""
        return await self._c.machines_keyboard_key(self._m.id, {"key": key, "repeat": repeat}, headers=self.headers())

    async def click(self, x: int, y: int, button: Literal["left", "middle", "right"] = "left", count: int = 1) -> InputResult:
        return await self._c.machines_mouse_click(self._m.id, {"at": {"x": x, "y": y}, "button": button, "count": count}, headers=self.headers())

    async def anthropic(self, body: MachinesToolsAnthropicBody) -> MachinesToolsAnthropicResponse:
        """One action of Anthropic's computer-use tool (its tool_use `input` in `body["input"]`)."""
        return await self._c.machines_tools_anthropic(self._m.id, body, headers=self.headers())

    async def openai(self, body: MachinesToolsOpenaiBody) -> MachinesToolsOpenaiResponse:
        """One `action` of an OpenAI computer_call (in `body["action"]`)."""
        return await self._c.machines_tools_openai(self._m.id, body, headers=self.headers())

    async def release(self) -> None:
        self._task.cancel()
        await self._c.input_lease_release(self._m.id, session_id=self.session_id)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()
