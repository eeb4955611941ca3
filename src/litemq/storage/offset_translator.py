"""Offset translation between a replicated partition's Raft log and its Kafka offsets.

In a LiteMQ cluster the Raft log *is* the partition log, but Raft's own batches (a new leader's
LEADER_CHANGE no-op, membership changes) must take no Kafka offset: clients expect the first
record at offset 0 and offsets dense but for transaction markers. Redpanda solves the same
problem with an offset translator (``raft/offset_translator.h``); this is LiteMQ's.

Vocabulary:

- **Raft offset**: the position in the Raft log (= the stored batches' base offsets, what the
  Raft core, the segment files and their indexes use). Every batch takes ``count`` of them.
- **internal offsets**: the Raft offsets taken by Raft-internal batches.
- **Kafka offset** of a Raft offset ``r``: ``r`` minus the internal offsets below ``r``. For a
  data record that is its offset as clients see it; for an internal offset it is the Kafka
  offset the next data record will get (so a high watermark or log end translates to the Kafka
  high watermark or log end).

The translator covers Raft offsets ``[base_raft_offset, end_raft_offset]``: ``base`` is the log
start offset (what lies below was removed by retention, DeleteRecords or a snapshot install,
and only the count of internal offsets below it is kept, ``base_delta``) and ``end`` the log end
offset. It is pure state (no disk, no clock): the partition log appends, truncates and persists
it through :meth:`checkpoint_entries` / :meth:`from_checkpoint_entries`.

Costs: O(log n) lookups in both directions, n = internal offsets above the base (one per leader
change and membership change, so small).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from litemq.protocol.records import (
    CONTROL_FLAG,
    LOG_OVERHEAD_BYTES,
    is_raft_internal_batch,
    iter_batches,
    set_base_offset,
)

__all__ = ["OffsetTranslator", "TranslatorCheckpointError", "rewrite_for_clients"]


class TranslatorCheckpointError(ValueError):
    """A checkpoint that does not describe a valid translator (the log must rebuild it)."""


class OffsetTranslator:
    """Raft offset <-> Kafka offset mapping of one partition log (see module docstring).

    Args:
        base_raft_offset: first Raft offset covered (the log start offset), >= 0.
        base_delta: internal offsets below ``base_raft_offset`` (0 <= base_delta <= base).
        end_raft_offset: the log end offset (>= base); ``None`` = ``base_raft_offset``.
        internal_offsets: the internal Raft offsets in ``[base, end)``.

    Raises:
        ValueError: inconsistent arguments.
    """

    __slots__ = ("base_raft_offset", "base_delta", "end_raft_offset", "_internal", "_kafka_after")

    def __init__(self, base_raft_offset: int = 0, base_delta: int = 0, end_raft_offset: int | None = None,
                 internal_offsets: list[int] | tuple[int, ...] = ()) -> None:
        end = base_raft_offset if end_raft_offset is None else end_raft_offset
        if not 0 <= base_delta <= base_raft_offset <= end:
            raise ValueError(f"need 0 <= base_delta ({base_delta}) <= base ({base_raft_offset}) <= end ({end})")
        internal = sorted(internal_offsets)
        if len(set(internal)) != len(internal) or (internal and not base_raft_offset <= internal[0] <= internal[-1] < end):
            raise ValueError(f"internal offsets {internal[:5]}... are not distinct offsets in [{base_raft_offset}, {end})")
        self.base_raft_offset = base_raft_offset
        self.base_delta = base_delta
        self.end_raft_offset = end
        self._internal: list[int] = internal
        # _kafka_after[i]: the Kafka offset of the first data record after the i-th internal
        # offset; non-decreasing, so Kafka -> Raft is one bisect.
        self._kafka_after: list[int] = [o - base_delta - i for i, o in enumerate(internal)]

    # ------------------------------------------------------------------ queries
    @property
    def internal_offsets(self) -> tuple[int, ...]:
        """The internal Raft offsets in ``[base, end)``, ascending."""
        return tuple(self._internal)

    @property
    def end_kafka_offset(self) -> int:
        """The Kafka log end offset (the next data record's Kafka offset)."""
        return self.end_raft_offset - self.base_delta - len(self._internal)

    @property
    def base_kafka_offset(self) -> int:
        """The Kafka log start offset."""
        return self.base_raft_offset - self.base_delta

    def delta(self, raft_offset: int) -> int:
        """Internal offsets below ``raft_offset`` (``base <= raft_offset <= end``).

        Raises:
            ValueError: ``raft_offset`` outside ``[base, end]``.
        """
        self._check_raft(raft_offset)
        return self.base_delta + bisect_left(self._internal, raft_offset)

    def to_kafka(self, raft_offset: int) -> int:
        """The Kafka offset of ``raft_offset`` (for an internal offset: of the next data record).

        Raises:
            ValueError: ``raft_offset`` outside ``[base, end]``.
        """
        return raft_offset - self.delta(raft_offset)

    def to_raft(self, kafka_offset: int) -> int:
        """The Raft offset of the data record at ``kafka_offset``; for the Kafka log end offset,
        the Raft log end offset.

        Raises:
            ValueError: ``kafka_offset`` outside ``[base_kafka_offset, end_kafka_offset]``.
        """
        if not self.base_kafka_offset <= kafka_offset <= self.end_kafka_offset:
            raise ValueError(f"Kafka offset {kafka_offset} outside [{self.base_kafka_offset}, "
                             f"{self.end_kafka_offset}]")
        return kafka_offset + self.base_delta + bisect_right(self._kafka_after, kafka_offset)

    def kafka_offset(self, raft_offset: int) -> int:
        """:meth:`to_kafka` for any ``raft_offset``: below the base it subtracts ``base_delta``
        (offsets there are gone), above the end the delta at the end (as if only data followed).
        The edges of the broker (Produce, Fetch, ListOffsets, ...) translate through this."""
        if not self._internal:
            return raft_offset - self.base_delta
        if raft_offset <= self.base_raft_offset:
            return raft_offset - self.base_delta
        return raft_offset - self.base_delta - bisect_left(self._internal, raft_offset)

    def raft_offset(self, kafka_offset: int) -> int:
        """:meth:`to_raft` for any ``kafka_offset``: below the Kafka log start the base delta
        is added, past the Kafka log end the delta at the end."""
        if not self._internal:
            return kafka_offset + self.base_delta
        if kafka_offset <= self.base_kafka_offset:
            return kafka_offset + self.base_delta
        return kafka_offset + self.base_delta + bisect_right(self._kafka_after, kafka_offset)

    def is_identity_below(self, raft_offset: int) -> bool:
        """Whether every Raft offset below ``raft_offset`` is its own Kafka offset (no
        internal offset below it, none below the base): reads need no rewrite then."""
        return self.base_delta == 0 and (not self._internal or self._internal[0] >= raft_offset)

    def is_internal(self, raft_offset: int) -> bool:
        """Whether ``raft_offset`` is taken by a Raft-internal batch."""
        i = bisect_left(self._internal, raft_offset)
        return i < len(self._internal) and self._internal[i] == raft_offset

    def _check_raft(self, raft_offset: int) -> None:
        if not self.base_raft_offset <= raft_offset <= self.end_raft_offset:
            raise ValueError(f"Raft offset {raft_offset} outside [{self.base_raft_offset}, {self.end_raft_offset}]")

    # ------------------------------------------------------------------ changes
    def append(self, raft_base_offset: int, count: int, internal: bool) -> None:
        """A batch of ``count`` offsets appended at ``raft_base_offset`` (= the log end).

        Raises:
            ValueError: not at the end, or ``count < 1``.
        """
        if raft_base_offset != self.end_raft_offset or count < 1:
            raise ValueError(f"append of {count} at {raft_base_offset}; the end is {self.end_raft_offset}")
        if internal:
            for o in range(raft_base_offset, raft_base_offset + count):
                self._kafka_after.append(o - self.base_delta - len(self._internal))
                self._internal.append(o)
        self.end_raft_offset = raft_base_offset + count

    def extend(self, raft_end_offset: int) -> None:
        """Data (or a compaction gap) up to ``raft_end_offset`` was appended: only the end moves.

        Raises:
            ValueError: ``raft_end_offset`` below the end.
        """
        if raft_end_offset < self.end_raft_offset:
            raise ValueError(f"extend to {raft_end_offset}; the end is {self.end_raft_offset}")
        self.end_raft_offset = raft_end_offset

    def truncate(self, raft_offset: int) -> None:
        """The log was truncated to ``raft_offset`` (everything at or after it removed).

        Raises:
            ValueError: ``raft_offset`` outside ``[base, end]``.
        """
        self._check_raft(raft_offset)
        i = bisect_left(self._internal, raft_offset)
        del self._internal[i:]
        del self._kafka_after[i:]
        self.end_raft_offset = raft_offset

    def prefix_truncate(self, raft_offset: int) -> None:
        """The log start moved up to ``raft_offset`` (retention, DeleteRecords, snapshot);
        a no-op at or below the base.

        Raises:
            ValueError: ``raft_offset`` beyond the end (use :meth:`reset`).
        """
        if raft_offset <= self.base_raft_offset:
            return
        self._check_raft(raft_offset)
        i = bisect_left(self._internal, raft_offset)
        self.base_delta += i
        del self._internal[:i]
        del self._kafka_after[:i]  # unchanged values: each depends on base_delta + index only
        self.base_raft_offset = raft_offset

    def reset(self, raft_offset: int, delta: int) -> None:
        """The log was emptied and restarts at ``raft_offset`` with ``delta`` internal offsets
        below it (a follower starting afresh at its leader's log start, which the leader's
        translator gives: ``delta(raft_offset)``).

        Raises:
            ValueError: ``delta`` not in ``[0, raft_offset]``.
        """
        if not 0 <= delta <= raft_offset:
            raise ValueError(f"delta {delta} at Raft offset {raft_offset}")
        self.base_raft_offset = self.end_raft_offset = raft_offset
        self.base_delta = delta
        self._internal.clear()
        self._kafka_after.clear()

    # ------------------------------------------------------------------ persistence
    def checkpoint_entries(self) -> list[tuple[int, int]]:
        """``[(base, base_delta), (end, -1)] + [(internal offset, delta below it), ...]``:
        integer pairs for :func:`litemq.storage.checkpoints.write_checkpoint`; the deltas make
        the file self-checking (:meth:`from_checkpoint_entries`)."""
        out = [(self.base_raft_offset, self.base_delta), (self.end_raft_offset, -1)]
        out += [(o, self.base_delta + i) for i, o in enumerate(self._internal)]
        return out

    @classmethod
    def from_checkpoint_entries(cls, entries: list[tuple[int, ...]]) -> "OffsetTranslator":
        """Inverse of :meth:`checkpoint_entries`.

        Raises:
            TranslatorCheckpointError: missing, inconsistent or unsorted entries.
        """
        if len(entries) < 2 or entries[1][1] != -1:
            raise TranslatorCheckpointError("offset translator checkpoint lacks its base and end entries")
        (base, base_delta), (end, _) = entries[0], entries[1]
        internal = []
        for i, (o, d) in enumerate(entries[2:]):
            if d != base_delta + i:
                raise TranslatorCheckpointError(f"internal offset {o}: delta {d}, expected {base_delta + i}")
            internal.append(o)
        if internal != sorted(internal):
            raise TranslatorCheckpointError("internal offsets are not ascending")
        try:
            return cls(base, base_delta, end, internal)
        except ValueError as exc:
            raise TranslatorCheckpointError(str(exc)) from None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, OffsetTranslator) and self.base_raft_offset == other.base_raft_offset
                and self.base_delta == other.base_delta and self.end_raft_offset == other.end_raft_offset
                and self._internal == other._internal)

    def __repr__(self) -> str:
        return (f"OffsetTranslator(base={self.base_raft_offset}, base_delta={self.base_delta}, "
                f"end={self.end_raft_offset}, internal={self._internal})")



def rewrite_for_clients(data: bytearray, translator: OffsetTranslator) -> bytearray | bytes:
    """Batches read from a Raft-offset log as a Kafka client must see them: every batch's base
    offset rewritten to its Kafka offset (the base offset lies outside the CRC, so the CRC
    holds) and the Raft-internal batches left out. ``data``: whole batches, as
    :meth:`PartitionLog.read` returns them, in a ``bytearray`` that is rewritten in place and
    returned (``bytes`` when internal batches in the middle had to be cut out). Cost: one
    header parse per batch; records are not decoded (an internal-batch check decodes control
    batches only).
    """
    out = data
    keep_from = 0
    parts: list[bytes] = []
    for pos, h in iter_batches(out):
        if h.attributes & CONTROL_FLAG and is_raft_internal_batch(out, pos, h):
            if pos > keep_from:
                parts.append(bytes(out[keep_from:pos]))
            keep_from = pos + h.batch_length + LOG_OVERHEAD_BYTES
            continue
        set_base_offset(out, pos, translator.kafka_offset(h.base_offset))
    if not parts:
        if keep_from:
            del out[:keep_from]
        return out
    parts.append(bytes(out[keep_from:]))
    return b"".join(parts)
