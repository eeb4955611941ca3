"""The offset translator (litemq.storage.offset_translator) against a model.

The model is the whole history of the log as one flag per Raft offset (internal or data) from
offset 0, plus the log start: a record's Kafka offset is the number of data offsets before it.
The state machine appends data and Raft-internal batches, truncates the suffix (divergence),
moves the log start (retention, DeleteRecords), starts afresh beyond the end (a follower behind
its leader's log start), and crashes/reopens through the checkpoint; after every step every
offset of the log must translate both ways exactly as the model says.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from litemq.storage.checkpoints import read_checkpoint, write_checkpoint
from litemq.storage.offset_translator import OffsetTranslator, TranslatorCheckpointError


class TranslatorMachine(RuleBasedStateMachine):
    @initialize()
    def empty_log(self):
        self.flags: list[bool] = []  # per Raft offset from 0: True = internal
        self.start = 0
        self.t = OffsetTranslator()

    @rule(count=st.integers(1, 5))
    def append_data(self, count):
        self.t.append(len(self.flags), count, internal=False)
        self.flags += [False] * count

    @rule()
    def append_internal(self):  # a new leader's LEADER_CHANGE no-op, a configuration batch
        self.t.append(len(self.flags), 1, internal=True)
        self.flags.append(True)

    @rule(data=st.data())
    def truncate(self, data):
        to = data.draw(st.integers(self.start, len(self.flags)))
        self.t.truncate(to)
        del self.flags[to:]

    @rule(data=st.data())
    def prefix_truncate(self, data):
        to = data.draw(st.integers(0, len(self.flags)))
        self.t.prefix_truncate(to)
        self.start = max(self.start, to)

    @rule(gap=st.integers(1, 6), internal=st.lists(st.booleans(), min_size=6, max_size=6))
    def start_afresh_beyond_end(self, gap, internal):
        # the leader's log (not this replica's) had these offsets; the follower restarts at
        # the leader's log start with the leader's delta there
        self.flags += internal[:gap]
        self.start = len(self.flags)
        self.t.reset(self.start, sum(self.flags))

    @rule()
    def crash_and_reopen(self):
        entries = self.t.checkpoint_entries()
        self.t = OffsetTranslator.from_checkpoint_entries(entries)

    @invariant()
    def matches_model(self):
        t = self.t
        assert t.base_raft_offset == self.start
        assert t.end_raft_offset == len(self.flags)
        kafka = sum(1 for f in self.flags[:self.start] if not f)
        assert t.base_kafka_offset == kafka
        for r in range(self.start, len(self.flags)):
            assert t.to_kafka(r) == kafka, f"Raft offset {r}"
            assert t.is_internal(r) == self.flags[r]
            if not self.flags[r]:
                assert t.to_raft(kafka) == r
                kafka += 1
        assert t.to_kafka(len(self.flags)) == kafka == t.end_kafka_offset
        assert t.to_raft(kafka) == len(self.flags)


TestTranslatorMachine = TranslatorMachine.TestCase
TestTranslatorMachine.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)


def test_first_record_is_offset_zero_after_a_leader_change_batch():
    t = OffsetTranslator()
    t.append(0, 1, internal=True)  # the first leader's LEADER_CHANGE
    t.append(1, 3, internal=False)  # records 0, 1, 2
    t.append(4, 1, internal=True)  # a failover
    t.append(5, 2, internal=False)  # records 3, 4
    assert [t.to_kafka(r) for r in range(8)] == [0, 0, 1, 2, 3, 3, 4, 5]
    assert [t.to_raft(k) for k in range(6)] == [1, 2, 3, 5, 6, 7]
    assert t.end_kafka_offset == 5
    assert t.delta(5) == 2


def test_checkpoint_round_trip_on_disk(tmp_path):
    t = OffsetTranslator()
    for internal, n in [(True, 1), (False, 4), (True, 1), (True, 1), (False, 2)]:
        t.append(t.end_raft_offset, n, internal)
    t.prefix_truncate(3)
    path = tmp_path / "offset-translator-checkpoint"
    write_checkpoint(path, t.checkpoint_entries())
    assert OffsetTranslator.from_checkpoint_entries(read_checkpoint(path, 2)) == t


@pytest.mark.parametrize("entries", [
    [],
    [(0, 0)],
    [(0, 0), (5, 0)],                    # the end entry is marked by -1
    [(4, 5), (6, -1)],                   # delta above the base
    [(0, 0), (6, -1), (2, 0), (1, 1)],   # not ascending
    [(0, 0), (6, -1), (2, 1)],           # wrong delta (self-check)
    [(0, 0), (3, -1), (4, 0)],           # internal offset beyond the end
])
def test_bad_checkpoints_are_refused(entries):
    with pytest.raises(TranslatorCheckpointError):
        OffsetTranslator.from_checkpoint_entries(entries)


@given(st.integers(0, 50))
def test_out_of_range_offsets_raise(n):
    t = OffsetTranslator(10, 2, 10 + n)
    with pytest.raises(ValueError):
        t.to_kafka(9)
    with pytest.raises(ValueError):
        t.to_kafka(11 + n)
    with pytest.raises(ValueError):
        t.to_raft(t.end_kafka_offset + 1)
    with pytest.raises(ValueError):
        t.append(9 + n, 1, False)
