"""KIP-848 ConsumerGroupHeartbeat / ConsumerGroupDescribe at the wire level, against an
embedded broker: epochs, revocation before assignment, static members, regexes, error codes,
OffsetCommit/OffsetFetch member epochs, coexistence with classic groups, and reload from
``__consumer_offsets`` after a restart.
"""

from __future__ import annotations

import time
import uuid

import pytest

from litemq.embedded import Broker
from litemq.protocol.errors import ErrorCode as E
from litemq.testing.cluster import wait_for
from litemq.testing.wire import WireClient

HB, DESCRIBE_CG, JOIN, LIST, DESCRIBE, COMMIT, FETCH, API_VERSIONS = 68, 69, 11, 16, 15, 8, 9, 18

pytestmark = pytest.mark.timeout(90)


def make_broker(path, **kw):
    kw.setdefault("group_consumer_heartbeat_interval_ms", 500)
    b = Broker(data_dir=path, group_initial_rebalance_delay_ms=0, **kw)
    b.create = lambda name, n=4: b.call(b.runtime.create_topic, name, n, 1, {})
    b.topic_id = lambda name: b.runtime.metadata.topics[name].topic_id
    return b


@pytest.fixture
def broker(tmp_path):
    with make_broker(tmp_path / "data") as b:
        yield b


def hb(c, group, member_id, epoch, topics=None, owned=None, regex=None, instance=None, assignor=None,
       rebalance_timeout_ms=-1, version=1, rack=None):
    return c.request(HB, version, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": instance,
        "rack_id": rack, "rebalance_timeout_ms": rebalance_timeout_ms, "subscribed_topic_names": topics,
        "subscribed_topic_regex": regex, "server_assignor": assignor, "topic_partitions": owned})


def join(c, group, topics=("t",), regex=None, instance=None, assignor=None, member_id=None,
         rebalance_timeout_ms=30000):
    member_id = member_id or uuid.uuid4().hex[:22]
    r = hb(c, group, member_id, 0, topics=list(topics) if topics is not None else None, owned=[], regex=regex,
           instance=instance, assignor=assignor, rebalance_timeout_ms=rebalance_timeout_ms)
    return member_id, r


def parts(b, resp_assignment) -> dict[str, set[int]]:
    names = {info.topic_id: name for name, info in b.runtime.metadata.topics.items()}
    return {names[tp.topic_id]: set(tp.partitions) for tp in resp_assignment.topic_partitions}


def owned(b, assignment: dict[str, set[int]]) -> list[dict]:
    return [{"topic_id": b.topic_id(t), "partitions": sorted(ps)} for t, ps in assignment.items()]


def two_settled_members(b, c, group, instance_a=None, instance_b=None):
    """Member a joins, then b; a revokes half, b gets it: (a, a's partitions, b, b's partitions)."""
    a, _ = join(c, group, instance=instance_a)
    x, _ = join(c, group, instance=instance_b)
    keep = parts(b, hb(c, group, a, 1).assignment)["t"]
    hb(c, group, a, 1, owned=owned(b, {"t": keep}))
    return a, keep, x, parts(b, hb(c, group, x, 2).assignment)["t"]


def describe(c, group, version=1):
    return c.request(DESCRIBE_CG, version, {"group_ids": [group], "include_authorized_operations": False}).groups[0]


