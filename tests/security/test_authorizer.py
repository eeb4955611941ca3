"""The ACL authorizer (Kafka StandardAuthorizer semantics) and the security metadata records, on
real metadata objects: the single broker's ClusterMetadata (persisted) and the cluster's
MetadataImage (records applied as committed, snapshots)."""

from __future__ import annotations

import hashlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litemq.security.acl_operations import (
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    to_bitfield,
)
from litemq.cluster.image import MetadataImage
from litemq.cluster.metadata import ClusterMetadata
from litemq.protocol.errors import ErrorCode
from litemq.security import records
from litemq.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
)
from litemq.security.authorizer import StandardAuthorizer, parse_super_users
from litemq.security.credentials import (
    SCRAM_MECHANISMS,
    salted_password,
    verify_password,
)
from litemq.security.principal import KafkaPrincipal

Op, R, P, A = AclOperation, ResourceType, PatternType, AclPermissionType
ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def acl(name, op, perm=A.ALLOW, principal="User:alice", pattern=P.LITERAL, rtype=R.TOPIC, host="*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def add(md, *bindings) -> list:
    """CreateAcls through the real plan/apply path; returns the per-binding results."""
    rec, reply = records.plan(md, "create_acls", {"acls": [b.to_row() for b in bindings]})
    if rec is not None:
        _apply(md, rec)
    return reply["results"]


def _apply(md, rec) -> None:
    if isinstance(md, MetadataImage):
        res = md.apply(rec)
        assert res.error == 0, res.message
    else:
        md.apply_security_record(rec)


@pytest.fixture(params=["single", "image"])
def md(request, tmp_path):
    return ClusterMetadata(tmp_path) if request.param == "single" else MetadataImage()


def authz(md, super_users="", allow_if_none=False) -> StandardAuthorizer:
    return StandardAuthorizer(lambda: md.acls, parse_super_users(super_users), allow_if_none)


def test_literal_allow_and_default_deny(md):
    add(md, acl("orders", Op.READ))
    a = authz(md)
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.WRITE, R.TOPIC, "orders")  # the resource has ACLs: deny
    assert not a.authorize(BOB, HOST, Op.READ, R.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "orders2")  # literal is exact
    assert not a.authorize(ALICE, HOST, Op.READ, R.GROUP, "orders")  # per resource type
    # no ACL matches the resource at all: allow.everyone.if.no.acl.found decides
    assert not authz(md).authorize(BOB, HOST, Op.READ, R.TOPIC, "free")
    assert authz(md, allow_if_none=True).authorize(BOB, HOST, Op.READ, R.TOPIC, "free")
    # ...but not when the resource has ACLs for someone else
    assert not authz(md, allow_if_none=True).authorize(BOB, HOST, Op.READ, R.TOPIC, "orders")


def test_deny_wins_over_allow_from_any_pattern(md):
    add(md, acl("orders", Op.ALL), acl("ord", Op.WRITE, A.DENY, pattern=P.PREFIXED))
    a = authz(md)
    assert a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.WRITE, R.TOPIC, "orders")
    add(md, acl("*", Op.READ, A.DENY, principal="User:*"))
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "orders")
    assert a.authorize(ALICE, HOST, Op.DELETE, R.TOPIC, "orders")


def test_prefixed_wildcard_principal_and_host(md):
    add(md, acl("logs.", Op.READ, pattern=P.PREFIXED, principal="User:*"),
        acl("*", Op.DESCRIBE, principal="User:bob", rtype=R.GROUP),
        acl("metrics", Op.WRITE, host=HOST))
    a = authz(md)
    assert a.authorize(BOB, "1.2.3.4", Op.READ, R.TOPIC, "logs.app")
    assert a.authorize(BOB, "1.2.3.4", Op.READ, R.TOPIC, "logs.")
    assert not a.authorize(BOB, "1.2.3.4", Op.READ, R.TOPIC, "logs")  # shorter than the prefix
    assert a.authorize(BOB, HOST, Op.DESCRIBE, R.GROUP, "any-group")  # literal * = every group
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, R.GROUP, "any-group")
    assert a.authorize(ALICE, HOST, Op.WRITE, R.TOPIC, "metrics")
    assert not a.authorize(ALICE, "10.0.0.2", Op.WRITE, R.TOPIC, "metrics")
    assert a.authorize("User:alice", HOST, Op.WRITE, R.TOPIC, "metrics")  # principal as its string


