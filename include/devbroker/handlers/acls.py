"""CreateAcls, DescribeAcls, DeleteAcls over `broker.acls` (devbroker.acls.AclStore).

Versions 1-3 as Kafka 4 offers them (v0 knew only literal patterns and is gone).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from devbroker.acls import AclBinding, AclBindingFilter, AclError
from devbroker.registry import RequestContext, handles


@handles(30, 1, 3)
async def create_acls(ctx: RequestContext, request: Any) -> dict:
    bindings = [
        AclBinding.from_codes(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in request.creations
    ]
    results = ctx.broker.acls.create(bindings)
    return {
        "results": [
            {"error_code": ErrorCode.none, "error_message": None}
            if error is None
            else {"error_code": error.code, "error_message": error.message}
            for error in results
        ]
    }


def _filter(item: Any) -> AclBindingFilter:
    return AclBindingFilter.from_codes(
        item.resource_type_filter,
        item.resource_name_filter,
        item.pattern_type_filter,
        item.principal_filter,
        item.host_filter,
        item.operation,
        item.permission_type,
    )


@handles(29, 1, 3)
async def describe_acls(ctx: RequestContext, request: Any) -> dict:
    try:
        bindings = ctx.broker.acls.describe(_filter(request))
    except AclError as exc:
        return {"error_code": exc.code, "error_message": exc.message, "resources": []}
    resources: dict[tuple[int, str, int], list[dict]] = {}
    for b in bindings:
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation,
                "permission_type": b.permission_type,
            }
        )
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": [
            {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": acls}
            for (rtype, name, ptype), acls in resources.items()
        ],
    }


@handles(31, 1, 3)
async def delete_acls(ctx: RequestContext, request: Any) -> dict:
    results = ctx.broker.acls.delete([_filter(f) for f in request.filters])
    filter_results = []
    for result in results:
        if isinstance(result, AclError):
            filter_results.append(
                {"error_code": result.code, "error_message": result.message, "matching_acls": []}
            )
            continue
        filter_results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        "resource_type": b.resource_type,
                        "resource_name": b.resource_name,
                        "pattern_type": b.pattern_type,
                        "principal": b.principal,
                        "host": b.host,
                        "operation": b.operation,
                        "permission_type": b.permission_type,
                    }
                    for b in result
                ],
            }
        )
    return {"filter_results": filter_results}
