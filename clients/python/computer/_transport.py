"""One API call over httpx: the credential, JSON in and out, and retries of `compute_unavailable`."""
from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import httpx

from ._errors import error_from_body

DEFAULT_RETRIES = 10
DEFAULT_MAX_BACKOFF = 8.0


def render_query(query: Mapping[str, str | int | bool | None] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (query or {}).items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def retry_delay(retry_after: str | None, attempt: int, max_backoff: float) -> float:
    """Retry-After (seconds) when the server gives one, else 0.25 s doubling up to `max_backoff`."""
    try:
        after = float(retry_after) if retry_after is not None else 0.0
    except ValueError:
        after = 0.0
    return after if after > 0 else min(max_backoff, 0.25 * 2.0**attempt)


class Transport:
    def __init__(self, base_url: str, api_key: str, *, retries: int, max_backoff: float, timeout: float | None, client: httpx.AsyncClient | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.retries = retries
        self.max_backoff = max_backoff
        # No read deadline by default: an exec may run for an hour and a waited snapshot for minutes (the
        # server bounds both); connecting is bounded.
        self.http = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=30.0))

    def auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.api_key}"}

    async def request(self, method: str, path: str, *, query: Mapping[str, str | int | bool | None] | None = None, body: object = None, headers: Mapping[str, str] | None = None) -> Any:
        h = {**self.auth_headers(), **(headers or {})}
        content = None
        if body is not None:
            h["content-type"] = "application/json"
            content = json.dumps(body).encode()
        for attempt in range(self.retries):
            res = await self.http.request(method, self.base_url + path, params=render_query(query), content=content, headers=h)
            if res.status_code < 400:
                if res.status_code == 204 or not res.content:
                    return None
                if res.headers.get("content-type", "").startswith("application/json"):
                    return res.json()
                return res.text
            err = error_from_body(res.status_code, res.content)
            if err.code == "compute_unavailable" and attempt + 1 < self.retries:
                await asyncio.sleep(retry_delay(res.headers.get("retry-after"), attempt, self.max_backoff))
                continue
            raise err
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        await self.http.aclose()
