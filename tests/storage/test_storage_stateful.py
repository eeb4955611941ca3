"""Hypothesis state machine: PartitionLog against an in-memory model of the log.

Steps: append, read, roll, flush, commit (the high watermark moves up), truncate_to (at or above
the high watermark, as Raft truncates only uncommitted entries), truncate_fully_and_start_at,
retention by bytes, delete_records_before, compaction (below the high watermark), close+reopen,
crash+reopen (optionally losing the unflushed tail at a random byte, with or without garbage
appended).

The falsifying examples Hypothesis found are kept below as explicit tests (``test_regression_*``),
not only in ``.hypothesis/``.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from litemq.protocol.records import build_batch, decode_records, iter_batches
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog

CFG = LogConfig(segment_bytes=700, index_interval_bytes=64, retention_ms=-1,
                cleanup_policy="compact,delete", min_cleanable_dirty_ratio=0.0,
                delete_retention_ms=10**12)
KEYS = [b"a", b"b", b"c", b"d", b"e"]


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="litemq-stateful-"))
        self.dir = self.tmp / "topic.x-0"
        self.log = PartitionLog.open(self.dir, CFG)
        self.model: dict[int, tuple[bytes, bytes]] = {}  # offset -> (key, value)
        self.batch_of: dict[int, int] = {}  # offset -> base offset of its batch
        self.start = 0
        self.leo = 0
        self.epoch = 0
        self.hw = 0  # high watermark: offsets below it are committed, never truncated
        self.compacted = False
        self.counter = 0

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ rules
    @rule(n=st.integers(1, 6), keys=st.lists(st.sampled_from(KEYS), min_size=6, max_size=6),
          bump=st.booleans(), size=st.integers(0, 120))
    def append(self, n, keys, bump, size):
        if bump:
            self.epoch += 1
        recs = []
        for i in range(n):
            self.counter += 1
            recs.append((keys[i], b"%d:" % self.counter + b"x" * size, (), 1_000 + self.counter))
        info = self.log.append(bytearray(build_batch(recs)), leader_epoch=self.epoch)
        assert (info.first_offset, info.last_offset) == (self.leo, self.leo + n - 1)
        for i, (k, v, _, _) in enumerate(recs):
            self.model[self.leo + i] = (k, v)
            self.batch_of[self.leo + i] = self.leo
        self.leo += n

    @rule(data=st.data(), max_bytes=st.integers(1, 3000))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(self.start, self.leo))
        res = self.log.read(offset, max_bytes)
        if offset == self.leo:
            assert res.size == 0
            return
        blob = res.to_bytes()
        assert len(blob) == res.size
        headers = [h for _, h in iter_batches(blob)]
        assert headers, "at least one batch"
        first = headers[0]
        assert first.base_offset == res.first_offset
        assert first.base_offset + first.last_offset_delta >= offset
        if not self.compacted:
            assert first.base_offset <= offset
        if len(headers) > 1:
            assert res.size <= max_bytes
        for r in decode_records(blob):
            if r.offset >= self.start:
                assert self.model[r.offset] == (r.key, r.value)

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        self.log.flush()
        assert self.log.flushed_offset == self.leo

    @rule(data=st.data())
    def commit(self, data):
        self.hw = data.draw(st.integers(self.hw, self.leo))

    @rule(data=st.data())
    def truncate_to(self, data):
        offset = data.draw(st.integers(max(self.hw, self.start), self.leo))
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset <= self.start:
            self.model.clear()
            self.start = self.leo = offset
            return
        # a batch is never split: truncation goes back to the base of the batch holding offset
        self._model_truncate(max(self.batch_of.get(offset, offset), self.start))

    @rule(delta=st.integers(0, 50))
    def truncate_fully(self, delta):
        offset = self.leo + delta
        self.log.truncate_fully_and_start_at(offset)
        self.model.clear()
        self.start = self.leo = self.hw = offset

    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.start, self.leo))
        assert self.log.delete_records_before(offset) == max(offset, self.start)
        self._model_start(max(offset, self.start))

    @rule(limit=st.integers(0, 3000))
    def retention_bytes(self, limit):
        self.log.update_config(dataclasses.replace(CFG, retention_bytes=limit))
        self.log.enforce_retention(10**12)
        self.log.update_config(CFG)
        new_start = self.log.log_start_offset
        assert self.start <= new_start <= self.leo
        assert new_start == self.start or new_start == self.log.segments[0].base_offset
        self._model_start(new_start)

    @rule()
    def compact(self):
        self.log.compact(now_ms=10**12, high_watermark=self.hw)
        self.compacted = True

    @rule()
    def reopen(self):
        self.log.close()
        self.log = PartitionLog.open(self.dir, CFG)

    @rule(data=st.data(), cut=st.booleans(), garbage=st.binary(min_size=0, max_size=80))
    def crash(self, data, cut, garbage):
        log = self.log
        flushed = log.flushed_offset
        seg = log.active_segment
        path, size = seg.log_path, seg.size
        if flushed <= seg.base_offset:
            safe = 0
        else:
            found = seg.find(flushed)
            safe = found[0] if found else size
        del log, seg
        self.log = None
        if cut and size > safe:
            pos = data.draw(st.integers(safe, size))
            with open(path, "r+b") as f:
                f.truncate(pos)
                f.seek(pos)
                f.write(garbage)
        elif garbage:
            with open(path, "ab") as f:
                f.write(garbage)
        self.log = PartitionLog.open(self.dir, CFG)
        new_leo = self.log.log_end_offset
        assert max(flushed, self.start) <= new_leo <= self.leo
        if new_leo < self.leo:
            self._model_truncate(new_leo)

    # ------------------------------------------------------------------ model helpers
    def _model_truncate(self, offset):
        for o in [o for o in self.model if o >= offset]:
            del self.model[o]
        self.leo = offset
        self.hw = min(self.hw, offset)
        if offset < self.start:
            self.start = offset

    def _model_start(self, offset):
        for o in [o for o in self.model if o < offset]:
            del self.model[o]
        self.start = offset
        self.hw = max(self.hw, offset)  # the broker raises the high watermark to the log start

    # ------------------------------------------------------------------ invariants
    @invariant()
    def matches_model(self):
        log = self.log
        assert log.log_end_offset == self.leo
        assert log.log_start_offset == self.start
        got = {r.offset: (r.key, r.value) for r in decode_records(log.read_bytes(self.start, 10**9))
               if r.offset >= self.start}
        if self.start < self.leo and not self.compacted:
            assert got == self.model
        else:
            for o, kv in got.items():
                assert self.model[o] == kv
            latest = {}
            for o in sorted(self.model):
                latest[self.model[o][0]] = o
            for o in latest.values():
                assert o in got, f"latest record of a key at {o} lost by compaction"


LogMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=35, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TestPartitionLogStateful = LogMachine.TestCase


# ---------------------------------------------------------------------- falsifying examples
class _Drawn:
    """Stands in for ``st.data()`` when a recorded example is replayed: draws the given values."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def draw(self, strategy):
        return self.values.pop(0)


