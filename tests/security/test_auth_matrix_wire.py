"""Authorization matrix on the wire (issue 12): every API the broker advertises x five kinds of
caller, over SASL_SSL, on one broker with the StandardAuthorizer and ``super.users=User:admin``.

Callers (one connection each, a fresh set of resources per row and caller):

- ``unauthenticated``: TLS but no SASL. Kafka's ``SaslServerAuthenticator`` answers only
  ApiVersions and SaslHandshake before authentication; any other request (SaslAuthenticate
  without a handshake included) closes the connection.
- ``bad_password``: SaslAuthenticate with a wrong password (of a user that holds every ACL the API
  needs) answers SASL_AUTHENTICATION_FAILED (58) and the connection closes; the API request
  cannot be sent on it.
- ``noacl``: an authenticated user without any ACL.
- ``deny<i>``: a user holding every ACL the API needs except the i-th, which is DENIED while an
  ALLOW of ALL on the same resource is also present (a DENY wins, Kafka ``StandardAuthorizer``).
- ``allow``: a user holding exactly the ALLOW ACLs the API needs.

A refusal is Kafka's error code for the resource (TOPIC_/GROUP_/CLUSTER_/
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or, where Kafka filters instead of refusing
(Metadata of all topics, ListGroups, ListTransactions, OffsetFetch of all offsets), the
resource left out; DescribeCluster answers without DESCRIBE on the cluster but with no authorized
operations (Kafka ``AuthHelper.computeDescribeClusterResponse``). After every refused or
unauthenticated request the observable state (records, offsets, topics, groups, transactions,
ACLs, SCRAM users) is checked unchanged; the allowed request must change it as asked.

The rows follow Kafka 3.9 ``KafkaApis`` (and ``AclApis``, ``ControllerApis``); the ACL each API
needs is listed in the docstrings of ``litemq.broker.handlers.*``. Users authenticate with PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512 in turn (by row), so principals from every mechanism are used.
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from litemq.security.acl_operations import AclOperation as O
from litemq.security.acl_operations import ResourceType as R
from litemq.protocol.errors import ErrorCode as E
from litemq.security.acls import AclPermissionType as P
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient, WireSaslError
from tests.security.security_helpers import (
    API_VERSIONS_V3,
    AUTHORIZATION_CODES,
    FILTERED,
    NO_OPERATIONS,
    RETRIABLE_COORDINATOR,
    AdminWire,
    Need,
    acl_rows,
    connect,
    one_record_batch,
    password_of,
    sasl_ssl_overrides,
    scram_upsertion,
)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
NOACL_USER = "noacl"
SASL_ONLY_APIS = {17, 18}
"""Kafka answers these before authentication; everything else closes the connection."""


@dataclass
class Ctx:
    """One (row, caller) cell: its own resource names and what its setup made."""

    row: Row
    case: str
    admin: AdminWire
    topic: str = ""
    group: str = ""
    txn: str = ""
    s: dict = field(default_factory=dict)


@dataclass
class Row:
    """One request of the matrix (see the module docstring).

    send(w, ctx) -> response; codes(resp, ctx) -> the error codes a refusal shows in;
    listed(resp, ctx) -> names a listing shows (for FILTERED needs); setup(ctx) prepares state as
    the super user; state(ctx) -> a snapshot that a refused request must leave unchanged;
    leak(resp, ctx) asserts a refused answer carries no data; allowed(resp, ctx, before) asserts
    the allowed request did its work; after(ctx, refused) checks state that only shows later.
    """

    id: str
    api_key: int
    version: int
    needs: tuple[Need, ...]
    send: Callable
    codes: Callable | None = None
    listed: Callable | None = None
    setup: Callable | None = None
    state: Callable | None = None
    leak: Callable | None = None
    allowed: Callable | None = None
    after: Callable | None = None

    @property
    def mechanism(self) -> str:
        return MECHANISMS[ROW_INDEX[self.id] % len(MECHANISMS)]

    def cases(self) -> list[str]:
        if not self.needs:
            return ["unauthenticated", "noacl"]
        return ["unauthenticated", "noacl", *(f"deny{i}" for i in range(len(self.needs))), "allow"]

    def user(self, case: str) -> str:
        return NOACL_USER if case == "noacl" else f"{self.id}_{case}"


# ============================================================== request builders
def _p0(resp_topics, attr="partitions"):
    return [p.error_code for t in resp_topics for p in getattr(t, attr)]


def _topic_part(name, **kw):
    return {"name": name, "partitions": [{"partition_index": 0, **kw}]}


def produce(w, c):
    return w.request(0, 9, {"acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": c.topic, "partition_data": [{"index": 0, "records": one_record_batch(b"matrix")}]}]})


def produce_txn(w, c):
    batch = one_record_batch(b"matrix", producer_id=c.s["pid"], producer_epoch=c.s["epoch"], base_sequence=0,
                             is_transactional=True)
    return w.request(0, 9, {"transactional_id": c.txn, "acks": -1, "timeout_ms": 10000, "topic_data": [
        {"name": c.topic, "partition_data": [{"index": 0, "records": batch}]}]})


def produce_codes(r, c):
    return [p.error_code for t in r.responses for p in t.partition_responses]


def fetch_body(c, version):
    part = {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
            "log_start_offset": -1}
    topic = {"topic_id": c.s["topic_id"]} if version >= 13 else {"topic": c.topic}
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{**topic, "partitions": [part]}],
            "forgotten_topics_data": []}


def fetch_leak(r, c):
    for t in r.responses:
        for p in t.partitions:
            assert not p.records, "refused Fetch returned records"
            assert p.high_watermark == -1


def fetch_allowed(r, c, before):
    assert r.responses[0].partitions[0].records, "allowed Fetch returned no records"


def metadata_topics(r, c):
    return [t.error_code for t in r.topics]


def metadata_listed(r, c):
    return {t.name for t in r.topics}


def offset_fetch(w, c, all_topics=False):
    topics = None if all_topics else [{"name": c.topic, "partition_indexes": [0]}]
    return w.request(9, 8, {"groups": [{"group_id": c.group, "topics": topics}], "require_stable": False})


def offset_fetch_codes(r, c):
    g = r.groups[0]
    return [g.error_code] if g.error_code else [p.error_code for t in g.topics for p in t.partitions]


def offset_fetch_listed(r, c):
    g = r.groups[0]
    assert g.error_code == E.NONE, E(g.error_code).name
    return {t.name for t in g.topics}


def offset_fetch_leak(r, c):
    for t in r.groups[0].topics:
        for p in t.partitions:
            assert p.committed_offset == -1


def join_group(w, c):
    body = {"group_id": c.group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    r = w.request(11, 9, body)
    if r.error_code == E.MEMBER_ID_REQUIRED:  # KIP-394: join again with the given member id
        r = w.request(11, 9, {**body, "member_id": r.member_id})
    return r


def top_code(r, c):
    return [r.error_code]


def group_state(c):
    return c.admin.group(c.group)


def txn_state(c):
    return c.admin.txn(c.txn)


def config_row(rid, api_key, version, resource_type, op, alter=False):
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on a topic (2), a broker (4, checked
    on the cluster), a broker logger (8, the cluster), a client metrics subscription (16, the
    cluster; KIP-714) or a group (32)."""
    rtype = {2: R.TOPIC, 4: R.CLUSTER, 8: R.CLUSTER, 16: R.CLUSTER, 32: R.GROUP}[resource_type]

    def name(c):
        return {2: c.topic, 4: str(c.s.get("node", "")), 8: str(c.s.get("node", "")), 16: c.topic,
                32: c.group}[resource_type]

    def setup(c):
        if resource_type == 2:
            c.admin.create_topic(c.topic)
        c.s["node"] = c.admin.node_id()

    def send(w, c):
        if api_key == 32:
            return w.request(32, version, {"resources": [{"resource_type": resource_type, "resource_name": name(c),
                                                          "configuration_keys": None}],
                                           "include_synonyms": False, "include_documentation": False})
        if api_key == 33:
            cfg = {"name": "retention.ms", "value": "123456"}
        else:
            cfg = {"name": "retention.ms", "config_operation": 0, "value": "123456"}
        if resource_type == 32:
            cfg["name"] = "consumer.session.timeout.ms"
        if resource_type == 8:
            cfg["name"] = "kafka.server.KafkaApis"
            cfg["value"] = "INFO"
        if resource_type == 16:
            cfg.update(name="metrics", value="org.apache.kafka.producer.")
        return w.request(api_key, version, {"resources": [{"resource_type": resource_type, "resource_name": name(c),
                                                           "configs": [cfg]}], "validate_only": False})

    def codes(r, c):
        return [x.error_code for x in (r.results if api_key == 32 else r.responses)]

    def leak(r, c):
        if api_key == 32:
            assert not r.results[0].configs, "refused DescribeConfigs returned configs"

    state = (lambda c: c.admin.topic_config(c.topic, "retention.ms")) if resource_type == 2 and alter else None

    def allowed(r, c, before):
        if resource_type in (2, 16):
            assert codes(r, c) == [E.NONE], [E(x).name for x in codes(r, c)]
        if resource_type == 2 and alter:
            assert c.admin.topic_config(c.topic, "retention.ms") == "123456"
        if resource_type == 16 and alter:
            assert name(c) in c.admin.client_metrics_subscriptions(), "subscription not stored"

    return Row(rid, api_key, version, (Need(rtype, op),), send, codes, setup=setup, state=state, leak=leak,
               allowed=allowed)


