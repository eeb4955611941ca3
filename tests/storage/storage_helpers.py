"""Helpers shared by the storage tests: batch building and reading back."""

from __future__ import annotations

from litemq.protocol.records import build_batch, decode_records, iter_batches


def batch(n: int = 1, *, key: bytes | None = b"k", value: bytes | None = b"v", ts: int = 1_000,
          pid: int = -1, epoch: int = -1, seq: int = -1, value_size: int | None = None) -> bytearray:
    """One uncompressed batch of ``n`` records (offsets 0..n-1, assigned by the log)."""
    if value_size is not None:
        value = b"x" * value_size
    recs = [(key, value, (), ts) for _ in range(n)]
    return bytearray(build_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def keyed(pairs: list[tuple[bytes, bytes | None]], ts: int = 1_000) -> bytearray:
    return bytearray(build_batch([(k, v, (), ts) for k, v in pairs]))


def compact_committed(log, now_ms: int):
    """Compact ``log`` with everything appended committed (high watermark = log end offset)."""
    return log.compact(now_ms=now_ms, high_watermark=log.log_end_offset)


def records(data: bytes):
    return list(decode_records(data))


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in decode_records(data)]


def batch_bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


# ---------------------------------------------------------------- transactions (KIP-98)
def txn_batch(pid: int, seq: int, values: list[bytes], *, epoch: int = 0, key: bytes | None = b"k",
              transactional: bool = True) -> bytearray:
    """One batch of producer ``pid`` (transactional by default), one record per value."""
    return bytearray(build_batch([(key, v, (), 1_000) for v in values], producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=transactional))


def verified_append(log, records: bytearray, *, leader_epoch: int = 0, **kw):
    """``log.append`` as the leader's produce path does it for transactional records (KIP-890
    part 1): the producer of the first transactional batch gets a verification guard first (as
    if its transaction coordinator had just confirmed the partition) and the append presents it."""
    guard = None
    for _pos, h in iter_batches(records):
        if h.is_transactional and h.producer_id >= 0:
            guard = log.maybe_start_transaction_verification(h.producer_id, h.producer_epoch)
            break
    return log.append(records, leader_epoch=leader_epoch, verification_guard=guard, **kw)


def marker_batch(pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytearray:
    """A COMMIT/ABORT control batch as the transaction coordinator writes it."""
    from litemq.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch

    return bytearray(build_control_batch(base_offset=0, partition_leader_epoch=0,
                                         control_type=CONTROL_COMMIT if commit else CONTROL_ABORT,
                                         timestamp_ms=1_000, producer_id=pid, producer_epoch=epoch,
                                         coordinator_epoch=coordinator_epoch))


def read_committed(data: bytes, aborted: list[tuple[int, int]]) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of the records a Kafka read_committed consumer returns from ``data``
    given the fetch's aborted transactions ``(producer_id, first_offset)`` (Kafka
    ``CompletedFetch``: a producer is aborted from its aborted transaction's first offset until
    its ABORT marker; its transactional batches meanwhile are skipped; control batches never
    reach the application)."""
    from litemq.protocol.records import CONTROL_ABORT, decode_batch, parse_control_key

    queue = sorted(aborted, key=lambda a: a[1])
    aborted_pids: set[int] = set()
    out = []
    for pos, h in iter_batches(data):
        if h.producer_id >= 0:
            while queue and queue[0][1] <= h.base_offset + h.last_offset_delta:
                aborted_pids.add(queue.pop(0)[0])
            if h.is_control:
                recs = decode_batch(data, pos)[1]
                if recs and parse_control_key(recs[0].key)[1] == CONTROL_ABORT:
                    aborted_pids.discard(h.producer_id)
            elif h.is_transactional and h.producer_id in aborted_pids:
                continue
        if h.is_control:
            continue
        out += [(r.offset, r.value) for r in decode_batch(data, pos)[1]]
    return out