def test_implied_operations_and_all(md):
    add(md, acl("t", Op.WRITE), acl("t", Op.ALTER_CONFIGS), acl("u", Op.READ, A.DENY), acl("u", Op.ALL),
        acl("v", Op.ALL, A.DENY), acl("v", Op.DESCRIBE))
    a = authz(md)
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "t")  # WRITE implies DESCRIBE
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, R.TOPIC, "t")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "u")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "u")  # a DENY implies nothing
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, R.TOPIC, "v")  # DENY ALL denies everything
    bits = a.authorized_operations(ALICE, HOST, R.TOPIC, "t")
    assert bits == to_bitfield({Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS})
    assert a.authorized_operations(ALICE, HOST, R.TOPIC, "u") == to_bitfield(SUPPORTED_OPERATIONS[R.TOPIC] - {Op.READ})
    assert a.authorized_operations(BOB, HOST, R.TOPIC, "t") == 0


def test_super_users_bypass_deny(md):
    add(md, acl("*", Op.ALL, A.DENY, principal="User:*"))
    a = authz(md, super_users=" User:admin ;User:bob")
    assert a.super_users == {"User:admin", "User:bob"}
    assert a.authorize(KafkaPrincipal("User", "admin"), HOST, Op.WRITE, R.TOPIC, "x")
    assert a.authorize(BOB, HOST, Op.ALTER, R.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, Op.READ, R.TOPIC, "x")
    assert a.authorized_operations(BOB, HOST, R.GROUP, "g") == to_bitfield(SUPPORTED_OPERATIONS[R.GROUP])


def test_authorize_by_resource_type(md):
    a = authz(md)
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)
    add(md, acl("orders", Op.WRITE))
    assert a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert not a.authorize_by_resource_type(BOB, HOST, Op.WRITE, R.TOPIC)
    add(md, acl("ord", Op.WRITE, A.DENY, pattern=P.PREFIXED))  # covers the only allowed name
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)
    add(md, acl("x", Op.ALL, pattern=P.PREFIXED))
    assert a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)
    add(md, acl("*", Op.WRITE, A.DENY))
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)
    assert authz(md, super_users="User:alice").authorize_by_resource_type(ALICE, HOST, Op.WRITE, R.TOPIC)
    with pytest.raises(ValueError):
        a.authorize_by_resource_type(ALICE, HOST, Op.ANY, R.TOPIC)


