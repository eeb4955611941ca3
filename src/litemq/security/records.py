"""ACLs, SCRAM credentials, client quotas and client metrics subscriptions as cluster metadata: planning changes and applying their records.

The same code serves both metadata stores: the single broker's
:class:`~litemq.cluster.metadata.ClusterMetadata` (plan, then apply and persist at once) and the
replicated :class:`~litemq.cluster.image.MetadataImage` (the metadata leader plans against its
image and proposes the record; every broker applies it when committed). A *state* is any object
with ``acls`` (:class:`~litemq.security.acls.AclStore`), ``scram_credentials``
(``dict[user, dict[mechanism name, ScramCredential]]``), ``client_quotas``
(:class:`~litemq.security.client_quotas.ClientQuotaStore`) and ``client_metrics``
(:class:`~litemq.security.client_metrics.ClientMetricsStore`).

Actions (:func:`plan`) and the records they produce (:func:`apply`):

======================== ============================================ =============================
action / record type     args                                         record
======================== ============================================ =============================
create_acls              ``acls``: binding rows (as on the wire)      ``acls``: the new rows
delete_acls              ``filters``: filter rows                     ``filters`` (applied as is)
alter_scram_credentials  ``deletions``: ``[user, mechanism code]``,   ``deletions``: ``[user,
                         ``upsertions``: ``[user, mechanism code,     mechanism]``, ``upsertions``:
                         iterations, salt hex, salted password hex]`` ``[user, credential json]``
alter_client_quotas      ``entries``, ``validate_only``: see           ``changes``: ``[entity, {key:
                         :func:`litemq.security.client_quotas.plan`   value}, [removed keys]]``
alter_client_metrics     ``name``, ``configs``, ``validate_only``:     ``name``, ``configs`` (empty:
                         :func:`litemq.security.client_metrics.plan`  the subscription is deleted)
======================== ============================================ =============================

A delete_acls record carries the filters, not the bindings, so deleting every ACL stays one
small record; applying a filter to the same image gives the same result on every broker.
Replies (what the Kafka response needs): create -> ``results: [[error, message], ...]``;
delete -> ``results: [[error, message, [binding rows]], ...]``; alter SCRAM ->
``results: [[user, error, message], ...]``.

Sources: Kafka 3.9 ``AclControlManager`` (createAcls, deleteAcls, validateFilter),
``ScramControlManager.alterCredentials`` (KIP-554), ``ScramImage.describe``.
"""

from __future__ import annotations

from litemq import limits
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security import client_metrics, client_quotas
from litemq.security.acls import (
    UNKNOWN_CODE,
    AclBinding,
    AclBindingFilter,
    AclStore,
    validate_binding,
)
from litemq.security.credentials import (
    MECHANISM_BY_CODE,
    SCRAM_MECHANISMS,
    ScramCredential,
    credential_from_salted_password,
)

ACTIONS = frozenset({"create_acls", "delete_acls", "alter_scram_credentials", "alter_client_quotas",
                     "alter_client_metrics"})
"""Metadata actions (and record types) this module plans and applies."""

_OK = ErrorCode.NONE


def _record_size_ok(rec: dict) -> bool:
    import json

    return len(json.dumps(rec, separators=(",", ":"))) <= limits.MAX_SECURITY_RECORD_BYTES


def _too_large(n: int) -> list:
    msg = (f"the request's metadata record would exceed {limits.MAX_SECURITY_RECORD_BYTES} bytes; "
           "send fewer entries per request")
    return [[int(ErrorCode.INVALID_REQUEST), msg]] * n


# ================================================================== planning (leader / single broker)
def plan(state, action: str, args: dict) -> tuple[dict | None, dict]:
    """Validate ``action`` against ``state``: (record to apply or None when nothing changes, reply).

    Raises:
        KafkaError(INVALID_REQUEST): malformed ``args`` (not what a broker sends).
    """
    try:
        if action == "create_acls":
            return _plan_create_acls(state, list(args["acls"]))
        if action == "delete_acls":
            return _plan_delete_acls(state, list(args["filters"]))
        if action == "alter_scram_credentials":
            return _plan_alter_scram(state, list(args.get("deletions") or ()), list(args.get("upsertions") or ()))
        if action == "alter_client_quotas":
            return client_quotas.plan(state, args)
        if action == "alter_client_metrics":
            return client_metrics.plan(state, args)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise KafkaError(f"malformed {action} request: {exc}", ErrorCode.INVALID_REQUEST) from None
    raise KafkaError(f"unknown security action {action!r}", ErrorCode.INVALID_REQUEST)


