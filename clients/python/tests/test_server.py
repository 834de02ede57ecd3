"""The SDK against a real server (API + gateway) on the container substrate, one shared machine: create,
screenshot to PNG, typing under the lease into a terminal window, a pty as a stream, exec, files up and down
across the chunk size and the cap, snapshot + fork, ports, secrets, lease renewal, screen frames, events
resumed across a cut connection, the coverage check on the served document, and the examples run."""
from __future__ import annotations

import asyncio
import hashlib
import secrets
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from computer import AsyncComputer, ComputerError, Computer, EventDelivery, Machine, ScreenFrame

from helpers import Relay, until

HERE = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG, "a PNG"
    w, h = struct.unpack(">II", data[16:24])
    return w, h


def test_create_and_screenshot_to_png(cx: Computer, machine: Machine, tmp_path: Path) -> None:
    assert machine.id.startswith("mch_")
    png = machine.screenshot()  # answered 503 while the desktop booted; retried
    (tmp_path / "screen.png").write_bytes(png)
    display = cx.machines_display_get(machine.id)
    assert png_size((tmp_path / "screen.png").read_bytes()) == (display["width"], display["height"])
    assert [m["id"] for m in cx.machines_list()["data"]] == [machine.id]


def test_errors_are_the_envelope(cx: Computer) -> None:
    with pytest.raises(ComputerError) as e:
        cx.machines_get("mch_000000000000000000000000")
    assert (e.value.status, e.value.code, e.value.quota, e.value.details) == (404, "not_found", None, [])
    assert e.value.request_id.startswith("req_")


def test_gateway_refusals_are_the_envelope(server: tuple[str, str], machine: Machine) -> None:
    async def refused() -> list[ComputerError]:
        out: list[ComputerError] = []
        async with AsyncComputer(base_url=server[0], api_key="sk_not_a_key") as stranger, AsyncComputer(base_url=server[0], api_key=server[1]) as acx:
            for attempt in (stranger.machine(machine.id).events(), acx.machine("mch_000000000000000000000000").screen_frames(), acx.machine(machine.id).events(cursor="bogus!")):
                try:
                    await attempt
                except ComputerError as e:
                    out.append(e)
        return out

    errors = asyncio.run(asyncio.wait_for(refused(), 60))
    assert [(e.status, e.code) for e in errors] == [(401, "unauthenticated"), (404, "not_found"), (400, "invalid_request")]
    assert all(e.request_id.startswith("req_") for e in errors)
    assert [d.field for d in errors[2].details] == ["cursor"]


