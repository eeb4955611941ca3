"""Transactions in the partition log (KIP-98): producer state, LSO, .txnindex, recovery,
truncation, retention, snapshots, compaction. Real files in tmp_path, no mocks."""

from __future__ import annotations

import logging
import os
import shutil
import struct

import pytest
from crc32c import crc32c

from litemq.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from litemq.protocol.records import CONTROL_LEADER_CHANGE, build_batch, build_control_batch
from litemq.storage.config import LogConfig
from litemq.storage.log import AppendOrigin, PartitionLog
from litemq.storage.producer_state import ProducerStateManager, snapshot_name
from litemq.storage.txn_index import AbortedTxn, TransactionIndex

from storage_helpers import batch, compact_committed, marker_batch, read_committed, txn_batch, verified_append

COORD = AppendOrigin.COORDINATOR


def open_log(path, **cfg) -> PartitionLog:
    return PartitionLog.open(path / "t-0", LogConfig(**cfg))


def end_txn(log, pid, commit, **kw):
    return log.append(marker_batch(pid, commit, **kw), leader_epoch=0, origin=COORD)


def committed_view(log, hw):
    lso = log.last_stable_offset(hw)
    data = log.read_bytes(log.log_start_offset, 10**9, max_offset=lso)
    return read_committed(data, log.collect_aborted_transactions(log.log_start_offset, lso))


def txnindex_files(log):
    return sorted(n for n in os.listdir(log.dir) if n.endswith(".txnindex"))


# ------------------------------------------------------------------ LSO
def test_lso_with_ongoing_committed_and_aborted_transactions(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(2), leader_epoch=0)  # 0-1 plain
    verified_append(log, txn_batch(1, 0, [b"a", b"b"]), leader_epoch=0)  # 2-3 P1
    verified_append(log, txn_batch(2, 0, [b"c"]), leader_epoch=0)  # 4 P2
    verified_append(log, txn_batch(1, 2, [b"d"]), leader_epoch=0)  # 5 P1 (same txn)
    assert log.ongoing_transactions() == [(1, 0, 2), (2, 0, 4)]
    assert log.first_unstable_offset == 2
    assert log.last_stable_offset(6) == 2
    assert log.last_stable_offset(1) == 1  # never above the high watermark
    assert end_txn(log, 1, commit=True).first_offset == 6  # P1 committed at 6
    assert log.first_unstable_offset == 4
    assert log.last_stable_offset(6) == 2  # P1's marker not below the high watermark yet
    assert log.last_stable_offset(7) == 4  # now replicated: P2 still ongoing
    end_txn(log, 2, commit=False)  # 7: P2 aborted
    assert log.ongoing_transactions() == [] and log.first_unstable_offset is None
    assert log.last_stable_offset(7) == 4
    assert log.last_stable_offset(8) == 8
    assert log.collect_aborted_transactions(0, 8) == [(2, 4)]
    assert log.collect_aborted_transactions(5, 8) == [(2, 4)]  # last offset 7 >= 5
    assert log.collect_aborted_transactions(0, 4) == []  # first offset 4 not below 4
    assert log.collect_aborted_transactions(8, 100) == []
    # the LSO recorded in the index: P1 not ongoing any more at the abort -> marker + 1
    assert log.active_segment.txn_index.entries == [AbortedTxn(2, 4, 7, 8)]
    assert committed_view(log, 8) == [(0, b"v"), (1, b"v"), (2, b"a"), (3, b"b"), (5, b"d")]
    # P1 can start a new transaction with the next sequence; an empty aborted one indexes itself
    verified_append(log, txn_batch(1, 3, [b"e"]), leader_epoch=0)  # 8
    assert log.last_stable_offset(9) == 8
    end_txn(log, 3, commit=False)  # 9: producer 3 never wrote: first offset = the marker's own
    assert log.active_segment.txn_index.entries[-1] == AbortedTxn(3, 9, 9, 8)  # P1 (8) ongoing
    log.close()


