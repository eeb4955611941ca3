"""KIP-932 share-partition state machine and the share-group assignor (pure, no broker)."""

from litemq.coordinator.assignors import MemberSubscription, SimpleAssignor
from litemq.coordinator.share_partition import AckType, BatchInfo, RecordState, SharePartition
from litemq.coordinator.share_records import (ShareSnapshot, ShareStateKey, decode_key, decode_value, encode_key,
                                              encode_value)
from litemq.protocol.errors import ErrorCode as E

import uuid


def sp(lock_ms=1000, limit=3, locks=100) -> SharePartition:
    s = SharePartition(lock_ms, limit, locks)
    s.initialize(0)
    return s


BATCHES = [BatchInfo(0, 4), BatchInfo(5, 9)]


def test_acquire_ack_accept_moves_spso():
    s = sp()
    got, used = s.acquire(BATCHES, "m1", 0, 100, 10)
    assert got == [(0, 9, 1)] and used == [0, 1]
    assert s.start_offset == 0 and s.end_offset == 10
    assert s.acknowledge("m1", 0, 4, [AckType.ACCEPT]) == E.NONE
    assert s.start_offset == 5
    # another member cannot acknowledge m1's records; GAP of a done offset is fine
    assert s.acknowledge("m2", 5, 5, [AckType.ACCEPT]) == E.INVALID_RECORD_STATE
    assert s.acknowledge("m1", 0, 0, [AckType.GAP]) == E.NONE
    assert s.acknowledge("m1", 5, 9, [1, 1, 3, 1, 1]) == E.NONE  # one REJECT
    assert s.start_offset == s.end_offset == 10 and not s.records



def test_acknowledgement_batches_are_all_or_nothing_and_a_rollback_reacquires():
    """Kafka's ``SharePartition.acknowledge``: a batch that fails undoes the batches before it,
    and an acknowledgement whose state write failed is rolled back
    (``rollbackOrProcessStateUpdates``): its records are ACQUIRED again by their member until
    their lock expires, then delivered again with the next delivery count."""
    s = sp(lock_ms=1000, limit=2)
    s.acquire(BATCHES, "m1", 0, 100, 10)
    code, undo = s.acknowledge_all("m1", [(0, 1, [AckType.ACCEPT]), (2, 2, [AckType.RELEASE]), (9, 10, [1])])
    assert (code, undo) == (E.INVALID_RECORD_STATE, [])  # 10 was never delivered: nothing applied
    assert s.start_offset == 0 and s.acquired_count() == 10
    code, undo = s.acknowledge_all("m1", [(0, 1, [AckType.ACCEPT]), (2, 3, [AckType.RELEASE]),
                                          (4, 4, [AckType.REJECT])])
    assert code == E.NONE and s.start_offset == 2 and s.first_fetchable() == 2
    got, _ = s.acquire(BATCHES, "m2", 10, 1, 10)  # meanwhile m2 takes released 2
    assert got == [(2, 2, 2)]
    s.rollback(undo)  # the state write failed
    assert s.start_offset == 0 and s.dirty
    assert {o: (r.state, r.member_id) for o, r in s.records.items() if o < 5} == {
        0: (RecordState.ACQUIRED, "m1"), 1: (RecordState.ACQUIRED, "m1"), 2: (RecordState.ACQUIRED, "m2"),
        3: (RecordState.ACQUIRED, "m1"), 4: (RecordState.ACQUIRED, "m1")}
    assert s.acknowledge("m1", 0, 1, [AckType.ACCEPT]) == E.NONE  # m1 may acknowledge them again
    s.expire_locks(1000)  # or they come back at the lock deadline
    got, _ = s.acquire(BATCHES, "m3", 1000, 100, 10)
    assert got == [(3, 9, 2)]  # 2 was archived at the limit (m2's lock expired too)

def test_release_redelivers_with_higher_count_and_archives_at_limit():
    s = sp(limit=2)
    s.acquire(BATCHES[:1], "m1", 0, 2, 5)  # max_records 2: offsets 0, 1
    assert s.end_offset == 2
    assert s.acknowledge("m1", 0, 1, [AckType.RELEASE]) == E.NONE
    got, _ = s.acquire(BATCHES[:1], "m2", 0, 100, 5)
    assert got == [(0, 1, 2), (2, 4, 1)]
    assert s.acknowledge("m2", 0, 1, [AckType.RELEASE]) == E.NONE  # count 2 = limit: archived
    got, _ = s.acquire(BATCHES[:1], "m3", 0, 100, 5)
    assert got == [] and s.start_offset == 2


def test_lock_expiry_and_member_release():
    s = sp(lock_ms=1000)
    s.acquire(BATCHES, "m1", 0, 3, 10)
    assert s.expire_locks(999) == 0
    assert s.expire_locks(1000) == 3
    assert all(r.state == RecordState.AVAILABLE for r in s.records.values())
    got, _ = s.acquire(BATCHES, "m2", 2000, 100, 10)
    assert got == [(0, 2, 2), (3, 9, 1)]
    assert s.release_member("m2") == 10
    assert s.first_fetchable() == 0


