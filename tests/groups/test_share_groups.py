"""KIP-932 share groups with real clients: confluent-kafka's ShareConsumer (librdkafka 2.16,
ShareGroupHeartbeat/ShareFetch/ShareAcknowledge v1) against ``litemq serve`` processes.

The broker runs with a short record lock (3 s), a delivery count limit of 3, a 500 ms share
heartbeat interval and ``share.auto.offset.reset=earliest`` so records produced before the
consumers start are delivered.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from groups_helpers import child_env, create_topic, wait_until
from litemq.testing.process import BrokerProcess
from litemq.testing.wire import WireClient

LOCK_MS = 3000
OVERRIDES = {"group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.delivery.count.limit": "3",
             "group.share.heartbeat.interval.ms": "500", "share.auto.offset.reset": "earliest",
             "share.coordinator.state.topic.num.partitions": "3"}
WORKER = str(Path(__file__).with_name("share_worker.py"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data", overrides=OVERRIDES).start()
    yield b
    b.stop()


def produce(bootstrap: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3, **conf})
    c.subscribe([topic])
    return c


def poll_records(c: ShareConsumer, timeout_s: float, want: int | None = None, ack=None):
    """Poll until ``want`` records (or ``timeout_s``): [(partition, offset, delivery count, message)].
    In explicit mode ``ack(message)`` gives each record's acknowledgement type (every poll's
    records must be acknowledged before the next poll)."""
    out = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (want is None or len(out) < want):
        for m in c.poll(0.5):
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.delivery_count(), m))
                if ack is not None:
                    c.acknowledge(m, ack(m))
    return out


def test_five_share_consumers_share_two_partitions_and_each_record_is_accepted_once(broker):
    """5 ShareConsumers on a 2-partition topic: every consumer gets records, every record is
    delivered, and with every record ACCEPTed (implicit mode) each is delivered exactly once."""
    bs = broker.bootstrap_servers
    create_topic(bs, "queue5", 2)
    n = 3000
    got: dict[int, list[tuple[int, int, int]]] = {i: [] for i in range(5)}
    stop = threading.Event()
    consumers = [consumer(bs, "g5", "queue5", **{"max.poll.records": "20"}) for _ in range(5)]

    def run(i: int) -> None:
        c = consumers[i]
        while not stop.is_set():
            for m in c.poll(0.3):
                if m.error() is None:
                    got[i].append((m.partition(), m.offset(), m.delivery_count()))
                    time.sleep(0.002)  # some work per record, so the others get their share
        c.close()  # implicit mode: the last poll's records are accepted on close

    # daemon threads, stopped in every case: a failed check must not leave pytest waiting on them
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(5)]
    for t in threads:
        t.start()
    try:
        # all five join and get an assignment (ShareGroupDescribe through the wire)
        with WireClient("127.0.0.1", broker.port) as w:
            def members():
                r = w.request(77, 1, {"group_ids": ["g5"], "include_authorized_operations": False})
                g = r.groups[0]
                return g if g.error_code == 0 and len(g.members) == 5 and all(
                    m.assignment.topic_partitions for m in g.members) else None
            described = wait_until(members, 30, "5 members with assignments")
        assert described.group_state == "Stable" and described.assignor_name == "simple"
        shared = Counter(p for m in described.members for tp in m.assignment.topic_partitions for p in tp.partitions)
        # each partition shared by several members (the simple assignor gives 3 + 2 once settled;
        # a member still giving up a partition may briefly hold both)
        assert sorted(shared) == [0, 1] and min(shared.values()) >= 2, shared
        for k in range(10):
            produce(bs, "queue5", n // 10, 2, start=k * n // 10)
            time.sleep(0.1)
        wait_until(lambda: sum(len(v) for v in got.values()) >= n, 60, "all records delivered")
        time.sleep(1.0)  # anything delivered twice would show up now
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    everything = [r for v in got.values() for r in v]
    offsets = Counter((p, o) for p, o, _ in everything)
    assert len(offsets) == n, f"{n - len(offsets)} records never delivered"
    assert max(offsets.values()) == 1, [k for k, v in offsets.items() if v > 1][:10]
    assert all(d == 1 for _, _, d in everything)
    assert all(len(v) > 0 for v in got.values()), {i: len(v) for i, v in got.items()}
    # every record is accepted: a new member of the group gets nothing
    late = consumer(bs, "g5", "queue5")
    assert poll_records(late, 4) == []
    late.close()


def test_release_comes_back_with_delivery_count_2_reject_never_and_limit_archives(broker):
    bs = broker.bootstrap_servers
    create_topic(bs, "queue-acks", 1)
    produce(bs, "queue-acks", 30, 1)
    c = consumer(bs, "g-acks", "queue-acks", **{"share.acknowledgement.mode": "explicit"})
    def kind(o: int) -> AcknowledgeType:
        return AcknowledgeType.RELEASE if o % 3 == 0 else AcknowledgeType.REJECT if o % 3 == 1 \
            else AcknowledgeType.ACCEPT

    first = poll_records(c, 20, want=30, ack=lambda m: kind(m.offset()))
    assert sorted(o for _, o, _, _ in first) == list(range(30))
    assert {d for _, _, d, _ in first} == {1}
    result = c.commit_sync()
    assert result and all(v is None for v in result.values()), result
    released = [o for o in range(30) if kind(o) == AcknowledgeType.RELEASE]
    again = poll_records(c, 15, want=len(released), ack=lambda m: AcknowledgeType.RELEASE)
    assert sorted(o for _, o, _, _ in again) == released  # REJECTed and ACCEPTed ones never return
    assert {d for _, _, d, _ in again} == {2}
    c.commit_sync()
    # the 3rd delivery is the limit: released again, they are archived
    third = poll_records(c, 15, want=len(released), ack=lambda m: AcknowledgeType.RELEASE)
    assert sorted(o for _, o, _, _ in third) == released and {d for _, _, d, _ in third} == {3}
    c.commit_sync()
    assert poll_records(c, 4) == []
    c.close()
    # the group's state agrees: SPSO moved past everything
    late = consumer(bs, "g-acks", "queue-acks")
    assert poll_records(late, 3) == []
    late.close()


def test_records_of_a_sigkilled_consumer_return_to_another_member(broker):
    """(At once since its connection closes: test_share_release.py; here: delivery count 2.)"""
    bs = broker.bootstrap_servers
    create_topic(bs, "queue-kill", 1)
    produce(bs, "queue-kill", 10, 1)
    proc = subprocess.Popen([sys.executable, WORKER, bs, "g-kill", "queue-kill", "--hold"],
                            stdout=subprocess.PIPE, text=True)
    try:
        lines = []
        while len(lines) < 10:
            line = proc.stdout.readline()
            assert line, "the worker exited"
            lines.append(json.loads(line))
        held = sorted(r["o"] for r in lines)
        assert held == list(range(10))
        c = consumer(bs, "g-kill", "queue-kill", **{"share.acknowledgement.mode": "explicit"})
        assert poll_records(c, 1.0) == []  # locked to the worker
        proc.kill()
        killed_at = time.monotonic()
        back = poll_records(c, 20, want=10)
        waited = time.monotonic() - killed_at
        assert sorted(o for _, o, _, _ in back) == held
        assert {d for _, _, d, _ in back} == {2}
        assert waited < LOCK_MS / 1000 + 10
        for *_, m in back:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
        c.close()
    finally:
        proc.kill()
        proc.wait()


def test_broker_sigkill_keeps_accepted_records_done_and_loses_no_unacknowledged_one(tmp_path):
    # The killed holder stays a member after the restart (membership is durable) until its
    # session times out; a short session timeout lets the new member get both partitions soon.
    b = BrokerProcess(tmp_path / "data", overrides=dict(OVERRIDES, **{"group.share.session.timeout.ms": "4000"})
                      ).start()
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-crash", 2)
        produce(bs, "queue-crash", 200, 2)
        c = consumer(bs, "g-crash", "queue-crash", **{"share.acknowledgement.mode": "explicit"})
        def kind(o: int) -> AcknowledgeType:  # 3 of 4 accepted, the others released
            return AcknowledgeType.RELEASE if o % 4 == 1 else AcknowledgeType.ACCEPT

        recs = poll_records(c, 20, want=200, ack=lambda m: kind(m.offset()))
        assert len({(p, o) for p, o, _, _ in recs}) == 200
        accepted = {(p, o) for p, o, _, _ in recs if kind(o) == AcknowledgeType.ACCEPT}
        result = c.commit_sync()
        assert result and all(v is None for v in result.values()), result
        c.close()
        # a member in another process acquires released records and holds them when the broker dies
        holder = subprocess.Popen([sys.executable, WORKER, bs, "g-crash", "queue-crash", "--hold"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            line = holder.stdout.readline()
            assert line, "the worker exited"
            held = json.loads(line)
            assert (held["p"], held["o"]) not in accepted and held["d"] == 2
            b.kill()
        finally:
            holder.kill()
            holder.wait()
        b.start()
        c2 = consumer(bs, "g-crash-other-member", "queue-crash")  # another group: independent state
        assert len(poll_records(c2, 20, want=200)) == 200
        c2.close()
        c3 = consumer(bs, "g-crash", "queue-crash", **{"share.acknowledgement.mode": "explicit"})
        accept = lambda m: AcknowledgeType.ACCEPT  # noqa: E731
        after = poll_records(c3, 30, want=200 - len(accepted), ack=accept)
        c3.commit_sync()
        after += poll_records(c3, 2, ack=accept)
        got = Counter((p, o) for p, o, _, _ in after)
        assert set(got) == {(p, o) for p, o, _, _ in recs} - accepted  # nothing accepted comes back, nothing lost
        assert max(got.values()) == 1
        c3.commit_sync()
        c3.close()
    finally:
        b.stop()


def cli(bs: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "share-group", *args, "-b", bs],
                       capture_output=True, text=True, timeout=60, env=child_env())
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_latest_by_default_and_the_share_group_cli_lists_describes_resets_and_deletes(litemq_broker):
    """share.auto.offset.reset is latest by default: records produced before the group first
    reads a partition are not delivered; ``litemq share-group reset-offsets --to-earliest``
    (AlterShareGroupOffsets, only while the group is empty) makes them deliverable."""
    bs = litemq_broker.bootstrap_servers
    create_topic(bs, "queue-cli", 2)
    produce(bs, "queue-cli", 10, 2)
    c = consumer(bs, "g-cli", "queue-cli")
    assert poll_records(c, 3) == []
    produce(bs, "queue-cli", 4, 2, start=10)
    assert sorted(o for _, o, _, _ in poll_records(c, 10, want=4)) == [5, 5, 6, 6]
    out = cli(bs, "list").stdout
    assert "g-cli" in out and "Stable" in out
    out = cli(bs, "describe", "g-cli").stdout
    assert "state Stable" in out and "assignor simple" in out and "members 1" in out and "t:" not in out
    refused = cli(bs, "reset-offsets", "g-cli", "--topic", "queue-cli", "--to-earliest", check=False)
    assert refused.returncode != 0 and "NON_EMPTY_GROUP" in refused.stderr + refused.stdout
    c.close()
    cli(bs, "reset-offsets", "g-cli", "--topic", "queue-cli", "--to-earliest")
    out = cli(bs, "describe", "g-cli").stdout
    assert "state Empty" in out and " 7 " in out  # lag: 7 records per partition from offset 0
    c = consumer(bs, "g-cli", "queue-cli")
    again = poll_records(c, 15, want=14)
    assert sorted((p, o) for p, o, _, _ in again) == [(p, o) for p in (0, 1) for o in range(7)]
    c.close()
    assert "deleted the share state" in cli(bs, "delete-offsets", "g-cli", "--topic", "queue-cli").stdout
    assert "queue-cli" not in cli(bs, "describe", "g-cli").stdout  # no share-partition state left
    assert "deleted share group" in cli(bs, "delete", "g-cli").stdout
    assert "g-cli" not in cli(bs, "list").stdout


def test_share_groups_in_metrics_and_the_console(tmp_path):
    """/metrics: members of the share groups coordinated here and, per share-partition led here,
    SPSO, in-flight window, acquired (locked) records and lag; the console's group view (the
    same per share-partition)."""
    import urllib.request

    from litemq import Broker

    b = Broker(tmp_path / "data", http_port=0, overrides={"share.auto.offset.reset": "earliest"})
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-m", 1)
        produce(bs, "queue-m", 10, 1)
        c = consumer(bs, "g-m", "queue-m", **{"share.acknowledgement.mode": "explicit"})
        held = []
        while not held:
            held = [m for m in c.poll(0.5) if m.error() is None]
        text = urllib.request.urlopen(b.http_url + "/metrics", timeout=10).read().decode()
        row = '{partition="0",sharegroup="g-m",topic="queue-m"}'
        assert 'kafka_sharegroup_members{sharegroup="g-m"} 1.0' in text
        assert f"kafka_sharegroup_start_offset{row} 0.0" in text
        assert f"kafka_sharegroup_acquired_records{row} {float(len(held))}" in text
        assert f"kafka_sharegroup_in_flight{row} {float(len(held))}" in text
        assert f"kafka_sharegroup_lag{row} 10.0" in text
        assert "litemq_sharegroup_redeliveries_total 0.0" in text
        # the web console's group view: members, their partitions, SPSO, in-flight, acquired and lag
        g = json.loads(urllib.request.urlopen(b.http_url + "/console/api/groups/g-m", timeout=10).read())
        assert g["protocol_type"] == "share" and g["state"] == "Stable" and g["protocol"] == "simple"
        assert [m["assignment"] for m in g["members"]] == [{"queue-m": [0]}]
        assert [(o["topic"], o["partition"], o["current_offset"], o["log_end_offset"], o["lag"], o["in_flight"],
                 o["acquired"]) for o in g["offsets"]] == [("queue-m", 0, 0, 10, 10, len(held), len(held))]
        ov = json.loads(urllib.request.urlopen(b.http_url + "/console/api/overview", timeout=10).read())
        assert [(x["group_id"], x["members"], x["lag"]) for x in ov["groups"]] == [("g-m", 1, 10)]
        c.close()
    finally:
        b.close()


def test_read_committed_share_group_skips_aborted_and_open_transactions(tmp_path):
    """share.isolation.level=read_committed (a group config of g-txn, Kafka 4.1's
    ``kafka-configs --entity-type groups``): an aborted transaction's records are archived
    without delivery, an open transaction's wait for its commit; a group left at the broker's
    read_uncommitted gets them all. A transaction the same producer commits after its aborted
    one is delivered (each aborted transaction ends at its marker, as in Kafka's
    ``consumeAbortedTransactionsUpTo``: the committed one was archived too)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from litemq import Broker

    b = Broker(tmp_path / "data", overrides={"share.auto.offset.reset": "earliest"})
    try:
        bs = b.bootstrap_servers
        create_topic(bs, "queue-txn", 1)
        res = ConfigResource(ResourceType.GROUP, "g-txn", incremental_configs=[
            ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": bs})
        admin.incremental_alter_configs([res])[res].result(timeout=30)
        p = Producer({"bootstrap.servers": bs, "transactional.id": "share-txn"})
        p.init_transactions(30)
        for values, commit in ((["a0", "a1"], True), (["b0", "b1", "b2"], False), (["d0"], True)):
            p.begin_transaction()
            for v in values:
                p.produce("queue-txn", v.encode())
            p.flush(30)  # written before the abort (librdkafka drops unsent records of an aborted one)
            (p.commit_transaction if commit else p.abort_transaction)(30)
        p.begin_transaction()
        p.produce("queue-txn", b"c0")
        p.flush(30)
        c = consumer(bs, "g-txn", "queue-txn")
        first = poll_records(c, 4)
        assert [m.value() for *_, m in first] == [b"a0", b"a1", b"d0"]
        p.commit_transaction(30)
        then = poll_records(c, 10, want=1)
        assert [m.value() for *_, m in then] == [b"c0"]
        c.close()
        committed_offsets = {o for _, o, _, _ in first + then}
        # a group at the broker's read_uncommitted acquires the aborted records too (asked on the
        # wire: librdkafka's share consumer itself drops records of aborted transactions)
        import uuid

        with WireClient("127.0.0.1", b.port) as w:
            tid = w.request(3, 12, {"topics": [{"name": "queue-txn", "topic_id": uuid.UUID(int=0)}],
                                    "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False}).topics[0].topic_id
            acquired: set[int] = set()
            for epoch in range(4):  # a fetch may stop at a transaction marker: fetch on
                r = w.request(78, 1, {"group_id": "g-txn-uncommitted", "member_id": "m", "share_session_epoch": epoch,
                                      "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
                                      "batch_size": 100, "topics": [{"topic_id": tid, "partitions": [
                                          {"partition_index": 0, "acknowledgement_batches": []}]}] if epoch == 0
                                      else [], "forgotten_topics_data": []})
                acquired |= {o for t in r.responses for p in t.partitions for a in p.acquired_records
                             for o in range(a.first_offset, a.last_offset + 1)}
        assert committed_offsets == {0, 1, 7, 9} and acquired == {0, 1, 3, 4, 5, 7, 9}  # b0..b2 at 3..5 too
    finally:
        b.close()


def test_share_session_epochs_and_limit_on_the_wire(tmp_path):
    """KIP-932 share sessions: epoch 0 opens (no acknowledgements then), the next epoch must
    follow, an unknown session is SHARE_SESSION_NOT_FOUND, ShareAcknowledge cannot open one, -1
    closes, and group.share.max.share.sessions bounds them."""
    import uuid

    from litemq import Broker
    from litemq.protocol.errors import ErrorCode as E

    b = Broker(tmp_path / "data", overrides={"group.share.max.share.sessions": "1"})

    def fetch(w, member: str, epoch: int, topics=()) -> int:
        return w.request(78, 1, {"group_id": "g-wire", "member_id": member, "share_session_epoch": epoch,
                                 "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10,
                                 "batch_size": 10, "topics": list(topics), "forgotten_topics_data": []}).error_code

    def ack(w, member: str, epoch: int) -> int:
        return w.request(79, 1, {"group_id": "g-wire", "member_id": member, "share_session_epoch": epoch,
                                 "topics": []}).error_code

    try:
        with WireClient("127.0.0.1", b.port) as w:
            acks = [{"topic_id": uuid.uuid4(), "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]
            assert fetch(w, "m1", 0, acks) == E.INVALID_REQUEST
            assert ack(w, "m1", 0) == E.INVALID_SHARE_SESSION_EPOCH
            assert fetch(w, "m1", 1) == E.SHARE_SESSION_NOT_FOUND
            assert fetch(w, "m1", 0) == E.NONE
            assert fetch(w, "m2", 0) == E.SHARE_SESSION_LIMIT_REACHED
            assert fetch(w, "m1", 2) == E.INVALID_SHARE_SESSION_EPOCH
            assert fetch(w, "m1", 1) == E.NONE
            assert ack(w, "m1", 2) == E.NONE
            assert fetch(w, "m1", 3) == E.NONE
            assert ack(w, "m1", -1) == E.NONE  # closes it
            assert fetch(w, "m1", 4) == E.SHARE_SESSION_NOT_FOUND
            assert fetch(w, "m2", 0) == E.NONE
            assert fetch(w, "", 0) == E.INVALID_REQUEST
    finally:
        b.close()


def test_share_consumer_subscribed_before_its_topic_exists(broker):
    """A ShareConsumer may subscribe before anyone created its topic (a queue's consumers often
    start first): its heartbeats get an empty assignment - before, the share assignor divided by
    zero partitions and the broker closed the connection on every heartbeat - and once the topic
    exists it gets the partitions and the records."""
    bs = broker.bootstrap_servers
    log_start = broker.log_path.stat().st_size
    c = consumer(bs, "g-later", "later-topic")
    try:
        assert poll_records(c, 3.0) == []
        with open(broker.log_path, errors="replace") as f:
            f.seek(log_start)
            failures = [line for line in f if "handler for api_key=76" in line or "internal error" in line]
        assert not failures, failures  # the heartbeats were answered, the connection kept
        with WireClient("127.0.0.1", broker.port) as w:
            r = w.request(77, 1, {"group_ids": ["g-later"], "include_authorized_operations": False})
            [g] = r.groups
            assert g.error_code == 0 and len(g.members) == 1, g
            assert g.members[0].assignment.topic_partitions == []
        create_topic(bs, "later-topic", 2)
        produce(bs, "later-topic", 20, 2)
        got = poll_records(c, 30.0, want=20)
        assert sorted(int(m.value()) for *_, m in got) == list(range(20))
    finally:
        c.close()