def test_marker_with_old_producer_epoch_is_refused(tmp_path):
    log = open_log(tmp_path)
    verified_append(log, txn_batch(1, 0, [b"a"], epoch=3), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        end_txn(log, 1, commit=True, epoch=2)
    assert log.log_end_offset == 1 and log.ongoing_transactions() == [(1, 3, 0)]
    # a newer epoch (KIP-360 bump by the coordinator) aborts and fences the old epoch
    end_txn(log, 1, commit=False, epoch=4)
    assert log.producer_state.entry(1).epoch == 4
    with pytest.raises(InvalidProducerEpochError):
        verified_append(log, txn_batch(1, 1, [b"b"], epoch=3), leader_epoch=0)
    verified_append(log, txn_batch(1, 0, [b"b"], epoch=4), leader_epoch=0)  # new epoch starts at sequence 0
    with pytest.raises(OutOfOrderSequenceError):
        verified_append(log, txn_batch(1, 5, [b"c"], epoch=4), leader_epoch=0)
    log.close()


def test_fenced_coordinator_epoch(tmp_path):
    log = open_log(tmp_path)
    verified_append(log, txn_batch(1, 0, [b"a"]), leader_epoch=0)
    end_txn(log, 1, commit=True, coordinator_epoch=5)
    assert log.producer_state.entry(1).coordinator_epoch == 5
    verified_append(log, txn_batch(1, 1, [b"b"]), leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError) as exc:
        end_txn(log, 1, commit=False, coordinator_epoch=4)
    assert exc.value.code == 52
    end_txn(log, 1, commit=False, coordinator_epoch=5)  # same epoch is fine
    assert log.collect_aborted_transactions(0, 10) == [(1, 2)]
    log.close()


def test_control_batches_from_clients_are_refused(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError):
        log.append(marker_batch(1, True), leader_epoch=0)
    with pytest.raises(InvalidRecordError):  # coordinator: data batch
        verified_append(log, txn_batch(1, 0, [b"a"]), leader_epoch=0, origin=COORD)
    with pytest.raises(InvalidRecordError):  # coordinator: a control batch that is no marker
        log.append(bytearray(build_control_batch(base_offset=0, partition_leader_epoch=0, timestamp_ms=1,
                                                 control_type=CONTROL_LEADER_CHANGE, producer_id=1,
                                                 producer_epoch=0)), leader_epoch=0, origin=COORD)
    with pytest.raises(InvalidRecordError):  # coordinator: two batches
        log.append(marker_batch(1, True) + marker_batch(2, True), leader_epoch=0, origin=COORD)
    with pytest.raises(InvalidRecordError):  # a transactional batch needs a producer id
        verified_append(log, txn_batch(-1, -1, [b"a"]), leader_epoch=0)
    assert log.log_end_offset == 0
    log.close()


def test_non_transactional_batch_during_transaction_is_refused(tmp_path):
    log = open_log(tmp_path)
    verified_append(log, txn_batch(1, 0, [b"a"]), leader_epoch=0)
    with pytest.raises(InvalidTxnStateError) as exc:
        verified_append(log, txn_batch(1, 1, [b"b"], transactional=False), leader_epoch=0)
    assert exc.value.code == 48
    # within one append too, and nothing of it is written
    with pytest.raises(InvalidTxnStateError):
        verified_append(log, txn_batch(2, 0, [b"x"]) + txn_batch(2, 1, [b"y"], transactional=False), leader_epoch=0)
    assert log.log_end_offset == 1 and log.ongoing_transactions() == [(1, 0, 0)]
    end_txn(log, 1, commit=True)
    verified_append(log, txn_batch(1, 1, [b"b"], transactional=False), leader_epoch=0)  # fine after the commit
    log.close()


def test_follower_tracks_transactions_without_validation(tmp_path):
    leader = open_log(tmp_path / "leader")
    verified_append(leader, txn_batch(1, 0, [b"a"], epoch=2), leader_epoch=0)
    verified_append(leader, txn_batch(2, 0, [b"b"]), leader_epoch=0)
    end_txn(leader, 1, commit=False, epoch=2, coordinator_epoch=7)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read_bytes(0, 10**9))
    lc = build_control_batch(base_offset=3, partition_leader_epoch=1, control_type=CONTROL_LEADER_CHANGE,
                             timestamp_ms=1)
    follower.append_as_follower(lc)  # Raft leader change: not a transaction marker
    # an old-epoch/fenced marker is recorded, not refused (Kafka AppendOrigin.REPLICATION)
    old = bytearray(build_control_batch(base_offset=4, partition_leader_epoch=1, control_type=1, timestamp_ms=1,
                                        producer_id=2, producer_epoch=0, coordinator_epoch=0))
    follower.append_as_follower(old)
    assert follower.ongoing_transactions() == []
    assert follower.collect_aborted_transactions(0, 10) == [(1, 0)]
    assert follower.active_segment.txn_index.entries == [AbortedTxn(1, 0, 2, 1)]  # P2 ongoing at 1
    assert follower.last_stable_offset(5) == 5
    leader.close()
    follower.close()


