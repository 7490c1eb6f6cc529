"""Every tool's input schema is portable: one JSON type per property (no string-or-number union,
no anyOf/oneOf/allOf, no $ref), every required name a property. Clients that render forms from a
schema, or validate against it strictly, then agree on what to send; amounts are decimal strings,
and a JSON number is still read where a client sends one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from server.kit.db import Database
from server.mcp.arguments import USD_PATTERN
from tests.support.paywarden import RunningServer, error_of, mcp_client, serve, structured
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio
COMBINATORS = ("anyOf", "oneOf", "allOf", "$ref", "not")


@pytest.fixture
def server(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url) as running:  # the schemas are the subject, not SQL: one database
        yield running


def portability_warnings(schema: dict[str, Any], where: str) -> list[str]:
    found: list[str] = []
    kind = schema.get("type")
    if not isinstance(kind, str):
        found.append(f"{where}: type is {kind!r}, not one JSON type")
    found += [f"{where}: uses {word}" for word in COMBINATORS if word in schema]
    properties = schema.get("properties", {})
    found += [
        f"{where}: requires {name}, not a property"
        for name in schema.get("required", [])
        if name not in properties
    ]
    for name, sub in properties.items():
        found += portability_warnings(sub, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        found += portability_warnings(schema["items"], f"{where}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        found += portability_warnings(schema["additionalProperties"], f"{where}{{}}")
    return found


def test_the_check_finds_what_it_looks_for() -> None:
    union = {"type": "object", "properties": {"amount": {"type": ["string", "number"]}}, "required": ["x"]}
    assert portability_warnings(union, "t") == [
        "t: requires x, not a property",
        "t.amount: type is ['string', 'number'], not one JSON type",
    ]
    assert portability_warnings({"type": "object", "properties": {"a": {"anyOf": []}}}, "t") == [
        "t.a: type is None, not one JSON type",
        "t.a: uses anyOf",
    ]


async def test_every_tool_input_schema_is_portable(server: RunningServer, sqlite_db: Database) -> None:
    setup = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"])
    async with mcp_client(server.mcp_url, setup.token) as client:
        tools = (await client.list_tools()).tools
    warnings = [w for tool in tools for w in portability_warnings(tool.input_schema, tool.name)]
    assert warnings == []
    amounts = {
        (tool.name, name): prop
        for tool in tools
        for name, prop in tool.input_schema["properties"].items()
        if name.endswith("Usd")
    }
    assert ("fetch_paid", "maxAmountUsd") in amounts
    assert ("propose_rule", "limitUsd") in amounts
    assert all(prop == {**prop, "type": "string", "pattern": USD_PATTERN} for prop in amounts.values())


async def test_an_amount_is_read_as_a_decimal_string_or_a_json_number(
    server: RunningServer, sqlite_db: Database
) -> None:
    setup = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"])
    async with mcp_client(server.mcp_url, setup.token) as client:
        as_text = structured(await client.call_tool("propose_rule", {"kind": "limit", "limitUsd": "2.5"}))
        as_number = structured(
            await client.call_tool("propose_rule", {"kind": "limit", "limitUsd": 1.25, "window": "week"})
        )
        refused = error_of(await client.call_tool("propose_rule", {"kind": "limit", "limitUsd": "two"}))
    assert as_text["limitUsd"] == "2.50"
    assert as_number["limitUsd"] == "1.25"
    assert refused["code"] == "rule_rejected"
