"""A replicated partition's log keeps Kafka offsets exact (issue 19): a Hypothesis state
machine over a real :class:`PartitionLog` on disk, against a model.

The log receives what a Raft follower writes: data batches and Raft-internal batches (a new
leader's LEADER_CHANGE no-op or a configuration change, KRAFT_VOTERS, both with control key
version 1) appended at the log end, such batches after a compaction gap (a follower copying its
leader's compacted log: the Raft entry starts at the log end, its batch above), truncation of a
divergent suffix, log start moves (retention on the leader, DeleteRecords, a follower following
its leader's log start), a fresh start at a leader's log start with the leader's count of
internal offsets below it, segment rolls, a clean close and reopen, and a crash (the object
dropped without close; its unflushed writes stay in the page cache as after SIGKILL) and
reopen. After every step: the log's translator maps every offset as the model does, and
:meth:`PartitionLog.read_for_clients` returns the data records at their Kafka offsets with no
internal batch.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from litemq.protocol.records import (
    CONTROL_KRAFT_VOTERS,
    CONTROL_LEADER_CHANGE,
    RAFT_INTERNAL_KEY_VERSION,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
)
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog

CONFIG = LogConfig(segment_bytes=600)  # a few batches per segment: rolls, whole-segment deletes


def _internal_batch(offset: int, control_type: int = CONTROL_LEADER_CHANGE) -> bytes:
    value = b"\x00\x00\x00\x01\x00\x00\x00\x01" if control_type == CONTROL_KRAFT_VOTERS else None
    return build_control_batch(base_offset=offset, partition_leader_epoch=1, control_type=control_type,
                               timestamp_ms=-1, key_version=RAFT_INTERNAL_KEY_VERSION, value=value)


class PartitionLogOffsets(RuleBasedStateMachine):
    @initialize()
    def open_log(self):
        self.tmp = Path(tempfile.mkdtemp())
        self.dir = self.tmp / "t-0"
        self.log = PartitionLog.open(self.dir, CONFIG)
        self.flags: list[bool] = []  # per Raft offset from 0: True = internal
        self.start = 0
        self.values: dict[int, bytes] = {}  # Raft offset -> value of each data record

    def teardown(self):
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _kafka(self, raft: int) -> int:
        return sum(1 for f in self.flags[:raft] if not f)

    @rule(count=st.integers(1, 4))
    def append_data(self, count):
        base = len(self.flags)
        recs = [Record(base + i, 1000 + base + i, None, b"v%d" % (base + i)) for i in range(count)]
        self.log.append_as_follower(build_batch(recs, base_offset=base, partition_leader_epoch=1))
        for i in range(count):
            self.values[base + i] = b"v%d" % (base + i)
        self.flags += [False] * count

    @rule(gap=st.integers(1, 6), count=st.integers(1, 3), internal=st.booleans())
    def append_after_compaction_gap(self, gap, count, internal):
        """A follower copying its leader's compacted log: the Raft entry starts at the log end,
        its batch ``gap`` offsets above (data records the leader's cleaner removed)."""
        end = len(self.flags)
        base = end + gap
        if internal:
            self.log.append_as_follower(_internal_batch(base), first_offset=end)
            self.flags += [False] * gap + [True]
            return
        recs = [Record(base + i, 1000 + base + i, None, b"v%d" % (base + i)) for i in range(count)]
        info = self.log.append_as_follower(build_batch(recs, base_offset=base, partition_leader_epoch=1),
                                           first_offset=end)
        assert (info.first_offset, info.last_offset) == (base, base + count - 1)
        for i in range(count):
            self.values[base + i] = b"v%d" % (base + i)
        self.flags += [False] * (gap + count)

    def _reopened(self):
        """After a reopen the log ends after its last batch: a truncation inside a compaction gap
        (log end between two batches) leaves the gap's offsets there, which hold nothing."""
        end = self.log.log_end_offset
        assert self.start <= end <= len(self.flags)
        assert not any(self.flags[end:]) and not any(o >= end for o in self.values)
        del self.flags[max(end, self.start):]

    @rule(control_type=st.sampled_from([CONTROL_LEADER_CHANGE, CONTROL_KRAFT_VOTERS]))
    def append_internal(self, control_type):
        self.log.append_as_follower(_internal_batch(len(self.flags), control_type))
        self.flags.append(True)

    @rule(data=st.data())
    def truncate(self, data):
        to = data.draw(st.integers(self.start + 1, len(self.flags))) if len(self.flags) > self.start else None
        if to is None:
            return
        self.log.truncate_to(to)
        to = self.log.log_end_offset  # never splits a batch: may go to the batch's base
        del self.flags[to:]
        self.values = {o: v for o, v in self.values.items() if o < to}

    @rule(data=st.data())
    def move_log_start(self, data):
        to = data.draw(st.integers(self.start, len(self.flags)))
        self.log.delete_records_before(to)
        self.start = max(self.start, to)

    @rule()
    def retention(self):
        self.log.roll()
        n = len(self.log.segments) - 1
        if n > 0:
            new_start = self.log.segments[n].base_offset
            self.log.delete_records_before(new_start)
            self.start = max(self.start, new_start)

    @rule(gap=st.integers(1, 5), internal=st.lists(st.booleans(), min_size=5, max_size=5))
    def start_afresh(self, gap, internal):
        self.flags += internal[:gap]
        self.start = len(self.flags)
        self.log.truncate_fully_and_start_at(self.start, sum(self.flags[: self.start]))
        self.values = {}

    @rule()
    def clean_reopen(self):
        self.log.close()
        self.log = PartitionLog.open(self.dir, CONFIG)
        self._reopened()

    @rule()
    def crash_reopen(self):
        self.log = PartitionLog.open(self.dir, CONFIG)  # the old object is dropped unclosed
        self._reopened()

    @invariant()
    def translates_as_the_model(self):
        t = self.log.translator
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == len(self.flags)
        assert t.kafka_offset(self.start) == self._kafka(self.start)
        assert t.kafka_offset(len(self.flags)) == self._kafka(len(self.flags))
        for raft in range(self.start, len(self.flags)):
            if not self.flags[raft]:
                assert t.to_kafka(raft) == self._kafka(raft)
                assert t.to_raft(self._kafka(raft)) == raft

    @invariant()
    def clients_see_kafka_offsets(self):
        if self.start >= len(self.flags):
            return
        data = self.log.read_for_clients(self.start, 1 << 20).to_bytes()
        want = [(self._kafka(o), v) for o, v in sorted(self.values.items()) if o >= self.start]
        got = [(r.offset, r.value) for r in decode_records(data) if r.offset >= self._kafka(self.start)]
        assert got == want
        assert not any(h.is_control for _, h in iter_batches(data))


PartitionLogOffsets.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_partition_log_offsets = PartitionLogOffsets.TestCase