# ------------------------------------------------------------------ segments, recovery, truncation
def _fill_with_aborts(log):
    """Transactions spanning segment rolls; returns the expected aborted list."""
    expected = []
    seq = {1: 0, 2: 0}
    for round_ in range(6):
        for pid in (1, 2):
            verified_append(log, txn_batch(pid, seq[pid], [b"x" * 60, b"y" * 60]), leader_epoch=0)
            seq[pid] += 2
            log.append(batch(1, value_size=80), leader_epoch=0)
        first = {pid: f for pid, _, f in log.ongoing_transactions()}
        end_txn(log, 1, commit=round_ % 2 == 0)
        if round_ % 2:
            expected.append((1, first[1]))
        if round_ % 3 == 2:
            end_txn(log, 2, commit=False)
            expected.append((2, first[2]))
    return sorted(expected, key=lambda t: t[1])


def test_aborted_index_across_segment_rolls(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    expected = _fill_with_aborts(log)
    assert len(log.segments) > 4
    leo = log.log_end_offset
    assert log.collect_aborted_transactions(0, leo) == expected
    # only segments holding an abort marker have a .txnindex file
    with_file = {s.base_offset for s in log.segments if s.txn_index.exists}
    with_entries = {s.base_offset for s in log.segments if s.txn_index.entries}
    assert with_file == with_entries and 0 < len(with_file) < len(log.segments)
    # every window agrees with a brute-force filter over all entries
    everything = [e for s in log.segments for e in s.txn_index.entries]
    for start in range(0, leo + 1, 7):
        for upper in range(start, leo + 2, 11):
            want = sorted(((e.producer_id, e.first_offset) for e in everything
                           if e.last_offset >= start and e.first_offset < upper), key=lambda t: t[1])
            assert log.collect_aborted_transactions(start, upper) == want, (start, upper)
    log.close()


@pytest.mark.parametrize("lose", ["nothing", "txnindex", "txnindex+checkpoint"])
def test_crash_recovery_rebuilds_ongoing_transactions_lso_and_txn_index(tmp_path, lose):
    log = open_log(tmp_path, segment_bytes=600)
    expected = _fill_with_aborts(log)
    verified_append(log, txn_batch(1, 12, [b"open"]), leader_epoch=0)  # P1 ongoing at the crash
    ongoing = log.ongoing_transactions()
    leo = log.log_end_offset
    lso = log.last_stable_offset(leo)
    view = committed_view(log, leo)
    log.flush()
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(log.dir, crashed)  # a copy of the live directory: no clean-shutdown marker
    assert not (crashed / ".kafka_cleanshutdown").exists()
    if lose != "nothing":
        for n in os.listdir(crashed):
            if n.endswith(".txnindex"):
                os.unlink(crashed / n)
    if lose == "txnindex+checkpoint":  # nothing known durable: every segment is re-validated
        os.unlink(crashed / "recovery-point-offset-checkpoint")
    log.close()
    again = PartitionLog.open(crashed, LogConfig(segment_bytes=600))
    assert again.log_end_offset == leo
    assert again.ongoing_transactions() == ongoing
    assert again.last_stable_offset(leo) == lso
    if lose != "txnindex":  # a lost .txnindex below the recovery point is not rebuilt
        assert again.collect_aborted_transactions(0, leo) == expected
        assert committed_view(again, leo) == view
    # the rebuilt state keeps working: P1 aborts, the index and LSO follow
    end_txn(again, 1, commit=False)
    assert again.last_stable_offset(leo + 1) == leo + 1
    assert again.collect_aborted_transactions(leo - 1, leo + 1) == [(1, ongoing[0][2])]
    again.close()


def test_truncate_to_drops_index_entries_and_rebuilds_state(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    verified_append(log, txn_batch(1, 0, [b"a"]), leader_epoch=0)  # 0
    verified_append(log, txn_batch(2, 0, [b"b"]), leader_epoch=0)  # 1
    end_txn(log, 1, commit=False)  # 2
    log.roll()
    verified_append(log, txn_batch(3, 0, [b"c"]), leader_epoch=0)  # 3
    end_txn(log, 2, commit=False)  # 4
    log.roll()
    end_txn(log, 3, commit=True)  # 5
    assert log.collect_aborted_transactions(0, 6) == [(1, 0), (2, 1)]
    assert log.last_stable_offset(6) == 6
    log.truncate_to(4)  # drops P2's abort marker (and P3's commit)
    assert log.collect_aborted_transactions(0, 6) == [(1, 0)]
    assert log.ongoing_transactions() == [(2, 0, 1), (3, 0, 3)]
    assert log.last_stable_offset(4) == 1
    assert [s.txn_index.entries for s in log.segments[1:]] == [[]]
    # the producers carry on: P2 can commit this time
    end_txn(log, 2, commit=True)
    assert log.collect_aborted_transactions(0, 6) == [(1, 0)]
    assert log.last_stable_offset(5) == 3
    log.truncate_to(2)  # drops P1's abort too: everything ongoing again
    assert log.ongoing_transactions() == [(1, 0, 0), (2, 0, 1)]
    assert log.collect_aborted_transactions(0, 6) == []
    assert log.segments[0].txn_index.entries == []
    log.close()
    log = open_log(tmp_path, segment_bytes=600)
    assert log.ongoing_transactions() == [(1, 0, 0), (2, 0, 1)] and log.last_stable_offset(2) == 0
    log.close()


def test_truncation_below_the_snapshot_keeps_unreplicated_completions(tmp_path):
    log = open_log(tmp_path)
    verified_append(log, txn_batch(1, 0, [b"a"]), leader_epoch=0)  # 0
    end_txn(log, 1, commit=False)  # 1
    assert log.last_stable_offset(1) == 0  # marker at 1 not replicated
    log.append(batch(1), leader_epoch=0)  # 2
    log.close()  # snapshot at 3 carries the completion
    log = open_log(tmp_path)
    assert log.last_stable_offset(1) == 0
    log.truncate_to(2)
    assert log.last_stable_offset(1) == 0
    assert log.last_stable_offset(2) == 2
    log.close()


def test_retention_and_delete_records_remove_txnindex_files(tmp_path):
    log = open_log(tmp_path, segment_bytes=600, retention_ms=-1)
    _fill_with_aborts(log)
    files = txnindex_files(log)
    assert len(files) >= 2
    leo = log.log_end_offset
    k = next(i for i, s in enumerate(log.segments) if s.txn_index.exists)
    cut = log.segments[k + 1].base_offset
    log.delete_records_before(cut)
    assert all(int(n[:20]) >= cut for n in txnindex_files(log))
    assert set(txnindex_files(log)) < set(files)
    got = log.collect_aborted_transactions(0, leo)  # entries with last offset < log start ignored
    assert got == [(p, f) for p, f in got if any(e.first_offset == f and e.last_offset >= cut
                                                 for s in log.segments for e in s.txn_index.entries)]
    assert all(e.last_offset >= cut for s in log.segments for e in s.txn_index.entries)
    log.update_config(LogConfig(segment_bytes=600, retention_bytes=0))
    log.enforce_retention()
    assert [s.base_offset for s in log.segments] == [log.active_segment.base_offset]
    assert all(int(n[:20]) >= log.log_start_offset for n in txnindex_files(log))
    log.close()


def _v1_snapshot(rows):
    body = struct.pack(">i", len(rows)) + b"".join(struct.pack(">qhiiqqq", *r) for r in rows)
    return struct.pack(">hI", 1, crc32c(body)) + body


def test_snapshot_version_1_still_loads(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(2, pid=7, epoch=1, seq=0), leader_epoch=0)  # 0-1
    log.append(batch(3, pid=7, epoch=1, seq=2), leader_epoch=0)  # 2-4
    log.close()
    snap = log.dir / snapshot_name(5)
    assert struct.unpack_from(">h", snap.read_bytes())[0] == 2
    snap.write_bytes(_v1_snapshot([(7, 1, 0, 1, 0, 1, 1_000), (7, 1, 2, 4, 2, 4, 1_000)]))
    log = open_log(tmp_path)
    entry = log.producer_state.entry(7)
    assert entry.epoch == 1 and entry.last_seq == 4 and entry.current_txn_first_offset is None
    dup = log.append(batch(3, pid=7, epoch=1, seq=2), leader_epoch=0)  # retry: recognised
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (2, 4)
    log.close()
    # a v2 snapshot written at close round-trips the transaction fields
    ps = ProducerStateManager(log.dir)
    assert ps.load_latest_snapshot(10**9)


def test_snapshot_version_2_round_trips_transaction_state(tmp_path):
    log = open_log(tmp_path)
    verified_append(log, txn_batch(1, 0, [b"a"], epoch=3), leader_epoch=0)
    end_txn(log, 1, commit=False, epoch=3, coordinator_epoch=9)
    verified_append(log, txn_batch(1, 1, [b"b"], epoch=3), leader_epoch=0)
    verified_append(log, txn_batch(2, 0, [b"c"]), leader_epoch=0)
    end_txn(log, 2, commit=True, epoch=4)  # epoch bump: P2 keeps no batch
    assert log.last_stable_offset(4) == 2
    log.close()
    ps = ProducerStateManager(log.dir)
    assert ps.load_latest_snapshot(10**9)
    assert ps.entry(1).current_txn_first_offset == 2 and ps.entry(1).coordinator_epoch == 9
    assert ps.entry(2).epoch == 4 and len(ps.entry(2).batches) == 0
    assert ps.ongoing_transactions() == [(1, 3, 2)]
    assert ps.completed_transactions() == [(2, 3, 4)]  # marker 4 >= the high watermark seen (4)
    assert ps.completed_floor == 4


def test_corrupt_txnindex_is_rebuilt_with_a_log_line(tmp_path, caplog):
    log = open_log(tmp_path, segment_bytes=600)
    expected = _fill_with_aborts(log)
    leo = log.log_end_offset
    log.close()
    victim = log.dir / txnindex_files(log)[0]
    with open(victim, "ab") as f:
        f.write(b"\x00" * 5)  # not a multiple of 34 bytes
    with caplog.at_level(logging.WARNING, logger="litemq.storage.log"):
        log = open_log(tmp_path, segment_bytes=600)
    assert [r for r in caplog.records if victim.name in r.getMessage()]
    assert log.collect_aborted_transactions(0, leo) == expected
    assert victim.stat().st_size % 34 == 0
    log.close()
    # bad content (wrong version) found when the index is first read: valid prefix kept, logged
    data = bytearray(victim.read_bytes())
    data[34 * (len(data) // 34 - 1)] = 9
    victim.write_bytes(bytes(data))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="litemq.storage.txn_index"):
        log = open_log(tmp_path, segment_bytes=600)
        n = len(log.collect_aborted_transactions(0, leo))
    assert n == len(expected) - 1
    assert len([r for r in caplog.records if "bad entry" in r.getMessage()]) == 1
    log.close()


def test_transaction_index_unit(tmp_path):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert idx.collect(0, 100) == ([], False) and not idx.exists
    idx.append(AbortedTxn(1, 0, 5, 6))
    idx.append(AbortedTxn(2, 3, 9, 12))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(3, 7, 9, 12))
    assert (tmp_path / "00000000000000000000.txnindex").stat().st_size == 68
    assert idx.collect(6, 100) == ([AbortedTxn(2, 3, 9, 12)], False)
    assert idx.collect(0, 6) == ([AbortedTxn(1, 0, 5, 6)], True)  # LSO 6 >= 6: nothing later matches
    assert idx.collect(0, 7) == ([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 12)], True)
    assert idx.collect(0, 13) == ([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 12)], False)
    idx.truncate_to(9)
    assert TransactionIndex(idx.path, 0).entries == [AbortedTxn(1, 0, 5, 6)]
    idx.delete()
    assert not idx.exists


