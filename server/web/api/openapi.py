"""The admin API's OpenAPI 3.1 document, generated from the route table and the schema models the
handlers render through: nothing in it is written by hand twice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse

from server.web.api.schemas import ProblemDocument
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


def document(operations: tuple[Operation, ...], *, server_url: str) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    models: tuple[type[BaseModel], ...] = (ProblemDocument, *(item.answer for item in operations))
    for model in models:
        generated = model.model_json_schema(ref_template=REF + "{model}", mode="serialization")
        schemas.update(generated.pop("$defs", {}))
        schemas[model.__name__] = generated
    for operation in operations:
        responses: dict[str, Any] = {
            "200": {
                "description": operation.summary,
                "content": {"application/json": {"schema": {"$ref": f"{REF}{operation.answer.__name__}"}}},
            },
            "400": {"description": "A parameter is not valid.", "content": PROBLEM},
            "401": {"description": "No admin token, or one that cannot be used.", "content": PROBLEM},
            "403": {"description": "The token lacks the admin scope.", "content": PROBLEM},
            "429": {"description": "Too many requests; see Retry-After.", "content": PROBLEM},
        }
        if operation.not_found:
            responses["404"] = {"description": "Not in this organisation.", "content": PROBLEM}
        paths[operation.path] = {
            "get": {
                "operationId": operation.operation_id,
                "summary": operation.summary,
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
        }
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


def endpoint(operations: tuple[Operation, ...]) -> Any:
    async def openapi_json(request: Request) -> JSONResponse:
        base = services_of(request).settings.admin_api_audience
        # Paths in the document are relative to the server URL, which ends in /api/v1.
        return JSONResponse(document(operations, server_url=base))

    return openapi_json
