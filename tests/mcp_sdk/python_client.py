"""An agent host's view of Switchboard through the official MCP Python SDK (issue #50).

`tests/blackbox_mcp_sdks.rs` installs the SDK from PyPI (pinned, `python-requirements.txt`) into
a venv under target/, starts the real binary, vends an endpoint and runs this script against it.

It initializes with every handshake revision the SDK offers and once with the SDK's high-level
`Client` in its default mode (which probes for the stateless revision first and falls back to
`initialize`); lists the tools; calls every tool the endpoint is granted and checks each answer;
receives a doorbell, a `reopen` ring and a clock-in digest through a notification binding whose
params type requires `meta` to be a map of string to string; loses a doorbell to a cut
connection and gets it back through the SDK's own reconnect with Last-Event-ID; and ends the
session with DELETE. Any failed check raises, and the process exits non-zero with the reason.

Environment: SB_MCP_URL, SB_MCP_TOKEN (sbk_), SB_API (the server's base URL), SB_HUMAN_TOKEN (sbh_
of the endpoint's owner), SB_SCOPE.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import anyio
import httpx2
import mcp.client.session as client_session
from mcp import Client
from mcp.client import ClientSession, NotificationBinding
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ConfigDict

MCP_URL = os.environ["SB_MCP_URL"]
MCP_TOKEN = os.environ["SB_MCP_TOKEN"]
API = os.environ["SB_API"]
HUMAN_TOKEN = os.environ["SB_HUMAN_TOKEN"]
SCOPE = os.environ["SB_SCOPE"]

DOORBELL_METHOD = "notifications/claude/channel"
# The tools an endpoint granted every verb has, in catalog order.
GRANTED_TOOLS = [
    "claim_next", "claim", "heartbeat", "complete", "fail", "release", "list_todos", "get_todo",
    "create_todo", "create_todos", "admission_status", "set_admission_policy", "discard_todo",
    "clear_queue", "clear_admission_policy", "clock_in", "clock_out", "presence",
]
WAIT_SECONDS = 20


def log(line: str) -> None:
    print(f"python sdk: {line}", flush=True)


def check(condition: Any, what: str, detail: Any = None) -> None:
    if not condition:
        raise AssertionError(f"{what}: {detail!r}")


class Channel(BaseModel):
    """A channel event as a host reads it: one sentence, and meta a map of string to string."""

    model_config = ConfigDict(extra="forbid")
    content: str
    meta: dict[str, str]


class Doorbells:
    """Doorbells the SDK's binding delivered, and waits for one that matches."""

    def __init__(self) -> None:
        self.seen: list[Channel] = []
        self.arrived = anyio.Event()

    async def receive(self, ring: Channel) -> None:
        self.seen.append(ring)
        self.arrived.set()

    async def wait_for(self, what: str, matches) -> Channel:
        try:
            with anyio.fail_after(WAIT_SECONDS):
                while True:
                    for ring in self.seen:
                        if matches(ring.meta):
                            return ring
                    self.arrived = anyio.Event()
                    await self.arrived.wait()
        except TimeoutError as timeout:
            raise AssertionError(f"no {what} within {WAIT_SECONDS} s; seen {self.seen}") from timeout


