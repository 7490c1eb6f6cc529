"""Many concurrent MCP sessions against a Paywarden server for a while: throughput, latency, errors.

Each session has its own connection and calls its tools one after the other, in a loop, until the
time is up. It speaks MCP's streamable HTTP (protocol 2026-07-28: one JSON-RPC POST per call, no
session to set up) over a small HTTP/1.1 client of its own, so that one process can drive hundreds of
sessions without being the bottleneck; `--client official` uses the official MCP client instead
(the result's `client_cpu_ms_per_call` shows what each costs).

    PAYWARDEN_LOADTEST_TOKEN=pw_at_... .venv/bin/python infra/loadtest.py \\
        --url http://127.0.0.1:8402/mcp --sessions 200 --seconds 60 \\
        --call get_budget --call '{"tool": "fetch_paid", "arguments": {"url": "https://api.example.com/x"}}'

A call is a tool name, or a JSON object with `tool`, `arguments`, an optional `label` (how the
results name it) and `every` (made only on every n-th round of the session's loop: rounds n, 2n, ...,
counting from 1). The result is one JSON object on stdout: per label and in total, the calls started
in the measured window (after the warm-up), their p50, p99 and errors, the calls per second, and the
load test's own CPU time per call.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientInfo": {"name": "paywarden-loadtest", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]
    label: str
    every: int = 1


def parse_call(spec: str) -> Call:
    if not spec.lstrip().startswith("{"):
        return Call(spec, {}, spec)
    data = json.loads(spec)
    return Call(
        data["tool"], data.get("arguments", {}), data.get("label", data["tool"]), int(data.get("every", 1))
    )


@dataclass
class Outcome:
    label: str
    started: float
    elapsed: float
    error: str | None = None  # None: a result that is not a tool error
    detail: str = ""


class CallFailed(Exception):
    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


class LeanSession:
    """One keep-alive HTTP/1.1 connection speaking MCP's JSON-RPC; reconnects when the server closes."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self.authority = parts.netloc
        self.token = token
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = 0

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self._reader, self._writer

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": self._ids,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments, "_meta": META},
            }
        ).encode()
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.authority}\r\n"
            f"Authorization: Bearer {self.token}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            f"Mcp-Protocol-Version: {PROTOCOL}\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        try:
            reader, writer = await self._connection()
            writer.write(head + body)
            await writer.drain()
            status, headers, payload = await _read_response(reader)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            await self.close()
            raise CallFailed("connection", repr(exc)) from exc
        if headers.get("connection", "").lower() == "close":
            await self.close()
        if status != 200:
            raise CallFailed(f"http_{status}", payload[:200].decode("utf-8", "replace"))
        message = _jsonrpc_message(headers.get("content-type", ""), payload)
        if "error" in message:
            raise CallFailed(f"jsonrpc_{message['error'].get('code')}", str(message["error"].get("message")))
        result: dict[str, Any] = message["result"]
        return result


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    status_line = await reader.readuntil(b"\r\n")
    status = int(status_line.split(b" ", 2)[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        return status, headers, await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return status, headers, b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    raise ValueError("a response without a length")


def _jsonrpc_message(content_type: str, payload: bytes) -> dict[str, Any]:
    if content_type.startswith("text/event-stream"):
        messages = [
            json.loads(line[5:])
            for line in payload.decode().splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
        answers = [m for m in messages if "result" in m or "error" in m]
        if not answers:
            raise CallFailed("no_answer", payload[:200].decode("utf-8", "replace"))
        return dict(answers[-1])
    return dict(json.loads(payload))


def _tool_error(result: dict[str, Any]) -> tuple[str, str] | None:
    if not result.get("isError"):
        return None
    error = (result.get("structuredContent") or {}).get("error") or {}
    return f"tool_{error.get('code', '?')}", str(error.get("message", ""))[:200]


async def _lean_session(
    url: str, token: str, calls: list[Call], stop_at: float, timeout_s: float, outcomes: list[Outcome]
) -> None:
    session = LeanSession(url, token)
    round_no = 0
    try:
        while time.monotonic() < stop_at:
            for call in calls:
                if (round_no + 1) % call.every:
                    continue
                started = time.monotonic()
                if started >= stop_at:
                    break
                outcome = Outcome(call.label, started, 0.0)
                try:
                    result = await asyncio.wait_for(session.call_tool(call.tool, call.arguments), timeout_s)
                    failed = _tool_error(result)
                    if failed is not None:
                        outcome.error, outcome.detail = failed
                except TimeoutError:
                    outcome.error = "timeout"
                    await session.close()
                except CallFailed as exc:
                    outcome.error, outcome.detail = exc.kind, exc.detail
                outcome.elapsed = time.monotonic() - started
                outcomes.append(outcome)
            round_no += 1
    finally:
        await session.close()


async def _official_session(
    url: str, token: str, calls: list[Call], stop_at: float, timeout_s: float, outcomes: list[Outcome]
) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout_s)
    round_no = 0
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        while time.monotonic() < stop_at:
            for call in calls:
                if (round_no + 1) % call.every:
                    continue
                started = time.monotonic()
                if started >= stop_at:
                    break
                outcome = Outcome(call.label, started, 0.0)
                try:
                    result = await asyncio.wait_for(client.call_tool(call.tool, call.arguments), timeout_s)
                    if result.is_error:
                        error = (result.structured_content or {}).get("error") or {}
                        outcome.error = f"tool_{error.get('code', '?')}"
                        outcome.detail = str(error.get("message", ""))[:200]
                except TimeoutError:
                    outcome.error = "timeout"
                except Exception as exc:
                    outcome.error, outcome.detail = type(exc).__name__, str(exc)[:200]
                outcome.elapsed = time.monotonic() - started
                outcomes.append(outcome)
            round_no += 1


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[max(1, min(len(ordered), math.ceil(fraction * len(ordered)))) - 1]


def summarise(
    outcomes: list[Outcome], labels: list[str], window_start: float, window_s: float
) -> dict[str, Any]:
    measured = [o for o in outcomes if window_start <= o.started < window_start + window_s]

    def stats(selected: list[Outcome]) -> dict[str, Any]:
        times = [o.elapsed * 1000 for o in selected]
        return {
            "calls": len(selected),
            "per_second": len(selected) / window_s,
            "errors": sum(1 for o in selected if o.error is not None),
            "p50_ms": percentile(times, 0.5) if times else None,
            "p99_ms": percentile(times, 0.99) if times else None,
            "max_ms": max(times) if times else None,
        }

    errors = Counter(o.error for o in measured if o.error is not None)
    samples: dict[str, str] = {}
    for o in measured:
        if o.error is not None and o.error not in samples:
            samples[o.error] = o.detail
    return {
        "window_s": window_s,
        "total": stats(measured),
        "by_label": {label: stats([o for o in measured if o.label == label]) for label in labels},
        "error_kinds": dict(errors),
        "error_samples": samples,
        "outside_window": len(outcomes) - len(measured),
    }


async def run(args: argparse.Namespace, token: str) -> dict[str, Any]:
    calls = [parse_call(spec) for spec in args.call]
    labels = list(dict.fromkeys(call.label for call in calls))
    outcomes: list[Outcome] = []
    session = _official_session if args.client == "official" else _lean_session
    started = time.monotonic()
    window_start = started + args.warmup
    stop_at = window_start + args.seconds
    tasks = [
        asyncio.create_task(session(args.url, token, calls, stop_at, args.timeout, outcomes))
        for _ in range(args.sessions)
    ]
    cpu_before = time.process_time()
    await asyncio.gather(*tasks)
    cpu = time.process_time() - cpu_before
    summary = summarise(outcomes, labels, window_start, args.seconds)
    summary.update(
        {
            "sessions": args.sessions,
            "client": args.client,
            "wall_s": time.monotonic() - started,
            "client_cpu_ms_per_call": 1000 * cpu / max(1, len(outcomes)),
        }
    )
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the MCP endpoint, e.g. http://127.0.0.1:8402/mcp")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the measured window")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before the window opens")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds before a call counts as timed out"
    )
    parser.add_argument("--call", action="append", required=True, help="a tool name or a JSON call")
    parser.add_argument("--client", choices=("lean", "official"), default="lean")
    args = parser.parse_args()
    token = os.environ.get("PAYWARDEN_LOADTEST_TOKEN", "")
    if not token:
        sys.exit("set PAYWARDEN_LOADTEST_TOKEN to an agent token")
    json.dump(asyncio.run(run(args, token)), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
