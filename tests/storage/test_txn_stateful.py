"""Hypothesis state machine: the LSO, the aborted-transaction index and the read_committed view
of a PartitionLog against a pure model (KIP-98).

The model is the list of batches appended (kind, producer id, offsets, values); ongoing and
completed transactions are derived from it by replay. Steps: transactional appends for
producers 0..2, plain appends, COMMIT/ABORT markers, high watermark advances, rolls,
truncation, close+reopen, crash+reopen (optionally losing the recovery point so every segment
and its .txnindex is rebuilt), DeleteRecords.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from storage_helpers import marker_batch, read_committed, txn_batch, verified_append

from litemq.protocol.records import build_batch
from litemq.storage.config import LogConfig
from litemq.storage.log import AppendOrigin, PartitionLog

CFG = LogConfig(segment_bytes=400, index_interval_bytes=64, retention_ms=-1)
PRODUCERS = [0, 1, 2]


@dataclass
class Batch:
    kind: str  # "txn", "plain", "commit", "abort"
    pid: int
    base: int
    last: int
    values: list[bytes]
    seq: int = -1


def derive(batches: list[Batch]):
    """Replay: ``(ongoing {pid: first}, completed [(pid, first, last, aborted)], aborted data bases)``."""
    ongoing: dict[int, tuple[int, list[int]]] = {}
    completed = []
    aborted_bases: set[int] = set()
    for b in batches:
        if b.kind == "txn":
            ongoing.setdefault(b.pid, (b.base, []))[1].append(b.base)
        elif b.kind in ("commit", "abort"):
            first, members = ongoing.pop(b.pid, (b.base, []))
            completed.append((b.pid, first, b.base, b.kind == "abort"))
            if b.kind == "abort":
                aborted_bases.update(members)
    return {p: f for p, (f, _) in ongoing.items()}, completed, aborted_bases


class TxnLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="litemq-txn-stateful-"))
        self.dir = self.tmp / "topic.x-0"
        self.log = PartitionLog.open(self.dir, CFG)
        self.batches: list[Batch] = []
        self.start = self.leo = self.hw = 0
        self.counter = 0

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def _values(self, n):
        out = []
        for _ in range(n):
            self.counter += 1
            out.append(b"v%d" % self.counter)
        return out

    def _next_seq(self, pid):
        for b in reversed(self.batches):
            if b.pid == pid and b.kind == "txn":
                return b.seq + len(b.values)
        return 0

    def _add(self, kind, pid, info, values, seq=-1):
        assert info.first_offset == self.leo and not info.duplicate
        self.batches.append(Batch(kind, pid, info.first_offset, info.last_offset, values, seq))
        self.leo = info.last_offset + 1

    def _boundaries(self, lo, hi):
        """Batch boundaries (base offsets and the log end) in ``[lo, hi]``."""
        out = {b.base for b in self.batches if lo <= b.base <= hi}
        if lo <= self.leo <= hi:
            out.add(self.leo)
        return sorted(out) or [hi]

    def _model_lso(self, hw):
        ongoing, completed, _ = derive(self.batches)
        firsts = list(ongoing.values()) + [f for _, f, last, _ in completed if last >= hw]
        if not firsts:
            return hw
        return min(hw, max(self.start, min(firsts)))

    def _model_aborted(self, start, upper):
        start = max(start, self.start)
        _, completed, _ = derive(self.batches)
        return sorted(((p, f) for p, f, last, aborted in completed
                       if aborted and last >= start and f < upper), key=lambda t: t[1])

    def _truncate_model(self, offset):
        self.batches = [b for b in self.batches if b.base < offset]
        self.leo = offset
        self.hw = min(self.hw, offset)

    # ------------------------------------------------------------------ rules
    @rule(pid=st.sampled_from(PRODUCERS), n=st.integers(1, 3), size=st.integers(0, 60))
    def txn_append(self, pid, n, size):
        values = [v + b"x" * size for v in self._values(n)]
        seq = self._next_seq(pid)
        info = verified_append(self.log, txn_batch(pid, seq, values), leader_epoch=0)
        self._add("txn", pid, info, values, seq)

    @rule(n=st.integers(1, 3))
    def plain_append(self, n):
        values = self._values(n)
        info = self.log.append(bytearray(build_batch([(b"k", v, (), 1_000) for v in values])), leader_epoch=0)
        self._add("plain", -1, info, values)

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans())
    def end_txn(self, pid, commit):
        info = self.log.append(marker_batch(pid, commit), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
        self._add("commit" if commit else "abort", pid, info, [])

    @rule(data=st.data())
    def advance_hw(self, data):
        self.hw = data.draw(st.sampled_from(self._boundaries(self.hw, self.leo)))

    @rule()
    def roll(self):
        self.log.roll()

    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.sampled_from(self._boundaries(self.start, self.leo)))
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset <= self.start:  # the log restarts empty there
            self.batches = []
            self.start = offset
        self._truncate_model(offset)

    @rule()
    def reopen(self):
        self.log.close()
        self.log = PartitionLog.open(self.dir, CFG)

    @rule(full=st.booleans())
    def crash(self, full):
        self.log.flush()
        self.log = None  # no close: no clean-shutdown marker, no snapshot at the log end
        if full:  # nothing known durable: every segment re-validated, every .txnindex rebuilt
            for n in os.listdir(self.dir):
                if n.endswith(".txnindex") or n == "recovery-point-offset-checkpoint":
                    os.unlink(self.dir / n)
        self.log = PartitionLog.open(self.dir, CFG)
        assert self.log.log_end_offset == self.leo

    @rule(data=st.data())
    def delete_records(self, data):
        ongoing, completed, _ = derive(self.batches)
        spans = [(f, self.leo) for f in ongoing.values()] + [(f, last) for _, f, last, _ in completed]
        # not inside a transaction (see the storage docs: a log start cutting into a transaction
        # loses its first offset on a crash, as in Kafka)
        options = [x for x in self._boundaries(self.start, self.hw) if all(not f < x <= last for f, last in spans)]
        if not options:
            return
        x = data.draw(st.sampled_from(options))
        assert self.log.delete_records_before(x) == max(x, self.start)
        self.start = max(x, self.start)
        assert all(int(n[:20]) >= self.log.segments[0].base_offset
                   for n in os.listdir(self.dir) if n.endswith(".txnindex"))

    # ------------------------------------------------------------------ invariants
    @invariant()
    def lso_matches_model(self):
        log = self.log
        assert log.log_end_offset == self.leo and log.log_start_offset == self.start
        ongoing, _, _ = derive(self.batches)
        assert log.ongoing_transactions() == sorted(((p, 0, f) for p, f in ongoing.items()), key=lambda t: t[2])
        assert log.last_stable_offset(self.hw) == self._model_lso(self.hw)

    @invariant()
    def aborted_index_matches_model(self):
        lso = self._model_lso(self.hw)
        points = {self.start, self.hw, lso, self.leo, (self.start + self.leo) // 2}
        for s in points:
            for u in points | {self.leo + 1}:
                assert self.log.collect_aborted_transactions(s, u) == self._model_aborted(s, u), (s, u)

    @invariant()
    def read_committed_view_matches_model(self):
        lso = self._model_lso(self.hw)
        _, _, aborted_bases = derive(self.batches)
        want = [(b.base + i, v) for b in self.batches if b.kind in ("txn", "plain") and b.base < lso
                and b.base >= self.start and b.base not in aborted_bases for i, v in enumerate(b.values)]
        data = self.log.read_bytes(self.start, 10**9, max_offset=lso) if self.start < lso else b""
        got = read_committed(data, self.log.collect_aborted_transactions(self.start, lso))
        assert got == want


TxnLogMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
test_txn_log_state_machine = TxnLogMachine.TestCase