def test_api_versions_advertise_kip848(broker):
    with WireClient("127.0.0.1", broker.port) as c:
        keys = {k.api_key: (k.min_version, k.max_version) for k in c.request(API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert keys[68] == (0, 1) and keys[69] == (0, 1)


def test_join_reconcile_leave_and_describe(broker):
    broker.create("t", 4)
    with WireClient("127.0.0.1", broker.port) as c:
        a, r = join(c, "g")
        assert r.error_code == E.NONE and r.member_epoch == 1 and r.heartbeat_interval_ms == 500
        assert parts(broker, r.assignment) == {"t": {0, 1, 2, 3}}
        b, r = join(c, "g")
        assert r.error_code == E.NONE and r.member_epoch == 2
        assert r.assignment is not None and parts(broker, r.assignment) == {}  # still owned by a
        d = describe(c, "g")
        assert d.group_state == "Reconciling" and d.group_epoch == 2 and d.assignment_epoch == 2
        assert d.assignor_name == "uniform"
        # a learns its new assignment (2 partitions) but stays at epoch 1 until it revoked
        r = hb(c, "g", a, 1)
        assert r.member_epoch == 1 and len(parts(broker, r.assignment)["t"]) == 2
        a_keep = parts(broker, r.assignment)["t"]
        # b asks again: nothing yet, a still holds them
        r = hb(c, "g", b, 2)
        assert r.assignment is None and r.member_epoch == 2
        # a acknowledges the revocation
        r = hb(c, "g", a, 1, owned=owned(broker, {"t": a_keep}))
        assert r.member_epoch == 2
        r = hb(c, "g", b, 2)
        assert parts(broker, r.assignment) == {"t": {0, 1, 2, 3} - a_keep}
        d = describe(c, "g")
        assert d.group_state == "Stable"
        members = {m.member_id: m for m in d.members}
        assert {m.member_epoch for m in members.values()} == {2} and members[a].member_type == 1
        assert {p for tp in members[b].assignment.topic_partitions for p in tp.partitions} == {0, 1, 2, 3} - a_keep
        assert members[b].assignment.topic_partitions[0].topic_name == "t"
        assert members[a].subscribed_topic_names == ["t"]
        # leave
        r = hb(c, "g", a, -1)
        assert r.error_code == E.NONE and r.member_epoch == -1
        r = hb(c, "g", b, 2)
        assert r.member_epoch == 3 and parts(broker, r.assignment) == {"t": {0, 1, 2, 3}}
        assert describe(c, "g").group_epoch == 3
        # a classic group is not a consumer group
        assert describe(c, "nope").error_code == E.GROUP_ID_NOT_FOUND


def test_errors(broker):
    broker.create("t", 2)
    with WireClient("127.0.0.1", broker.port) as c:
        assert hb(c, "", "m", 0, topics=["t"], owned=[], rebalance_timeout_ms=1).error_code == E.INVALID_REQUEST
        assert hb(c, "g", "", 0, topics=["t"], owned=[], rebalance_timeout_ms=1).error_code == E.INVALID_REQUEST
        assert hb(c, "g", "m", 0, topics=["t"], owned=None, rebalance_timeout_ms=1).error_code == E.INVALID_REQUEST
        assert hb(c, "g", "m", 0, owned=[], rebalance_timeout_ms=1).error_code == E.INVALID_REQUEST
        assert hb(c, "g", "m", -3).error_code == E.INVALID_REQUEST
        assert join(c, "g", assignor="sticky")[1].error_code == E.UNSUPPORTED_ASSIGNOR
        assert join(c, "g", topics=None, regex="t(")[1].error_code == E.INVALID_REGULAR_EXPRESSION
        bad = join(c, "g", topics=None, regex=r"(t)\1")[1]  # RE2 (Kafka's syntax) has no backreferences
        assert bad.error_code == E.INVALID_REGULAR_EXPRESSION and "invalid escape" in bad.error_message
        assert hb(c, "g", "unknown", 1).error_code == E.GROUP_ID_NOT_FOUND  # no such group
        m, r = join(c, "g")
        assert r.member_epoch == 1
        assert hb(c, "g", "unknown", 1).error_code == E.UNKNOWN_MEMBER_ID
        assert hb(c, "g", m, 5).error_code == E.FENCED_MEMBER_EPOCH
        r = hb(c, "g", m, 1)
        assert r.error_code == E.NONE
        # v0: the coordinator generates the member id
        r = c.request(HB, 0, {"group_id": "g0", "member_id": "", "member_epoch": 0, "rebalance_timeout_ms": 1000,
                              "subscribed_topic_names": ["t"], "topic_partitions": []})
        assert r.error_code == E.NONE and r.member_id


def test_group_max_size(tmp_path):
    with make_broker(tmp_path / "d", group_consumer_max_size=1) as b:
        b.create("t", 2)
        with WireClient("127.0.0.1", b.port) as c:
            assert join(c, "g")[1].error_code == E.NONE
            assert join(c, "g")[1].error_code == E.GROUP_MAX_SIZE_REACHED


def test_unknown_assignor_setting_refuses_to_start(tmp_path):
    with pytest.raises(Exception, match="unknown assignor"):
        with make_broker(tmp_path / "d", group_consumer_assignors="uniform,sticky"):
            pass


def test_range_assignor_chosen_by_members(tmp_path):
    with make_broker(tmp_path / "d", group_consumer_assignors="range,uniform") as b:
        b.create("t", 3)
        with WireClient("127.0.0.1", b.port) as c:
            join(c, "g")
            assert describe(c, "g").assignor_name == "range"
            join(c, "g2", assignor="uniform")
            assert describe(c, "g2").assignor_name == "uniform"


def test_static_member_leaves_and_rejoins_with_its_partitions(broker):
    broker.create("t", 4)
    with WireClient("127.0.0.1", broker.port) as c:
        a, _, b, b_parts = two_settled_members(broker, c, "gs", "i-a", "i-b")
        epoch_before = describe(c, "gs").group_epoch
        # b leaves temporarily: its partitions stay with it
        r = hb(c, "gs", b, -2, instance="i-b")
        assert r.error_code == E.NONE and r.member_epoch == -2
        # while it is away another process with the same instance id is not let in
        m2, r = join(c, "gs", instance="i-a")
        assert r.error_code == E.UNRELEASED_INSTANCE_ID
        # b comes back under a new member id, gets the same partitions, no rebalance
        b2, r = join(c, "gs", instance="i-b")
        assert r.error_code == E.NONE and parts(broker, r.assignment) == {"t": b_parts}
        d = describe(c, "gs")
        assert d.group_epoch == epoch_before and {m.member_id for m in d.members} == {a, b2}
        assert {m.instance_id for m in d.members} == {"i-a", "i-b"}
        assert hb(c, "gs", b, 2).error_code == E.UNKNOWN_MEMBER_ID
        # the same member id may come back too (a process that kept it)
        assert hb(c, "gs", b2, -2, instance="i-b").member_epoch == -2
        _, r = join(c, "gs", instance="i-b", member_id=b2)
        assert r.error_code == E.NONE and r.member_epoch == epoch_before
        assert parts(broker, r.assignment) == {"t": b_parts}


def test_regex_subscription_follows_new_topics(broker):
    broker.create("orders-eu", 2)
    broker.create("payments", 2)
    broker.create("a" * 200, 1)
    with WireClient("127.0.0.1", broker.port) as c:
        # a pattern that backtracks exponentially in Python's re is linear in RE2
        m0, r = join(c, "gslow", topics=None, regex="(a+)+b")
        assert r.error_code == E.NONE and parts(broker, r.assignment) == {}
        m, r = join(c, "gr", topics=None, regex="orders-.*")
        assert parts(broker, r.assignment) == {"orders-eu": {0, 1}}
        broker.create("orders-us", 1)
        r = hb(c, "gr", m, r.member_epoch)
        assert r.member_epoch == 2 and parts(broker, r.assignment) == {"orders-eu": {0, 1}, "orders-us": {0}}
        assert describe(c, "gr").members[0].subscribed_topic_regex == "orders-.*"


def test_session_timeout_removes_member(tmp_path):
    with make_broker(tmp_path / "d", group_consumer_session_timeout_ms=600) as b:
        b.create("t", 2)
        with WireClient("127.0.0.1", b.port) as c:
            a, _ = join(c, "g")
            time.sleep(1.5)
            d = describe(c, "g")
            assert d.group_state == "Empty" and d.members == [] and d.group_epoch == 2
            assert hb(c, "g", a, 1).error_code == E.UNKNOWN_MEMBER_ID


def commit(c, group, member, epoch, offsets, version=9):
    r = c.request(COMMIT, version, {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
                                    "topics": [{"name": t, "partitions": [{"partition_index": p, "committed_offset": o}
                                                                          for (tt, p), o in offsets.items() if tt == t]}
                                               for t in {t for t, _ in offsets}]})
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def fetch(c, group, member=None, epoch=-1):
    r = c.request(FETCH, 9, {"groups": [{"group_id": group, "member_id": member, "member_epoch": epoch,
                                         "topics": None}], "require_stable": False})
    g = r.groups[0]
    return g.error_code, {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}


def test_offset_commit_and_fetch_check_member_epochs(broker):
    broker.create("t", 2)
    with WireClient("127.0.0.1", broker.port) as c:
        m, r = join(c, "go")
        assert commit(c, "go", m, 1, {("t", 0): 5}) == {0: E.NONE}
        assert commit(c, "go", m, 0, {("t", 0): 6}) == {0: E.STALE_MEMBER_EPOCH}
        assert commit(c, "go", "other", 1, {("t", 0): 6}) == {0: E.UNKNOWN_MEMBER_ID}
        assert commit(c, "go", m, 1, {("t", 0): 6}, version=8) == {0: E.UNSUPPORTED_VERSION}
        assert commit(c, "go", "", -1, {("t", 0): 6}) == {0: E.UNKNOWN_MEMBER_ID}  # group has members
        assert fetch(c, "go", m, 1) == (E.NONE, {("t", 0): 5})
        assert fetch(c, "go", m, 0)[0] == E.STALE_MEMBER_EPOCH
        assert fetch(c, "go", "x", 1)[0] == E.UNKNOWN_MEMBER_ID
        assert fetch(c, "go") == (E.NONE, {("t", 0): 5})  # admin fetch, no member
        hb(c, "go", m, -1)
        assert commit(c, "go", "", -1, {("t", 1): 7}) == {1: E.NONE}  # empty: admin commits


def test_coexistence_with_classic_groups(broker):
    broker.create("t", 2)
    sub = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
    with WireClient("127.0.0.1", broker.port) as c:
        # offsets committed by a simple consumer; the first heartbeat converts the empty group
        assert commit(c, "conv", "", -1, {("t", 0): 3}) == {0: E.NONE}
        m, r = join(c, "conv")
        assert r.error_code == E.NONE
        assert fetch(c, "conv", m, r.member_epoch) == (E.NONE, {("t", 0): 3})
        # a classic JoinGroup to a consumer group with members
        jr = c.request(JOIN, 5, {"group_id": "conv", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                 "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                 "protocols": [{"name": "range", "metadata": sub}]})
        assert jr.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        # a classic group with members refuses ConsumerGroupHeartbeat
        jr = c.request(JOIN, 3, {"group_id": "classic", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                 "member_id": "", "protocol_type": "consumer",
                                 "protocols": [{"name": "range", "metadata": sub}]})
        assert jr.error_code == E.NONE
        assert join(c, "classic")[1].error_code == E.GROUP_ID_NOT_FOUND
        assert describe(c, "classic").error_code == E.GROUP_ID_NOT_FOUND
        groups = {g.group_id: g for g in c.request(LIST, 5, {"states_filter": [], "types_filter": []}).groups}
        assert groups["conv"].group_type == "consumer" and groups["classic"].group_type == "classic"
        assert [g.group_id for g in c.request(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups] \
            == ["conv"]
        assert [g.group_id for g in c.request(LIST, 5, {"states_filter": [], "types_filter": ["Classic"]}).groups] \
            == ["classic"]
        # DescribeGroups does not describe a consumer group, as Kafka 4 (KIP-1043): v6 says it is
        # no classic group, v5 and before call it Dead; ConsumerGroupDescribe describes it
        dg = c.request(DESCRIBE, 5, {"groups": ["conv"], "include_authorized_operations": False}).groups[0]
        assert (dg.error_code, dg.group_state, dg.protocol_type, list(dg.members)) == (E.NONE, "Dead", "", [])
        dg6 = c.request(DESCRIBE, 6, {"groups": ["conv"], "include_authorized_operations": False}).groups[0]
        assert (dg6.error_code, dg6.error_message, dg6.group_state) == (
            E.GROUP_ID_NOT_FOUND, "Group conv is not a classic group.", "Dead")
        cg = describe(c, "conv")
        assert cg.error_code == E.NONE and cg.assignor_name == "uniform" and [mm.member_id for mm in cg.members] == [m]
        # the consumer group empties: a classic JoinGroup converts it back, offsets kept
        hb(c, "conv", m, -1)
        jr = c.request(JOIN, 3, {"group_id": "conv", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                 "member_id": "", "protocol_type": "consumer",
                                 "protocols": [{"name": "range", "metadata": sub}]})
        assert jr.error_code == E.NONE
        assert fetch(c, "conv") == (E.NONE, {("t", 0): 3})


def test_group_state_survives_restart(tmp_path):
    data = tmp_path / "d"
    with make_broker(data) as b:
        b.create("t", 4)
        port = b.port
        with WireClient("127.0.0.1", b.port) as c:
            a, keep, x, x_parts = two_settled_members(b, c, "gp", instance_b="i-x")
            assert commit(c, "gp", a, 2, {("t", min(keep)): 11}) == {min(keep): E.NONE}
            before = describe(c, "gp")
    with make_broker(data, port=port) as b:
        with WireClient("127.0.0.1", b.port) as c:
            after = describe(c, "gp")
            assert (after.group_epoch, after.assignment_epoch, after.group_state) == \
                (before.group_epoch, before.assignment_epoch, "Stable")
            assert {(m.member_id, m.member_epoch, m.instance_id) for m in after.members} == \
                {(m.member_id, m.member_epoch, m.instance_id) for m in before.members}
            # the members carry on with their epochs
            r = hb(c, "gp", x, 2)
            assert r.error_code == E.NONE and r.member_epoch == 2
            r = hb(c, "gp", x, 2, topics=["t"], owned=owned(b, {"t": x_parts}), rebalance_timeout_ms=30000)
            assert parts(b, r.assignment) == {"t": x_parts}
            assert fetch(c, "gp", a, 2) == (E.NONE, {("t", min(keep)): 11})
            hb(c, "gp", a, 2, rack="rack-2")  # a field change alone is stored too
            # the static member goes away (-2) and comes back as a new member id: that survives too
            hb(c, "gp", x, -2, instance="i-x")
            x2, r = join(c, "gp", instance="i-x")
            assert r.error_code == E.NONE and parts(b, r.assignment) == {"t": x_parts}
            members = {(m.member_id, m.instance_id) for m in describe(c, "gp").members}
    with make_broker(data, port=port) as b:
        with WireClient("127.0.0.1", b.port) as c:
            assert {(m.member_id, m.instance_id) for m in describe(c, "gp").members} == members
            assert (x2, "i-x") in members
            assert {m.member_id: m.rack_id for m in describe(c, "gp").members}[a] == "rack-2"


def test_member_that_does_not_revoke_is_removed_after_its_rebalance_timeout(broker):
    broker.create("t", 2)
    with WireClient("127.0.0.1", broker.port) as c:
        a, _ = join(c, "gt", rebalance_timeout_ms=500)
        b, _ = join(c, "gt")
        r = hb(c, "gt", a, 1, owned=owned(broker, {"t": {0, 1}}))  # told to give one up; keeps both
        assert r.member_epoch == 1 and len(parts(broker, r.assignment)["t"]) == 1
        time.sleep(1.2)
        assert hb(c, "gt", a, 1).error_code == E.UNKNOWN_MEMBER_ID
        r = hb(c, "gt", b, 2)
        assert parts(broker, r.assignment) == {"t": {0, 1}} and r.member_epoch == 3


def test_delete_empty_consumer_group_survives_restart(tmp_path):
    data = tmp_path / "d"
    with make_broker(data) as b:
        b.create("t", 2)
        port = b.port
        with WireClient("127.0.0.1", b.port) as c:
            m, r = join(c, "gd")
            assert commit(c, "gd", m, 1, {("t", 0): 4}) == {0: E.NONE}
            r = c.request(42, 2, {"groups_names": ["gd"]})
            assert r.results[0].error_code == E.NON_EMPTY_GROUP
            hb(c, "gd", m, -1)
            assert c.request(42, 2, {"groups_names": ["gd"]}).results[0].error_code == E.NONE
            assert describe(c, "gd").error_code == E.GROUP_ID_NOT_FOUND
    with make_broker(data, port=port) as b:
        with WireClient("127.0.0.1", b.port) as c:
            assert describe(c, "gd").error_code == E.GROUP_ID_NOT_FOUND
            assert fetch(c, "gd") == (E.NONE, {})


def test_exactly_once_with_a_consumer_group_member(broker):
    """send_offsets_to_transaction from a group.protocol=consumer consumer: TxnOffsetCommit with
    the member id and epoch; the offsets become visible when the transaction commits."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
    from confluent_kafka.admin import AdminClient

    broker.create("in", 2)
    broker.create("out", 2)
    bs = broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bs})
    for i in range(20):
        p.produce("in", str(i).encode(), partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": "eos", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.subscribe(["in"])
    tp = Producer({"bootstrap.servers": bs, "transactional.id": "kip848-eos"})
    tp.init_transactions(30)
    copied = 0
    deadline = time.monotonic() + 30
    try:
        while copied < 20:
            assert time.monotonic() < deadline, f"copied {copied} of 20"
            msgs = [m for m in c.consume(50, 0.5) if m.error() is None]
            if not msgs:
                continue
            tp.begin_transaction()
            for m in msgs:
                tp.produce("out", m.value())
            copied += len(msgs)
            tp.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            tp.commit_transaction(30)
        admin = AdminClient({"bootstrap.servers": bs})
        # EndTxn is answered once PrepareCommit is durable; the markers that make the offsets
        # visible follow (in Kafka too), so a read right after commit_transaction may come early
        def committed() -> dict[int, int]:
            res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("eos")])["eos"].result(timeout=30)
            return {t.partition: t.offset for t in res.topic_partitions}

        wait_for(lambda: committed() == {0: 10, 1: 10}, 30, lambda: f"offsets {{0: 10, 1: 10}}, have {committed()}")
    finally:
        c.close()


def test_txn_offset_commit_with_only_a_group_id_to_a_group_with_members(broker):
    """kafka-python's ``send_offsets_to_transaction(offsets, "group")`` (Java's
    ``sendOffsetsToTransaction(offsets, String)``) and confluent-kafka's with the metadata of a
    consumer that never joined send TxnOffsetCommit with generation -1, no member id and no
    instance id. Kafka's ``ConsumerGroup.validateOffsetCommit`` accepts that while the group has
    members (the fields are only validated if one is given); the member is left alone."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    broker.create("in", 1)
    broker.create("out", 1)
    bs = broker.bootstrap_servers
    member = Consumer({"bootstrap.servers": bs, "group.id": "plain", "group.protocol": "consumer",
                       "enable.auto.commit": False})
    member.subscribe(["in"])
    admin = AdminClient({"bootstrap.servers": bs})

    def committed() -> dict[int, int]:
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("plain")])["plain"].result(timeout=30)
        return {t.partition: t.offset for t in res.topic_partitions}

    kp = KafkaProducer(bootstrap_servers=bs, transactional_id="plain-kafka-python")
    idle = Consumer({"bootstrap.servers": bs, "group.id": "plain"})  # never subscribes: generation -1, no member id
    tp = Producer({"bootstrap.servers": bs, "transactional.id": "plain-confluent"})
    try:
        with WireClient("127.0.0.1", broker.port) as c:
            def stable() -> bool:
                member.poll(0.1)
                d = describe(c, "plain")
                return d.error_code == E.NONE and len(d.members) == 1 and d.members[0].member_epoch > 0 \
                    and d.group_state == "Stable"
            wait_for(stable, 30, lambda: f"one stable member, have {describe(c, 'plain')}")
            before = describe(c, "plain").members[0]

            kp.init_transactions()
            kp.begin_transaction()
            kp.send("out", b"kafka-python")
            kp.send_offsets_to_transaction({TopicPartition("in", 0): OffsetAndMetadata(5, "", -1)}, "plain")
            kp.commit_transaction()
            wait_for(lambda: committed() == {0: 5}, 30, lambda: f"offset 5, have {committed()}")

            tp.init_transactions(30)
            tp.begin_transaction()
            tp.produce("out", b"confluent")
            tp.send_offsets_to_transaction([CTopicPartition("in", 0, 7)], idle.consumer_group_metadata(), 30)
            tp.commit_transaction(30)
            wait_for(lambda: committed() == {0: 7}, 30, lambda: f"offset 7, have {committed()}")

            after = describe(c, "plain").members
            assert [(m.member_id, m.member_epoch) for m in after] == [(before.member_id, before.member_epoch)]
    finally:
        kp.close()
        idle.close()
        member.close()


def test_static_confluent_consumer_restarts_without_a_rebalance(broker):
    """librdkafka with group.instance.id: close() leaves with epoch -2, a new consumer with the
    same instance id gets the same partitions back and the group epoch does not move."""
    from confluent_kafka import Consumer

    broker.create("t", 4)

    def consumer(instance: str) -> Consumer:
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "gsc", "group.protocol": "consumer",
                      "group.instance.id": instance})
        c.subscribe(["t"])
        return c

    def state():
        with WireClient("127.0.0.1", broker.port) as c:
            d = describe(c, "gsc")
        return d.group_state, d.group_epoch, {m.instance_id: (m.member_epoch, frozenset(
            p for tp in m.assignment.topic_partitions for p in tp.partitions)) for m in d.members}

    def poll_until(consumers, pred, what):
        deadline = time.monotonic() + 30
        while not pred():
            assert time.monotonic() < deadline, f"{what}: {state()}"
            for c in consumers:
                c.poll(0.1)

    a, b = consumer("A"), consumer("B")
    poll_until([a, b], lambda: state()[0] == "Stable" and len(state()[2]) == 2
               and all(len(ps) == 2 for _, ps in state()[2].values()), "two static members, two partitions each")
    _, epoch, before = state()
    b.close()
    poll_until([a], lambda: state()[2]["B"][0] == -2, "B left with -2")
    assert state()[2]["B"][1] == before["B"][1]  # still assigned to B
    b = consumer("B")
    poll_until([a, b], lambda: state()[0] == "Stable" and state()[2]["B"][0] > 0, "B back")
    _, epoch_after, after = state()
    assert epoch_after == epoch and {k: v[1] for k, v in after.items()} == {k: v[1] for k, v in before.items()}
    a.close()
    b.close()


