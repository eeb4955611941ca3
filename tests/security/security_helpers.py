"""Shared pieces of the security acceptance tests and ``benchmarks/bench_security.py``: broker
settings for a SASL_SSL listener with the StandardAuthorizer, SCRAM credential upsertions, and
:class:`AdminWire`, a super-user connection that sets up and inspects broker state with raw
Kafka requests (so the tests observe exactly what a refused request did or did not change).
"""

from __future__ import annotations

import os
import ssl
import time
from dataclasses import dataclass
from typing import Any

from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.records import build_batch
from litemq.security.acls import AclPermissionType
from litemq.security.credentials import SCRAM_MECHANISMS, salted_password
from litemq.testing.wire import WireClient

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"
SCRAM_ITERATIONS = 4096
RETRIABLE_COORDINATOR = (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
                         E.CONCURRENT_TRANSACTIONS)
AUTHORIZATION_CODES = frozenset({E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED,
                                 E.CLUSTER_AUTHORIZATION_FAILED, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
API_VERSIONS_V3 = {"client_software_name": "litemq-security-test", "client_software_version": "1"}
CLUSTER = "kafka-cluster"
"""The one CLUSTER resource's name in ACLs."""
FILTERED = "filtered"
"""Refusal by omission: the resource is left out of a listing."""
NO_OPERATIONS = "no-operations"
"""Refusal of DescribeCluster's authorized operations: answered, with none of them (Kafka
``AuthHelper.computeDescribeClusterResponse`` needs no ACL to answer)."""
REFUSAL_CODE = {ResourceType.TOPIC: E.TOPIC_AUTHORIZATION_FAILED, ResourceType.GROUP: E.GROUP_AUTHORIZATION_FAILED,
                ResourceType.CLUSTER: E.CLUSTER_AUTHORIZATION_FAILED,
                ResourceType.TRANSACTIONAL_ID: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


@dataclass(frozen=True)
class Need:
    """One ACL an API or client operation needs: ``op`` on the cell's resource of ``rtype`` (the
    cluster for CLUSTER). ``refusal``: what a caller without it gets (default: the resource
    type's *_AUTHORIZATION_FAILED code), :data:`FILTERED` or :data:`NO_OPERATIONS`."""

    rtype: ResourceType
    op: AclOperation
    refusal: Any = None

    def expected(self):
        return REFUSAL_CODE[self.rtype] if self.refusal is None else self.refusal


def acl_rows(needs, case: str, principal: str, topic: str, group: str, txn: str) -> list[tuple]:
    """The ACLs of one matrix cell for :meth:`AdminWire.create_acls`: ``allow`` gets exactly the
    ALLOWs ``needs`` lists; ``deny<i>`` the same with the i-th replaced by a DENY of it plus an
    ALLOW of ALL on that resource (a DENY must win)."""
    names = {ResourceType.TOPIC: topic, ResourceType.GROUP: group, ResourceType.TRANSACTIONAL_ID: txn,
             ResourceType.CLUSTER: CLUSTER}
    out = []
    for i, need in enumerate(needs):
        name = names[need.rtype]
        if case == f"deny{i}":
            out += [(need.rtype, name, principal, need.op, AclPermissionType.DENY),
                    (need.rtype, name, principal, AclOperation.ALL, AclPermissionType.ALLOW)]
        else:
            out.append((need.rtype, name, principal, need.op, AclPermissionType.ALLOW))
    return out


def password_of(user: str) -> str:
    """Every test user's password (the JAAS PLAIN users and the SCRAM credentials agree)."""
    return f"{user}-secret"


def plain_jaas(users: dict[str, str]) -> str:
    """A Kafka PlainLoginModule JAAS config whose ``user_NAME="PASSWORD"`` options are ``users``."""
    opts = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{ADMIN_USER}" password="{ADMIN_PASSWORD}" {opts};')


def sasl_ssl_overrides(pki, plain_users: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """Broker settings: one SASL_SSL listener (PLAIN and both SCRAMs), inter-broker listener
    SASL_SSL, the StandardAuthorizer with ``User:admin`` as super user (no ACL = denied); PLAIN
    users ``admin`` plus ``plain_users``. ``extra`` keys use ``_`` for ``.``."""
    users = {ADMIN_USER: ADMIN_PASSWORD, **(plain_users or {})}
    out = {**pki.broker_overrides(),
           "inter.broker.listener.name": "SASL_SSL",
           "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
           "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(users),
           "authorizer.class.name": STANDARD_AUTHORIZER,
           "super.users": f"User:{ADMIN_USER}",
           "offsets.topic.num.partitions": "1",
           "transaction.state.log.num.partitions": "1"}
    out.update({k.replace("_", "."): v for k, v in extra.items()})
    return out


def scram_upsertion(user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                    iterations: int = SCRAM_ITERATIONS) -> dict:
    """One AlterUserScramCredentials v0 upsertion (KIP-554: the client sends the salted password)."""
    salt = os.urandom(24)
    return {"name": user, "mechanism": SCRAM_MECHANISMS[mechanism][0], "iterations": iterations, "salt": salt,
            "salted_password": salted_password(mechanism, password, salt, iterations)}


def connect(port: int, ssl_context: ssl.SSLContext, user: str | None = None, password: str | None = None,
            mechanism: str = "PLAIN", timeout_s: float = 20.0) -> WireClient:
    """A WireClient on the SASL_SSL port, authenticated as ``user`` with ``mechanism`` (no SASL at
    all when ``user`` is None). Raises WireSaslError when authentication fails."""
    w = WireClient("127.0.0.1", port, timeout_s=timeout_s, ssl_context=ssl_context)
    if user is None:
        return w
    try:
        if mechanism == "PLAIN":
            w.sasl_plain(user, password)
        else:
            w.sasl_scram(mechanism, user, password)
    except BaseException:
        w.close()
        raise
    return w


def one_record_batch(value: bytes = b"v", **kw) -> bytes:
    return build_batch([(None, value)], **kw)


class AdminWire:
    """The super user's connection: raw requests that create and read broker state. Every method
    asserts the request succeeded (these are the test's own setup and observations)."""

    def __init__(self, port: int, ssl_context: ssl.SSLContext, mechanism: str = "PLAIN",
                 user: str | None = ADMIN_USER, password: str | None = ADMIN_PASSWORD) -> None:
        """``user`` None: no SASL (the connection's identity is its TLS client certificate)."""
        self.port, self.ssl_context = port, ssl_context
        self.w = connect(port, ssl_context, user, password, mechanism)

    def close(self) -> None:
        self.w.close()

    def request(self, api_key: int, version: int, body):
        return self.w.request(api_key, version, body)

    # ------------------------------------------------------------ topics and records
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1) -> None:
        r = self.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                             "replication_factor": replication_factor}], "timeout_ms": 30000})
        assert r.topics[0].error_code == E.NONE, (name, E(r.topics[0].error_code).name, r.topics[0].error_message)

    def partitions(self, name: str) -> int | None:
        """The topic's partition count, None when it does not exist."""
        r = self.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        t = r.topics[0]
        if t.error_code == E.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        assert t.error_code == E.NONE, E(t.error_code).name
        return len(t.partitions)

    def topic_id(self, name: str):
        r = self.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        assert r.topics[0].error_code == E.NONE
        return r.topics[0].topic_id

    def node_id(self) -> int:
        return self.request(3, 12, {"topics": [], "allow_auto_topic_creation": False}).brokers[0].node_id

    def produce(self, topic: str, n: int = 1, partition: int = 0) -> int:
        """Append ``n`` one-record batches (acks=all); returns the last base offset."""
        base = -1
        for _ in range(n):
            r = self.request(0, 9, {"acks": -1, "timeout_ms": 30000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": one_record_batch()}]}]})
            p = r.responses[0].partition_responses[0]
            assert p.error_code == E.NONE, E(p.error_code).name
            base = p.base_offset
        return base

    def offsets(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(log start offset, high watermark)."""
        out = []
        for ts in (-2, -1):
            r = self.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": partition, "timestamp": ts}]}]})
            p = r.topics[0].partitions[0]
            assert p.error_code == E.NONE, E(p.error_code).name
            out.append(p.offset)
        return out[0], out[1]

    def topic_config(self, topic: str, key: str) -> str:
        r = self.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                "configuration_keys": [key]}]})
        res = r.results[0]
        assert res.error_code == E.NONE, E(res.error_code).name
        return {c.name: c.value for c in res.configs}[key]

    # ------------------------------------------------------------ groups and offsets
    def commit(self, group: str, topic: str, offset: int, partition: int = 0) -> None:
        """A standalone (generation -1) offset commit."""
        r = self.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                "topics": [{"name": topic, "partitions": [{"partition_index": partition,
                                                                           "committed_offset": offset}]}]})
        code = r.topics[0].partitions[0].error_code
        assert code == E.NONE, E(code).name

    def committed(self, group: str, topic: str, partition: int = 0) -> int:
        """The group's committed offset of the partition (-1: none), waiting out pending
        transactional commits."""
        deadline = time.monotonic() + 30
        while True:
            r = self.request(9, 8, {"groups": [{"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [partition]}]}], "require_stable": True})
            g = r.groups[0]
            codes = {g.error_code} | {p.error_code for t in g.topics for p in t.partitions}
            if (codes & {E.UNSTABLE_OFFSET_COMMIT, *RETRIABLE_COORDINATOR}) and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            assert codes == {E.NONE}, [E(c).name for c in codes]
            return g.topics[0].partitions[0].committed_offset

    def group(self, group: str) -> tuple[str, int]:
        """(state, member count) from DescribeGroups."""
        r = self.request(15, 5, {"groups": [group], "include_authorized_operations": False})
        g = r.groups[0]
        assert g.error_code == E.NONE, E(g.error_code).name
        return g.group_state, len(g.members)

    def list_groups(self) -> set[str]:
        r = self.request(16, 5, {"states_filter": [], "types_filter": []})
        assert r.error_code == E.NONE
        return {g.group_id for g in r.groups}

    def join(self, group: str, sync: bool = True) -> tuple[str, int]:
        """Join ``group`` as its only member (and sync it, making it Stable); (member id, generation)."""
        body = {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
        r = self.request(11, 9, body)
        if r.error_code == E.MEMBER_ID_REQUIRED:
            r = self.request(11, 9, {**body, "member_id": r.member_id})
        assert r.error_code == E.NONE, E(r.error_code).name
        if sync:
            s = self.request(14, 5, {"group_id": group, "generation_id": r.generation_id, "member_id": r.member_id,
                                     "protocol_type": "consumer", "protocol_name": "range",
                                     "assignments": [{"member_id": r.member_id, "assignment": b""}]})
            assert s.error_code == E.NONE, E(s.error_code).name
        return r.member_id, r.generation_id

    # ------------------------------------------------------------ transactions
    def _retry(self, api_key: int, version: int, body, code_of):
        deadline = time.monotonic() + 30
        while True:
            r = self.request(api_key, version, body)
            code = code_of(r)
            if code in RETRIABLE_COORDINATOR and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            assert code == E.NONE, (api_key, E(code).name)
            return r

    def init_pid(self, txn: str | None) -> tuple[int, int]:
        r = self._retry(22, 4, {"transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": -1,
                                "producer_epoch": -1}, lambda r: r.error_code)
        return r.producer_id, r.producer_epoch

    def add_partitions(self, txn: str, pid: int, epoch: int, topic: str) -> None:
        self._retry(24, 3, {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
                            "v3_and_below_producer_epoch": epoch,
                            "v3_and_below_topics": [{"name": topic, "partitions": [0]}]},
                    lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    def add_offsets(self, txn: str, pid: int, epoch: int, group: str) -> None:
        self._retry(25, 3, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                            "group_id": group}, lambda r: r.error_code)

    def end_txn(self, txn: str, pid: int, epoch: int, commit: bool = True) -> None:
        self._retry(26, 3, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                            "committed": commit}, lambda r: r.error_code)

    def produce_txn(self, txn: str, pid: int, epoch: int, topic: str, sequence: int = 0) -> None:
        batch = one_record_batch(producer_id=pid, producer_epoch=epoch, base_sequence=sequence, is_transactional=True)
        r = self.request(0, 9, {"transactional_id": txn, "acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
        code = r.responses[0].partition_responses[0].error_code
        assert code == E.NONE, E(code).name

    def txn(self, txn: str) -> tuple[int, str, list[str]]:
        """(error code, state, topics) from DescribeTransactions."""
        r = self.request(65, 0, {"transactional_ids": [txn]})
        s = r.transaction_states[0]
        return s.error_code, s.transaction_state, sorted(t.topic for t in s.topics)

    # ------------------------------------------------------------ ACLs and SCRAM users
    def create_acls(self, rows: list[tuple]) -> None:
        """``rows``: (resource type, name, principal, operation, permission) literal, any host."""
        for i in range(0, len(rows), 500):
            chunk = rows[i:i + 500]
            r = self.request(30, 3, {"creations": [
                {"resource_type": int(rt), "resource_name": name, "resource_pattern_type": 3, "principal": principal,
                 "host": "*", "operation": int(op), "permission_type": int(perm)}
                for rt, name, principal, op, perm in chunk]})
            bad = [(chunk[j], res.error_code, res.error_message) for j, res in enumerate(r.results) if res.error_code]
            assert not bad, bad[:5]

    def acls_on(self, resource_type: int, name: str) -> list[tuple]:
        """Literal bindings on one resource: sorted (principal, operation, permission)."""
        r = self.request(29, 3, {"resource_type_filter": int(resource_type), "resource_name_filter": name,
                                 "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                                 "operation": 1, "permission_type": 1})
        assert r.error_code == E.NONE, E(r.error_code).name
        return sorted((a.principal, a.operation, a.permission_type) for res in r.resources for a in res.acls)

    def upsert_scram(self, upsertions: list[dict]) -> None:
        """AlterUserScramCredentials; a user appears at most once per request (Kafka answers
        DUPLICATE_RESOURCE otherwise), so one request per round of the user's mechanisms."""
        rounds: list[list[dict]] = []
        for u in upsertions:
            slot = next((r for r in rounds if all(x["name"] != u["name"] for x in r)), None)
            if slot is None:
                slot = []
                rounds.append(slot)
            slot.append(u)
        for batch in rounds:
            for i in range(0, len(batch), 200):
                r = self.request(51, 0, {"deletions": [], "upsertions": batch[i:i + 200]})
                bad = [(res.user, E(res.error_code).name, res.error_message) for res in r.results if res.error_code]
                assert not bad, bad[:5]

    def delete_scram(self, user: str, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")) -> None:
        """Delete the user's credentials, one request per mechanism (a user once per request)."""
        for m in mechanisms:
            r = self.request(51, 0, {"deletions": [{"name": user, "mechanism": SCRAM_MECHANISMS[m][0]}],
                                     "upsertions": []})
            bad = [(res.user, E(res.error_code).name, res.error_message) for res in r.results if res.error_code]
            assert not bad, bad

    def client_quotas(self, client_id: str) -> dict[str, float]:
        """The quotas of client id entity ``client_id`` (DescribeClientQuotas, strict)."""
        r = self.request(48, 1, {"components": [{"entity_type": "client-id", "match_type": 0, "match": client_id}],
                                 "strict": True})
        assert r.error_code == E.NONE, E(r.error_code).name
        return {v.key: v.value for entry in r.entries for v in entry.values}

    def client_metrics_subscriptions(self) -> list[str]:
        """The client metrics subscription names (ListClientMetricsResources, KIP-714)."""
        r = self.request(74, 0, {})
        assert r.error_code == E.NONE, E(r.error_code).name
        return [x.name for x in r.client_metrics_resources]

    def scram_user(self, user: str) -> tuple[int, list[int]]:
        """(error code, mechanism codes) of one user from DescribeUserScramCredentials."""
        r = self.request(50, 0, {"users": [{"name": user}]})
        assert r.error_code == E.NONE, E(r.error_code).name
        res = r.results[0]
        return res.error_code, sorted(c.mechanism for c in res.credential_infos)


def produce_and_consume_for(conf: dict, topic: str, seconds: float, timeout_s: float = 20.0) -> tuple[int, int, list]:
    """A confluent-kafka producer and consumer with ``conf`` (an ``error_cb`` is added) write and
    read ``topic`` together for ``seconds``, then the consumer reads what is left: returns
    (records sent and flushed, records received, client errors). The re-authentication tests
    run it across several SASL session lifetimes."""
    from confluent_kafka import Consumer, Producer

    errors: list = []
    conf = {**conf, "error_cb": errors.append}
    producer = Producer(conf)
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    sent = received = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.produce(topic, b"%d" % sent)
        sent += 1
        producer.poll(0)
        msg = consumer.poll(0.1)
        received += msg is not None and msg.error() is None
    if producer.flush(timeout_s) != 0:
        errors.append("records left unflushed")
    deadline = time.monotonic() + timeout_s
    while received < sent and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        received += msg is not None and msg.error() is None
    consumer.close()
    return sent, received, errors