def _plan_create_acls(state, rows: list) -> tuple[dict | None, dict]:
    store: AclStore = state.acls
    results: list = []
    new: dict[AclBinding, None] = {}
    for row in rows:
        try:
            b = AclBinding.from_row(row)
            validate_binding(b)
        except ValueError as exc:
            results.append([int(ErrorCode.INVALID_REQUEST), str(exc)])
            continue
        except KafkaError as exc:
            results.append([int(exc.code), str(exc)])
            continue
        if b not in store:
            new[b] = None
        results.append([_OK, None])
    if not new:
        return None, {"results": results}
    if len(store) + len(new) > limits.MAX_ACLS:
        msg = f"the cluster stores at most {limits.MAX_ACLS} ACLs ({len(store)} now)"
        return None, {"results": [[int(ErrorCode.INVALID_REQUEST), msg] if r[0] == _OK else r for r in results]}
    rec = {"type": "create_acls", "acls": [b.to_row() for b in new]}
    if not _record_size_ok(rec):
        return None, {"results": _too_large(len(rows))}
    return rec, {"results": results}


def _plan_delete_acls(state, rows: list) -> tuple[dict | None, dict]:
    store: AclStore = state.acls
    results: list = []
    valid: list[list] = []
    for row in rows:
        flt = AclBindingFilter.from_row(row)
        if flt.is_unknown():
            part = "patternFilter" if UNKNOWN_CODE in (flt.resource_type, flt.pattern_type) else "entryFilter"
            results.append([int(ErrorCode.INVALID_REQUEST), f"Unknown {part}.", []])
            continue
        results.append([_OK, None, [b.to_row() for b in store.select(flt)]])
        valid.append(flt.to_row())
    if not any(r[2] for r in results):
        return None, {"results": results}
    rec = {"type": "delete_acls", "filters": valid}
    if not _record_size_ok(rec):
        return None, {"results": [e + [[]] for e in _too_large(len(rows))]}
    return rec, {"results": results}


