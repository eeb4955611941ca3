"""KIP-890 part 1 verification guards in the partition log (Kafka ``VerificationGuard``,
``ProducerStateManager.maybeCreateVerificationStateEntry``/``clearVerificationStateEntry``,
``UnifiedLog.maybeStartTransactionVerification``): a transactional batch that starts a
transaction is appended only with the guard its producer got before the coordinator verified
it, and any marker or transactional batch of that producer applied in between voids the guard.
Real logs on disk in tmp_path, no mocks."""

from __future__ import annotations

import pytest
from storage_helpers import marker_batch, txn_batch

from litemq.protocol.errors import InvalidProducerEpochError, InvalidTxnStateError
from litemq.storage.config import LogConfig
from litemq.storage.log import AppendOrigin, PartitionLog

COORD = AppendOrigin.COORDINATOR


@pytest.fixture
def log(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig())
    yield plog
    plog.close()


def end_txn(log, pid, commit, **kw):
    return log.append(marker_batch(pid, commit, **kw), leader_epoch=0, origin=COORD)


def test_verified_first_batch_starts_the_transaction_and_clears_the_guard(log):
    guard = log.maybe_start_transaction_verification(1, 0)
    assert guard is not None
    assert log.producer_state.verification_guard(1) is guard
    assert log.maybe_start_transaction_verification(1, 0) is guard  # a concurrent request shares it
    log.append(txn_batch(1, 0, [b"a"]), leader_epoch=0, verification_guard=guard)
    assert log.ongoing_transactions() == [(1, 0, 0)]
    assert log.producer_state.verification_state_entry(1) is None  # the transaction has a first offset
    # batches continuing the ongoing transaction need no guard, and no verification starts
    assert log.maybe_start_transaction_verification(1, 0) is None
    log.append(txn_batch(1, 1, [b"b"]), leader_epoch=0)
    log.append(txn_batch(1, 2, [b"c"]), leader_epoch=0, verification_guard=guard)  # the stale one is ignored
    assert log.ongoing_transactions() == [(1, 0, 0)]


def test_abort_marker_between_verification_and_append_refuses_the_batch(log):
    """The race: verified, then the ABORT lands, then the verified batch arrives. Without the
    guard it was appended after the marker and opened a transaction nobody ends (LSO stuck)."""
    log.append(txn_batch(1, 0, [b"first"]), leader_epoch=0,
               verification_guard=log.maybe_start_transaction_verification(1, 0))
    end_txn(log, 1, commit=True)  # 0, marker 1
    guard = log.maybe_start_transaction_verification(1, 0)  # the next transaction, verifying
    end_txn(log, 1, commit=False)  # 2: EndTxn(abort) completed meanwhile
    assert log.producer_state.verification_guard(1) is None
    leo = log.log_end_offset
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        log.append(txn_batch(1, 1, [b"late"]), leader_epoch=0, verification_guard=guard)
    assert log.log_end_offset == leo  # nothing written
    assert log.ongoing_transactions() == []
    assert log.last_stable_offset(leo) == leo
    # a fresh verification of the producer's next transaction works
    log.append(txn_batch(1, 1, [b"next"]), leader_epoch=0,
               verification_guard=log.maybe_start_transaction_verification(1, 0))
    assert log.ongoing_transactions() == [(1, 0, leo)]


def test_missing_or_foreign_guard_is_refused(log):
    with pytest.raises(InvalidTxnStateError):
        log.append(txn_batch(1, 0, [b"a"]), leader_epoch=0)  # never verified
    other = log.maybe_start_transaction_verification(2, 0)
    with pytest.raises(InvalidTxnStateError):
        log.append(txn_batch(1, 0, [b"a"]), leader_epoch=0, verification_guard=other)  # producer 2's guard
    mine = log.maybe_start_transaction_verification(1, 0)
    log.append(txn_batch(2, 0, [b"b"]), leader_epoch=0, verification_guard=other)
    log.append(txn_batch(1, 0, [b"a"]), leader_epoch=0, verification_guard=mine)
    assert [pid for pid, _e, _f in log.ongoing_transactions()] == [2, 1]
    assert log.log_end_offset == 2
    # plain and idempotent appends never need a guard
    log.append(txn_batch(3, 0, [b"c"], transactional=False), leader_epoch=0)
    assert log.log_end_offset == 3


