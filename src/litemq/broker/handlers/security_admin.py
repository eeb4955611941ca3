"""ACL, SCRAM credential and client quota administration: DescribeAcls (29), CreateAcls (30),
DeleteAcls (31), DescribeClientQuotas (48), AlterClientQuotas (49), DescribeUserScramCredentials
(50), AlterUserScramCredentials (51).

ACLs and credentials live in the cluster metadata (:mod:`litemq.security.records`). A change
received by any broker goes through the metadata leader in a cluster (``cluster.admin``, which
answers once this broker has applied it) or straight into ``metadata.json`` on a single broker.
Describes read this broker's copy.

Rules (Kafka 3.9 ``AclApis``, ``KafkaApis``, ``AclControlManager``, ``ScramControlManager``):

- Create/DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE on the cluster; otherwise
  every result is CLUSTER_AUTHORIZATION_FAILED. With no authorizer configured they answer
  SECURITY_DISABLED.
- A binding with UNKNOWN/ANY fields, an empty name, a CLUSTER name other than
  ``kafka-cluster``, a principal that is not ``TYPE:NAME`` or an operation the resource type
  does not support gets INVALID_REQUEST; a filter with UNKNOWN fields too.
- DescribeUserScramCredentials needs DESCRIBE on the cluster (top-level
  CLUSTER_AUTHORIZATION_FAILED), AlterUserScramCredentials ALTER (each user gets it). Per user:
  UNACCEPTABLE_CREDENTIAL (empty name, iterations outside 4096..16384),
  UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND (deleting or describing a missing
  credential), DUPLICATE_RESOURCE (a user twice in one request). Works with or without an
  authorizer (KIP-554).
- DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster (top-level
  CLUSTER_AUTHORIZATION_FAILED), AlterClientQuotas ALTER_CONFIGS (each entry gets it). Filters
  and alterations follow :mod:`litemq.security.client_quotas` (KIP-546); a bad filter is a
  top-level INVALID_REQUEST (UNSUPPORTED_VERSION for an unknown entity type), a bad entry an
  INVALID_REQUEST of its own.
"""

from __future__ import annotations

import logging
import math

from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker.authz import authorize
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security import records as security_records
from litemq.security.acls import AclBinding, AclBindingFilter

log = logging.getLogger(__name__)

CLUSTER_AUTHORIZATION_MESSAGE = "Cluster authorization failed."
NO_AUTHORIZER_MESSAGE = "No Authorizer is configured."


async def metadata_change(runtime, action: str, **args) -> dict:
    """Plan and apply a security metadata change (see :mod:`litemq.security.records`) and return
    its reply: through the metadata leader in a cluster, locally (persisted) on a single broker.

    Raises:
        KafkaError: REQUEST_TIMED_OUT (no metadata leader), INVALID_REQUEST (a bound exceeded).
    """
    if runtime.cluster is not None:
        return await runtime.cluster.admin(action, **args)
    rec, reply = security_records.plan(runtime.metadata, action, args)
    if rec is not None:
        runtime.metadata.apply_security_record(rec)
    return reply


def _filter_row(f) -> list:
    return [f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
            f.host_filter, f.operation, f.permission_type]


# ================================================================== ACLs
async def handle_create_acls(ctx, req) -> dict:
    n = len(req.creations)
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        results = [[ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_MESSAGE]] * n
    elif ctx.runtime.authorizer is None:
        results = [[ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE]] * n
    else:
        rows = [[c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                 c.permission_type] for c in req.creations]
        try:
            results = (await metadata_change(ctx.runtime, "create_acls", acls=rows))["results"]
        except KafkaError as exc:
            results = [[exc.code, str(exc)]] * n
        created = sum(1 for code, _ in results if code == ErrorCode.NONE)
        if created:
            log.info("CreateAcls from %s: %d of %d binding(s) stored", ctx.client_id, created, n)
    return {"throttle_time_ms": 0,
            "results": [{"error_code": code, "error_message": msg} for code, msg in results]}


def handle_describe_acls(ctx, req) -> dict:
    out = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "resources": []}
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        out.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_AUTHORIZATION_MESSAGE)
        return out
    authorizer = ctx.runtime.authorizer
    if authorizer is None:
        out.update(error_code=ErrorCode.SECURITY_DISABLED, error_message="No Authorizer is configured on the broker")
        return out
    flt = AclBindingFilter.from_row(_filter_row(req))
    if flt.is_unknown():
        out.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Filter contain UNKNOWN elements")
        return out
    out["resources"] = describe_resources(authorizer.acls(flt))
    return out


