"""What needs no server: the error envelope and quota rendering, the retry schedule, and the retry loop
against an httpx mock transport (unit tests of the SDK's own logic)."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from computer import DEFAULT_DOWNLOAD_CAP, UPLOAD_CHUNK, AsyncComputer, ComputerError, Quota
from computer._config import resolve
from computer._errors import error_from_body
from computer._transport import render_query, retry_delay

QUOTA_BODY: dict[str, Any] = {
    "error": {
        "code": "quota_exceeded",
        "message": "Your plan allows 2 running machines.",
        "request_id": "req_abc",
        "details": [],
        "quota": {"limit": "running_machines", "current": 2, "maximum": None, "plan_id": "enterprise", "upgrade_url": None},
    }
}


def test_quota_is_data_and_a_null_maximum_is_negotiated() -> None:
    e = error_from_body(402, json.dumps(QUOTA_BODY))
    assert (e.status, e.code, e.request_id, e.details) == (402, "quota_exceeded", "req_abc", [])
    assert e.quota == Quota("running_machines", 2, None, "enterprise", None)
    assert str(e) == (
        "Your plan allows 2 running machines. (quota_exceeded, HTTP 402)\n"
        "  quota: running_machines is at 2 of a negotiated maximum on plan enterprise; change plan (GET /v1/plans) or free capacity\n"
        "  request id: req_abc"
    )
    capped = {**QUOTA_BODY["error"], "quota": {"limit": "machines", "current": 5, "maximum": 5, "plan_id": "developer", "upgrade_url": "https://x.test/up"}}
    q = error_from_body(402, json.dumps({"error": capped})).quota
    assert q is not None and q.describe() == "quota: machines is at 5 of 5 on plan developer; upgrade: https://x.test/up"


def test_details_and_a_body_that_is_not_the_envelope() -> None:
    e = error_from_body(400, json.dumps({"error": {"code": "invalid_request", "message": "bad", "request_id": "req_1", "details": [{"field": "name", "message": "too long"}], "quota": None}}))
    assert [(d.field, d.message) for d in e.details] == [("name", "too long")]
    assert e.quota is None
    html = error_from_body(502, "<html>bad gateway</html>")
    assert (html.code, html.message, html.request_id) == ("internal_error", "HTTP 502", "")


def test_retry_schedule_and_query_rendering() -> None:
    assert [retry_delay(None, a, 8.0) for a in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert retry_delay("3", 0, 8.0) == 3.0
    assert retry_delay("soon", 1, 8.0) == 0.5
    assert render_query({"wait": True, "limit": 5, "cursor": None, "path": "/a b"}) == {"wait": "true", "limit": "5", "path": "/a b"}
    assert (DEFAULT_DOWNLOAD_CAP, UPLOAD_CHUNK) == (64 * 1024 * 1024, 4 * 1024 * 1024)


UNAVAILABLE: dict[str, Any] = {"error": {"code": "compute_unavailable", "message": "The desktop is not up yet.", "request_id": "req_u", "details": [], "quota": None}}


def run_with(answers: list[httpx.Response], retries: int) -> tuple[list[str], object]:
    seen: list[str] = []

    def handle(req: httpx.Request) -> httpx.Response:
        seen.append(f"{req.method} {req.url.path} {req.headers['authorization']}")
        return answers.pop(0)

    async def go() -> object:
        async with AsyncComputer(api_key="sk_t", base_url="http://cp.test", retries=retries, max_backoff=0.01, http=httpx.AsyncClient(transport=httpx.MockTransport(handle))) as c:
            try:
                return await c.machines_get("mch_1")
            except ComputerError as e:
                return e

    return seen, asyncio.run(go())


def test_compute_unavailable_is_retried_then_answered() -> None:
    ok = httpx.Response(200, json={"id": "mch_1"})
    seen, r = run_with([httpx.Response(503, json=UNAVAILABLE), httpx.Response(503, json=UNAVAILABLE, headers={"retry-after": "0"}), ok], retries=5)
    assert seen == ["GET /v1/machines/mch_1 Bearer sk_t"] * 3
    assert r == {"id": "mch_1"}


def test_retries_give_up_with_the_envelope_and_other_errors_are_not_retried() -> None:
    seen, r = run_with([httpx.Response(503, json=UNAVAILABLE) for _ in range(3)], retries=3)
    assert len(seen) == 3
    assert isinstance(r, ComputerError) and (r.code, r.status, r.request_id) == ("compute_unavailable", 503, "req_u")
    nf = {"error": {**UNAVAILABLE["error"], "code": "not_found", "message": "No such machine."}}
    seen, r = run_with([httpx.Response(404, json=nf)], retries=5)
    assert len(seen) == 1
    assert isinstance(r, ComputerError) and r.code == "not_found"


@pytest.mark.parametrize("status", [500, 502])
def test_a_server_error_is_not_retried(status: int) -> None:
    seen, r = run_with([httpx.Response(status, text="oops")], retries=5)
    assert len(seen) == 1 and isinstance(r, ComputerError) and r.code == "internal_error"


def test_credentials_are_found_as_the_cli_finds_them(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    with pytest.raises(LookupError, match="COMPUTER_API_KEY"):
        resolve(env)
    (tmp_path / "computer").mkdir()
    (tmp_path / "computer" / "config.json").write_text(json.dumps({"base_url": "https://stored.test", "api_key": "sk_stored"}))
    assert resolve(env) == ("https://stored.test", "sk_stored"), "the file `computer login` writes"
    assert resolve({**env, "COMPUTER_API_KEY": "sk_env"}) == ("https://stored.test", "sk_env"), "the variable overrides the file"
    assert resolve({**env, "COMPUTER_BASE_URL": "http://h:1"}) == ("http://h:1", "sk_stored")
    (tmp_path / "computer" / "config.json").unlink()
    assert resolve({**env, "COMPUTER_API_KEY": "sk_env"}) == ("http://127.0.0.1:8080", "sk_env"), "the CLI's default URL"