def test_exec(machine: Machine) -> None:
    r = machine.exec(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (r["stdout"], r["stderr"], r["exit_code"]) == ("out\n", "err\n", 7)
    assert machine.exec({"command": ["pwd"], "cwd": "/tmp"})["stdout"] == "/tmp\n"


def test_type_under_the_lease_into_a_terminal_window(cx: Computer, machine: Machine) -> None:
    xterm = "setsid xterm -xrm '*allowTitleOps: false' -title pysdk </dev/null >/dev/null 2>&1 &"
    machine.exec(["bash", "-c", xterm])
    until("the xterm to have the focus", lambda: True if machine.exec(["xdotool", "getwindowfocus", "getwindowname"])["stdout"].strip() == "pysdk" else None)
    with machine.control() as lease:  # released on the way out
        lease.type("echo typed-by-python > /tmp/typed")
        lease.key("Return")
    assert cx.input_lease_get(machine.id)["held"] is False
    assert until("the shell to write the file", lambda: machine.read_file("/tmp/typed") or None) == b"typed-by-python\n"


def test_lease_renewed_at_half_the_ttl(cx: Computer, machine: Machine) -> None:
    lease = machine.control(5)
    fence = lease.fence
    time.sleep(8)  # past the 5 s ttl: only the renewals (every 2.5 s, on the client's loop thread) keep it
    assert lease.renewals >= 2 and lease.last_error is None
    held = cx.input_lease_get(machine.id)
    assert (held["held"], held["session_id"], held["fence"]) == (True, lease.session_id, fence)
    lease.key("Escape")  # input accepted under the renewed lease
    lease.release()
    assert cx.input_lease_get(machine.id)["held"] is False


def test_terminal_as_a_stream(server: tuple[str, str], machine: Machine) -> None:
    async def go() -> tuple[bytes, int | None]:
        async with AsyncComputer(base_url=server[0], api_key=server[1], retries=60) as acx:
            m = acx.machine(machine.id)
            term = await m.open_terminal({"command": ["bash", "--norc", "-i"], "cols": 100, "rows": 30})
            stream = await m.attach_terminal(term["id"])
            await stream.write("echo $((6 * 7))-done; exit 3\n")
            out = b""
            async for chunk in stream:
                out += chunk
            return out, await stream.wait()

    out, code = asyncio.run(asyncio.wait_for(go(), 120))
    assert b"42-done" in out
    assert code == 3


def test_files_up_and_down_across_the_chunk_and_the_cap(machine: Machine) -> None:
    data = secrets.token_bytes(5 * 1024 * 1024 + 17)
    progress: list[tuple[int, int | None]] = []
    machine.upload_file("/home/agent/big.bin", data, on_progress=lambda d, t: progress.append((d, t)))
    assert progress == [(4 * 1024 * 1024, len(data)), (len(data), len(data))], "two chunks: the first replaced, the second appended"
    assert machine.exec(["sha256sum", "/home/agent/big.bin"])["stdout"].split()[0] == hashlib.sha256(data).hexdigest()
    assert machine.read_file("/home/agent/big.bin", max_bytes=8 * 1024 * 1024) == data, "looped to eof, byte-exact"
    assert machine.read_file("/home/agent/big.bin") == data, "under the default 64 MiB cap"
    with pytest.raises(ComputerError) as e:
        machine.read_file("/home/agent/big.bin", max_bytes=1024 * 1024)
    assert (e.value.status, e.value.code) == (413, "invalid_request")
    assert "larger than the download cap of 1048576 bytes" in e.value.message
    machine.upload_file("/home/agent/empty", b"")
    assert machine.read_file("/home/agent/empty") == b""


def test_snapshot_and_fork(cx: Computer, machine: Machine) -> None:
    def mark(m: Machine, text: str) -> None:
        m.exec(["sh", "-c", f"echo {text} > /home/agent/mark.txt && sync"])

    mark(machine, "before")
    snap = machine.snapshot(name="py-snap")  # waits for the capture
    assert (snap["state"], snap["name"], snap["machine_id"]) == ("ready", "py-snap", machine.id)
    mark(machine, "after")
    fork = machine.fork({"snapshot_id": snap["id"], "name": "py-fork"})
    try:
        assert fork.id != machine.id
        assert fork.exec(["cat", "/home/agent/mark.txt"])["stdout"] == "before\n", "the fork starts from the snapshot"
        assert machine.exec(["cat", "/home/agent/mark.txt"])["stdout"] == "after\n", "the parent is unchanged"
    finally:
        fork.delete()
    assert [s["id"] for s in cx.snapshots_list(machine_id=machine.id)["data"]] == [snap["id"]]
    cx.snapshots_delete(snap["id"])


APP = "require('http').createServer((q, s) => s.end('hello from the guest')).listen(3000, '127.0.0.1')"


def test_ports(cx: Computer, machine: Machine) -> None:
    machine.write_file("/home/agent/app.js", APP)
    machine.exec(["sh", "-c", "node /home/agent/app.js >/tmp/app.log 2>&1 &"])
    pv = machine.publish_port({"port": 3000, "name": "app"})
    assert (pv["port"], pv["access"]) == (3000, "private")
    secret = pv.get("secret")
    assert secret, "the publishing answer carries the secret once"
    assert [p["id"] for p in machine.list_ports()["data"]] == [pv["id"]]
    assert cx.ports_get(machine.id, pv["id"]).get("secret") is None, "later reads do not"
    port = httpx.URL(cx.base_url).port
    host = f"{httpx.URL(pv['url']).host}:{port}"

    def through_preview() -> str | None:
        r = httpx.get(f"http://127.0.0.1:{port}/", headers={"host": host, "authorization": f"Bearer {secret}"})
        return r.text if r.status_code == 200 else None

    assert until("the app through the preview", through_preview) == "hello from the guest"
    machine.unpublish_port(pv["id"])
    assert machine.list_ports()["data"] == []


def test_secrets(machine: Machine) -> None:
    value = "py-secret-" + secrets.token_hex(6)
    s = machine.set_secret("PY_TOKEN", value)
    assert s["name"] == "PY_TOKEN" and value not in str(s)
    listed = machine.list_secrets()
    assert "PY_TOKEN" in str(listed) and value not in str(listed)
    assert machine.exec(["bash", "-lc", 'printf %s "$PY_TOKEN"'])["stdout"] == value, "a login shell has it"
    machine.delete_secret("PY_TOKEN")
    assert "PY_TOKEN" not in str(machine.list_secrets())


def test_screen_frames(server: tuple[str, str], cx: Computer, machine: Machine) -> None:
    display = cx.machines_display_get(machine.id)
    with machine.screen_frames(format="jpeg", fps=2) as frames:
        frame = next(frames)
        status = frames.aio.status
    assert frame.image[:2] == b"\xff\xd8", "a JPEG"
    assert (frame.format, frame.width, frame.height) == ("jpeg", display["width"], display["height"])
    assert status is not None and status["up"] is True

    async def webp() -> ScreenFrame:
        async with AsyncComputer(base_url=server[0], api_key=server[1]) as acx:
            async with await acx.machine(machine.id).screen_frames(format="webp", quality=50, fps=5) as stream:
                async for f in stream:
                    return f
        raise AssertionError("no frame")

    f = asyncio.run(asyncio.wait_for(webp(), 120))
    assert f.image[:4] == b"RIFF" and f.image[8:12] == b"WEBP", "a WebP, through the async iterator"
    assert (f.format, f.width, f.height) == ("webp", display["width"], display["height"])


def test_events_resume_across_a_cut_connection(server: tuple[str, str], cx: Computer, machine: Machine) -> None:
    relay = Relay(httpx.URL(cx.base_url).port or 80)
    key = server[1]

    async def go() -> tuple[list[EventDelivery], int]:
        async with AsyncComputer(base_url=f"http://127.0.0.1:{relay.port}", api_key=key) as via, AsyncComputer(base_url=server[0], api_key=key) as direct:
            events = await via.machine(machine.id).events(max_reconnects=20)
            got: list[EventDelivery] = []

            async def take(n: int) -> None:
                while sum(d.event["type"] == "machine.updated" for d in got) < n:
                    got.append(await asyncio.wait_for(events.__anext__(), 120))

            await direct.machines_update(machine.id, {"name": "py-ev-1"})
            await take(1)
            relay.drop()  # the connection is cut; events happen while it is down
            for n in (2, 3, 4):
                await direct.machines_update(machine.id, {"name": f"py-ev-{n}"})
            await take(4)
            await events.aclose()
            return got, events.reconnects

    try:
        got, reconnects = asyncio.run(go())
    finally:
        relay.close()
    assert reconnects >= 1 and relay.accepted >= 2, "resumed over a new connection"
    log = list(reversed(cx.machines_events(machine.id, limit=100)["data"]))
    ids = [e["id"] for e in log]
    since = log[ids.index(got[0].event["id"]) :]
    assert [d.event["id"] for d in got] == [e["id"] for e in since][: len(got)], "in log order, no gap, no repeat"
    assert [d.event["id"] for d in got if d.event["type"] == "machine.updated"] == [e["id"] for e in since if e["type"] == "machine.updated"]
    assert len({d.cursor for d in got}) == len(got)
    cx.machines_update(machine.id, {"name": "py-sdk"})


def test_coverage_check_on_the_served_document(cx: Computer) -> None:
    sys.path.insert(0, str(HERE))
    import codegen

    doc = httpx.get(f"{cx.base_url}/v1/openapi.json").json()
    assert codegen.check(doc) == []
    doc["paths"]["/v1/machines/{machine_id}/brand-new"] = {"post": {"operationId": "machinesBrandNew", "responses": {}}}
    problems = codegen.check(doc)
    assert problems[0] == "route POST /v1/machines/{machine_id}/brand-new has no Python method (run codegen.py, then wrap it where the SDK adds behaviour)"
    assert "computer/_operations.py differs from what the document generates (run codegen.py)" in problems


def test_anthropic_loop_drives_the_machine(machine: Machine) -> None:
    sys.path.insert(0, str(HERE / "examples"))
    import anthropic_loop

    seen_tools: list[dict[str, Any]] = []
    script: list[list[dict[str, Any]]] = [
        [{"type": "tool_use", "id": "tu_1", "name": "computer", "input": {"action": "mouse_move", "coordinate": [0, 0]}}],
        [{"type": "tool_use", "id": "tu_2", "name": "computer", "input": {"action": "screenshot"}}],
        [{"type": "text", "text": "done"}],
    ]

    def model(messages: list[dict[str, Any]], tool: dict[str, Any]) -> list[dict[str, Any]]:
        seen_tools.append(tool)
        return script.pop(0)

    messages = anthropic_loop.run(machine, "move the pointer to the corner", model)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert seen_tools[0]["type"] == "computer_20250124" and seen_tools[0]["display_width_px"] > 0
    results = [m["content"][0] for m in messages if m["role"] == "user" and isinstance(m["content"], list)]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("tu_1", False), ("tu_2", False)]
    assert results[1]["content"][0]["type"] == "image"
    assert machine.exec(["xdotool", "getmouselocation", "--shell"])["stdout"].splitlines()[:2] == ["X=0", "Y=0"]