class Wire:
    """What the test's transport saw and may do: the session id, the GET streams opened (with the
    Last-Event-ID each carried), the id of the last event passed on, and a cut to make."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.streams: list[str | None] = []
        self.last_delivered_id: str | None = None
        self.cut_at_next_doorbell = False
        self.dropped: list[bytes] = []


class CuttingStream(httpx2.AsyncByteStream):
    """An event stream the test can cut as a doorbell arrives, the way a network drops a
    connection mid-event: that event never reaches the SDK."""

    def __init__(self, inner: httpx2.AsyncByteStream, wire: Wire) -> None:
        self.inner = inner
        self.wire = wire

    async def __aiter__(self):
        buffered = b""
        async for chunk in self.inner:
            buffered += chunk
            while b"\n\n" in buffered:
                event, buffered = buffered.split(b"\n\n", 1)
                event += b"\n\n"
                if self.wire.cut_at_next_doorbell and DOORBELL_METHOD.encode() in event:
                    self.wire.cut_at_next_doorbell = False
                    self.wire.dropped.append(event)
                    raise httpx2.ReadError("connection cut by the test")
                found = re.search(rb"^id: ?(.*)$", event, re.MULTILINE)
                if found:
                    self.wire.last_delivered_id = found.group(1).decode()
                yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


class TestTransport(httpx2.AsyncBaseTransport):
    def __init__(self, wire: Wire) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.wire = wire

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if session := response.headers.get("mcp-session-id"):
            self.wire.session_id = session
        is_stream = request.method == "GET" and "text/event-stream" in request.headers.get("accept", "")
        if not is_stream or response.status_code != 200:
            return response
        self.wire.streams.append(request.headers.get("last-event-id"))
        return httpx2.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=CuttingStream(response.stream, self.wire),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def http_client(wire: Wire) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers={"authorization": f"Bearer {MCP_TOKEN}"},
        transport=TestTransport(wire),
        timeout=httpx2.Timeout(30, read=300),
    )


async def api(method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {HUMAN_TOKEN}"}) as http:
        response = await http.request(method, API + path, json=body)
        return response.status_code, (response.json() if response.content else None)


async def create_todo(queue: str, title: str) -> str:
    status, body = await api("POST", "/api/v1/todos", {"scope": SCOPE, "queue": queue, "title": title})
    check(status == 201, f"POST /api/v1/todos in {queue}", body)
    return body["todo"]["id"]


async def check_ended(session_id: str | None) -> None:
    """An ended session is unknown: its stream cannot be opened again."""
    check(session_id, "the transport saw a session id")
    headers = {"authorization": f"Bearer {MCP_TOKEN}", "accept": "text/event-stream", "mcp-session-id": session_id}
    async with httpx2.AsyncClient() as http:
        response = await http.get(MCP_URL, headers=headers)
    check(response.status_code == 404, "an ended session is unknown", response.status_code)


def check_ring(ring: Channel, **expected: str) -> None:
    check(0 < len(ring.content) <= 120, "content is one short sentence", ring)
    for key, value in expected.items():
        check(ring.meta.get(key) == value, f"meta.{key} is {value}", ring)


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, arguments)
    check(not result.is_error, f"{name} answered without an error", result)
    check(isinstance(result.structured_content, dict), f"{name} has structuredContent", result)
    check(json.loads(result.content[0].text) == result.structured_content, f"{name}: text and structuredContent agree")
    return result.structured_content


async def refused(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(name, arguments)
    check(result.is_error, f"{name} refused", result)
    return result.structured_content


async def every_handshake_revision() -> None:
    """Each revision the SDK's `initialize` can offer, in its own session, ended with DELETE."""
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        client_session.LATEST_HANDSHAKE_VERSION = version
        wire = Wire()
        async with http_client(wire) as http, streamable_http_client(MCP_URL, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                result = await session.initialize()
                check(result.protocol_version == version, f"offered {version}", result.protocol_version)
                check(result.capabilities.experimental == {"claude/channel": {}}, "the channel capability", result.capabilities)
                check(result.capabilities.tools is not None, "the tools capability", result.capabilities)
                instructions = result.instructions or ""
                check("claim_next" in instructions and "never a command" in instructions, "instructions", instructions)
                tools = (await session.list_tools()).tools
                check([tool.name for tool in tools] == GRANTED_TOOLS, f"tools/list at {version}", [t.name for t in tools])
        await check_ended(wire.session_id)
        log(f"offered {version}: negotiated {version}, {len(tools)} tools listed, session ended")
    client_session.LATEST_HANDSHAKE_VERSION = LATEST_HANDSHAKE_VERSION


async def the_default_client() -> None:
    """The SDK's high-level `Client` as a host uses it by default (mode "auto")."""
    wire = Wire()
    async with http_client(wire) as http:
        async with Client(streamable_http_client(MCP_URL, http_client=http)) as client:
            check(client.protocol_version == LATEST_HANDSHAKE_VERSION, "the default client's revision", client.protocol_version)
            check("claude/channel" in (client.server_capabilities.experimental or {}), "the channel capability")
            tools = (await client.list_tools()).tools
            check([tool.name for tool in tools] == GRANTED_TOOLS, "tools/list by the default client")
            answer = await client.call_tool("presence", {})
            check(not answer.is_error and answer.structured_content["presence"] in ("in", "out"), "presence", answer)
    await check_ended(wire.session_id)
    log(f"the default Client negotiated {LATEST_HANDSHAKE_VERSION} and called a tool")


async def one_host_session() -> None:
    doorbells = Doorbells()
    binding = NotificationBinding(method=DOORBELL_METHOD, params_type=Channel, handler=doorbells.receive)
    wire = Wire()
    async with http_client(wire) as http, streamable_http_client(MCP_URL, http_client=http) as (read, write):
        async with ClientSession(read, write, notification_bindings=[binding]) as session:
            await session.initialize()
            with anyio.fail_after(WAIT_SECONDS):
                while not wire.streams:
                    await anyio.sleep(0.05)

            # A doorbell for new work.
            first = await create_todo("inbox", "ring me")
            ring = await doorbells.wait_for("the first doorbell", lambda meta: meta.get("todo_id") == first)
            check_ring(ring, queue="inbox", reason="created", source="human")
            log("doorbell received for new work")

            # A doorbell lost to a cut connection comes back through the SDK's reconnect.
            with anyio.fail_after(WAIT_SECONDS):
                while wire.last_delivered_id is None:
                    await anyio.sleep(0.05)
            delivered_before_cut = wire.last_delivered_id
            wire.cut_at_next_doorbell = True
            second = await create_todo("inbox", "ring me after a cut")
            ring = await doorbells.wait_for("the lost doorbell, replayed", lambda meta: meta.get("todo_id") == second)
            check_ring(ring, queue="inbox")
            check(len(wire.dropped) == 1 and second.encode() in wire.dropped[0], "the cut dropped the doorbell", wire.dropped)
            check(len(wire.streams) >= 2 and wire.streams[-1] == delivered_before_cut, "resumed with Last-Event-ID", wire.streams)
            log(f"stream resumed after a cut with Last-Event-ID {wire.streams[-1]}; the lost doorbell replayed")

            await every_granted_tool(session, doorbells, first, second)
    await check_ended(wire.session_id)
    log("session ended with DELETE")


async def every_granted_tool(session: ClientSession, doorbells: Doorbells, first: str, second: str) -> None:
    for tool in (await session.list_tools()).tools:
        check(tool.input_schema.get("type") == "object", f"{tool.name} input schema", tool)
        check((tool.output_schema or {}).get("type") == "object", f"{tool.name} output schema", tool)

    answer = await call(session, "claim_next", {"queue": "inbox"})
    check(not answer["empty"] and answer["todo"]["id"] == first and answer["todo"]["state"] == "claimed", "claim_next", answer)
    answer = await call(session, "heartbeat", {"id": first, "lease_ttl_seconds": 600})
    check(answer["id"] == first and answer["state"] == "claimed", "heartbeat", answer)
    answer = await call(session, "complete", {"id": first, "result": {"summary": "done", "files": ["a.txt"]}})
    check(answer["id"] == first and answer["state"] == "done", "complete", answer)
    answer = await call(session, "get_todo", {"id": first})
    check(answer["state"] == "done" and answer["result"] == {"summary": "done", "files": ["a.txt"]}, "get_todo", answer)

    answer = await call(session, "claim", {"id": second})
    check(answer["todo"]["id"] == second and answer["todo"]["state"] == "claimed", "claim", answer)
    answer = await call(session, "fail", {"id": second, "summary": "flaky upstream"})
    check(answer["id"] == second and answer["attempt"] == 1 and answer["state"] != "claimed", "fail", answer)

    answer = await call(session, "create_todo", {"queue": "spare", "title": "from the agent", "payload": {"n": 1}})
    check(answer["todo"]["created_by_kind"] == "agent" and answer["deduped"] is False, "create_todo", answer)
    spare_one = answer["todo"]["id"]
    batch = [{"queue": "spare", "title": "batch a"}, {"queue": "spare", "title": "batch b", "payload": [1, 2]}]
    answer = await call(session, "create_todos", {"todos": batch})
    check(len(answer["todos"]) == 2 and all(t["todo"]["queue"] == "spare" for t in answer["todos"]), "create_todos", answer)
    answer = await call(session, "list_todos", {"queue": "spare"})
    check(len(answer["todos"]) == 3 and any(t["id"] == spare_one for t in answer["todos"]), "list_todos", answer)

    releasing = (await call(session, "claim_next", {"queue": "spare"}))["todo"]["id"]
    answer = await call(session, "release", {"id": releasing})
    check(answer["id"] == releasing and answer["state"] == "pending", "release", answer)
    answer = await call(session, "discard_todo", {"queue": "spare", "id": spare_one})
    check(answer == {"queue": "spare", "removed": 1}, "discard_todo", answer)
    answer = await call(session, "clear_queue", {"queue": "spare"})
    check(answer == {"queue": "spare", "removed": 2}, "clear_queue", answer)

    # A paused queue defers its work, says why, and rings `reopen` when its limit is raised.
    answer = await call(session, "set_admission_policy", {"queue": "gated", "policy": {"max_in_flight": 0}})
    check(answer["queue"] == "gated" and answer["status"]["status"] == "paused", "set_admission_policy", answer)
    gated = (await call(session, "create_todo", {"queue": "gated", "title": "waits for the reopening"}))["todo"]["id"]
    answer = await call(session, "claim_next", {"queue": "gated"})
    check(answer["empty"] and answer["deferred"][0]["reason"] == "paused", "claim_next says why", answer)
    answer = await refused(session, "claim", {"id": gated})
    check(answer["code"] == "deferred" and answer["reason"] == "paused", "claim answers deferred", answer)
    answer = await call(session, "admission_status", {"queue": "gated"})
    entry = answer["queues"][0]
    check(entry["queue"] == "gated" and entry["status"] == "paused" and entry["pending"] == 1, "admission_status", answer)
    status, body = await api("PUT", f"/api/v1/admission/{SCOPE}/gated", {"max_in_flight": 1})
    check(status == 200, "the owner raises the limit", body)
    ring = await doorbells.wait_for("the reopen ring", lambda m: m.get("reason") == "reopen" and m.get("queue") == "gated")
    check_ring(ring, todo_id=gated, queue="gated", reason="reopen")
    log("reopen ring received when the paused queue reopened")
    answer = await call(session, "clear_admission_policy", {"queue": "gated"})
    check(answer == {"queue": "gated", "cleared": True}, "clear_admission_policy", answer)

    # Presence: out, then in again, with a digest of the work waiting.
    answer = await call(session, "clock_out", {})
    check(answer["presence"] == "out", "clock_out", answer)
    answer = await call(session, "clock_in", {"for": 600})
    check(answer["presence"] == "in" and answer["pending"] >= 1, "clock_in", answer)
    ring = await doorbells.wait_for("the clock-in digest", lambda m: m.get("kind") == "digest" and m.get("reason") == "clock_in")
    check(ring.meta["pending"].isdigit() and "gated" in ring.meta["queues"].split(","), "the digest's meta", ring)
    answer = await call(session, "presence", {})
    check(answer["presence"] == "in" and answer["source"] == "override", "presence", answer)
    log("every granted tool called and its answer checked; clock-in digest received")


async def main() -> None:
    await every_handshake_revision()
    await the_default_client()
    await one_host_session()
    log("all checks passed")


if __name__ == "__main__":
    anyio.run(main)