def describe_resources(bindings) -> list[dict]:
    """DescribeAcls ``Resources``: bindings grouped by resource pattern (first-seen order)."""
    groups: dict[tuple, list[dict]] = {}
    for b in bindings:
        groups.setdefault((int(b.resource_type), b.resource_name, int(b.pattern_type)), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission_type)})
    return [{"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
            for (rt, name, pt), acls in groups.items()]


async def handle_delete_acls(ctx, req) -> dict:
    n = len(req.filters)
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        results = [[ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_MESSAGE, []]] * n
    elif ctx.runtime.authorizer is None:
        results = [[ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE, []]] * n
    else:
        try:
            results = (await metadata_change(ctx.runtime, "delete_acls",
                                             filters=[_filter_row(f) for f in req.filters]))["results"]
        except KafkaError as exc:
            results = [[exc.code, str(exc), []]] * n
        deleted = sum(len(matches) for _, _, matches in results)
        if deleted:
            log.info("DeleteAcls from %s: %d binding(s) deleted", ctx.client_id, deleted)
    out = []
    for code, msg, matches in results:
        acls = []
        for row in matches:
            b = AclBinding.from_row(row)
            acls.append({"error_code": ErrorCode.NONE, "error_message": None, "resource_type": int(b.resource_type),
                         "resource_name": b.resource_name, "pattern_type": int(b.pattern_type),
                         "principal": b.principal, "host": b.host, "operation": int(b.operation),
                         "permission_type": int(b.permission_type)})
        out.append({"error_code": code, "error_message": msg, "matching_acls": acls})
    return {"throttle_time_ms": 0, "filter_results": out}


# ================================================================== client quotas
def handle_describe_client_quotas(ctx, req) -> dict:
    """DescribeClientQuotas v0-1 (KIP-546)."""
    out = {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": None}
    if not authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        out.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_AUTHORIZATION_MESSAGE)
        return out
    try:
        found = ctx.runtime.metadata.client_quotas.describe(
            [(c.entity_type, c.match_type, c.match) for c in req.components], bool(req.strict))
    except KafkaError as exc:
        out.update(error_code=exc.code, error_message=str(exc))
        return out
    out["entries"] = [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                       "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]}
                      for entity, values in found]
    return out


def _quota_value(value: float) -> float | str:
    """A quota value as the metadata change carries it. JSON (the broker-to-broker RPC and the
    metadata log) has no NaN or infinity, so those travel as their text, which the validation
    refuses with INVALID_REQUEST as it refuses the number itself."""
    return value if math.isfinite(value) else repr(value)


async def handle_alter_client_quotas(ctx, req) -> dict:
    """AlterClientQuotas v0-1 (KIP-546): one result per entry, in request order; a value that is
    not a finite number >= 0 is INVALID_REQUEST, on any broker of a cluster."""
    entries = [[[[e.entity_type, e.entity_name] for e in entry.entity],
                [[op.key, _quota_value(op.value), bool(op.remove)] for op in entry.ops]] for entry in req.entries]
    n = len(entries)
    if not authorize(ctx, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
        results = [[ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_MESSAGE]] * n
    else:
        try:
            results = (await metadata_change(ctx.runtime, "alter_client_quotas", entries=entries,
                                             validate_only=bool(req.validate_only)))["results"]
        except KafkaError as exc:
            results = [[exc.code, str(exc)]] * n
        applied = sum(1 for code, _ in results if code == ErrorCode.NONE)
        if applied and not req.validate_only:
            log.info("AlterClientQuotas from %s: %d of %d entr%s applied", ctx.client_id, applied, n,
                     "y" if n == 1 else "ies")
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": msg, "entity": [{"entity_type": t, "entity_name": name}
                                                              for t, name in pairs]}
        for (code, msg), (pairs, _ops) in zip(results, entries)]}


# ================================================================== SCRAM credentials
def handle_describe_user_scram_credentials(ctx, req) -> dict:
    """DescribeUserScramCredentials (KIP-554). Refused (no DESCRIBE on the cluster): the
    top-level error and, as Kafka's ``getErrorResponse``, one result with that error per user
    named (librdkafka reads a result per user it asked for: with none it crashed)."""
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_MESSAGE
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "results": [{"user": u.name, "error_code": code, "error_message": message, "credential_infos": []}
                            for u in req.users or ()]}
    users = None if req.users is None else [u.name for u in req.users]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "results": security_records.describe_scram(ctx.runtime.metadata, users)}


async def handle_alter_user_scram_credentials(ctx, req) -> dict:
    if not authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER):
        users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        results = [[u, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_MESSAGE] for u in users]
    else:
        deletions = [[d.name, d.mechanism] for d in req.deletions]
        upsertions = [[u.name, u.mechanism, u.iterations, bytes(u.salt).hex(), bytes(u.salted_password).hex()]
                      for u in req.upsertions]
        try:
            results = (await metadata_change(ctx.runtime, "alter_scram_credentials", deletions=deletions,
                                             upsertions=upsertions))["results"]
        except KafkaError as exc:
            users = sorted({d[0] for d in deletions} | {u[0] for u in upsertions})
            results = [[u, exc.code, str(exc)] for u in users]
        changed = [u for u, code, _ in results if code == ErrorCode.NONE]
        if changed:
            log.info("AlterUserScramCredentials from %s: credentials of %s changed", ctx.client_id,
                     ", ".join(changed[:10]) + (" ..." if len(changed) > 10 else ""))
    return {"throttle_time_ms": 0,
            "results": [{"user": u, "error_code": code, "error_message": msg} for u, code, msg in results]}


def register(runtime) -> None:
    runtime.register(29, handle_describe_acls)
    runtime.register(30, handle_create_acls)
    runtime.register(31, handle_delete_acls)
    runtime.register(48, handle_describe_client_quotas)
    runtime.register(49, handle_alter_client_quotas)
    runtime.register(50, handle_describe_user_scram_credentials)
    runtime.register(51, handle_alter_user_scram_credentials)
