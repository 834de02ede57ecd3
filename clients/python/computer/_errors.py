"""The API's one error envelope as one exception type (shared/errors.ts renders it on the server)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Quota:
    """The entitlement that declined a request (`quota_exceeded`). `maximum` None means negotiated (a
    contract limit agreed outside self-serve), never unlimited."""

    limit: str
    current: int
    maximum: int | None
    plan_id: str
    upgrade_url: str | None

    def describe(self) -> str:
        of = "a negotiated maximum" if self.maximum is None else str(self.maximum)
        where = f"upgrade: {self.upgrade_url}" if self.upgrade_url else "change plan (GET /v1/plans) or free capacity"
        return f"quota: {self.limit} is at {self.current} of {of} on plan {self.plan_id}; {where}"


@dataclass(frozen=True)
class Detail:
    field: str
    message: str


class ComputerError(Exception):
    """Every non-2xx answer (and the SDK's own refusals, e.g. the download cap): the envelope's fields."""

    def __init__(self, status: int, code: str, message: str, request_id: str = "", details: list[Detail] | None = None, quota: Quota | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.details = details or []
        self.quota = quota

    def __str__(self) -> str:
        lines = [f"{self.message} ({self.code}, HTTP {self.status})"]
        lines += [f"  {d.field}: {d.message}" for d in self.details]
        if self.quota:
            lines.append("  " + self.quota.describe())
        if self.request_id:
            lines.append(f"  request id: {self.request_id}")
        return "\n".join(lines)


def error_from_body(status: int, text: str | bytes) -> ComputerError:
    """An error answer's body as a ComputerError; anything that is not the envelope (a proxy's HTML page, a
    truncated body) becomes `internal_error` naming the HTTP status rather than a parse exception."""
    try:
        e = json.loads(text)["error"]
        q = e.get("quota")
        return ComputerError(
            status,
            _str(e["code"]),
            _str(e["message"]),
            _str(e.get("request_id", "")),
            [Detail(_str(d["field"]), _str(d["message"])) for d in e.get("details") or []],
            Quota(_str(q["limit"]), int(q["current"]), None if q["maximum"] is None else int(q["maximum"]), _str(q["plan_id"]), None if q.get("upgrade_url") is None else _str(q["upgrade_url"]))
            if isinstance(q, dict)
            else None,
        )
    except (ValueError, KeyError, TypeError):
        return ComputerError(status, "internal_error", f"HTTP {status}")


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("not a string")
    return v