def test_openai_loop_drives_the_machine(machine: Machine) -> None:
    sys.path.insert(0, str(HERE / "examples"))
    import openai_loop

    script: list[list[dict[str, Any]]] = [
        [{"type": "computer_call", "call_id": "call_1", "action": {"type": "move", "x": 3, "y": 4}}],
        [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}],
    ]
    sent: list[list[dict[str, Any]]] = []

    def model(items: list[dict[str, Any]], tool: dict[str, Any]) -> list[dict[str, Any]]:
        sent.append(items)
        return script.pop(0)

    openai_loop.run(machine, "move the pointer", model)
    out = sent[1][0]
    assert (out["type"], out["call_id"], out["output"]["type"]) == ("computer_call_output", "call_1", "computer_screenshot")
    assert out["output"]["image_url"].startswith("data:image/png;base64,")
    assert machine.exec(["xdotool", "getmouselocation", "--shell"])["stdout"].splitlines()[:2] == ["X=3", "Y=4"]


def test_quickstart_end_to_end(cx: Computer, tmp_path: Path) -> None:
    before = {m["id"] for m in cx.machines_list()["data"]}
    r = subprocess.run([sys.executable, str(HERE / "examples" / "quickstart.py")], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Linux x86_64\n"
    assert (tmp_path / "screenshot.png").read_bytes()[:8] == PNG
    assert {m["id"] for m in cx.machines_list()["data"]} == before, "and deleted its machine"