# ============================================================== the rows
def _topic(c):
    c.admin.create_topic(c.topic)


def _topic_with_record(c):
    c.admin.create_topic(c.topic)
    c.admin.produce(c.topic)


def _offsets(c):
    return c.admin.offsets(c.topic)


def _committed(c):
    return c.admin.committed(c.group, c.topic)


def _committed_group(c):
    c.admin.create_topic(c.topic)
    c.admin.commit(c.group, c.topic, 1)


def _init_txn(c):
    c.s["pid"], c.s["epoch"] = c.admin.init_pid(c.txn)


def _txn_with_topic(c):
    c.admin.create_topic(c.topic)
    _init_txn(c)
    c.admin.add_partitions(c.txn, c.s["pid"], c.s["epoch"], c.topic)


def _ongoing_txn(c):
    _txn_with_topic(c)
    c.admin.produce_txn(c.txn, c.s["pid"], c.s["epoch"], c.topic)


def _stable_group(c):
    c.s["member"], c.s["generation"] = c.admin.join(c.group)


def _joined_group(c):
    c.s["member"], c.s["generation"] = c.admin.join(c.group, sync=False)


def _txn_offsets(c):
    c.admin.create_topic(c.topic)
    _init_txn(c)
    c.admin.add_offsets(c.txn, c.s["pid"], c.s["epoch"], c.group)


def _after_txn_offsets(c, refused):
    c.admin.end_txn(c.txn, c.s["pid"], c.s["epoch"], commit=True)
    assert c.admin.committed(c.group, c.topic) == (-1 if refused else 1)


def _scram_target(c):
    return f"made_{c.row.id}_{c.case}"


def _acl_target(c):
    return f"acl-target-{c.row.id}-{c.case}"


def _delete_acl_setup(c):
    c.admin.create_acls([(R.TOPIC, _acl_target(c), "User:nobody", O.READ, P.ALLOW)])