def _replay(steps: list[tuple[str, dict]]) -> None:
    """Run ``steps`` (rule name, arguments) on a fresh :class:`LogMachine`, checking the
    invariants after each step as Hypothesis does."""
    machine = LogMachine()
    try:
        machine.matches_model()
        for name, kwargs in steps:
            getattr(machine, name)(**kwargs)
            machine.matches_model()
    finally:
        machine.teardown()


A6 = [b"a"] * 6


@pytest.mark.parametrize("truncate_at", [1, 2])
def test_regression_compaction_then_truncation_of_the_uncommitted_tail(truncate_at):
    """Found by the state machine (issue 17): two records of key ``a`` then a third, roll,
    compact, truncate. Compaction used to clean the whole inactive segment, the uncommitted
    offset 2 included, dropping 0 and 1 as superseded by it; truncating 2 away then lost key
    ``a`` entirely (``latest record of a key at 1 lost by compaction``), and truncating at 1
    left the log end at 1 inside the removed batch (``log_end_offset == leo``: ``1 == 0``).
    Compaction now stops below the high watermark (here 0: nothing is committed)."""
    _replay([("append", dict(n=2, keys=A6, bump=False, size=0)),
             ("append", dict(n=1, keys=A6, bump=False, size=0)),
             ("roll", {}), ("compact", {}),
             ("truncate_to", dict(data=_Drawn(truncate_at)))])


def test_regression_compaction_below_the_high_watermark_then_truncation_above_it():
    """The same log committed up to 2 (mid-segment: not cleanable) and then up to 3 (the
    segment is cleaned); truncations at or above the high watermark keep every latest value."""
    _replay([("append", dict(n=2, keys=A6, bump=False, size=0)),
             ("append", dict(n=1, keys=A6, bump=False, size=0)),
             ("roll", {}), ("commit", dict(data=_Drawn(2))), ("compact", {}),
             ("truncate_to", dict(data=_Drawn(2))),
             ("append", dict(n=2, keys=A6, bump=True, size=0)),
             ("roll", {}), ("commit", dict(data=_Drawn(4))), ("compact", {}),
             ("truncate_to", dict(data=_Drawn(4)))])
