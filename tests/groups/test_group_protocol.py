"""Group APIs at the wire level (every version that differs), against an embedded broker.

The raw :class:`~litemq.testing.wire.WireClient` sends exact requests, so version-specific
semantics are pinned down: KIP-394 MEMBER_ID_REQUIRED, KIP-345 static members and batched
LeaveGroup, OffsetCommit v0-v9 generation rules, OffsetFetch single/multi group, ListGroups
filters, batched FindCoordinator (group and transaction keys), DeleteGroups, OffsetDelete.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time

import pytest

from litemq.coordinator import records as R
from litemq.embedded import Broker
from litemq.protocol.errors import ErrorCode as E
from litemq.testing.wire import WireClient

FIND, JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST, COMMIT, FETCH, DELETE, OFFSET_DELETE = 10, 11, 12, 13, 14, 15, 16, \
    8, 9, 42, 47

pytestmark = pytest.mark.timeout(60)


def subscription(*topics: str) -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return bytes(out + struct.pack(">i", -1))


def assignment(topic: str, parts: list[int]) -> bytes:
    b = t = topic.encode()
    out = struct.pack(">hih", 0, 1, len(t)) + b + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    return out + struct.pack(">i", -1)


@pytest.fixture
def broker(tmp_path):
    with Broker(data_dir=tmp_path / "data", group_min_session_timeout_ms=200, group_initial_rebalance_delay_ms=0) as b:
        b.create = lambda name, n=2: b.call(b.runtime.create_topic, name, n, 1, {})
        yield b


def wait_for(pred, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def client(b) -> WireClient:
    return WireClient("127.0.0.1", b.port)


def join(c, group, member_id="", version=5, instance=None, topics=("t",), session=10000, rebalance=10000,
         protocols=None):
    protocols = protocols or [{"name": "range", "metadata": subscription(*topics)}]
    return c.request(JOIN, version, {"group_id": group, "session_timeout_ms": session,
                                     "rebalance_timeout_ms": rebalance, "member_id": member_id,
                                     "group_instance_id": instance, "protocol_type": "consumer",
                                     "protocols": protocols})


def join_new(c, group, version=5, **kw):
    r = join(c, group, version=version, **kw)
    if r.error_code == E.MEMBER_ID_REQUIRED:
        r = join(c, group, r.member_id, version=version, **kw)
    return r


def sync(c, group, gen, member, assignments=(), version=3, instance=None):
    return c.request(SYNC, version, {"group_id": group, "generation_id": gen, "member_id": member,
                                     "group_instance_id": instance,
                                     "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]})


def heartbeat(c, group, gen, member, instance=None, version=3):
    return c.request(HEARTBEAT, version, {"group_id": group, "generation_id": gen, "member_id": member,
                                          "group_instance_id": instance}).error_code


def commit(c, group, offsets, version=8, gen=-1, member="", **part_fields):
    topics = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o, "committed_metadata": "md",
                                         **part_fields})
    r = c.request(COMMIT, version, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
                                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch(c, group, topics=None, version=7):
    body = {"group_id": group, "topics": None if topics is None else
            [{"name": t, "partition_indexes": ps} for t, ps in topics.items()], "require_stable": True}
    r = c.request(FETCH, version, body)
    return r, {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
               for t in r.topics for p in t.partitions}


def stable_group(b, group, n=1, topics=("t",), session=10000):
    """n members joined and synced; returns [(client, member id)] and the generation."""
    clients = [client(b) for _ in range(n)]
    results = [None] * n

    def go(i):
        results[i] = join_new(clients[i], group, topics=topics, session=session)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    gen = results[0].generation_id
    assert all(r.error_code == 0 and r.generation_id == gen for r in results), results
    leader = results[0].leader
    members = [r.member_id for r in results]
    syncs = [None] * n

    def do_sync(i):
        assigns = [(m, assignment(topics[0], [k])) for k, m in enumerate(members)] if members[i] == leader else []
        syncs[i] = sync(clients[i], group, gen, members[i], assigns)

    threads = [threading.Thread(target=do_sync, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(s.error_code == 0 for s in syncs), syncs
    return list(zip(clients, members)), gen


# ------------------------------------------------------------------ FindCoordinator
def test_find_coordinator_versions_and_offsets_topic(broker):
    c = client(broker)
    for v in range(4):
        r = c.request(FIND, v, {"key": "g", "key_type": 0})
        assert (r.error_code, r.node_id, r.port) == (0, 1, broker.port)
    r = c.request(FIND, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(x.key, x.error_code, x.port) for x in r.coordinators] == [("a", 0, broker.port), ("b", 0, broker.port)]
    r = c.request(FIND, 4, {"key_type": 1, "coordinator_keys": ["txn"]})
    assert (r.coordinators[0].error_code, r.coordinators[0].port) == (0, broker.port)
    r = c.request(FIND, 2, {"key": "txn", "key_type": 1})
    assert (r.error_code, r.node_id, r.port) == (0, 1, broker.port)
    r = c.request(FIND, 2, {"key": "", "key_type": 1})
    assert r.error_code == E.INVALID_REQUEST  # an empty transactional id
    txn_info = broker.runtime.metadata.topics["__transaction_state"]
    assert txn_info.internal and txn_info.configs["cleanup.policy"] == "compact"
    info = broker.runtime.metadata.topics["__consumer_offsets"]
    assert info.internal and info.num_partitions == 8 and info.configs["cleanup.policy"] == "compact"


def test_partition_for_matches_kafka():
    assert R.java_string_hash("hello") == 99162322
    assert R.java_string_hash("") == 0
    assert R.java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE: Utils.abs -> 0
    assert R.partition_for("polygenelubricants", 8) == 0
    assert R.partition_for("hello", 50) == 99162322 % 50
    assert R.java_string_hash("é€") == (0xE9 * 31 + 0x20AC)


def test_record_formats_round_trip():
    k = R.encode_offset_key("g", "t", 3)
    assert R.decode_key(k) == R.OffsetKey("g", "t", 3)
    assert R.decode_key(R.encode_group_key("g")) == R.GroupKey("g")
    for om in (R.OffsetAndMetadata(5, 2, "m", 1000), R.OffsetAndMetadata(5, -1, "", 1000, 2000)):
        assert R.decode_offset_value(R.encode_offset_value(om)) == om
    g = R.StoredGroup("consumer", 3, "range", "m1", 123,
                      [R.StoredMember("m1", "i1", "c", "/h", 100, 200, b"s", b"a")])
    assert R.decode_group_value(R.encode_group_value(g)) == g
    with pytest.raises(R.FormatError):
        R.decode_key(b"\x00\x07")
    with pytest.raises(R.FormatError):
        R.decode_group_value(R.encode_group_value(g)[:-3])


# ------------------------------------------------------------------ join / sync / heartbeat / leave
def test_member_id_required_and_rebalance(broker):
    broker.create("t")
    c1, c2 = client(broker), client(broker)
    r = join(c1, "g1", version=4)
    assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("wire-test-")
    r1 = join(c1, "g1", r.member_id, version=4)
    assert (r1.error_code, r1.generation_id, r1.leader) == (0, 1, r.member_id)
    assert [m.member_id for m in r1.members] == [r.member_id]
    m1 = r1.member_id
    s = sync(c1, "g1", 1, m1, [(m1, assignment("t", [0, 1]))])
    assert s.error_code == 0 and s.assignment == assignment("t", [0, 1])
    assert heartbeat(c1, "g1", 1, m1) == 0
    assert heartbeat(c1, "g1", 0, m1) == E.ILLEGAL_GENERATION
    assert heartbeat(c1, "g1", 1, "nobody") == E.UNKNOWN_MEMBER_ID
    # v3 has no KIP-394 round trip: the second member joins directly; the first learns via heartbeat.
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r2", join(c2, "g1", version=3)))
    th.start()
    c1b = client(broker)
    assert wait_for(lambda: heartbeat(c1b, "g1", 1, m1) == E.REBALANCE_IN_PROGRESS)
    r1 = join(c1, "g1", m1)
    th.join(10)
    r2 = out["r2"]
    assert r1.generation_id == r2.generation_id == 2 and r1.leader == m1 and len(r1.members) == 2
    assert r2.members == []
    # The follower's SyncGroup waits for the leader's.
    th = threading.Thread(target=lambda: out.setdefault("s2", sync(c2, "g1", 2, r2.member_id)))
    th.start()
    s1 = sync(c1, "g1", 2, m1, [(m1, assignment("t", [0])), (r2.member_id, assignment("t", [1]))])
    th.join(10)
    assert s1.assignment == assignment("t", [0]) and out["s2"].assignment == assignment("t", [1])
    d = c1b.request(DESCRIBE, 5, {"groups": ["g1"], "include_authorized_operations": True}).groups[0]
    assert (d.group_state, d.protocol_type, d.protocol_data, len(d.members)) == ("Stable", "consumer", "range", 2)
    assert {m.member_assignment for m in d.members} == {assignment("t", [0]), assignment("t", [1])}
    assert d.members[0].client_host == "/127.0.0.1"
    # Batched leave (v3+): one known, one unknown member.
    r = c1b.request(LEAVE, 4, {"group_id": "g1", "members": [{"member_id": r2.member_id},
                                                             {"member_id": "ghost"}]})
    assert r.error_code == 0 and [m.error_code for m in r.members] == [0, E.UNKNOWN_MEMBER_ID]
    assert heartbeat(c1b, "g1", 2, m1) == E.REBALANCE_IN_PROGRESS
    assert c1b.request(LEAVE, 0, {"group_id": "g1", "member_id": m1}).error_code == 0
    d = c1b.request(DESCRIBE, 0, {"groups": ["g1"]}).groups[0]
    assert (d.group_state, d.members) == ("Empty", [])


def test_protocol_selection_and_inconsistent_protocol(broker):
    broker.create("t")
    c1, c2, c3 = client(broker), client(broker), client(broker)
    p1 = [{"name": "roundrobin", "metadata": subscription("t")}, {"name": "range", "metadata": subscription("t")}]
    p2 = [{"name": "range", "metadata": subscription("t")}, {"name": "roundrobin", "metadata": subscription("t")}]
    p3 = [{"name": "range", "metadata": subscription("t")}]
    a = join_new(c1, "gp", protocols=p1)
    assert (a.generation_id, a.protocol_name) == (1, "roundrobin")  # alone: its first choice
    res = {}
    ths = [threading.Thread(target=lambda k=k, c=c, p=p: res.setdefault(k, join_new(c, "gp", protocols=p)))
           for k, c, p in (("b", c2, p2), ("c", c3, p3))]
    for t in ths:
        t.start()
    assert wait_for(lambda: heartbeat(client(broker), "gp", 1, a.member_id) == E.REBALANCE_IN_PROGRESS)
    # a rejoins only once b and c are both waiting in the rebalance: rejoining earlier would
    # complete generation 2 without the one that lacks roundrobin
    assert wait_for(lambda: len(client(broker).request(DESCRIBE, 0, {"groups": ["gp"]}).groups[0].members) == 3)
    res["a"] = join(c1, "gp", a.member_id, protocols=p1)
    for t in ths:
        t.join(10)
    assert {(r.generation_id, r.protocol_name) for r in res.values()} == {(2, "range")}  # the one all support
    bad = join_new(client(broker), "gp", protocols=[{"name": "sticky", "metadata": b""}])
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeout_removes_member(broker):
    broker.create("t")
    [(c, m)], gen = stable_group(broker, "gs", session=400)
    c2 = client(broker)
    t0 = time.monotonic()
    r = join_new(c2, "gs", session=5000, rebalance=20000)  # the first member never rejoins
    assert r.error_code == 0 and r.generation_id == gen + 1
    assert time.monotonic() - t0 < 5  # its session expired: no wait for the 20 s rebalance timeout
    assert heartbeat(c, "gs", gen, m) == E.UNKNOWN_MEMBER_ID
    assert join(c2, "gs", session=5).error_code == E.INVALID_SESSION_TIMEOUT


def test_static_membership(broker):
    broker.create("t")
    c1 = client(broker)
    r = join(c1, "gst", instance="i-1", version=5)  # static members skip MEMBER_ID_REQUIRED
    assert r.error_code == 0 and r.generation_id == 1
    old = r.member_id
    assert sync(c1, "gst", 1, old, [(old, assignment("t", [0]))], instance="i-1").error_code == 0
    # The same instance restarts: new member id, same generation, its assignment, no rebalance.
    c2 = client(broker)
    r2 = join(c2, "gst", instance="i-1", version=5)
    assert r2.error_code == 0 and r2.generation_id == 1 and r2.member_id != old and r2.leader == r2.member_id
    s = sync(c2, "gst", 1, r2.member_id, instance="i-1")
    assert s.error_code == 0 and s.assignment == assignment("t", [0])
    assert heartbeat(c1, "gst", 1, old, instance="i-1") == E.FENCED_INSTANCE_ID
    assert heartbeat(c2, "gst", 1, r2.member_id, instance="i-1") == 0
    r9 = join(client(broker), "gst", instance="i-1", version=9)
    assert r9.skip_assignment and r9.generation_id == 1  # KIP-814: the leader keeps the assignment
    # KIP-345 leave by instance id (admin removeMembersFromConsumerGroup)
    r = c2.request(LEAVE, 3, {"group_id": "gst", "members": [{"member_id": "", "group_instance_id": "i-1"}]})
    assert r.members[0].error_code == 0
    assert c2.request(DESCRIBE, 4, {"groups": ["gst"]}).groups[0].group_state == "Empty"


# ------------------------------------------------------------------ offsets
def test_offset_commit_fetch_versions(broker):
    broker.create("t", 3)
    c = client(broker)
    # Simple (assign-mode) commits: generation -1, empty member id, every version.
    for v in range(10):
        body_extra = {"commit_timestamp": 1234} if v == 1 else {}
        errs = commit(c, f"simple{v}", {("t", 0): 10 + v}, version=v, **body_extra)
        assert errs == {("t", 0): 0}, (v, errs)
        r, got = fetch(c, f"simple{v}", {"t": [0, 1]}, version=min(v, 7))
        assert got[("t", 0)][:2] == (10 + v, "md") and got[("t", 1)][:2] == (-1, ""), (v, got)
    g = broker.runtime.coordinator.groups
    assert g["simple1"].offsets[("t", 0)][0].commit_timestamp_ms == 1234
    r = c.request(COMMIT, 2, {"group_id": "ret", "generation_id_or_member_epoch": -1, "member_id": "",
                              "retention_time_ms": 60000, "topics": [{"name": "t", "partitions": [
                                  {"partition_index": 1, "committed_offset": 3, "committed_metadata": None}]}]})
    assert r.topics[0].partitions[0].error_code == 0
    om = g["ret"].offsets[("t", 1)][0]
    assert om.expire_timestamp_ms == om.commit_timestamp_ms + 60000
    # Errors per partition.
    errs = commit(c, "simple8", {("t", 9): 1, ("nope", 0): 1})
    assert errs == {("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    r = c.request(COMMIT, 8, {"group_id": "simple8", "generation_id_or_member_epoch": -1, "member_id": "",
                              "topics": [{"name": "t", "partitions": [
                                  {"partition_index": 0, "committed_offset": 1, "committed_metadata": "x" * 5000}]}]})
    assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
    assert commit(c, "", {("t", 0): 1}) == {("t", 0): E.INVALID_GROUP_ID}
    # leader epoch (v6+ commit, v5+ fetch); all topics (null, v2+)
    commit(c, "ep", {("t", 2): 7}, version=8, committed_leader_epoch=4)
    r, got = fetch(c, "ep", None, version=7)
    assert list(got) == [("t", 2)] and r.topics[0].partitions[0].committed_leader_epoch == 4
    # multi-group v8+
    r = c.request(FETCH, 8, {"groups": [{"group_id": "simple8", "topics": None},
                                        {"group_id": "unknown-group", "topics": [{"name": "t", "partition_indexes": [0]}]}],
                             "require_stable": True})
    assert [(x.group_id, x.error_code) for x in r.groups] == [("simple8", 0), ("unknown-group", 0)]
    assert r.groups[0].topics[0].partitions[0].committed_offset == 18
    assert r.groups[1].topics[0].partitions[0].committed_offset == -1


def test_member_commit_rules(broker):
    broker.create("t")
    [(c, m)], gen = stable_group(broker, "gm")
    assert commit(c, "gm", {("t", 0): 5}, gen=gen, member=m) == {("t", 0): 0}
    assert commit(c, "gm", {("t", 0): 6}, gen=gen + 1, member=m) == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(c, "gm", {("t", 0): 6}, gen=gen, member="x") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # a group instance id no static member has (Kafka's ClassicGroup.validateMember)
    r = c.request(COMMIT, 8, {"group_id": "gm", "generation_id_or_member_epoch": gen, "member_id": m,
                              "group_instance_id": "nobody", "topics": [{"name": "t", "partitions": [
                                  {"partition_index": 0, "committed_offset": 6, "committed_metadata": ""}]}]})
    assert r.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
    # A simple commit to a group with members is refused; OffsetDelete of a subscribed topic too.
    assert commit(c, "gm", {("t", 0): 6}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    r = c.request(OFFSET_DELETE, 0, {"group_id": "gm", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert r.error_code == 0 and r.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
    assert c.request(DELETE, 1, {"groups_names": ["gm", "missing"]}).results[0].error_code == E.NON_EMPTY_GROUP
    assert c.request(DELETE, 1, {"groups_names": ["missing"]}).results[0].error_code == E.GROUP_ID_NOT_FOUND
    c.request(LEAVE, 1, {"group_id": "gm", "member_id": m})
    r = c.request(OFFSET_DELETE, 0, {"group_id": "gm", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert r.topics[0].partitions[0].error_code == 0
    assert fetch(c, "gm", {"t": [0]})[1][("t", 0)][0] == -1
    assert c.request(DELETE, 2, {"groups_names": ["gm"]}).results[0].error_code == 0
    assert "gm" not in [g.group_id for g in c.request(LIST, 4, {"states_filter": []}).groups]


def test_list_groups_filters(broker):
    broker.create("t")
    stable_group(broker, "gl-stable")
    commit(client(broker), "gl-simple", {("t", 0): 1})
    c = client(broker)
    by_id = {g.group_id: g for g in c.request(LIST, 5, {"states_filter": [], "types_filter": []}).groups}
    assert by_id["gl-stable"].group_state == "Stable" and by_id["gl-stable"].protocol_type == "consumer"
    assert by_id["gl-simple"].group_state == "Empty" and by_id["gl-simple"].protocol_type == ""
    assert by_id["gl-simple"].group_type == "classic"
    only = c.request(LIST, 4, {"states_filter": ["stable"]}).groups
    assert [g.group_id for g in only] == ["gl-stable"]
    assert c.request(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups == []
    assert {g.group_id for g in c.request(LIST, 0, {}).groups} >= {"gl-stable", "gl-simple"}


# ------------------------------------------------------------------ persistence and expiry
def test_groups_and_offsets_survive_restart(tmp_path):
    data = tmp_path / "data"
    with Broker(data_dir=data, group_initial_rebalance_delay_ms=0) as b:
        b.call(b.runtime.create_topic, "t", 2, 1, {})
        [(c, m)], gen = stable_group(b, "gr")
        assert commit(c, "gr", {("t", 0): 42, ("t", 1): 7}, gen=gen, member=m) == {("t", 0): 0, ("t", 1): 0}
        commit(c, "gone", {("t", 0): 1})
        commit(c, "gone", {("t", 0): 2})
        assert client(b).request(DELETE, 0, {"groups_names": ["gone"]}).results[0].error_code == 0
        c.close()
    with Broker(data_dir=data, group_initial_rebalance_delay_ms=0) as b:
        c = client(b)
        got = fetch(c, "gr", {"t": [0, 1]})[1]
        assert (got[("t", 0)][0], got[("t", 1)][0]) == (42, 7)
        d = c.request(DESCRIBE, 5, {"groups": ["gr"]}).groups[0]
        assert (d.group_state, [x.member_id for x in d.members]) == ("Stable", [m])
        assert d.members[0].member_assignment == assignment("t", [0])
        assert heartbeat(c, "gr", gen, m) == 0  # the member carries on with its generation
        assert "gone" not in b.runtime.coordinator.groups


def test_offsets_of_empty_groups_expire(broker):
    broker.create("t")
    c = client(broker)
    commit(c, "old", {("t", 0): 1})
    [(c2, m)], gen = stable_group(broker, "active")
    commit(c2, "active", {("t", 0): 1}, gen=gen, member=m)
    coord = broker.runtime.coordinator
    later = coord.groups["old"].offsets[("t", 0)][0].commit_timestamp_ms + broker.config.offsets_retention_minutes * 60_000
    removed = asyncio.run_coroutine_threadsafe(coord.expire_offsets(later + 1), broker._loop).result(10)
    assert removed == 1  # the stable group's offsets of its subscribed topic stay
    assert "old" not in coord.groups and ("t", 0) in coord.groups["active"].offsets
    assert fetch(c, "old", {"t": [0]})[1][("t", 0)][0] == -1


def test_require_stable_reports_commits_in_flight(broker):
    broker.create("t")
    c = client(broker)
    commit(c, "rs", {("t", 0): 3})
    pending = broker.runtime.coordinator.groups["rs"].pending_commits
    broker.call(pending.__setitem__, ("t", 0), 1)  # as while an OffsetCommit waits for its fsync
    r, got = fetch(c, "rs", {"t": [0]}, version=7)
    assert got[("t", 0)][2] == E.UNSTABLE_OFFSET_COMMIT
    r = c.request(FETCH, 6, {"group_id": "rs", "topics": [{"name": "t", "partition_indexes": [0]}]})
    assert r.topics[0].partitions[0].committed_offset == 3  # before KIP-447 clients: the last durable offset
    broker.call(pending.clear)
    assert fetch(c, "rs", {"t": [0]}, version=7)[1][("t", 0)][:2] == (3, "md")


def test_commit_rules_of_a_group_that_does_not_exist_or_is_empty(broker):
    """Kafka 4's ``OffsetMetadataManager.validateOffsetCommit`` and
    ``ClassicGroup.validateOffsetCommit``: a commit with a generation to a group that does not
    exist is GROUP_ID_NOT_FOUND from v9 (ILLEGAL_GENERATION before); one without a generation
    (-1) creates the group whatever member id it names; an empty group takes any commit
    without a generation."""
    broker.create("t")
    with client(broker) as c:
        assert commit(c, "gone9", {("t", 0): 1}, version=9, gen=5, member="m") == {("t", 0): E.GROUP_ID_NOT_FOUND}
        assert commit(c, "gone8", {("t", 0): 1}, version=8, gen=5, member="m") == {("t", 0): E.ILLEGAL_GENERATION}
        assert "gone9" not in broker.runtime.coordinator.groups
        assert commit(c, "named", {("t", 0): 2}, version=9, member="m") == {("t", 0): E.NONE}
        assert commit(c, "named", {("t", 0): 3}, version=9, member="other") == {("t", 0): E.NONE}  # empty group
        assert fetch(c, "named", {"t": [0]})[1][("t", 0)][0] == 3
        [(_, m)], _ = stable_group(broker, "busy")
        assert commit(c, "busy", {("t", 0): 1}, version=9, member="stranger") == {("t", 0): E.UNKNOWN_MEMBER_ID}
        assert commit(c, "busy", {("t", 0): 1}, version=9, member=m) == {("t", 0): E.ILLEGAL_GENERATION}
