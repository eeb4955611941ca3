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


def records(data: bytes):
    return list(decode_records(data))


def offsets(data: bytes) -> list[int]:
    return [r.offset for r in decode_records(data)]


def batch_bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]