def _txn_offset_commit(w, c):
    return w.request(28, 3, {"transactional_id": c.txn, "group_id": c.group, "producer_id": c.s["pid"],
                             "producer_epoch": c.s["epoch"], "generation_id": -1, "member_id": "",
                             "topics": [{"name": c.topic, "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})


def _add_partitions_v3(w, c):
    return w.request(24, 3, {"v3_and_below_transactional_id": c.txn, "v3_and_below_producer_id": c.s["pid"],
                             "v3_and_below_producer_epoch": c.s["epoch"],
                             "v3_and_below_topics": [{"name": c.topic, "partitions": [0]}]})


def _add_partitions_v4(w, c):
    return w.request(24, 4, {"transactions": [{"transactional_id": c.txn, "producer_id": c.s["pid"],
                                               "producer_epoch": c.s["epoch"], "verify_only": True,
                                               "topics": [{"name": c.topic, "partitions": [0]}]}]})


def _add_partitions_v4_codes(r, c):
    if r.error_code:
        return [r.error_code]
    return [p.partition_error_code for t in r.results_by_transaction for tr in t.topic_results
            for p in tr.results_by_partition]


def _init_pid(txn):
    def send(w, c):
        body = {"transactional_id": c.txn if txn else None, "transaction_timeout_ms": 60000, "producer_id": -1,
                "producer_epoch": -1}
        for _ in range(300):
            r = w.request(22, 4, body)
            if r.error_code not in RETRIABLE_COORDINATOR:
                return r
        return r
    return send


def _pid_allowed(r, c, before):
    assert r.error_code == E.NONE and r.producer_id >= 0, E(r.error_code).name


def _writable_marker(w, c):
    return w.request(27, 1, {"markers": [{"producer_id": 987_654_321, "producer_epoch": 0, "transaction_result": True,
                                          "topics": [{"name": c.topic, "partition_indexes": [0]}],
                                          "coordinator_epoch": 0}]})


def _consumer_heartbeat(w, c):
    return w.request(68, 0, {"group_id": c.group, "member_id": "", "member_epoch": 0, "instance_id": None,
                             "rack_id": None, "rebalance_timeout_ms": 30000, "subscribed_topic_names": [c.topic],
                             "server_assignor": None, "topic_partitions": []})


def _consumer_group_member(c):
    """A KIP-848 group with one member, joined as the super user."""
    c.admin.create_topic(c.topic)
    r = _consumer_heartbeat(c.admin, c)
    assert r.error_code == E.NONE, E(r.error_code).name


def _share_heartbeat(w, c):
    member = c.s.setdefault("share_member", f"m-{c.row.id}-{c.case}")
    return w.request(76, 1, {"group_id": c.group, "member_id": member, "member_epoch": 0, "rack_id": None,
                             "subscribed_topic_names": [c.topic]})


def _share_member(c):
    """A share group with one member subscribed to the cell's topic (which has a record)."""
    _topic_with_record(c)
    c.s["topic_id"] = c.admin.topic_id(c.topic)
    r = _share_heartbeat(c.admin, c)
    assert r.error_code == E.NONE, E(r.error_code).name


def _share_partitions(c, acks: bool) -> list[dict]:
    part = {"partition_index": 0, "acknowledgement_batches": []}
    if not acks:
        part["partition_max_bytes"] = 1 << 20
    return [{"topic_id": c.s["topic_id"], "partitions": [part]}]


def _share_fetch(w, c, epoch: int = 0):
    return w.request(78, 1, {"group_id": c.group, "member_id": c.s["share_member"], "share_session_epoch": epoch,
                             "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
                             "batch_size": 100, "topics": _share_partitions(c, False),
                             "forgotten_topics_data": []})


def _share_session(c):
    """A share member with an open share session (epoch 2 next) holding the record at offset 1
    (share.auto.offset.reset is latest: the first fetch starts the share-partition at the end)."""
    _share_member(c)
    r = _share_fetch(c.admin, c)
    assert r.error_code == E.NONE, E(r.error_code).name
    c.admin.produce(c.topic)
    for _ in range(50):
        r = _share_fetch(c.admin, c, epoch=1)
        if any(p.acquired_records for t in r.responses for p in t.partitions):
            return
        time.sleep(0.05)
    pytest.fail("the share member acquired no record")


def _empty_share_group(c):
    """A share group whose one member held the record at offset 1 and left (start offset 1)."""
    _share_session(c)
    r = c.admin.request(76, 1, {"group_id": c.group, "member_id": c.s["share_member"], "member_epoch": -1,
                                "rack_id": None, "subscribed_topic_names": None})
    assert r.error_code == E.NONE, E(r.error_code).name


def _share_start_offset(c):
    r = c.admin.request(90, 0, {"groups": [{"group_id": c.group, "topics": [{"topic_name": c.topic,
                                                                            "partitions": [0]}]}]})
    return [p.start_offset for t in r.groups[0].topics for p in t.partitions][0]


def _share_acknowledge(w, c):
    topics = _share_partitions(c, True)
    topics[0]["partitions"][0]["acknowledgement_batches"] = [
        {"first_offset": 1, "last_offset": 1, "acknowledge_types": [1]}]  # ACCEPT
    return w.request(79, 1, {"group_id": c.group, "member_id": c.s["share_member"], "share_session_epoch": 2,
                             "topics": topics})


def _share_codes(r, c):
    if r.error_code:
        return [r.error_code]
    return [p.error_code for t in r.responses for p in t.partitions]


T, G, C, X = R.TOPIC, R.GROUP, R.CLUSTER, R.TRANSACTIONAL_ID

ROWS: list[Row] = [
    # ---------------------------------------------------------------- records
    Row("produce", 0, 9, (Need(T, O.WRITE),), produce, produce_codes, setup=_topic, state=_offsets,
        allowed=lambda r, c, b: c.admin.offsets(c.topic)[1] == b[1] + 1 or pytest.fail("not appended")),
    Row("produce_txn", 0, 9, (Need(X, O.WRITE), Need(T, O.WRITE)), produce_txn, produce_codes,
        setup=_txn_with_topic, state=_offsets,
        allowed=lambda r, c, b: c.admin.offsets(c.topic)[1] > b[1] or pytest.fail("not appended")),
    Row("fetch", 1, 12, (Need(T, O.READ),), lambda w, c: w.request(1, 12, fetch_body(c, 12)),
        lambda r, c: _p0(r.responses), setup=_topic_with_record, leak=fetch_leak, allowed=fetch_allowed),
    Row("fetch_by_id", 1, 13, (Need(T, O.READ),), lambda w, c: w.request(1, 13, fetch_body(c, 13)),
        lambda r, c: _p0(r.responses),
        setup=lambda c: (_topic_with_record(c), c.s.update(topic_id=c.admin.topic_id(c.topic))),
        leak=fetch_leak, allowed=fetch_allowed),
    Row("list_offsets", 2, 7, (Need(T, O.DESCRIBE),),
        lambda w, c: w.request(2, 7, {"replica_id": -1, "isolation_level": 0,
                                      "topics": [_topic_part(c.topic, timestamp=-1)]}),
        lambda r, c: _p0(r.topics), setup=_topic_with_record,
        leak=lambda r, c: r.topics[0].partitions[0].offset == -1 or pytest.fail("offset leaked"),
        allowed=lambda r, c, b: r.topics[0].partitions[0].offset == 1 or pytest.fail("wrong offset")),
    Row("offset_for_leader_epoch", 23, 4, (Need(T, O.DESCRIBE),),
        lambda w, c: w.request(23, 4, {"replica_id": -1, "topics": [
            {"topic": c.topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        lambda r, c: _p0(r.topics), setup=_topic_with_record,
        leak=lambda r, c: r.topics[0].partitions[0].end_offset == -1 or pytest.fail("end offset leaked")),
    Row("describe_producers", 61, 0, (Need(T, O.READ),),
        lambda w, c: w.request(61, 0, {"topics": [{"name": c.topic, "partition_indexes": [0]}]}),
        lambda r, c: _p0(r.topics), setup=_topic_with_record,
        leak=lambda r, c: not r.topics[0].partitions[0].active_producers or pytest.fail("producers leaked")),
    Row("delete_records", 21, 2, (Need(T, O.DELETE),),
        lambda w, c: w.request(21, 2, {"topics": [_topic_part(c.topic, offset=1)], "timeout_ms": 10000}),
        lambda r, c: _p0(r.topics), setup=lambda c: (c.admin.create_topic(c.topic), c.admin.produce(c.topic, 2)),
        state=_offsets, allowed=lambda r, c, b: c.admin.offsets(c.topic)[0] == 1 or pytest.fail("not deleted")),
    # ---------------------------------------------------------------- metadata and topics
    Row("metadata", 3, 12, (Need(T, O.DESCRIBE),),
        lambda w, c: w.request(3, 12, {"topics": [{"name": c.topic}], "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": True}),
        metadata_topics, setup=_topic,
        leak=lambda r, c: not r.topics[0].partitions or pytest.fail("partitions leaked"),
        allowed=lambda r, c, b: len(r.topics[0].partitions) == 1 or pytest.fail("no partitions")),
    Row("metadata_by_id", 3, 12, (Need(T, O.DESCRIBE),),
        lambda w, c: w.request(3, 12, {"topics": [{"name": None, "topic_id": c.s["topic_id"]}],
                                       "allow_auto_topic_creation": False}),
        metadata_topics, setup=lambda c: (_topic(c), c.s.update(topic_id=c.admin.topic_id(c.topic))),
        leak=lambda r, c: (r.topics[0].name is None and not r.topics[0].partitions) or pytest.fail("name leaked"),
        allowed=lambda r, c, b: r.topics[0].name == c.topic or pytest.fail("wrong name")),
    Row("metadata_all", 3, 12, (Need(T, O.DESCRIBE, FILTERED),),
        lambda w, c: w.request(3, 12, {"topics": None, "allow_auto_topic_creation": False}),
        listed=metadata_listed, setup=_topic),
    # KIP-966: DESCRIBE on each topic, as Metadata (Kafka DescribeTopicPartitionsRequestHandler)
    Row("describe_topic_partitions", 75, 0, (Need(T, O.DESCRIBE),),
        lambda w, c: w.request(75, 0, {"topics": [{"name": c.topic}], "response_partition_limit": 10,
                                       "cursor": None}),
        metadata_topics, setup=_topic,
        leak=lambda r, c: (not r.topics[0].partitions and r.topics[0].topic_id == uuid.UUID(int=0)
                           and r.topics[0].topic_authorized_operations == -(2**31)) or pytest.fail("topic leaked"),
        allowed=lambda r, c, b: (len(r.topics[0].partitions) == 1
                                 and r.topics[0].topic_authorized_operations & (1 << int(O.DESCRIBE)))
        or pytest.fail("not described")),
    Row("describe_topic_partitions_all", 75, 0, (Need(T, O.DESCRIBE, FILTERED),),
        lambda w, c: w.request(75, 0, {"topics": [], "response_partition_limit": 2000, "cursor": None}),
        listed=metadata_listed, setup=_topic),
    Row("metadata_auto_create", 3, 12, (Need(T, O.DESCRIBE), Need(T, O.CREATE)),
        lambda w, c: w.request(3, 12, {"topics": [{"name": c.topic}], "allow_auto_topic_creation": True}),
        metadata_topics, state=lambda c: c.admin.partitions(c.topic),
        allowed=lambda r, c, b: c.admin.partitions(c.topic) == 1 or pytest.fail("not created")),
    Row("create_topics", 19, 7, (Need(T, O.CREATE),),
        lambda w, c: w.request(19, 7, {"topics": [{"name": c.topic, "num_partitions": 1, "replication_factor": 1}],
                                       "timeout_ms": 10000}),
        lambda r, c: [t.error_code for t in r.topics], state=lambda c: c.admin.partitions(c.topic),
        allowed=lambda r, c, b: c.admin.partitions(c.topic) == 1 or pytest.fail("not created")),
    Row("create_topics_by_cluster", 19, 7, (Need(C, O.CREATE, E.TOPIC_AUTHORIZATION_FAILED),),
        lambda w, c: w.request(19, 7, {"topics": [{"name": c.topic, "num_partitions": 1, "replication_factor": 1}],
                                       "timeout_ms": 10000}),
        lambda r, c: [t.error_code for t in r.topics], state=lambda c: c.admin.partitions(c.topic),
        allowed=lambda r, c, b: c.admin.partitions(c.topic) == 1 or pytest.fail("not created")),
    Row("delete_topics", 20, 6, (Need(T, O.DELETE),),
        lambda w, c: w.request(20, 6, {"topics": [{"name": c.topic}], "timeout_ms": 10000}),
        lambda r, c: [t.error_code for t in r.responses], setup=_topic, state=lambda c: c.admin.partitions(c.topic),
        allowed=lambda r, c, b: c.admin.partitions(c.topic) is None or pytest.fail("not deleted")),
    Row("create_partitions", 37, 3, (Need(T, O.ALTER),),
        lambda w, c: w.request(37, 3, {"topics": [{"name": c.topic, "count": 2, "assignments": None}],
                                       "timeout_ms": 10000, "validate_only": False}),
        lambda r, c: [t.error_code for t in r.results], setup=_topic, state=lambda c: c.admin.partitions(c.topic),
        allowed=lambda r, c, b: c.admin.partitions(c.topic) == 2 or pytest.fail("not grown")),
    config_row("describe_configs_topic", 32, 4, 2, O.DESCRIBE_CONFIGS),
    config_row("describe_configs_broker", 32, 4, 4, O.DESCRIBE_CONFIGS),
    config_row("describe_configs_broker_logger", 32, 4, 8, O.DESCRIBE_CONFIGS),
    config_row("describe_configs_group", 32, 4, 32, O.DESCRIBE_CONFIGS),
    config_row("alter_configs_topic", 33, 2, 2, O.ALTER_CONFIGS, alter=True),
    config_row("alter_configs_broker", 33, 2, 4, O.ALTER_CONFIGS, alter=True),
    config_row("alter_configs_group", 33, 2, 32, O.ALTER_CONFIGS, alter=True),
    config_row("incremental_alter_configs_topic", 44, 1, 2, O.ALTER_CONFIGS, alter=True),
    config_row("incremental_alter_configs_broker", 44, 1, 4, O.ALTER_CONFIGS, alter=True),
    config_row("incremental_alter_configs_broker_logger", 44, 1, 8, O.ALTER_CONFIGS, alter=True),
    config_row("incremental_alter_configs_group", 44, 1, 32, O.ALTER_CONFIGS, alter=True),
    config_row("describe_configs_client_metrics", 32, 4, 16, O.DESCRIBE_CONFIGS),
    config_row("incremental_alter_configs_client_metrics", 44, 1, 16, O.ALTER_CONFIGS, alter=True),
    Row("list_client_metrics_resources", 74, 0, (Need(C, O.DESCRIBE_CONFIGS),),
        lambda w, c: w.request(74, 0, {}), top_code,
        setup=lambda c: c.admin.request(44, 1, {"validate_only": False, "resources": [{
            "resource_type": 16, "resource_name": "matrix-subscription",
            "configs": [{"name": "metrics", "config_operation": 0, "value": "*"}]}]}),
        leak=lambda r, c: not r.client_metrics_resources or pytest.fail("subscriptions leaked"),
        allowed=lambda r, c, b: r.client_metrics_resources or pytest.fail("no subscription listed")),
    Row("describe_cluster", 60, 1, (Need(C, O.DESCRIBE, NO_OPERATIONS),),
        lambda w, c: w.request(60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})),
    # ---------------------------------------------------------------- groups
    Row("find_coordinator_group", 10, 4, (Need(G, O.DESCRIBE),),
        lambda w, c: w.request(10, 4, {"key_type": 0, "coordinator_keys": [c.group]}),
        lambda r, c: [x.error_code for x in r.coordinators],
        leak=lambda r, c: r.coordinators[0].node_id == -1 or pytest.fail("coordinator leaked")),
    Row("find_coordinator_txn", 10, 4, (Need(X, O.DESCRIBE),),
        lambda w, c: w.request(10, 4, {"key_type": 1, "coordinator_keys": [c.txn]}),
        lambda r, c: [x.error_code for x in r.coordinators],
        leak=lambda r, c: r.coordinators[0].node_id == -1 or pytest.fail("coordinator leaked")),
    Row("find_coordinator_share", 10, 6, (Need(C, O.CLUSTER_ACTION),),  # KIP-932: brokers ask it
        lambda w, c: w.request(10, 6, {"key_type": 2, "coordinator_keys": [f"{c.group}:AAAAAAAAAAAAAAAAAAAAAQ:0"]}),
        lambda r, c: [x.error_code for x in r.coordinators],
        leak=lambda r, c: r.coordinators[0].node_id == -1 or pytest.fail("coordinator leaked")),
    Row("join_group", 11, 9, (Need(G, O.READ),), join_group, top_code,
        state=lambda c: c.admin.list_groups() & {c.group},
        allowed=lambda r, c, b: c.admin.group(c.group)[1] == 1 or pytest.fail("not joined")),
    Row("sync_group", 14, 5, (Need(G, O.READ),),
        lambda w, c: w.request(14, 5, {"group_id": c.group, "generation_id": c.s["generation"],
                                       "member_id": c.s["member"], "protocol_type": "consumer",
                                       "protocol_name": "range",
                                       "assignments": [{"member_id": c.s["member"], "assignment": b"a"}]}),
        top_code, setup=_joined_group, state=group_state,
        allowed=lambda r, c, b: c.admin.group(c.group)[0] == "Stable" or pytest.fail("not synced")),
    Row("heartbeat", 12, 4, (Need(G, O.READ),),
        lambda w, c: w.request(12, 4, {"group_id": c.group, "generation_id": c.s["generation"],
                                       "member_id": c.s["member"]}),
        top_code, setup=_stable_group, state=group_state,
        allowed=lambda r, c, b: r.error_code == E.NONE or pytest.fail(E(r.error_code).name)),
    Row("leave_group", 13, 5, (Need(G, O.READ),),
        lambda w, c: w.request(13, 5, {"group_id": c.group, "members": [{"member_id": c.s["member"]}]}),
        top_code, setup=_stable_group, state=group_state,
        allowed=lambda r, c, b: c.admin.group(c.group)[1] == 0 or pytest.fail("member still there")),
    Row("offset_commit", 8, 8, (Need(G, O.READ), Need(T, O.READ)),
        lambda w, c: w.request(8, 8, {"group_id": c.group, "generation_id_or_member_epoch": -1, "member_id": "",
                                      "topics": [_topic_part(c.topic, committed_offset=1)]}),
        lambda r, c: _p0(r.topics), setup=_topic, state=_committed,
        allowed=lambda r, c, b: _committed(c) == 1 or pytest.fail("not committed")),
    Row("offset_fetch", 9, 8, (Need(G, O.DESCRIBE), Need(T, O.DESCRIBE)), offset_fetch, offset_fetch_codes,
        setup=_committed_group, leak=offset_fetch_leak,
        allowed=lambda r, c, b: r.groups[0].topics[0].partitions[0].committed_offset == 1 or pytest.fail("offset")),
    Row("offset_fetch_all", 9, 8, (Need(G, O.DESCRIBE), Need(T, O.DESCRIBE, FILTERED)),
        lambda w, c: offset_fetch(w, c, all_topics=True), offset_fetch_codes, listed=offset_fetch_listed,
        setup=_committed_group, leak=offset_fetch_leak),
    Row("offset_delete", 47, 0, (Need(G, O.DELETE), Need(T, O.READ)),
        lambda w, c: w.request(47, 0, {"group_id": c.group, "topics": [_topic_part(c.topic)]}),
        lambda r, c: [r.error_code] if r.error_code else _p0(r.topics), setup=_committed_group, state=_committed,
        allowed=lambda r, c, b: _committed(c) == -1 or pytest.fail("offset not deleted")),
    Row("describe_groups", 15, 5, (Need(G, O.DESCRIBE),),
        lambda w, c: w.request(15, 5, {"groups": [c.group], "include_authorized_operations": True}),
        lambda r, c: [g.error_code for g in r.groups], setup=_committed_group,
        leak=lambda r, c: (not r.groups[0].members and r.groups[0].group_state == "") or pytest.fail("leak"),
        allowed=lambda r, c, b: r.groups[0].group_state == "Empty" or pytest.fail(r.groups[0].group_state)),
    Row("list_groups", 16, 5, (Need(G, O.DESCRIBE, FILTERED),),
        lambda w, c: w.request(16, 5, {"states_filter": [], "types_filter": []}),
        listed=lambda r, c: {g.group_id for g in r.groups}, setup=_committed_group),
    Row("list_groups_by_cluster", 16, 5, (Need(C, O.DESCRIBE, FILTERED),),
        lambda w, c: w.request(16, 5, {"states_filter": [], "types_filter": []}),
        listed=lambda r, c: {g.group_id for g in r.groups}, setup=_committed_group),
    Row("delete_groups", 42, 2, (Need(G, O.DELETE),),
        lambda w, c: w.request(42, 2, {"groups_names": [c.group]}),
        lambda r, c: [x.error_code for x in r.results], setup=_committed_group,
        state=lambda c: c.group in c.admin.list_groups(),
        allowed=lambda r, c, b: c.group not in c.admin.list_groups() or pytest.fail("group not deleted")),
    # KIP-848: READ on the group, DESCRIBE on every subscribed topic name (Kafka 4.x KafkaApis)
    Row("consumer_group_heartbeat", 68, 0, (Need(G, O.READ), Need(T, O.DESCRIBE)), _consumer_heartbeat, top_code,
        setup=_topic, state=lambda c: c.group in c.admin.list_groups(),
        leak=lambda r, c: (r.member_id is None and r.assignment is None) or pytest.fail("member leaked"),
        allowed=lambda r, c, b: (r.error_code == E.NONE and r.member_epoch >= 1) or pytest.fail(E(r.error_code).name)),
    Row("consumer_group_describe", 69, 0, (Need(G, O.DESCRIBE),),
        lambda w, c: w.request(69, 0, {"group_ids": [c.group], "include_authorized_operations": False}),
        lambda r, c: [g.error_code for g in r.groups], setup=_consumer_group_member,
        leak=lambda r, c: not r.groups[0].members or pytest.fail("members leaked"),
        allowed=lambda r, c, b: (r.groups[0].error_code == E.NONE and len(r.groups[0].members) == 1)
        or pytest.fail(E(r.groups[0].error_code).name)),
    # KIP-932 share groups: READ on the group (whole request), DESCRIBE (heartbeat) or READ (fetch,
    # acknowledge, per partition) on the topics; describe needs DESCRIBE on the group
    Row("share_group_heartbeat", 76, 1, (Need(G, O.READ), Need(T, O.DESCRIBE)), _share_heartbeat, top_code,
        setup=_topic, state=lambda c: c.group in c.admin.list_groups(),
        leak=lambda r, c: r.assignment is None or pytest.fail("assignment leaked"),
        allowed=lambda r, c, b: (r.error_code == E.NONE and r.member_epoch >= 1) or pytest.fail(E(r.error_code).name)),
    Row("share_group_describe", 77, 1, (Need(G, O.DESCRIBE),),
        lambda w, c: w.request(77, 1, {"group_ids": [c.group], "include_authorized_operations": False}),
        lambda r, c: [g.error_code for g in r.groups], setup=_share_member,
        leak=lambda r, c: not r.groups[0].members or pytest.fail("members leaked"),
        allowed=lambda r, c, b: (r.groups[0].error_code == E.NONE and len(r.groups[0].members) == 1)
        or pytest.fail(E(r.groups[0].error_code).name)),
    Row("share_fetch", 78, 1, (Need(G, O.READ), Need(T, O.READ)), _share_fetch, _share_codes,
        setup=_share_member, leak=lambda r, c: not any(p.records for t in r.responses for p in t.partitions)
        or pytest.fail("records leaked"),
        allowed=lambda r, c, b: _share_codes(r, c) == [E.NONE] or pytest.fail(str([E(x).name for x in _share_codes(r, c)]))),
    Row("share_acknowledge", 79, 1, (Need(G, O.READ), Need(T, O.READ)), _share_acknowledge, _share_codes,
        setup=_share_session,
        allowed=lambda r, c, b: _share_codes(r, c) == [E.NONE] or pytest.fail(str([E(x).name for x in _share_codes(r, c)]))),
    Row("describe_share_group_offsets", 90, 0, (Need(G, O.DESCRIBE), Need(T, O.DESCRIBE)),
        lambda w, c: w.request(90, 0, {"groups": [{"group_id": c.group, "topics": [
            {"topic_name": c.topic, "partitions": [0]}]}]}),
        lambda r, c: [r.groups[0].error_code] if r.groups[0].error_code else
        [p.error_code for t in r.groups[0].topics for p in t.partitions],
        setup=_share_session,
        leak=lambda r, c: all(p.start_offset == -1 for t in r.groups[0].topics for p in t.partitions)
        or pytest.fail("start offset leaked"),
        allowed=lambda r, c, b: [p.start_offset for t in r.groups[0].topics for p in t.partitions] == [1]
        or pytest.fail("wrong start offset")),
    Row("alter_share_group_offsets", 91, 0, (Need(G, O.READ), Need(T, O.READ)),
        lambda w, c: w.request(91, 0, {"group_id": c.group, "topics": [
            {"topic_name": c.topic, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
        lambda r, c: [p.error_code for t in r.responses for p in t.partitions], setup=_empty_share_group,
        state=_share_start_offset,
        allowed=lambda r, c, b: _share_start_offset(c) == 0 or pytest.fail("start offset not altered")),
    Row("delete_share_group_offsets", 92, 0, (Need(G, O.DELETE), Need(T, O.READ)),
        lambda w, c: w.request(92, 0, {"group_id": c.group, "topics": [{"topic_name": c.topic}]}),
        lambda r, c: [r.error_code] if r.error_code else [p.error_code for t in r.responses for p in t.partitions],
        setup=_empty_share_group, state=_share_start_offset,
        allowed=lambda r, c, b: _share_start_offset(c) == -1 or pytest.fail("share state not deleted")),
    # KIP-460: ALTER on the cluster (one broker: every partition answers ELECTION_NOT_NEEDED)
    Row("elect_leaders", 43, 2, (Need(C, O.ALTER),),
        lambda w, c: w.request(43, 2, {"election_type": 0, "timeout_ms": 5000,
                                       "topic_partitions": [{"topic": c.topic, "partitions": [0]}]}),
        lambda r, c: [r.error_code, *(p.error_code for t in r.replica_election_results for p in t.partition_result)],
        setup=_topic,
        allowed=lambda r, c, b: [p.error_code for t in r.replica_election_results for p in t.partition_result]
        == [E.ELECTION_NOT_NEEDED] or pytest.fail("not answered ELECTION_NOT_NEEDED")),
    # KIP-455: ALTER / DESCRIBE on the cluster (one broker: its only replica is itself, nothing is moving)
    Row("alter_partition_reassignments", 45, 0, (Need(C, O.ALTER),),
        lambda w, c: w.request(45, 0, {"timeout_ms": 5000, "topics": [
            {"name": c.topic, "partitions": [{"partition_index": 0, "replicas": [1]}]}]}),
        lambda r, c: [r.error_code, *(p.error_code for t in r.responses for p in t.partitions)], setup=_topic,
        allowed=lambda r, c, b: [r.error_code, *(p.error_code for t in r.responses for p in t.partitions)]
        == [E.NONE, E.NONE] or pytest.fail("not answered NONE")),
    Row("list_partition_reassignments", 46, 0, (Need(C, O.DESCRIBE),),
        lambda w, c: w.request(46, 0, {"timeout_ms": 5000, "topics": None}), top_code,
        allowed=lambda r, c, b: (r.error_code, r.topics) == (E.NONE, []) or pytest.fail("not an empty listing")),
    # KIP-595/KIP-853: DESCRIBE on the cluster (one broker: the only voter, itself, leads)
    Row("describe_quorum", 55, 2, (Need(C, O.DESCRIBE),),
        lambda w, c: w.request(55, 2, {"topics": [{"topic_name": "__cluster_metadata",
                                                   "partitions": [{"partition_index": 0}]}]}),
        lambda r, c: [r.error_code], leak=lambda r, c: r.topics == [] or pytest.fail("quorum leaked"),
        allowed=lambda r, c, b: [v.replica_id for v in r.topics[0].partitions[0].current_voters] == [1]
        or pytest.fail("not the broker itself as the only voter")),
    # KIP-113: DESCRIBE on the cluster; refused: the top-level error and no directory
    Row("describe_log_dirs", 35, 4, (Need(C, O.DESCRIBE),),
        lambda w, c: w.request(35, 4, {"topics": [{"topic": c.topic, "partitions": [0]}]}),
        top_code, setup=_topic, leak=lambda r, c: r.results == [] or pytest.fail("log dirs leaked"),
        allowed=lambda r, c, b: [(t.name, [p.partition_index for p in t.partitions]) for t in r.results[0].topics]
        == [(c.topic, [0])] or pytest.fail("not the asked partition")),
    # KIP-113: ALTER on the cluster; refused: every partition (allowed: a path that is no log dir)
    Row("alter_replica_log_dirs", 34, 2, (Need(C, O.ALTER),),
        lambda w, c: w.request(34, 2, {"dirs": [{"path": "/no/such/log/dir",
                                                 "topics": [{"name": c.topic, "partitions": [0]}]}]}),
        lambda r, c: [p.error_code for t in r.results for p in t.partitions], setup=_topic,
        allowed=lambda r, c, b: [p.error_code for t in r.results for p in t.partitions] == [E.LOG_DIR_NOT_FOUND]
        or pytest.fail("not answered LOG_DIR_NOT_FOUND")),
    # KIP-631: ALTER on the cluster (one broker: any other id is not registered)
    Row("unregister_broker", 64, 0, (Need(C, O.ALTER),), lambda w, c: w.request(64, 0, {"broker_id": 99}),
        top_code, allowed=lambda r, c, b: r.error_code == E.BROKER_ID_NOT_REGISTERED
        or pytest.fail("not answered BROKER_ID_NOT_REGISTERED")),
    # KIP-853: ALTER on the cluster (one broker: a static quorum, as Kafka's with kraft.version 0)
    Row("add_raft_voter", 80, 0, (Need(C, O.ALTER),),
        lambda w, c: w.request(80, 0, {"cluster_id": None, "timeout_ms": 5000, "voter_id": 99,
                                       "voter_directory_id": uuid.UUID(int=12345), "listeners": []}),
        top_code, allowed=lambda r, c, b: r.error_code == E.UNSUPPORTED_VERSION
        or pytest.fail("not answered UNSUPPORTED_VERSION")),
    Row("remove_raft_voter", 81, 0, (Need(C, O.ALTER),),
        lambda w, c: w.request(81, 0, {"cluster_id": None, "voter_id": 1, "voter_directory_id": uuid.UUID(int=12345)}),
        top_code, allowed=lambda r, c, b: r.error_code == E.UNSUPPORTED_VERSION
        or pytest.fail("not answered UNSUPPORTED_VERSION")),
    # ---------------------------------------------------------------- transactions
    Row("init_producer_id_txn", 22, 4, (Need(X, O.WRITE),), _init_pid(True), top_code, state=txn_state,
        allowed=_pid_allowed),
    Row("init_producer_id_idempotent", 22, 4, (Need(C, O.IDEMPOTENT_WRITE),), _init_pid(False), top_code,
        allowed=_pid_allowed),
    # KIP-679: WRITE on any topic is enough for an idempotent producer (a DENY on that topic takes it away)
    Row("init_producer_id_by_topic_write", 22, 4, (Need(T, O.WRITE, E.CLUSTER_AUTHORIZATION_FAILED),),
        _init_pid(False), top_code, allowed=_pid_allowed),
    Row("add_partitions_to_txn", 24, 3, (Need(X, O.WRITE), Need(T, O.WRITE)), _add_partitions_v3,
        lambda r, c: [p.partition_error_code for t in r.results_by_topic_v3_and_below
                      for p in t.results_by_partition],
        setup=lambda c: (_topic(c), _init_txn(c)), state=txn_state,
        allowed=lambda r, c, b: c.admin.txn(c.txn)[2] == [c.topic] or pytest.fail("partition not added")),
    # v4+ is broker to broker (KIP-890): CLUSTER_ACTION only, no transactional id or topic ACLs
    Row("add_partitions_to_txn_verify", 24, 4, (Need(C, O.CLUSTER_ACTION),), _add_partitions_v4,
        _add_partitions_v4_codes, setup=_txn_with_topic, state=txn_state,
        allowed=lambda r, c, b: _add_partitions_v4_codes(r, c) == [E.NONE] or pytest.fail(
            [E(x).name for x in _add_partitions_v4_codes(r, c)])),
    Row("add_offsets_to_txn", 25, 3, (Need(X, O.WRITE), Need(G, O.READ)),
        lambda w, c: w.request(25, 3, {"transactional_id": c.txn, "producer_id": c.s["pid"],
                                       "producer_epoch": c.s["epoch"], "group_id": c.group}),
        top_code, setup=_init_txn, state=txn_state,
        allowed=lambda r, c, b: c.admin.txn(c.txn)[2] == ["__consumer_offsets"] or pytest.fail("not added")),
    Row("txn_offset_commit", 28, 3, (Need(X, O.WRITE), Need(G, O.READ), Need(T, O.READ)), _txn_offset_commit,
        lambda r, c: _p0(r.topics), setup=_txn_offsets, after=_after_txn_offsets),
    Row("end_txn", 26, 3, (Need(X, O.WRITE),),
        lambda w, c: w.request(26, 3, {"transactional_id": c.txn, "producer_id": c.s["pid"],
                                       "producer_epoch": c.s["epoch"], "committed": True}),
        top_code, setup=_ongoing_txn, state=lambda c: (txn_state(c), c.admin.offsets(c.topic)),
        allowed=lambda r, c, b: c.admin.txn(c.txn)[1] in ("PrepareCommit", "CompleteCommit") or pytest.fail("state")),
    Row("write_txn_markers", 27, 1, (Need(C, O.CLUSTER_ACTION),), _writable_marker,
        lambda r, c: [p.error_code for m in r.markers for t in m.topics for p in t.partitions],
        setup=_topic, state=_offsets),
    Row("describe_transactions", 65, 0, (Need(X, O.DESCRIBE),),
        lambda w, c: w.request(65, 0, {"transactional_ids": [c.txn]}),
        lambda r, c: [s.error_code for s in r.transaction_states], setup=_init_txn,
        leak=lambda r, c: r.transaction_states[0].producer_id == -1 or pytest.fail("producer id leaked"),
        allowed=lambda r, c, b: r.transaction_states[0].transaction_state == "Empty" or pytest.fail("state")),
    Row("list_transactions", 66, 1, (Need(X, O.DESCRIBE, FILTERED),),
        lambda w, c: w.request(66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}),
        listed=lambda r, c: {s.transactional_id for s in r.transaction_states}, setup=_init_txn),
    # ---------------------------------------------------------------- ACLs and SCRAM credentials
    Row("describe_acls", 29, 3, (Need(C, O.DESCRIBE),),
        lambda w, c: w.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None,
                                       "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                       "operation": 1, "permission_type": 1}),
        top_code, leak=lambda r, c: not r.resources or pytest.fail("ACLs leaked"),
        allowed=lambda r, c, b: r.resources or pytest.fail("no ACLs described")),
    Row("create_acls", 30, 3, (Need(C, O.ALTER),),
        lambda w, c: w.request(30, 3, {"creations": [
            {"resource_type": 2, "resource_name": _acl_target(c), "resource_pattern_type": 3,
             "principal": "User:nobody", "host": "*", "operation": int(O.READ), "permission_type": 3}]}),
        lambda r, c: [x.error_code for x in r.results], state=lambda c: c.admin.acls_on(R.TOPIC, _acl_target(c)),
        allowed=lambda r, c, b: c.admin.acls_on(R.TOPIC, _acl_target(c)) or pytest.fail("ACL not created")),
    Row("delete_acls", 31, 3, (Need(C, O.ALTER),),
        lambda w, c: w.request(31, 3, {"filters": [
            {"resource_type_filter": 2, "resource_name_filter": _acl_target(c), "pattern_type_filter": 3,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]}),
        lambda r, c: [x.error_code for x in r.filter_results], setup=_delete_acl_setup,
        state=lambda c: c.admin.acls_on(R.TOPIC, _acl_target(c)),
        leak=lambda r, c: not r.filter_results[0].matching_acls or pytest.fail("ACLs leaked"),
        allowed=lambda r, c, b: not c.admin.acls_on(R.TOPIC, _acl_target(c)) or pytest.fail("ACL not deleted")),
    Row("describe_user_scram_credentials", 50, 0, (Need(C, O.DESCRIBE),),
        lambda w, c: w.request(50, 0, {"users": None}), top_code,
        leak=lambda r, c: not r.results or pytest.fail("users leaked"),
        allowed=lambda r, c, b: r.results or pytest.fail("no users described")),
    Row("alter_user_scram_credentials", 51, 0, (Need(C, O.ALTER),),
        lambda w, c: w.request(51, 0, {"deletions": [], "upsertions": [scram_upsertion(_scram_target(c), "pw-1")]}),
        lambda r, c: [x.error_code for x in r.results], state=lambda c: c.admin.scram_user(_scram_target(c)),
        allowed=lambda r, c, b: c.admin.scram_user(_scram_target(c))[0] == E.NONE or pytest.fail("not created")),
    # ---------------------------------------------------------------- client quotas (KIP-546)
    Row("describe_client_quotas", 48, 1, (Need(C, O.DESCRIBE_CONFIGS),),
        lambda w, c: w.request(48, 1, {"components": [], "strict": False}), top_code,
        setup=lambda c: c.admin.request(49, 1, {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "client-id", "entity_name": "matrix-quota"}],
             "ops": [{"key": "request_percentage", "value": 1000.0, "remove": False}]}]}),
        leak=lambda r, c: not r.entries or pytest.fail("quotas leaked"),
        allowed=lambda r, c, b: r.entries or pytest.fail("no quotas described")),
    Row("alter_client_quotas", 49, 1, (Need(C, O.ALTER_CONFIGS),),
        lambda w, c: w.request(49, 1, {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "client-id", "entity_name": _acl_target(c)}],
             "ops": [{"key": "consumer_byte_rate", "value": 1e12, "remove": False}]}]}),
        lambda r, c: [x.error_code for x in r.entries], state=lambda c: c.admin.client_quotas(_acl_target(c)),
        allowed=lambda r, c, b: c.admin.client_quotas(_acl_target(c)) == {"consumer_byte_rate": 1e12}
        or pytest.fail("quota not set")),
    # ---------------------------------------------------------------- no ACL: the SASL exchange itself
    Row("api_versions", 18, 3, (), lambda w, c: w.request(18, 3, API_VERSIONS_V3), top_code),
    Row("sasl_handshake", 17, 1, (), lambda w, c: w.request(17, 1, {"mechanism": "PLAIN"}), top_code),
    Row("sasl_authenticate", 36, 2, (), lambda w, c: w.request(36, 2, {"auth_bytes": b"\0x\0y"}), top_code),
]
ROW_INDEX = {r.id: i for i, r in enumerate(ROWS)}
assert len(ROW_INDEX) == len(ROWS), "duplicate row id"
CELLS = [(row, case) for row in ROWS for case in row.cases()]


# ============================================================== broker, users and ACLs
def _users() -> list[str]:
    return [NOACL_USER] + [row.user(case) for row, case in CELLS if case.startswith(("deny", "allow"))]


def _names(row: Row, case: str) -> tuple[str, str, str]:
    base = f"am-{row.id.replace('_', '-')}-{case.replace('_', '-')}"
    return base, "g-" + base, "x-" + base


def _acl_rows() -> list[tuple]:
    out = []
    for row, case in CELLS:
        if case.startswith(("deny", "allow")):
            topic, group, txn = _names(row, case)
            out += acl_rows(row.needs, case, "User:" + row.user(case), topic, group, txn)
    return out


@pytest.fixture(scope="module")
def matrix_broker(pki, tmp_path_factory):
    users = {u: password_of(u) for u in _users()}
    overrides = sasl_ssl_overrides(pki, users)
    with BrokerProcess(tmp_path_factory.mktemp("authmatrix") / "data", listeners={"SASL_SSL": 0},
                       overrides=overrides) as bp:
        port = bp.ports["SASL_SSL"]
        ctx = pki.client_context()
        admin = AdminWire(port, ctx)
        admin.create_acls(_acl_rows())
        # the same users with SCRAM credentials (rows authenticate with PLAIN or either SCRAM)
        scram_users = [u for u in users if u == NOACL_USER or any(
            u == row.user(case) and row.mechanism != "PLAIN" for row, case in CELLS)]
        admin.upsert_scram([scram_upsertion(u, password_of(u), m) for u in scram_users
                            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")])
        admin.init_pid("warm-up")  # creates and loads the coordinators' internal topics once
        admin.create_topic("warm-up")
        admin.commit("warm-up", "warm-up", 0)
        yield bp, port, ctx, admin
        admin.close()


def _ctx(row: Row, case: str, admin: AdminWire) -> Ctx:
    topic, group, txn = _names(row, case)
    return Ctx(row, case, admin, topic, group, txn)


def _closed(w: WireClient, send: Callable[[], Any]) -> bool:
    """True when the broker closed ``w``: sending the request fails or its answer never comes."""
    try:
        send()
    except (ConnectionError, ssl.SSLError, OSError):
        return True
    return False


# ============================================================== tests
def test_every_advertised_api_has_a_row(matrix_broker):
    _, port, ctx, _ = matrix_broker
    with connect(port, ctx) as w:  # ApiVersions is answered before authentication
        advertised = {k.api_key: (k.min_version, k.max_version) for k in w.request(18, 3, API_VERSIONS_V3).api_keys}
    covered = {row.api_key for row in ROWS}
    assert not set(advertised) - covered, f"APIs without a matrix row: {sorted(set(advertised) - covered)}"
    for row in ROWS:
        lo, hi = advertised[row.api_key]
        assert lo <= row.version <= hi, (row.id, row.version, (lo, hi))


@pytest.mark.parametrize("row,case", CELLS, ids=[f"{r.id}-{c}" for r, c in CELLS])
def test_matrix(matrix_broker, row: Row, case: str):
    _, port, ssl_ctx, admin = matrix_broker
    c = _ctx(row, case, admin)
    if row.setup:
        row.setup(c)
    before = row.state(c) if row.state else None
    if case == "unauthenticated":
        w = connect(port, ssl_ctx)
        try:
            if row.api_key in SASL_ONLY_APIS:
                r = row.send(w, c)
                assert r.error_code == E.NONE, E(r.error_code).name
                assert not w.is_closed_by_peer(0.3), "connection closed after an allowed pre-auth request"
            else:
                assert _closed(w, lambda: row.send(w, c)), f"{row.id} answered before authentication"
        finally:
            w.close()
    else:
        user = row.user(case)
        with connect(port, ssl_ctx, user, password_of(user), row.mechanism) as w:
            r = row.send(w, c)
            if not row.needs:
                _check_sasl_api_authenticated(row, r)
                assert not w.is_closed_by_peer(0.2)
                return
            if case == "allow":
                _check_allowed(row, c, r, before)
            else:
                need = row.needs[0] if case == "noacl" else row.needs[int(case[len("deny"):])]
                _check_refused(row, c, r, need, case)
    if case != "allow":
        if row.state:
            assert row.state(c) == before, f"{row.id}: state changed by a refused request"
        if row.after:
            row.after(c, True)


def _wrong_password(port: int, ssl_ctx, row: Row, c: Ctx) -> str | None:
    """One wrong-password attempt then the row's request on the same connection; a problem or None."""
    user = row.user("allow") if row.needs else NOACL_USER
    w = connect(port, ssl_ctx)
    try:
        try:
            if row.mechanism == "PLAIN":
                w.sasl_plain(user, "wrong-" + password_of(user))
            else:
                w.sasl_scram(row.mechanism, user, "wrong-" + password_of(user))
            return f"{row.id}: authenticated with a wrong password"
        except WireSaslError as err:
            if (err.api_key, err.error_code) != (36, E.SASL_AUTHENTICATION_FAILED):
                return f"{row.id}: {err}"
        if not _closed(w, lambda: row.send(w, c)):
            return f"{row.id}: answered after a failed authentication"
    finally:
        w.close()
    return None


def test_wrong_password_every_api(matrix_broker):
    """Every row with a wrong password of a user allowed to run it (its mechanism: PLAIN or a
    SCRAM): SaslAuthenticate answers SASL_AUTHENTICATION_FAILED, the connection closes, the request
    sent after it is never answered and changes nothing. The attempts run concurrently (each
    failure is answered after connection.failed.authentication.delay.ms and then lingers)."""
    _, port, ssl_ctx, admin = matrix_broker
    cells = []
    for row in ROWS:
        c = _ctx(row, "bad_password", admin)
        if row.setup:
            row.setup(c)
        cells.append((row, c, row.state(c) if row.state else None))
    with ThreadPoolExecutor(16) as pool:
        problems = [p for p in pool.map(lambda cell: _wrong_password(port, ssl_ctx, cell[0], cell[1]), cells) if p]
    for row, c, before in cells:
        if row.state and row.state(c) != before:
            problems.append(f"{row.id}: state changed after a failed authentication")
        if row.after:
            row.after(c, True)
    assert not problems, problems


def _check_sasl_api_authenticated(row: Row, r) -> None:
    if row.api_key == 18:
        assert r.error_code == E.NONE
    else:  # Kafka KafkaApis: SaslHandshake/SaslAuthenticate after authentication
        assert r.error_code == E.ILLEGAL_SASL_STATE, E(r.error_code).name


def _check_refused(row: Row, c: Ctx, r, need: Need, case: str) -> None:
    expected = need.expected()
    if expected == FILTERED:
        if row.codes:
            assert not (set(row.codes(r, c)) & AUTHORIZATION_CODES), [E(x).name for x in row.codes(r, c)]
        listed = row.listed(r, c)
        assert {c.topic, c.group, c.txn}.isdisjoint(listed), f"{row.id}: refused resource listed"
        if case == "noacl":
            assert not listed, f"{row.id}: a user without ACLs sees {sorted(listed)[:5]}"
        return
    if expected == NO_OPERATIONS:
        assert r.error_code == E.NONE, E(r.error_code).name
        assert r.cluster_authorized_operations == 0, r.cluster_authorized_operations
        return
    codes = row.codes(r, c)
    assert codes and all(x == expected for x in codes), (
        f"{row.id} as {case}: expected {E(expected).name}, got {[E(x).name for x in codes]}")
    if row.leak:
        row.leak(r, c)


def _check_allowed(row: Row, c: Ctx, r, before) -> None:
    if any(n.refusal == FILTERED for n in row.needs):
        assert {c.topic, c.group, c.txn} & row.listed(r, c), f"{row.id}: allowed resource not listed"
    if any(n.refusal == NO_OPERATIONS for n in row.needs):
        assert r.error_code == E.NONE
        assert r.cluster_authorized_operations & (1 << int(O.DESCRIBE)), r.cluster_authorized_operations
    if row.codes:
        codes = row.codes(r, c)
        assert not set(codes) & AUTHORIZATION_CODES, f"{row.id}: {[E(x).name for x in codes]}"
    if row.allowed:
        row.allowed(r, c, before)
    if row.after:
        row.after(c, False)
