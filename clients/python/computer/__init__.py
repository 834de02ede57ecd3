"""Python SDK for the computer API: persistent Linux machines (desktop, shell, browser) over HTTP.

`AsyncComputer` is the asyncio client; `Computer` is the same client for blocking code (it runs the async
one on a private loop thread). Every /v1 operation is a method named after its operationId in snake_case
(generated from the server's OpenAPI document); machine handles add downloads to `eof` under a cap,
chunked uploads, waiting snapshots, lease auto-renewal, screen frames, terminals and events with resume.
"""
from ._channels import ChannelClosedError, EventDelivery, EventStream, ScreenFrame, ScreenStream
from ._client import DEFAULT_DOWNLOAD_CAP, UPLOAD_CHUNK, AsyncComputer, AsyncLease, AsyncMachine
from ._errors import ComputerError, Detail, Quota
from ._operations import ROUTES
from ._sync import Computer, Frames, Lease, Machine, Terminal
from ._terminal import TerminalClosedError, TerminalStream

__all__ = [
    "AsyncComputer",
    "AsyncLease",
    "AsyncMachine",
    "ChannelClosedError",
    "Computer",
    "ComputerError",
    "DEFAULT_DOWNLOAD_CAP",
    "Detail",
    "EventDelivery",
    "EventStream",
    "Frames",
    "Lease",
    "Machine",
    "Quota",
    "ROUTES",
    "ScreenFrame",
    "ScreenStream",
    "Terminal",
    "TerminalClosedError",
    "TerminalStream",
    "UPLOAD_CHUNK",
]