def test_confluent_regex_subscription(broker):
    """librdkafka's ``^...`` subscription travels as SubscribedTopicRegex; a topic created later
    that matches is assigned without resubscribing."""
    from confluent_kafka import Consumer

    broker.create("orders-eu", 2)
    broker.create("payments", 2)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "grx", "group.protocol": "consumer",
                  "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe(["^orders-.*"])

    def assigned_within(want, timeout_s=20):
        deadline = time.monotonic() + timeout_s
        while {(tp.topic, tp.partition) for tp in c.assignment()} != want:
            assert time.monotonic() < deadline, f"assignment {c.assignment()} != {want}"
            c.poll(0.1)

    try:
        assigned_within({("orders-eu", 0), ("orders-eu", 1)})
        broker.create("orders-us", 1)
        assigned_within({("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0)})
        with WireClient("127.0.0.1", broker.port) as w:
            assert describe(w, "grx").members[0].subscribed_topic_regex == "(^orders-.*)"  # librdkafka joins with |
    finally:
        c.close()


def test_cli_names_the_assigning_and_reconciling_states(broker):
    """confluent-kafka's ConsumerGroupState has no Assigning/Reconciling (it says UNKNOWN):
    ``litemq group list`` and ``group describe`` show Kafka's name, from ConsumerGroupDescribe."""
    import subprocess
    import sys

    broker.create("t", 4)
    with WireClient("127.0.0.1", broker.port) as c:
        join(c, "g")
        join(c, "g")  # the first member still owns every partition: the group reconciles
        assert describe(c, "g").group_state == "Reconciling"

        def cli(*args: str) -> str:
            res = subprocess.run([sys.executable, "-m", "litemq.cli", "group", *args, "-b", broker.bootstrap_servers],
                                 capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": ""})
            assert res.returncode == 0, res.stderr
            return res.stdout

        rows = [[cell.strip() for cell in line.strip("│ ").split("│")] for line in cli("list").splitlines()]
        assert ["g", "consumer", "Reconciling", "no"] in rows, rows
        assert "state Reconciling" in cli("describe", "g")
