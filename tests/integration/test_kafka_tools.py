"""``scripts/kafka-tools/bin``: Kafka's ``kafka-topics.sh`` and ``kafka-acls.sh`` as far as
librdkafka's test harness runs them (``$KAFKA_PATH/bin``, set by ``scripts/librdkafka-suite.sh``),
over ``litemq``'s CLI. Run here with the command lines the harness builds, against a real broker
with an ACL authorizer, and checked through a Kafka client's admin API."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

import litemq

BIN = Path(__file__).resolve().parents[2] / "scripts" / "kafka-tools" / "bin"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with litemq.Broker(data_dir=tmp_path_factory.mktemp("kafka-tools"), overrides={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}) as broker:
        yield broker


def _sh(command: str) -> subprocess.CompletedProcess:
    """One command line through a shell, as the harness's ``system()`` runs it."""
    return subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITEMQ_BOOTSTRAP_SERVER": ""}, stdin=subprocess.DEVNULL)


def test_kafka_topics_create_alter_describe_delete(acl_broker):
    bs = acl_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    r = _sh(f'{BIN}/kafka-topics.sh --bootstrap-server {bs} --create --topic "kt-1" --replication-factor 1 '
            f'--partitions 2 --config message.timestamp.type=LogAppendTime --config retention.ms=60000')
    assert r.returncode == 0, r.stderr
    md = admin.list_topics("kt-1", timeout=10).topics["kt-1"]
    assert md.error is None and len(md.partitions) == 2
    res = ConfigResource("topic", "kt-1")
    cfg = admin.describe_configs([res])[res].result(timeout=30)
    assert (cfg["message.timestamp.type"].value, cfg["retention.ms"].value) == ("LogAppendTime", "60000")

    r = _sh(f"{BIN}/kafka-topics.sh --bootstrap-server {bs} --alter --topic kt-1 --partitions 4")
    assert r.returncode == 0, r.stderr
    assert len(admin.list_topics("kt-1", timeout=10).topics["kt-1"].partitions) == 4
    r = _sh(f"{BIN}/kafka-topics.sh --bootstrap-server {bs} --list")
    assert r.returncode == 0 and "kt-1" in r.stdout, r.stdout + r.stderr
    r = _sh(f"{BIN}/kafka-topics.sh --bootstrap-server {bs} --describe --topic kt-1")
    assert r.returncode == 0 and "kt-1" in r.stdout, r.stdout + r.stderr

    r = _sh(f'{BIN}/kafka-topics.sh --bootstrap-server {bs} --delete --topic "kt-1" ')
    assert r.returncode == 0, r.stderr
    assert "kt-1" not in admin.list_topics(timeout=10).topics


def test_kafka_topics_refusals_exit_nonzero(acl_broker):
    """A refused creation (Kafka 4's segment.bytes floor, as librdkafka's 0077_compaction asks
    for) and an option the shim does not know both fail the command, so the harness fails."""
    bs = acl_broker.bootstrap_servers
    r = _sh(f"{BIN}/kafka-topics.sh --bootstrap-server {bs} --create --topic kt-small --partitions 1 "
            f"--replication-factor 1 --config segment.bytes=10000")
    assert r.returncode == 1 and "segment.bytes" in r.stderr, r.stderr
    r = _sh(f"{BIN}/kafka-topics.sh --bootstrap-server {bs} --create --topic kt-x --if-not-exists")
    assert r.returncode == 2 and "--if-not-exists" in r.stderr, r.stderr


def test_kafka_acls_add_list_remove(acl_broker):
    """The ACLs librdkafka's 0115/0119 add (and an allow ACL beside them), then listed, and the
    deny ACL removed with the same options as Kafka's --remove takes: the allow ACL stays."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType

    bs = acl_broker.bootstrap_servers
    for add in ("--add --deny-principal 'User:*' --operation Read --deny-host '*' --topic 'ka-1'",
                "--add --allow-principal 'User:*' --operation Describe --allow-host '*' --topic 'ka-1'"):
        r = _sh(f"{BIN}/kafka-acls.sh --bootstrap-server {bs} {add}")
        assert r.returncode == 0, r.stderr
    r = _sh(f"{BIN}/kafka-acls.sh --bootstrap-server {bs} --list --topic ka-1")
    assert r.returncode == 0 and "DENY" in r.stdout and "READ" in r.stdout, r.stdout + r.stderr
    r = _sh(f"{BIN}/kafka-acls.sh --bootstrap-server {bs} --remove --deny-principal 'User:*' "
            f"--operation Read --deny-host '*' --topic 'ka-1'")
    assert r.returncode == 0, r.stderr
    admin = AdminClient({"bootstrap.servers": bs})
    flt = AclBindingFilter(ResourceType.TOPIC, "ka-1", ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    left = admin.describe_acls(flt, request_timeout=30).result(timeout=30)
    assert [(b.principal, b.host, b.operation, b.permission_type) for b in left] == [
        ("User:*", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
    assert _sh(f"{BIN}/kafka-acls.sh --bootstrap-server {bs} --add --list").returncode == 2
