"""The admin API's OpenAPI 3.1 document, generated from the route table and the schema models the
handlers render through: nothing in it is written by hand twice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode
from starlette.requests import Request
from starlette.responses import JSONResponse

from server.web.api.schemas import ConfirmationRequired, ProblemDocument
from server.web.http import services_of

REF = "#/components/schemas/"
PROBLEM = {"application/problem+json": {"schema": {"$ref": f"{REF}ProblemDocument"}}}


@dataclass(frozen=True)
class Parameter:
    name: str
    where: str  # "query" or "path"
    schema: dict[str, Any]
    description: str
    required: bool = False


@dataclass(frozen=True)
class Operation:
    path: str
    operation_id: str
    summary: str
    answer: type[BaseModel]
    parameters: tuple[Parameter, ...] = field(default=())
    not_found: bool = False
    method: str = "get"
    body: type[BaseModel] | None = None  # the JSON request body a change takes
    status: int = 200
    csv: bool = False  # also answers text/csv (with `format=csv`)
    conflict: bool = False  # may answer 409 (the change contradicts the state)
    confirms: bool = False  # may answer 202: a widening change waits for a member's passkey

    @property
    def writes(self) -> bool:
        """Whether the route changes something, so needs admin:write."""
        return self.method != "get"


def document(operations: tuple[Operation, ...], *, server_url: str) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    described: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        (ProblemDocument, "serialization"),
        (ConfirmationRequired, "serialization"),
    ]
    for item in operations:
        described.append((item.answer, "serialization"))
        if item.body is not None:
            described.append((item.body, "validation"))
    for model, mode in described:
        generated = model.model_json_schema(ref_template=REF + "{model}", mode=mode)
        schemas.update(generated.pop("$defs", {}))
        schemas[model.__name__] = generated
    for operation in operations:
        paths.setdefault(operation.path, {})[operation.method] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Paywarden admin API", "version": "1"},
        "servers": [{"url": server_url}],
        "security": [{"adminToken": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"adminToken": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(operation: Operation) -> dict[str, Any]:
    answer: dict[str, Any] = {"application/json": {"schema": {"$ref": f"{REF}{operation.answer.__name__}"}}}
    if operation.csv:
        answer["text/csv"] = {"schema": {"type": "string"}}
    scope = "admin:write" if operation.writes else "admin:read (or admin:write)"
    responses: dict[str, Any] = {
        str(operation.status): {"description": operation.summary, "content": answer},
        "400": {"description": "A parameter or the body is not valid.", "content": PROBLEM},
        "401": {"description": "No admin token, or one that cannot be used.", "content": PROBLEM},
        "403": {
            "description": f"The token lacks the scope ({scope}), or the change needs more.",
            "content": PROBLEM,
        },
        "429": {"description": "Too many requests; see Retry-After.", "content": PROBLEM},
    }
    if operation.not_found:
        responses["404"] = {"description": "Not in this organisation.", "content": PROBLEM}
    if operation.confirms:
        responses["202"] = {
            "description": "The change widens authority: it waits for a member to confirm it with a "
            "passkey at `confirmationUrl` (also the `Location`), and is made only then.",
            "headers": {"Location": {"description": "The confirmation page.", "schema": {"type": "string"}}},
            "content": {"application/json": {"schema": {"$ref": f"{REF}ConfirmationRequired"}}},
        }
    if operation.conflict:
        responses["409"] = {"description": "The change contradicts the current state.", "content": PROBLEM}
    described: dict[str, Any] = {
        "operationId": operation.operation_id,
        "summary": operation.summary,
        "description": f"Needs the {scope} scope.",
        "parameters": [
            {
                "name": parameter.name,
                "in": parameter.where,
                "required": parameter.required or parameter.where == "path",
                "description": parameter.description,
                "schema": parameter.schema,
            }
            for parameter in operation.parameters
        ],
        "responses": responses,
    }
    if operation.body is not None:
        body_schema = {"$ref": f"{REF}{operation.body.__name__}"}
        described["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body_schema}},
        }
    return described


def endpoint(operations: tuple[Operation, ...]) -> Any:
    async def openapi_json(request: Request) -> JSONResponse:
        base = services_of(request).settings.admin_api_audience
        # Paths in the document are relative to the server URL, which ends in /api/v1.
        return JSONResponse(document(operations, server_url=base))

    return openapi_json