# ------------------------------------------------------------------ compaction
def test_compaction_keeps_read_committed_semantics(tmp_path):
    cfg = dict(segment_bytes=10**6, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
               delete_retention_ms=10**12, min_compaction_lag_ms=0)
    log = open_log(tmp_path, **cfg)

    def put(pid, seq, key, value, transactional=True):
        verified_append(log, bytearray(build_batch([(key, value, (), 1_000)], producer_id=pid, producer_epoch=0,
                                                   base_sequence=seq, is_transactional=transactional)))
    put(1, 0, b"k1", b"committed-1")  # 0
    end_txn(log, 1, commit=True)  # 1
    put(2, 0, b"k1", b"aborted-1")  # 2: would shadow the committed k1
    put(2, 1, b"k2", b"aborted-2")  # 3
    put(3, 0, b"k3", b"committed-3")  # 4
    end_txn(log, 2, commit=False)  # 5
    end_txn(log, 3, commit=True)  # 6
    log.roll()
    put(1, 1, b"k4", b"ongoing-4")  # 7: P1 ongoing: nothing from here on is cleanable
    log.roll()
    put(1, 2, b"k1", b"ongoing-k1")  # 8
    log.roll()
    before = committed_view(log, log.log_end_offset)
    assert [v for _, v in before] == [b"committed-1", b"committed-3"]
    stats = compact_committed(log, 10**12)
    assert stats.segments_cleaned == 1 and stats.end_offset == 7  # stops at the ongoing transaction
    after = committed_view(log, log.log_end_offset)
    assert after == before
    raw = [r.value for r in __import__("litemq.protocol.records", fromlist=["x"]).decode_records(
        log.read_bytes(0, 10**9), skip_control=True)]
    assert b"aborted-1" not in raw and b"aborted-2" not in raw  # aborted data dropped
    assert b"ongoing-4" in raw and b"ongoing-k1" in raw
    assert log.collect_aborted_transactions(0, 9) == [(2, 2)]  # index entry kept with its marker
    assert txnindex_files(log) == ["00000000000000000000.txnindex"]
    # P1 commits: both its records become visible (its k1 now supersedes the one at offset 0)
    end_txn(log, 1, commit=True)
    log.roll()
    log.compact(now_ms=10**12, high_watermark=log.log_end_offset - 1)  # the marker is not replicated yet
    assert [v for _, v in committed_view(log, log.log_end_offset - 1)] == [b"committed-1", b"committed-3"]
    compact_committed(log, 10**12)  # the marker is below the high watermark: P1's records are stable
    final = committed_view(log, log.log_end_offset)
    assert [v for _, v in final] == [b"committed-3", b"ongoing-4", b"ongoing-k1"]
    log.close()
    log = open_log(tmp_path, **cfg)
    assert committed_view(log, log.log_end_offset) == final
    assert log.collect_aborted_transactions(0, 100) == [(2, 2)]
    log.close()