@pytest.mark.parametrize("binding, reason", [
    (acl("t", Op.READ, rtype=R.ANY), "Invalid resourceType ANY"),
    (acl("t", Op.READ, rtype=R.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl("t", Op.READ, pattern=P.MATCH), "Invalid patternType MATCH"),
    (acl("t", Op.ANY), "Invalid operation ANY"),
    (acl("t", Op.READ, perm=A.ANY), "Invalid permissionType ANY"),
    (acl("", Op.READ), "Resource name should not be empty"),
    (acl("cluster", Op.ALTER, rtype=R.CLUSTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl("g", Op.WRITE, rtype=R.GROUP), "ResourceType GROUP only supports operations"),
    (acl("t", Op.READ, principal="alice"), "bad principal"),
])
def test_bad_bindings_are_invalid_request(md, binding, reason):
    results = add(md, binding, acl("ok", Op.READ))
    assert results[0][0] == ErrorCode.INVALID_REQUEST and reason in results[0][1]
    assert results[1] == [0, None]
    assert list(md.acls) == [acl("ok", Op.READ)]
    # unknown wire codes are UNKNOWN (Kafka's fromCode), so they are rejected too
    row = acl("t", Op.READ).to_row()
    row[5] = 99
    assert add(md, AclBinding.from_row(row))[0][0] == ErrorCode.INVALID_REQUEST


def test_filters_describe_and_delete(md):
    bindings = [acl("orders", Op.READ), acl("ord", Op.WRITE, A.DENY, pattern=P.PREFIXED, principal="User:bob"),
                acl("*", Op.DESCRIBE, principal="User:*"), acl("g", Op.READ, rtype=R.GROUP)]
    assert add(md, *bindings, bindings[0]) == [[0, None]] * 5  # a duplicate is no error
    assert list(md.acls) == bindings

    def f(rtype=R.ANY, name=None, pattern=P.ANY, principal=None, host=None, op=Op.ANY, perm=A.ANY):
        return AclBindingFilter(rtype, name, pattern, principal, host, op, perm)

    assert md.acls.select(f()) == bindings
    assert md.acls.select(f(R.TOPIC, "orders", P.MATCH)) == bindings[:3]  # literal, prefix, wildcard
    assert md.acls.select(f(R.TOPIC, "orders", P.ANY)) == bindings[:1]  # exact names only
    assert md.acls.select(f(R.TOPIC, "ord", P.PREFIXED)) == bindings[1:2]
    assert md.acls.select(f(R.TOPIC, None, P.LITERAL)) == [bindings[0], bindings[2]]
    assert md.acls.select(f(principal="User:bob")) == bindings[1:2]
    assert md.acls.select(f(op=Op.DESCRIBE, perm=A.ALLOW)) == bindings[2:3]

    rec, reply = records.plan(md, "delete_acls", {"filters": [f(R.TOPIC, "orders", P.MATCH).to_row(),
                                                             f(R.TOPIC, "orders", P.MATCH).to_row(),
                                                             f(op=Op.UNKNOWN).to_row()]})
    rows = [b.to_row() for b in bindings[:3]]
    assert reply["results"] == [[0, None, rows], [0, None, rows],
                                [ErrorCode.INVALID_REQUEST, "Unknown entryFilter.", []]]
    _apply(md, rec)
    assert list(md.acls) == bindings[3:]
    assert authz(md).authorize(ALICE, HOST, Op.READ, R.TOPIC, "orders") is False
    rec, reply = records.plan(md, "delete_acls", {"filters": [f(R.TOPIC).to_row()]})
    assert rec is None and reply["results"] == [[0, None, []]]


def test_acls_and_credentials_survive_reload_and_snapshot(tmp_path):
    md = ClusterMetadata(tmp_path)
    img = MetadataImage()
    cred_rows = [["alice", 1, 4096, b"salt".hex(), salted_password("SCRAM-SHA-256", "pw", b"salt", 4096).hex()]]
    for m in (md, img):
        add(m, acl("orders", Op.READ), acl("ord", Op.WRITE, pattern=P.PREFIXED))
        rec, _ = records.plan(m, "alter_scram_credentials", {"upsertions": cred_rows})
        _apply(m, rec)
    again = ClusterMetadata(tmp_path)
    copy = MetadataImage.from_json(img.to_json())
    for m in (again, copy):
        assert list(m.acls) == list(md.acls)
        assert m.scram_credentials == md.scram_credentials
        assert verify_password(m.scram_credentials["alice"]["SCRAM-SHA-256"], "pw")
        assert authz(m).authorize(ALICE, HOST, Op.WRITE, R.TOPIC, "orders")


def _upsert(user, mech=1, iterations=4096, password="pw"):
    salt = os.urandom(16)
    name = {code: n for n, (code, _) in SCRAM_MECHANISMS.items()}.get(mech, "SCRAM-SHA-256")
    return [user, mech, iterations, salt.hex(), salted_password(name, password, salt, 4096).hex()]


def test_scram_alterations_follow_kafka(md):
    rec, reply = records.plan(md, "alter_scram_credentials", {
        "upsertions": [_upsert("alice"), _upsert("bob", 2, 8192), _upsert("carol", 3), _upsert("dave", 1, 4095),
                       _upsert("erin", 1, 16385), _upsert("", 1), _upsert("frank"), _upsert("frank", 2)],
        "deletions": [["ghost", 1]]})
    assert reply["results"] == [
        ["alice", 0, None], ["bob", 0, None],
        ["ghost", ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"],
        ["carol", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"],
        ["dave", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"],
        ["erin", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"],
        ["", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"],
        ["frank", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"]]
    _apply(md, rec)
    assert set(md.scram_credentials) == {"alice", "bob"}
    cred = md.scram_credentials["bob"]["SCRAM-SHA-512"]
    assert cred.iterations == 8192 and len(cred.stored_key) == hashlib.sha512().digest_size
    assert records.describe_scram(md, None) == [
        {"user": "alice", "error_code": 0, "error_message": None,
         "credential_infos": [{"mechanism": 1, "iterations": 4096}]},
        {"user": "bob", "error_code": 0, "error_message": None,
         "credential_infos": [{"mechanism": 2, "iterations": 8192}]}]
    described = records.describe_scram(md, ["bob", "nobody", "bob"])
    assert [(d["user"], d["error_code"]) for d in described] == [
        ("bob", ErrorCode.DUPLICATE_RESOURCE), ("nobody", ErrorCode.RESOURCE_NOT_FOUND)]
    # a second mechanism for alice, then delete the first: the user stays with the second
    rec, reply = records.plan(md, "alter_scram_credentials", {"upsertions": [_upsert("alice", 2)]})
    _apply(md, rec)
    rec, reply = records.plan(md, "alter_scram_credentials", {"deletions": [["alice", 1]]})
    assert reply["results"] == [["alice", 0, None]]
    _apply(md, rec)
    assert set(md.scram_credentials["alice"]) == {"SCRAM-SHA-512"}
    rec, _ = records.plan(md, "alter_scram_credentials", {"deletions": [["alice", 2]]})
    _apply(md, rec)
    assert "alice" not in md.scram_credentials


# ---------------------------------------------------------------- property: index == definition
_NAMES = ["a", "ab", "abc", "b", "*", "abd"]


def _reference(bindings, principal, host, op, rtype, name, allow_if_none) -> bool:
    """Kafka's rules applied by a linear scan, without any index."""
    def pattern_matches(b):
        if b.resource_type != rtype:
            return False
        if b.pattern_type == P.PREFIXED:
            return name.startswith(b.resource_name)
        return b.resource_name in (name, "*")

    def applies(b):
        if b.principal not in (principal, "User:*") or b.host not in (host, "*"):
            return False
        if b.operation in (op, Op.ALL):
            return True
        if b.permission_type == A.DENY:
            return False
        return (op == Op.DESCRIBE and b.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)) or \
               (op == Op.DESCRIBE_CONFIGS and b.operation == Op.ALTER_CONFIGS)

    matching = [b for b in bindings if pattern_matches(b)]
    hits = [b for b in matching if applies(b)]
    if any(b.permission_type == A.DENY for b in hits):
        return False
    if hits:
        return True
    return not matching and allow_if_none


_binding = st.builds(
    AclBinding, st.sampled_from([R.TOPIC, R.GROUP]), st.sampled_from(_NAMES), st.sampled_from([P.LITERAL, P.PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*"]), st.sampled_from(["*", HOST]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE]), st.sampled_from([A.ALLOW, A.DENY]))


@settings(max_examples=300, deadline=None)
@given(bindings=st.lists(_binding, max_size=12), removed=st.integers(0, 4), allow_if_none=st.booleans(),
       principal=st.sampled_from(["User:alice", "User:bob"]), host=st.sampled_from([HOST, "10.9.9.9"]),
       op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE]), rtype=st.sampled_from([R.TOPIC, R.GROUP]),
       name=st.sampled_from(["a", "ab", "abc", "abcd", "b", "c"]))
def test_indexed_lookup_matches_the_definition(bindings, removed, allow_if_none, principal, host, op, rtype, name):
    img = MetadataImage()
    add(img, *[b for b in bindings if b.operation in SUPPORTED_OPERATIONS[b.resource_type] or b.operation == Op.ALL])
    for b in list(img.acls)[:removed]:  # removal keeps the indexes right
        img.apply({"type": "delete_acls", "filters": [AclBindingFilter(*b.to_row()).to_row()]})
    live = list(img.acls)
    a = StandardAuthorizer(lambda: img.acls, frozenset(), allow_if_none)
    assert a.authorize(principal, host, op, rtype, name) == _reference(live, principal, host, op, rtype, name,
                                                                       allow_if_none)