def _plan_alter_scram(state, deletions: list, upsertions: list) -> tuple[dict | None, dict]:
    creds: dict[str, dict[str, ScramCredential]] = state.scram_credentials
    to_delete: dict[str, str] = {}
    to_upsert: dict[str, tuple] = {}
    errors: dict[str, tuple[int, str]] = {}
    dup = (int(ErrorCode.DUPLICATE_RESOURCE), "A user credential cannot be altered twice in the same request")

    for user, mech_code in deletions:
        user = str(user)
        if user in errors:
            continue
        if to_delete.pop(user, None) is not None:
            errors[user] = dup
            continue
        err, mech = _check_user_and_mechanism(user, mech_code)
        if not err and mech not in creds.get(user, {}):
            err = (int(ErrorCode.RESOURCE_NOT_FOUND), "Attempt to delete a user credential that does not exist")
        if err:
            errors[user] = err
        else:
            to_delete[user] = mech
    for user, mech_code, iterations, salt_hex, salted_hex in upsertions:
        user = str(user)
        if user in errors:
            continue
        if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
            errors[user] = dup
            continue
        err, mech = _check_user_and_mechanism(user, mech_code)
        if not err and int(iterations) < limits.SCRAM_MIN_ITERATIONS:
            err = (int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Too few iterations")
        elif not err and int(iterations) > limits.SCRAM_MAX_ITERATIONS:
            err = (int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Too many iterations")
        if err:
            errors[user] = err
        else:
            cred = credential_from_salted_password(mech, bytes.fromhex(salt_hex), bytes.fromhex(salted_hex),
                                                   int(iterations))
            to_upsert[user] = (mech, cred)

    new_users = [u for u in to_upsert if u not in creds]
    if new_users and len(creds) + len(new_users) > limits.MAX_SCRAM_USERS:
        msg = f"the cluster stores SCRAM credentials of at most {limits.MAX_SCRAM_USERS} users"
        for u in new_users:
            errors[u] = (int(ErrorCode.INVALID_REQUEST), msg)
            del to_upsert[u]
    results = [[u, _OK, None] for u in to_delete] + [[u, _OK, None] for u in to_upsert]
    results += [[u, code, msg] for u, (code, msg) in errors.items()]
    if not to_delete and not to_upsert:
        return None, {"results": results}
    rec = {"type": "alter_scram_credentials", "deletions": [[u, m] for u, m in to_delete.items()],
           "upsertions": [[u, cred.to_json()] for u, (_, cred) in to_upsert.items()]}
    if not _record_size_ok(rec):
        msg = _too_large(1)[0][1]
        return None, {"results": [[r[0], int(ErrorCode.INVALID_REQUEST), msg] for r in results]}
    return rec, {"results": results}


def _check_user_and_mechanism(user: str, mech_code) -> tuple[tuple[int, str] | None, str | None]:
    if not user:
        return (int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Username must not be empty"), None
    mech = MECHANISM_BY_CODE.get(int(mech_code))
    if mech is None:
        return (int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "Unknown SCRAM mechanism"), None
    return None, mech


# ================================================================== applying (every broker)
def apply(state, rec: dict) -> None:
    """Apply a committed security record to ``state``. All or nothing; a binding or credential
    already there (or already gone) is no error, as racing proposals can produce that.

    Raises:
        KafkaError(INVALID_REQUEST): the record would exceed ``MAX_ACLS``/``MAX_SCRAM_USERS``.
        KeyError, TypeError, ValueError: a malformed record (nothing applied).
    """
    kind = rec["type"]
    if kind == "create_acls":
        store: AclStore = state.acls
        new = [b for b in (AclBinding.from_row(r) for r in rec["acls"]) if b not in store]
        if len(store) + len(set(new)) > limits.MAX_ACLS:
            raise KafkaError(f"the cluster stores at most {limits.MAX_ACLS} ACLs", ErrorCode.INVALID_REQUEST)
        for b in new:
            store.add(b)
    elif kind == "delete_acls":
        store = state.acls
        filters = [AclBindingFilter.from_row(r) for r in rec["filters"]]
        for b in [b for b in store if any(f.matches(b) for f in filters)]:
            store.remove(b)
    elif kind == "alter_scram_credentials":
        creds = state.scram_credentials
        deletions = [(str(u), str(m)) for u, m in rec.get("deletions") or ()]
        upserts = [(str(u), ScramCredential.from_json(c)) for u, c in rec.get("upsertions") or ()]
        for _, cred in upserts:
            if cred.mechanism not in SCRAM_MECHANISMS:
                raise ValueError(f"unknown SCRAM mechanism {cred.mechanism!r}")
        new_users = {u for u, _ in upserts if u not in creds}
        if new_users and len(creds) + len(new_users) > limits.MAX_SCRAM_USERS:
            raise KafkaError(f"at most {limits.MAX_SCRAM_USERS} SCRAM users", ErrorCode.INVALID_REQUEST)
        for user, mech in deletions:
            by_mech = creds.get(user)
            if by_mech is not None:
                by_mech.pop(mech, None)
                if not by_mech:
                    del creds[user]
        for user, cred in upserts:
            creds.setdefault(user, {})[cred.mechanism] = cred
    elif kind == "alter_client_quotas":
        client_quotas.apply(state, rec)
    elif kind == "alter_client_metrics":
        client_metrics.apply(state, rec)
    else:
        raise ValueError(f"not a security record: {kind!r}")


# ================================================================== reading (any broker)
def describe_scram(state, users: list[str] | None) -> list[dict]:
    """DescribeUserScramCredentials results (Kafka ``ScramImage.describe``): every user with a
    credential when ``users`` is None or empty; otherwise each named user once, with
    RESOURCE_NOT_FOUND when it has none and DUPLICATE_RESOURCE when named twice."""
    creds: dict[str, dict[str, ScramCredential]] = state.scram_credentials
    if not users:
        wanted = {u: False for u in sorted(creds)}
    else:
        wanted = {}
        for u in users:
            wanted[u] = u in wanted
    out = []
    for user, duplicate in wanted.items():
        entry = {"user": user, "error_code": _OK, "error_message": None, "credential_infos": []}
        if duplicate:
            entry.update(error_code=ErrorCode.DUPLICATE_RESOURCE,
                         error_message=f"Cannot describe SCRAM credentials for the same user twice in a single "
                                       f"request: {user}")
        elif user not in creds:
            entry.update(error_code=ErrorCode.RESOURCE_NOT_FOUND,
                         error_message=f"Attempt to describe a user credential that does not exist: {user}")
        else:
            entry["credential_infos"] = [{"mechanism": SCRAM_MECHANISMS[m][0], "iterations": c.iterations}
                                         for m, c in sorted(creds[user].items())]
        out.append(entry)
    return out


def scram_to_json(creds: dict[str, dict[str, ScramCredential]]) -> dict:
    """``scram_credentials`` as stored in metadata.json and image snapshots."""
    return {u: [c.to_json() for c in by_mech.values()] for u, by_mech in creds.items()}


def scram_from_json(d: dict | None) -> dict[str, dict[str, ScramCredential]]:
    out: dict[str, dict[str, ScramCredential]] = {}
    for user, items in (d or {}).items():
        for item in items:
            cred = ScramCredential.from_json(item)
            out.setdefault(str(user), {})[cred.mechanism] = cred
    return out