def test_marker_only_producer_accepts_any_sequence_after_crash(tmp_path):
    """Replay from the log start may know a producer only from a marker (no batch remembered):
    its next batch's sequence cannot be checked (Kafka ``checkSequence`` NO_SEQUENCE case)."""
    log = open_log(tmp_path)
    verified_append(log, txn_batch(0, 0, [b"a"]), leader_epoch=0)  # 0
    end_txn(log, 0, commit=False)  # 1
    log.delete_records_before(2)
    end_txn(log, 0, commit=False)  # 2: empty transaction
    log.flush()
    log = open_log(tmp_path)  # crash: no snapshot, replay from the log start sees only the marker
    assert log.producer_state.entry(0).last_seq == -1
    verified_append(log, txn_batch(0, 1, [b"b"]), leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        verified_append(log, txn_batch(0, 5, [b"c"]), leader_epoch=0)
    log.close()


def _markers(log) -> list[tuple[int, int, int | None]]:
    """(offset, producer id, delete horizon) of every transaction marker in the log."""
    from litemq.protocol.records import iter_batches

    data = log.read_bytes(log.log_start_offset, 10**9)
    return [(h.base_offset, h.producer_id, h.delete_horizon_ms) for _, h in iter_batches(data)
            if h.is_control and h.producer_id >= 0]


def test_compaction_removes_markers_of_emptied_transactions_after_delete_retention(tmp_path):
    """Kafka's marker cleanup (KIP-534, ``CleanedTransactionMetadata``): a COMMIT or ABORT marker
    whose transaction has no batch left is first given a delete horizon of now +
    delete.retention.ms, then removed by the first clean after it - unless it is its producer's
    last batch; its .txnindex entry goes with it; read_committed reads the same all along."""
    log = open_log(tmp_path, segment_bytes=10**6, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0,
                   delete_retention_ms=60_000, min_compaction_lag_ms=0)

    def put(pid, seq, key, value):
        verified_append(log, bytearray(build_batch([(key, value, (), 1_000)], producer_id=pid, producer_epoch=0,
                                                   base_sequence=seq, is_transactional=True)))
    put(1, 0, b"k1", b"old")  # 0: superseded by offset 2
    end_txn(log, 1, commit=True)  # 1: its transaction will be empty
    put(1, 1, b"k1", b"new")  # 2
    end_txn(log, 1, commit=True)  # 3: P1's last batch
    put(2, 0, b"k2", b"aborted")  # 4
    end_txn(log, 2, commit=False)  # 5: its aborted data is dropped at the first clean
    put(2, 1, b"k3", b"kept")  # 6
    end_txn(log, 2, commit=True)  # 7: P2's last batch
    log.roll()
    put(9, 0, b"k9", b"tail")  # 8 (not cleanable: the active segment)
    end_txn(log, 9, commit=True)  # 9
    log.roll()
    assert committed_view(log, log.log_end_offset) == [(0, b"old"), (2, b"new"), (6, b"kept"), (8, b"tail")]
    assert log.collect_aborted_transactions(0, 10) == [(2, 4)]
    now = 10**12
    first = compact_committed(log, now)
    assert (first.markers_expiring, first.markers_removed) == (2, 0)
    assert _markers(log)[:4] == [(1, 1, now + 60_000), (3, 1, None), (5, 2, now + 60_000), (7, 2, None)]
    view = committed_view(log, log.log_end_offset)
    assert view == [(2, b"new"), (6, b"kept"), (8, b"tail")]
    assert log.collect_aborted_transactions(0, 10) == [(2, 4)]  # kept while its marker is
    early = compact_committed(log, now + 59_999)  # before the horizon: kept
    assert early.markers_removed == 0 and len(_markers(log)) == 5
    late = compact_committed(log, now + 60_000)
    assert late.markers_removed == 2
    assert [m[0] for m in _markers(log)] == [3, 7, 9]  # the producers' last batches stay
    assert log.collect_aborted_transactions(0, 10) == []
    assert committed_view(log, log.log_end_offset) == view
    log.close()
    log = open_log(tmp_path, segment_bytes=10**6, cleanup_policy="compact")
    assert [m[0] for m in _markers(log)] == [3, 7, 9] and committed_view(log, log.log_end_offset) == view
    assert log.producer_state.entry(1) is not None and log.producer_state.entry(2) is not None
    log.close()
