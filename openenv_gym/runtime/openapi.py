"""The OpenAPI 3.1 document of a server: what ``GET /openapi.json`` serves.

Written from the routes the server actually answers (:class:`Operation` records, one per
path and method) and from the Pydantic models of the environment, so the document never
lists a path the server does not serve. OpenEnv's ``openenv validate --url`` reads its
``info.version`` and its ``paths`` (``/reset``, ``/step``, ``/state`` present: simulation
mode; absent: production mode).

    >>> from pydantic import BaseModel
    >>> class Health(BaseModel):
    ...     status: str = "healthy"
    >>> health = Operation("/health", "get", "Health check", response=Health)
    >>> doc = openapi_document(title="t", version="1.0.0", operations=[health])
    >>> doc["paths"]["/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    {'$ref': '#/components/schemas/Health'}
    >>> sorted(doc["components"]["schemas"])
    ['Health']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

__all__ = ["OPENAPI_VERSION", "Operation", "openapi_document"]

OPENAPI_VERSION = "3.1.0"
"""The OpenAPI version written (3.1: its schemas are JSON Schema 2020-12, as Pydantic's)."""

_REF = "#/components/schemas/{model}"


@dataclass(frozen=True, slots=True)
class Operation:
    """One path and method the server answers, as the document describes it.

    Attributes:
        path: The path, e.g. ``/step``.
        method: Lower-case HTTP method (``get``, ``post``).
        summary: One line.
        tag: The group it is listed under.
        description: Longer text (Markdown), or empty.
        request: The model of the JSON request body, or None (no body).
        request_required: Whether the body is required.
        response: The model of the 200 response body, or None.
        responses: Other statuses: status -> (description, model or None).
    """

    path: str
    method: str
    summary: str
    tag: str = "Environment"
    description: str = ""
    request: type[BaseModel] | None = None
    request_required: bool = True
    response: type[BaseModel] | None = None
    responses: Mapping[int, tuple[str, type[BaseModel] | None]] = field(default_factory=dict)


def openapi_document(
    *,
    title: str,
    version: str,
    operations: Sequence[Operation],
    description: str = "",
    extra_info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The OpenAPI document of ``operations``; every model they name becomes a component.

    Args:
        title: ``info.title``.
        version: ``info.version`` (what ``openenv validate`` reports as the API version).
        operations: What the server answers.
        description: ``info.description``.
        extra_info: More ``info`` fields (``x-...`` extensions).

    Returns:
        The document, ready for ``json.dumps``.
    """
    models: list[type[BaseModel]] = []
    for op in operations:
        for model in (op.request, op.response, *(m for _, m in op.responses.values())):
            if model is not None and model not in models:
                models.append(model)
    refs, components = _components(models)
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method] = _operation(op, refs)
    info: dict[str, Any] = {"title": title, "version": version}
    if description:
        info["description"] = description
    info.update(extra_info or {})
    tags = list(dict.fromkeys(op.tag for op in operations))
    return {
        "openapi": OPENAPI_VERSION,
        "info": info,
        "paths": paths,
        "components": {"schemas": components},
        "tags": [{"name": tag} for tag in tags],
    }


def _components(
    models: Sequence[type[BaseModel]],
) -> tuple[dict[type[BaseModel], dict[str, Any]], dict[str, Any]]:
    """Per model its ``$ref``, and the component schemas (models they nest included)."""
    if not models:
        return {}, {}
    mapping, top = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
    refs: dict[type[BaseModel], dict[str, Any]] = {}
    for (model, _), schema in mapping.items():
        refs[model] = schema  # type: ignore[index]  # only models were given
    return refs, dict(top.get("$defs", {}))


def _operation(op: Operation, refs: Mapping[type[BaseModel], dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "tags": [op.tag],
        "summary": op.summary,
        "operationId": f"{op.method}_{op.path.strip('/').replace('/', '_') or 'root'}",
    }
    if op.description:
        out["description"] = op.description
    if op.request is not None:
        out["requestBody"] = {
            "required": op.request_required,
            "content": {"application/json": {"schema": refs[op.request]}},
        }
    responses: dict[str, Any] = {"200": _response("Successful Response", op.response, refs)}
    for status, (text, model) in sorted(op.responses.items()):
        responses[str(status)] = _response(text, model, refs)
    out["responses"] = responses
    return out


def _response(
    text: str, model: type[BaseModel] | None, refs: Mapping[type[BaseModel], dict[str, Any]]
) -> dict[str, Any]:
    if model is None:
        return {"description": text}
    return {"description": text, "content": {"application/json": {"schema": refs[model]}}}
