"""ACL and SCRAM credential admin APIs end to end: real broker processes with
``authorizer.class.name`` (Kafka's StandardAuthorizer class name) on PLAINTEXT, where the
connections are ``User:ANONYMOUS``; confluent-kafka and kafka-python admin clients, raw requests
for the exact error codes, persistence across restarts (clean and SIGKILL), the ``litemq acl`` /
``litemq user`` commands, and a 3-broker cluster where a change made through one broker is seen
by every broker."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from litemq.protocol.errors import ErrorCode
from litemq.security.credentials import salted_password
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient
from tests.integration.admin_helpers import error_code, unique_name

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURED = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
TIMEOUT_S = 30

ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                              AclPermissionType.ANY)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("acl") / "data", overrides=SECURED) as proc:
        yield proc


def _admin(servers: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": servers})


def _topic_acl(name, principal="User:alice", op=AclOperation.READ, perm=AclPermissionType.ALLOW,
               pattern=ResourcePatternType.LITERAL, host="*") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, host, op, perm)


def _topic_filter(name, pattern=ResourcePatternType.MATCH) -> AclBindingFilter:
    return AclBindingFilter(ResourceType.TOPIC, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY)


def _users(admin, names=None) -> dict[str, list[tuple[str, int]]]:
    if names:
        res = {n: f.result(TIMEOUT_S) for n, f in admin.describe_user_scram_credentials(names).items()}
    else:
        res = admin.describe_user_scram_credentials().result(TIMEOUT_S)
    return {u: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos) for u, d in res.items()}


def test_acls_with_confluent_kafka(secured):
    admin = _admin(secured.bootstrap_servers)
    t = unique_name("orders")
    lit, pre = _topic_acl(t), _topic_acl(t[:4], "User:bob", AclOperation.WRITE, AclPermissionType.DENY,
                                         ResourcePatternType.PREFIXED)
    grp = AclBinding(ResourceType.GROUP, "g-" + t, ResourcePatternType.LITERAL, "User:*", "10.0.0.1",
                     AclOperation.READ, AclPermissionType.ALLOW)
    cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)
    for fut in admin.create_acls([lit, pre, grp, cluster]).values():
        assert fut.result(TIMEOUT_S) is None
    assert set(admin.describe_acls(_topic_filter(t)).result(TIMEOUT_S)) == {lit, pre}  # literal + its prefix
    assert admin.describe_acls(_topic_filter(t, ResourcePatternType.LITERAL)).result(TIMEOUT_S) == [lit]
    assert {lit, pre, grp, cluster} <= set(admin.describe_acls(ANY_FILTER).result(TIMEOUT_S))

    bad = [AclBinding(ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.WRITE,
                      AclPermissionType.ALLOW),  # WRITE is no group operation
           AclBinding(ResourceType.BROKER, "other", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.ALTER,
                      AclPermissionType.ALLOW)]  # the cluster is only kafka-cluster
    assert [error_code(f) for f in admin.create_acls(bad).values()] == [ErrorCode.INVALID_REQUEST] * 2

    deleted = admin.delete_acls([_topic_filter(t)])
    assert set(next(iter(deleted.values())).result(TIMEOUT_S)) == {lit, pre}
    assert admin.describe_acls(_topic_filter(t)).result(TIMEOUT_S) == []


def test_acls_and_scram_with_kafka_python(secured):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.admin import ScramMechanism as KMech
    from kafka.admin import UserScramCredentialDeletion as KDel
    from kafka.admin import UserScramCredentialUpsertion as KUps

    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        t = unique_name("kp")
        acl = ACL("User:carol", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(KResourceType.TOPIC, t, ACLResourcePatternType.PREFIXED))
        res = admin.create_acls([acl])
        assert res["succeeded"] == [acl] and not res["failed"]
        flt = ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KResourceType.TOPIC, t + "-x", ACLResourcePatternType.MATCH))
        found, err = admin.describe_acls(flt)
        assert err.errno == 0 and [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:carol", ACLOperation.WRITE, t)]
        [(_, matched, err)] = admin.delete_acls([flt])
        assert err.errno == 0 and len(matched) == 1

        user = unique_name("kpuser")
        admin.alter_user_scram_credentials([KUps(user, KMech.SCRAM_SHA_512, "pw", iterations=8192)])
        described = admin.describe_user_scram_credentials([user])
        assert [(i["mechanism"], i["iterations"]) for i in described[user]["credential_infos"]] == [
            (KMech.SCRAM_SHA_512, 8192)]
        admin.alter_user_scram_credentials([KDel(user, KMech.SCRAM_SHA_512)])
        assert admin.describe_user_scram_credentials([user])[user]["error"]
    finally:
        admin.close()


def test_scram_credentials_with_confluent_kafka(secured):
    admin = _admin(secured.bootstrap_servers)
    alice, bob = unique_name("alice"), unique_name("bob")
    ups = [UserScramCredentialUpsertion(alice, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"s1"),
           UserScramCredentialUpsertion(bob, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 16384), b"s2")]
    for fut in admin.alter_user_scram_credentials(ups).values():
        assert fut.result(TIMEOUT_S) is None
    assert _users(admin, [alice, bob]) == {alice: [("SCRAM_SHA_256", 4096)], bob: [("SCRAM_SHA_512", 16384)]}
    everyone = _users(admin)
    assert everyone[alice] == [("SCRAM_SHA_256", 4096)] and bob in everyone
    # a second mechanism for alice, then delete one: the other stays
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        alice, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"s3")])[alice].result(TIMEOUT_S)
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(
        alice, ScramMechanism.SCRAM_SHA_256)])[alice].result(TIMEOUT_S)
    assert _users(admin, [alice]) == {alice: [("SCRAM_SHA_512", 8192)]}

    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("nobody-" + bob,
                                                                              ScramMechanism.SCRAM_SHA_256)])
    assert error_code(next(iter(missing.values()))) == ErrorCode.RESOURCE_NOT_FOUND
    assert error_code(admin.describe_user_scram_credentials(["nobody-" + bob])["nobody-" + bob]) == \
        ErrorCode.RESOURCE_NOT_FOUND


def _alter_scram(c: WireClient, upsertions=(), deletions=()):
    return c.request(51, 0, {"deletions": [{"name": n, "mechanism": m} for n, m in deletions],
                             "upsertions": [{"name": n, "mechanism": m, "iterations": i, "salt": b"salt",
                                             "salted_password": salted_password("SCRAM-SHA-256", "pw", b"salt", 4096)}
                                            for n, m, i in upsertions]})


def test_error_codes_on_the_wire(secured):
    u = unique_name("wire")
    with WireClient("127.0.0.1", secured.port) as c:
        r = c.request(30, 3, {"creations": [
            {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
             "operation": 0, "permission_type": 3},  # UNKNOWN operation
            {"resource_type": 1, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
             "operation": 3, "permission_type": 3},  # ANY resource type
            {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 2, "principal": "User:a", "host": "*",
             "operation": 3, "permission_type": 3},  # MATCH is a filter, not a pattern
            {"resource_type": 2, "resource_name": "", "resource_pattern_type": 3, "principal": "User:a", "host": "*",
             "operation": 3, "permission_type": 3},  # empty name
            {"resource_type": 2, "resource_name": u, "resource_pattern_type": 3, "principal": "User:a", "host": "*",
             "operation": 3, "permission_type": 3}]})
        assert [x.error_code for x in r.results] == [ErrorCode.INVALID_REQUEST] * 4 + [0]
        r = c.request(29, 1, {"resource_type_filter": 2, "resource_name_filter": u, "pattern_type_filter": 3,
                              "principal_filter": None, "host_filter": None, "operation": 0, "permission_type": 1})
        assert r.error_code == ErrorCode.INVALID_REQUEST
        r = c.request(29, 0, {"resource_type_filter": 2, "resource_name_filter": u, "principal_filter": None,
                              "host_filter": None, "operation": 1, "permission_type": 1})  # v0: LITERAL only
        assert [(x.resource_name, [a.principal for a in x.acls]) for x in r.resources] == [(u, ["User:a"])]
        r = c.request(31, 2, {"filters": [
            {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
             "host_filter": None, "operation": 1, "permission_type": 1},
            {"resource_type_filter": 2, "resource_name_filter": u, "pattern_type_filter": 1, "principal_filter": None,
             "host_filter": None, "operation": 1, "permission_type": 1}]})
        assert [x.error_code for x in r.filter_results] == [ErrorCode.INVALID_REQUEST, 0]
        assert [m.resource_name for m in r.filter_results[1].matching_acls] == [u]

        r = _alter_scram(c, upsertions=[(u, 1, 4096), (u + "-2", 3, 4096), (u + "-3", 1, 100), (u + "-4", 1, 20000),
                                        ("", 1, 4096), (u + "-5", 1, 4096), (u + "-5", 2, 4096)],
                         deletions=[(u + "-6", 1)])
        assert {x.user: x.error_code for x in r.results} == {
            u: 0, u + "-2": ErrorCode.UNSUPPORTED_SASL_MECHANISM, u + "-3": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            u + "-4": ErrorCode.UNACCEPTABLE_CREDENTIAL, "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            u + "-5": ErrorCode.DUPLICATE_RESOURCE, u + "-6": ErrorCode.RESOURCE_NOT_FOUND}
        r = c.request(50, 0, {"users": [{"name": u}, {"name": u}, {"name": u + "-2"}]})
        assert r.error_code == 0
        assert [(x.user, x.error_code) for x in r.results] == [
            (u, ErrorCode.DUPLICATE_RESOURCE), (u + "-2", ErrorCode.RESOURCE_NOT_FOUND)]


def test_security_disabled_without_authorizer(shared_broker):
    admin = _admin(shared_broker.bootstrap_servers)
    with WireClient("127.0.0.1", shared_broker.port) as c:  # librdkafka drops DescribeAcls' error code
        r = c.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
        assert (r.error_code, r.error_message) == (ErrorCode.SECURITY_DISABLED,
                                                   "No Authorizer is configured on the broker")
    [fut] = admin.create_acls([_topic_acl("t")]).values()
    assert error_code(fut) == ErrorCode.SECURITY_DISABLED
    [fut] = admin.delete_acls([ANY_FILTER]).values()
    assert error_code(fut) == ErrorCode.SECURITY_DISABLED
    # SCRAM credentials do not need an authorizer (KIP-554)
    user = unique_name("plain-broker-user")
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")])[user].result(TIMEOUT_S)
    assert _users(admin, [user]) == {user: [("SCRAM_SHA_256", 4096)]}


def test_persistence_and_cluster_authorization(tmp_path):
    proc = BrokerProcess(tmp_path / "data", overrides=dict(SECURED))
    try:
        proc.start()
        admin = _admin(proc.bootstrap_servers)
        acls = [_topic_acl("keep"), _topic_acl("ke", pattern=ResourcePatternType.PREFIXED, op=AclOperation.DESCRIBE)]
        for f in admin.create_acls(acls).values():
            f.result(TIMEOUT_S)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "keeper", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 5000), b"pw")])["keeper"].result(TIMEOUT_S)
        del admin
        proc.restart()  # clean shutdown
        admin = _admin(proc.bootstrap_servers)
        assert admin.describe_acls(ANY_FILTER).result(TIMEOUT_S) == acls
        assert _users(admin) == {"keeper": [("SCRAM_SHA_512", 5000)]}
        del admin
        proc.kill()  # SIGKILL: metadata.json was fsynced when the change was answered
        proc.overrides.update({"super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"})
        proc.start()
        admin = _admin(proc.bootstrap_servers)
        assert admin.describe_acls(ANY_FILTER).result(TIMEOUT_S) == acls  # no cluster ACL yet: allowed
        describe_cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                      "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        [f] = admin.create_acls([describe_cluster]).values()
        f.result(TIMEOUT_S)
        # now the cluster has ACLs: ANONYMOUS may DESCRIBE it but not ALTER it
        assert len(admin.describe_acls(ANY_FILTER).result(TIMEOUT_S)) == 3
        assert _users(admin) == {"keeper": [("SCRAM_SHA_512", 5000)]}
        [f] = admin.create_acls([_topic_acl("more")]).values()
        assert error_code(f) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        [f] = admin.delete_acls([ANY_FILTER]).values()
        assert error_code(f) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        f = admin.alter_user_scram_credentials([UserScramCredentialDeletion("keeper", ScramMechanism.SCRAM_SHA_512)])
        assert error_code(f["keeper"]) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        proc.kill()


def _cli(*args, env_extra=None, check=True) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200")
    env.pop("LITEMQ_CLIENT_CONFIG", None)
    env.update(env_extra or {})
    res = subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def test_cli_acl_and_user_commands(secured, tmp_path):
    b = ["-b", secured.bootstrap_servers]
    conf = tmp_path / "client.properties"
    conf.write_text("# Kafka-style client settings\nclient.id=litemq-cli-test\nsocket.timeout.ms=20000\n")
    t = unique_name("cli")
    out = _cli("acl", "add", "--allow-principal", "User:dave", "--operation", "Read", "--operation", "describe_configs",
               "--topic", t, "--group", "g-" + t, "--command-config", str(conf), *b).stdout
    assert out.count("added ACL") == 4
    _cli("acl", "add", "--deny-principal", "User:eve", "--host", "10.1.2.3", "--topic", t[:5],
         "--resource-pattern-type", "prefixed", *b, env_extra={"LITEMQ_CLIENT_CONFIG": str(conf)})
    listed = _cli("acl", "list", "--topic", t, "--resource-pattern-type", "match", *b).stdout
    assert "User:dave" in listed and "User:eve" in listed and "10.1.2.3" in listed and "PREFIXED" in listed
    assert "g-" + t not in listed
    assert "g-" + t in _cli("acl", "list", *b).stdout
    bad = _cli("acl", "add", "--allow-principal", "User:dave", "--operation", "Write", "--group", "g", *b, check=False)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "only supports operations" in bad.stderr
    removed = _cli("acl", "remove", "--topic", t, "--resource-pattern-type", "match", "--force", *b).stdout
    assert "removed 3 ACL(s)" in removed
    assert "User:dave" not in _cli("acl", "list", "--topic", t, *b).stdout

    user = unique_name("cliuser")
    _cli("user", "create", user, "--password", "s3cret", "--mechanism", "SCRAM-SHA-256", "--mechanism",
         "SCRAM-SHA-512", "--iterations", "8192", *b)
    listed = _cli("user", "list", user, *b).stdout
    assert "SCRAM-SHA-256" in listed and "SCRAM-SHA-512" in listed and "8192" in listed
    assert user in _cli("user", "list", *b).stdout
    _cli("user", "delete", user, *b)
    gone = _cli("user", "list", user, *b, check=False)
    assert gone.returncode == 1 and "does not exist" in gone.stderr

    broken = tmp_path / "broken.properties"
    broken.write_text("no.such.librdkafka.setting=1\n")
    res = _cli("user", "list", "--command-config", str(broken), *b, check=False)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert "no.such.librdkafka.setting" in res.stderr


def _wire_acls(port: int) -> list[tuple]:
    with WireClient("127.0.0.1", port) as c:
        r = c.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    assert r.error_code == 0, r.error_message
    return [(x.resource_type, x.resource_name, x.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for x in r.resources for a in x.acls]


def _wire_users(port: int) -> dict[str, list[tuple[int, int]]]:
    with WireClient("127.0.0.1", port) as c:
        r = c.request(50, 0, {"users": None})
    assert r.error_code == 0, r.error_message
    return {x.user: [(i.mechanism, i.iterations) for i in x.credential_infos] for x in r.results}


def test_three_brokers_see_credentials_and_acls_made_through_any_broker(tmp_path):
    with LocalCluster(tmp_path, n=3, overrides=SECURED) as cluster:
        leader = cluster.metadata_leader()
        via = next(n for n in cluster.node_ids if n != leader)  # forwards to the metadata leader
        row = (2, "shared", 3, "User:frank", "*", int(AclOperation.WRITE.value), 3)
        with WireClient("127.0.0.1", cluster.node(via).port) as c:
            r = c.request(30, 3, {"creations": [dict(zip(("resource_type", "resource_name", "resource_pattern_type",
                                                          "principal", "host", "operation", "permission_type"), row))]})
            assert [x.error_code for x in r.results] == [0]
            r = _alter_scram(c, upsertions=[("frank", 1, 8192)])
            assert [(x.user, x.error_code) for x in r.results] == [("frank", 0)]
        # the answering broker applied the change before answering (read-your-writes)
        assert _wire_acls(cluster.node(via).port) == [row]
        assert _wire_users(cluster.node(via).port) == {"frank": [(1, 8192)]}
        for n in cluster.node_ids:
            port = cluster.node(n).port
            wait_for(lambda port=port: _wire_acls(port) == [row], 15, f"ACL on broker {n}")
            wait_for(lambda port=port: _wire_users(port) == {"frank": [(1, 8192)]}, 15, f"credential on broker {n}")

        admin = _admin(cluster.bootstrap_servers)
        [f] = admin.delete_acls([ANY_FILTER]).values()
        assert f.result(TIMEOUT_S) == [_topic_acl("shared", "User:frank", AclOperation.WRITE)]
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(
            "frank", ScramMechanism.SCRAM_SHA_256)])["frank"].result(TIMEOUT_S)
        for n in cluster.node_ids:
            port = cluster.node(n).port
            wait_for(lambda port=port: _wire_acls(port) == [] and _wire_users(port) == {}, 15,
                     f"changes on broker {n}")


def test_cli_produce_without_write_fails_in_one_line(tmp_path):
    """A principal that may describe a topic but not write it: ``litemq produce`` fails with one
    line and exit 1. With ``--acks all`` (idempotent) InitProducerId is refused
    CLUSTER_AUTHORIZATION_FAILED, as Kafka refuses it without IdempotentWrite or Write on any topic
    (KIP-679), and librdkafka raises it as a fatal error from ``flush()`` while running the delivery
    callbacks (that once ended in a SystemError traceback); with ``--acks 1`` the records are
    refused TOPIC_AUTHORIZATION_FAILED."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";')
    overrides = {**SECURED, "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas}
    with BrokerProcess(tmp_path / "data", overrides=overrides,
                       listeners={"PLAINTEXT": 0, "SASL_PLAINTEXT": 0}) as proc:
        plain = ["-b", proc.bootstrap("PLAINTEXT")]
        t = unique_name("ro")
        _cli("topic", "create", t, *plain)
        _cli("acl", "add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
             "--topic", t, *plain)
        conf = tmp_path / "alice.properties"
        conf.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                        "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                        '    username="alice" password="alice-secret";\n')
        alice = ["-b", proc.bootstrap("SASL_PLAINTEXT"), "--command-config", str(conf)]
        env = {k: v for k, v in os.environ.items() if k != "LITEMQ_CLIENT_CONFIG"}
        res = subprocess.run([sys.executable, "-m", "litemq.cli", "produce", t, *alice], input="hi\n",
                             capture_output=True, text=True, timeout=60, env=env)
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert len(errors) == 1 and "Cluster authorization failed" in errors[0], res.stderr
        assert "IdempotentWrite" in errors[0]
        res = subprocess.run([sys.executable, "-m", "litemq.cli", "produce", t, "--acks", "1", *alice],
                             input="hi\n", capture_output=True, text=True, timeout=60, env=env)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.strip().splitlines()[-1] == "error: delivery failed: Broker: Topic authorization failed"


def test_refused_user_and_acl_listing_is_an_error_not_a_crash_or_an_empty_list(tmp_path):
    """A principal without Describe on the cluster: DescribeUserScramCredentials answers, as
    Kafka's ``getErrorResponse``, one CLUSTER_AUTHORIZATION_FAILED result per user named;
    ``litemq user list`` and ``litemq acl list`` stop with one line instead of a crash (librdkafka
    2.16 aborts reading a refused DescribeUserScramCredentials, whatever its shape) or an empty
    table (it reports a refused DescribeAcls as no ACLs)."""
    with BrokerProcess(tmp_path / "data", overrides={"authorizer.class.name": STANDARD_AUTHORIZER,
                                                     "super.users": "User:admin"}) as broker:
        with WireClient("127.0.0.1", broker.port) as w:  # ANONYMOUS: no ACL, not a super user
            r = w.request(50, 0, {"users": [{"name": "alice"}, {"name": "bob"}]})
            assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            assert [(x.user, x.error_code) for x in r.results] == [
                ("alice", ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
        for args in (["user", "list"], ["user", "list", "alice"], ["acl", "list"]):
            out = subprocess.run([sys.executable, "-m", "litemq.cli", *args, "-b", broker.bootstrap_servers],
                                 capture_output=True, timeout=60)
            assert out.returncode == 1, (args, out)
            assert b"CLUSTER_AUTHORIZATION_FAILED" in out.stderr and b"Traceback" not in out.stderr, (args, out)