def test_guard_cleared_by_another_batch_of_the_producer_and_reused_after(log):
    """Two requests verified with the shared guard: the first append clears it, the second
    continues the transaction; once that transaction ends the old guard is void."""
    guard = log.maybe_start_transaction_verification(1, 0)
    assert log.maybe_start_transaction_verification(1, 0) is guard
    log.append(txn_batch(1, 0, [b"a"]), leader_epoch=0, verification_guard=guard)
    log.append(txn_batch(1, 1, [b"b"]), leader_epoch=0, verification_guard=guard)
    end_txn(log, 1, commit=True)
    with pytest.raises(InvalidTxnStateError):
        log.append(txn_batch(1, 2, [b"c"]), leader_epoch=0, verification_guard=guard)


def test_fenced_producer_keeps_its_epoch_error(log):
    """An abort with a bumped epoch (InitProducerId fencing) between verification and append:
    the late batch gets INVALID_PRODUCER_EPOCH, the more specific answer, checked first."""
    guard = log.maybe_start_transaction_verification(1, 0)
    end_txn(log, 1, commit=False, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        log.append(txn_batch(1, 0, [b"late"]), leader_epoch=0, verification_guard=guard)
    assert log.log_end_offset == 1


def test_retry_of_a_verified_batch_is_a_duplicate_without_a_guard(log):
    records = txn_batch(1, 0, [b"a"])
    first = log.append(bytearray(records), leader_epoch=0,
                       verification_guard=log.maybe_start_transaction_verification(1, 0))
    retry = log.append(bytearray(records), leader_epoch=0)  # ongoing: the produce path verifies nothing
    assert retry.duplicate and retry.first_offset == first.first_offset
    assert log.log_end_offset == 1


def test_follower_and_replayed_markers_clear_the_guard(tmp_path):
    """The guard is leader-local, but whatever applies a marker or transactional batch of the
    producer to the state clears it: a replica that was a follower (or replays its log) and
    then leads never accepts a guard taken before."""
    leader = PartitionLog.open(tmp_path / "leader" / "t-0", LogConfig())
    follower = PartitionLog.open(tmp_path / "follower" / "t-0", LogConfig())
    leader.append(txn_batch(1, 0, [b"a"]), leader_epoch=0,
                  verification_guard=leader.maybe_start_transaction_verification(1, 0))
    end_txn(leader, 1, commit=False)
    stale = follower.maybe_start_transaction_verification(1, 0)
    follower.append_as_follower(leader.read_bytes(0, 10**9))  # the batch and the ABORT, replicated
    assert follower.producer_state.verification_guard(1) is None
    with pytest.raises(InvalidTxnStateError):
        follower.append(txn_batch(1, 1, [b"late"]), leader_epoch=1, verification_guard=stale)
    assert follower.log_end_offset == 2
    # a marker alone (no data batch of the producer in this log: the coordinator ends a
    # transaction whose batch never came) clears it as well
    other = PartitionLog.open(tmp_path / "other" / "t-0", LogConfig())
    stale = other.maybe_start_transaction_verification(1, 0)
    end_txn(other, 1, commit=False)
    with pytest.raises(InvalidTxnStateError):
        other.append(txn_batch(1, 1, [b"late"]), leader_epoch=0, verification_guard=stale)
    for plog in (leader, follower, other):
        plog.close()


def test_unused_verification_entries_expire_with_the_producers(log):
    """Kafka ``removeExpiredProducers``: a verification never followed by an append (refused by
    the coordinator, say) is forgotten after ``producer.id.expiration.ms``."""
    log.producer_state.maybe_create_verification_state_entry(5, 0, now_ms=1_000)
    log.producer_state.maybe_create_verification_state_entry(6, 0, now_ms=50_000)
    log.remove_expired_producers(now_ms=60_000, expiration_ms=30_000)
    assert log.producer_state.verification_state_entry(5) is None
    assert log.producer_state.verification_state_entry(6) is not None