def test_control_batches_and_gaps_are_skipped_and_max_locks_bound():
    s = sp(locks=4)
    got, used = s.acquire([BatchInfo(0, 0, is_control=True), BatchInfo(3, 9)], "m", 0, 100, 10)
    assert got == [(3, 6, 1)] and used == [1]  # the window [SPSO, SPEO) holds at most 4
    assert s.start_offset == 3 and s.end_offset == 7
    got, _ = s.acquire([BatchInfo(3, 9)], "m", 0, 100, 10)
    assert got == []
    s.acknowledge("m", 3, 4, [AckType.ACCEPT])
    got, _ = s.acquire([BatchInfo(3, 9)], "m", 0, 100, 10)
    assert got == [(7, 8, 1)]


def test_snapshot_round_trip_keeps_done_and_pending_records():
    s = sp()
    s.acquire(BATCHES, "m1", 0, 100, 10)
    s.acknowledge("m1", 2, 3, [AckType.ACCEPT])
    s.acknowledge("m1", 0, 0, [AckType.RELEASE])
    start, epoch, batches = s.snapshot()
    key = ShareStateKey("g", uuid.uuid4(), 3)
    assert decode_key(encode_key(key)) == key
    snap = decode_value(encode_value(ShareSnapshot(start, epoch, 1, 1, 5, 6, batches)))
    t = SharePartition(1000, 3, 100)
    t.initialize(snap.start_offset, snap.batches, snap.state_epoch + 1)
    assert t.start_offset == 0 and t.end_offset == 10
    assert sorted(t.records) == [0, 1, 4, 5, 6, 7, 8, 9]  # 2 and 3 stay accepted
    assert all(r.state == RecordState.AVAILABLE for r in t.records.values())
    assert t.records[0].delivery_count == 1
    got, _ = t.acquire(BATCHES, "m2", 0, 100, 10)
    assert got == [(0, 1, 2), (4, 9, 2)]


def test_simple_assignor_shares_partitions_when_members_outnumber_them():
    a = SimpleAssignor()
    members = {f"m{i}": MemberSubscription(frozenset({"t"})) for i in range(5)}
    out = a.assign(members, {"t": 2}, {})
    assert all(len(v["t"]) == 1 for v in out.values())
    counts = sorted(sum(1 for v in out.values() if p in v["t"]) for p in (0, 1))
    assert counts == [2, 3]
    # sticky: a sixth member moves nobody
    members["m5"] = MemberSubscription(frozenset({"t"}))
    again = a.assign(members, {"t": 2}, out)
    assert all(again[m] == out[m] for m in out)
    # fewer members than partitions: each partition to exactly one member
    two = a.assign({"a": MemberSubscription(frozenset({"t"})), "b": MemberSubscription(frozenset({"t"}))},
                   {"t": 4}, {})
    assert sorted(p for v in two.values() for p in v["t"]) == [0, 1, 2, 3]


def test_acknowledgement_ranges_are_checked_without_walking_them():
    """A client cannot make the leader walk a huge range: offsets past SPEO were never delivered,
    offsets below SPSO are done (only GAP may name them), negative offsets are malformed."""
    s = sp()
    s.acquire(BATCHES, "m1", 0, 100, 10)
    assert s.acknowledge("m1", 0, 2**62, [AckType.ACCEPT]) == E.INVALID_RECORD_STATE
    assert s.acknowledge("m1", -5, 3, [AckType.ACCEPT]) == E.INVALID_REQUEST
    assert s.acknowledge("m1", 0, 4, [AckType.ACCEPT]) == E.NONE
    assert s.acknowledge("m1", 0, 5, [AckType.ACCEPT]) == E.INVALID_RECORD_STATE  # 0..4 are done
    assert s.acknowledge("m1", 0, 5, [0, 0, 0, 0, 0, 1]) == E.NONE  # GAPs below SPSO, then 5
    assert s.start_offset == 6
    assert s.acknowledge("m1", 0, 9, [AckType.GAP]) == E.NONE  # GAP also ends acquired records
    assert s.start_offset == s.end_offset == 10


def test_simple_assignor_with_no_subscribed_partition_assigns_nothing():
    """Members subscribed only to topics that do not exist yet (a ShareGroupHeartbeat of a queue
    consumer started before its topic): empty assignments, not a division by zero partitions."""
    members = {"m1": MemberSubscription(frozenset({"later"})), "m2": MemberSubscription(frozenset({"later"}))}
    assert SimpleAssignor().assign(members, {"other": 3}, {}) == {"m1": {}, "m2": {}}
    assert SimpleAssignor().assign(members, {}, {}) == {"m1": {}, "m2": {}}
