"""One Raft group on one broker: a :class:`~litemq.raft.RaftNode` over a PartitionLog.

Every replicated log in a cluster (each topic partition, and the ``__cluster_metadata``
log) is one :class:`RaftGroup`. The Raft core is pure (:mod:`litemq.raft`); this module is
the caller side of its Ready contract (docs/raft.md):

1. install a snapshot (``truncate_fully_and_start_at``), truncate a divergent suffix
   (``truncate_to``, the epoch cache follows), append entries as follower batches;
2. persist the hard state (term, vote) and fsync the log on the broker's fsync thread
   (:class:`~litemq.replica.sync_queue.SyncQueue`: one hand-off for all groups' fsyncs);
3. send the messages (a leader's Append/Heartbeat go out at once: thesis §10.2.1 lets a
   leader write its own log in parallel; votes and follower acks wait for the fsync);
4. hand committed entries / the new high watermark to the owner, then ``advance``.

Vocabulary: Raft log index = the log's offset, term = the batches' ``partitionLeaderEpoch``,
commit index + 1 = high watermark (in log offsets). A new leader's no-op is a Raft-internal
batch (LEADER_CHANGE, control key version 1, no timestamp): it takes a log offset but no Kafka
offset (the log's :class:`~litemq.storage.offset_translator.OffsetTranslator`, issue 19), and a
partition's InstallSnapshot carries the leader's count of internal offsets below its log start
(8 bytes, big-endian) so a follower starting afresh translates as its leader does. A
configuration change (a ``CONFIG`` entry: voters and learners) is a Raft-internal batch too
(KRAFT_VOTERS, control key version 1, value = the entry's payload), read back as a ``CONFIG``
entry, so a restarted replica rebuilds its configuration from its log; the configuration at or
below the commit index is also kept in the state file (``conf``), written with an fsync before
the high watermark that commits it is published (so before retention or DeleteRecords can move
the log start past it) and before a snapshot install empties the log: it is the configuration
at the log start that :meth:`PartitionLogView.snapshot` reports. The leader's produce path (:meth:`RaftGroup.leader_append`)
appends the client's batches to the log first (offsets, epoch and producer sequences are
checked and stamped by :meth:`PartitionLog.append`), then proposes one entry per batch with the
stamped bytes as payload, so followers receive exactly the leader's bytes.

Only one Ready per group is in flight; the next one is taken when the fsync of the previous one
completes, which batches everything that arrived meanwhile (group commit).
"""

from __future__ import annotations

import json
import logging
import os
import random
import struct
import threading
import time
from bisect import bisect_right
from pathlib import Path
from typing import Callable

from litemq.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from litemq.protocol.records import (
    CONTROL_KRAFT_VOTERS,
    NO_TIMESTAMP,
    RAFT_INTERNAL_KEY_VERSION,
    build_control_batch,
    iter_batches,
    raft_internal_record,
)
from litemq.raft import (
    ConfState,
    Entry,
    EntryKind,
    HardState,
    InstallSnapshot,
    NotLeader,
    ProposalDropped,
    RaftConfig,
    RaftNode,
    Ready,
    Snapshot,
)
from litemq.raft.messages import Append, Heartbeat, TimeoutNow
from litemq.replica.sync_queue import SyncQueue
from litemq.storage.log import AppendInfo, AppendOrigin, PartitionLog
from litemq.storage.producer_state import VerificationGuard

log = logging.getLogger(__name__)

RAFT_STATE_FILE = "raft-state.json"
CONTROL_LEADER_CHANGE = 2
"""Kafka ``ControlRecordType.LEADER_CHANGE``: the type of a new leader's no-op batch (as KRaft)."""
_DELTA = struct.Struct(">q")

_LEADER_MESSAGES = (Append, Heartbeat, TimeoutNow, InstallSnapshot)


class PartitionLogView:
    """:class:`litemq.raft.LogView` over a :class:`PartitionLog` and its leader-epoch cache.

    ``stable_end`` is the log end offset the Raft core may rely on: entries it handed out in
    a Ready and that were persisted. The physical log may be ahead of it (the leader's produce
    path appends before the core's Ready is handled); the core never sees that tail here,
    it holds those entries in its unstable tail.
    """

    def __init__(self, plog: PartitionLog, voters, snapshot_term: int | None = None, learners=()) -> None:
        self.plog = plog
        self.stable_end = plog.log_end_offset
        self.voters = frozenset(voters)
        self.learners = frozenset(learners)
        """The configuration reported at the log start (see the module docstring)."""
        self.snapshot_term = snapshot_term
        self.snapshot_data: bytes | None = None

    @property
    def log_start_offset(self) -> int:
        return self.plog.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.stable_end

    def _start_term(self) -> int:
        """Term of ``log_start_offset - 1`` (the snapshot term)."""
        start = self.plog.log_start_offset
        if start == 0:
            return 0
        cache = self.plog.leader_epoch_cache
        e = cache.epoch_for_offset(start - 1)
        if e >= 0:
            return e
        if self.snapshot_term is not None:
            return self.snapshot_term
        # Retention moved the log start and the cache was cut there: the first epoch is the
        # best knowledge left (a mismatch only costs a snapshot install, never safety: offsets
        # below the log start are committed everywhere).
        return cache.epochs[0] if cache.epochs else 0

    def term_at(self, offset: int) -> int | None:
        start = self.plog.log_start_offset
        if offset < start - 1 or offset >= self.stable_end:
            return None
        if offset == start - 1:
            return self._start_term()
        return max(self.plog.leader_epoch_cache.epoch_for_offset(offset), 0)

    def end_offset_for_epoch(self, epoch: int) -> int:
        start = self.plog.log_start_offset
        if self._start_term() > epoch:
            return start
        cache = self.plog.leader_epoch_cache
        i = bisect_right(cache.epochs, epoch)
        if i >= len(cache.epochs):
            return self.stable_end
        return max(start, min(cache.start_offsets[i], self.stable_end))

    def entries(self, start: int, end: int, max_bytes: int) -> list[Entry]:
        """One entry per batch, from the batch holding ``start`` (or the first after it) up to
        ``end`` (exclusive, at most ``stable_end``), about ``max_bytes`` of batches, at least one.
        Entries are contiguous in offsets: the offsets of a compaction gap belong to the entry of
        the batch after it (the first entry starts at ``start`` when ``start`` lies in a gap),
        whose term is that batch's leader epoch; a follower appends its batch above its log end
        (:meth:`PartitionLog.append_as_follower` ``first_offset``)."""
        end = min(end, self.stable_end)
        if start >= end:
            return []
        data = self.plog.read_bytes(start, max(max_bytes, 1), max_offset=end, min_one_batch=True)
        out: list[Entry] = []
        prev_end = None
        for pos, h in iter_batches(data):
            nxt = h.base_offset + h.last_offset_delta + 1
            if prev_end is None:
                offset = h.base_offset if h.base_offset <= start else start
            else:
                offset = prev_end  # a compaction gap belongs to the next batch
            size = h.batch_length + 12
            payload = data[pos:pos + size]
            kind = EntryKind.DATA
            if h.is_control:
                kind = EntryKind.CONTROL
                internal = raft_internal_record(data, pos, h)
                if internal is not None and internal[0] == CONTROL_KRAFT_VOTERS:
                    kind, payload = EntryKind.CONFIG, internal[1]  # the core's config payload
            out.append(Entry(offset, max(h.partition_leader_epoch, 0), payload, nxt - offset, kind))
            prev_end = nxt
        return out

    def config_entries(self, start: int, end: int) -> list[Entry]:
        """The ``CONFIG`` entries in ``[start, end)``: found among the Raft-internal batches the
        offset translator lists (one per leader change or configuration change), each read
        alone, so a restart does not read the whole log."""
        end = min(end, self.stable_end)
        out: list[Entry] = []
        for offset in self.plog.translator.internal_offsets:
            if start <= offset < end:
                out += [e for e in self.entries(offset, offset + 1, 1)
                        if e.kind == EntryKind.CONFIG and e.offset == offset]
        return out

    def snapshot(self) -> Snapshot:
        start = self.plog.log_start_offset
        data = self.snapshot_data
        if data is None:  # a partition: the internal offsets below the log start (issue 19)
            data = _DELTA.pack(self.plog.translator.base_delta)
        return Snapshot(start - 1, self._start_term(), self.voters, data, self.learners)


class RaftGroup:
    """A Raft group member backed by a PartitionLog.

    Args:
        host: the :class:`~litemq.cluster.manager.ClusterManager` (node id, executor, sending,
            scheduling of :meth:`process`).
        group_id: ``"topic-partition"`` or ``"__cluster_metadata"``.
        plog: the replica's log.
        voters: node ids of the replicas (Raft voters). For a partition group only when the
            state file records no configuration yet (a new replica, or one written before
            configurations were kept); otherwise the recorded one wins, and the log's
            ``CONFIG`` batches above it apply. The same for the metadata group: ``--peers``
            (or, for a broker joining with ``--join``, the voters its bootstrap broker named)
            until a configuration changed at run time is recorded (AddRaftVoter/RemoveRaftVoter,
            observers: ``conf_dynamic`` in the state file).
        learners: the learners with ``voters`` (a joining broker names itself), under the same rule.
        apply_entries: hand committed entries to ``on_ready`` (the metadata group).
        on_ready: called with each handled :class:`Ready` before ``advance``.
    """

    def __init__(self, host, group_id: str, plog: PartitionLog, voters, *, apply_entries: bool = False,
                 on_ready: Callable[[Ready], None] | None = None, election_timeout_ticks: int = 10,
                 snapshot: tuple[int, bytes] | None = None, recovering: bool = False, learners=()) -> None:
        self.host = host
        self.group_id = group_id
        self.plog = plog
        self.closed = False
        self.failed = False
        self._state_lock = threading.Lock()
        self._written_term = -1
        self._written_hs: HardState | None = None
        state = self._read_state()
        if state is None:  # a lost term and vote: never vote as its old self (as a replaced disk)
            state, recovering = {}, True
        # A replaced disk (issue 20): the group starts recovering (RaftNode(recovering=True))
        # when it has no state yet; later its state file says whether it still is.
        recovering = bool(state.get("recovering", False)) if state else recovering
        self._recovering_state = recovering
        """What the state file says: True until a hard state recording the vote that ended the
        recovery (or a later term) is written."""
        self._recovery_end_term: int | None = None
        conf = state.get("conf")
        self._conf_dynamic = bool(state.get("conf_dynamic"))
        """The metadata group's configuration was changed at run time (observers, AddRaftVoter):
        the recorded one wins over ``--peers`` at the next start. Until then ``--peers`` wins,
        so a data dir of another (static) cluster is still found by its peers' cluster id."""
        if isinstance(conf, dict) and conf.get("voters") and (not apply_entries or self._conf_dynamic or not voters):
            voters = conf["voters"]
            learners = conf.get("learners") or ()
        self.view = PartitionLogView(plog, voters, state.get("snapshot_term"), learners)
        if snapshot is not None:  # metadata group: (term, image) at log start - 1
            self.view.snapshot_term, self.view.snapshot_data = snapshot
        commit = int(state.get("commit_index", -1))
        if commit >= plog.log_end_offset:
            log.warning("%s: persisted commit index %d beyond log end %d; using the log end",
                        group_id, commit, plog.log_end_offset)
            commit = plog.log_end_offset - 1
        commit = max(commit, plog.log_start_offset - 1)
        hs = HardState(int(state.get("term", 0)), state.get("voted_for"), commit)
        self._saved_hs = hs
        self._commit_dirty = False
        self.on_ready = on_ready
        self.group_type = "metadata" if apply_entries else "partition"
        """``group_type`` label of the Raft metrics (litemq.metrics)."""
        self._seen_role: str | None = None
        self._seen_leader: int | None = None
        # A partition's new leader appends its no-op (a LEADER_CHANGE batch, which takes a
        # Kafka offset) only when it inherits records not known committed (issue 19).
        cfg = RaftConfig(election_timeout_ticks=election_timeout_ticks, heartbeat_interval_ticks=1,
                         apply_entries=apply_entries, noop_only_when_needed=not apply_entries,
                         eager_commit_broadcast=apply_entries)
        self.node = RaftNode(host.node_id, voters, self.view, cfg, random.Random(), hard_state=hs,
                             recovering=recovering)
        if recovering and not state:
            self.write_state(hs, sync=True)  # a restart before catching up is still recovering
            log.info("%s: replaced disk: recovering (no vote until caught up with a leader)", group_id)
        self._persisting = False
        # quiescence (see ClusterManager._should_tick)
        self.quiet = False
        self.stable_ticks = 0
        self.last_sig = None
        self.last_msg_tick = 0
        self.tp: tuple[str, int] | None = None
        """(topic, partition) of a partition group; None for the metadata group."""
        self.on_follower_answer: Callable[[object], None] | None = None
        """Called with each follower's AppendResponse or HeartbeatResponse the node stepped (the
        cluster manager calls it): a partition's follower log start offsets (its low watermark)."""
        self.hold_awake = False
        """The owner waits on the followers' answers (a DeleteRecords waiting for the low
        watermark): the group does not quiesce, so its leader keeps heartbeating."""
        self.heard_at: dict[int, tuple[int, float]] = {}
        """Leader lease: voter -> (term, loop time in s) of the last message in which it
        acknowledged that term (an AppendResponse or HeartbeatResponse, a granted vote), noted by
        the cluster manager; while the group is quiet, the manager notes every voter whose
        broker it hears from (:meth:`lease_current`)."""

    # ------------------------------------------------------------ state file
    @property
    def _state_path(self) -> Path:
        return self.plog.dir / RAFT_STATE_FILE

    def _read_state(self) -> dict | None:
        """The state file's content; {} when there is none (a new replica); None when it cannot
        be read: the term and vote it held are lost, so the replica starts recovering (it votes
        only once caught up with a leader, as after a replaced disk), never from term 0 with no
        vote, which could vote twice in a term (Raft §5.2; Kafka refuses to start on a corrupt
        quorum-state file)."""
        try:
            state = json.loads(self._state_path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            log.warning("%s: unreadable %s (%s): term and vote lost; recovering (no vote until caught up "
                        "with a leader)", self.group_id, self._state_path, exc)
            return None
        if not isinstance(state, dict):
            log.warning("%s: %s holds no state object: term and vote lost; recovering", self.group_id,
                        self._state_path)
            return None
        return state

    def write_state(self, hs: HardState, sync: bool) -> None:
        """Persist term, vote, commit index (and the snapshot term); fsync when ``sync``.

        Called from the event loop (lazy commit checkpoints, close) and from the executor (a
        new term or vote, fsynced before any message leaves): a lock serialises them, and a
        state never replaces one with a higher term (a vote must not be rolled back)."""
        with self._state_lock:
            if hs.term < self._written_term:
                if self._written_hs is None:
                    return
                hs = self._written_hs  # keep the newer term and vote (the configuration may be new)
            view = self.view
            end = self._recovery_end_term
            if self._recovering_state and end is not None and (
                    hs.term > end or (hs.term == end and hs.voted_for is not None)):
                self._recovering_state = False
                log.info("%s: caught up after a replaced disk: votes again from term %d", self.group_id, hs.term)
            body = json.dumps({"term": hs.term, "voted_for": hs.voted_for, "commit_index": hs.commit_index,
                               "snapshot_term": view.snapshot_term, "recovering": self._recovering_state,
                               "conf": {"voters": sorted(view.voters), "learners": sorted(view.learners)},
                               "conf_dynamic": self._conf_dynamic}).encode()
            path = self._state_path
            tmp = path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, body)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            self._written_term = hs.term
            self._written_hs = hs

    def checkpoint_commit(self) -> None:
        """Lazily persist a moved commit index (no fsync; like Kafka's HW checkpoint). Skipped
        while a Ready is being persisted (its hard state is written by that fsync)."""
        if self._commit_dirty and not self.closed and not self._persisting:
            self._commit_dirty = False
            try:
                self.write_state(self._saved_hs_with_commit(), sync=False)
            except OSError as exc:
                log.warning("%s: cannot checkpoint the commit index: %s", self.group_id, exc)

    def _saved_hs_with_commit(self) -> HardState:
        """The durable term and vote with the current commit index (never an unsynced vote)."""
        hs = self._saved_hs
        return HardState(hs.term, hs.voted_for, self.node.commit_index)

    # ------------------------------------------------------------ leader append
    @property
    def is_leader(self) -> bool:
        return self.node.is_leader

    def _materialize(self) -> None:
        """Write entries the core holds beyond the physical log end (a new leader's no-op)."""
        node, plog = self.node, self.plog
        leo = plog.log_end_offset
        if node.log_end_offset <= leo:
            return
        for e in node.entries(leo, node.log_end_offset):
            if e.offset >= plog.log_end_offset:
                self._write_entry(e)

    def _write_entry(self, e: Entry) -> None:
        payload = e.payload
        if e.kind == EntryKind.CONTROL and not payload:
            payload = build_control_batch(base_offset=e.offset, partition_leader_epoch=e.term,
                                          control_type=CONTROL_LEADER_CHANGE, timestamp_ms=NO_TIMESTAMP,
                                          key_version=RAFT_INTERNAL_KEY_VERSION)
        elif e.kind == EntryKind.CONFIG:  # the same bytes on every replica: nothing varies
            payload = build_control_batch(base_offset=e.offset, partition_leader_epoch=e.term,
                                          control_type=CONTROL_KRAFT_VOTERS, timestamp_ms=NO_TIMESTAMP,
                                          key_version=RAFT_INTERNAL_KEY_VERSION, value=bytes(e.payload))
        # The entry may start in a compaction gap of the leader's log (PartitionLogView.entries):
        # its batch then starts above the log end, which the follower append accepts.
        self.plog.append_as_follower(payload, first_offset=e.offset)

    def leader_append(self, records: bytearray, origin: AppendOrigin = AppendOrigin.CLIENT,
                      verification_guard: VerificationGuard | None = None) -> AppendInfo:
        """Append a produced records blob as leader and propose it (one entry per batch).
        ``verification_guard``: the KIP-890 guard of this leader's log a transactional batch
        starting a transaction must present (:meth:`PartitionLog.append`).

        Raises:
            KafkaError: NOT_LEADER_OR_FOLLOWER when not the leader (or handing leadership
                over), plus everything :meth:`PartitionLog.append` raises.
        """
        node = self.node
        if not node.is_leader or node.transferee is not None or self.failed:
            raise KafkaError(f"{self.group_id}: not the leader", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._materialize()
        if node.log_end_offset != self.plog.log_end_offset:
            raise KafkaError(f"{self.group_id}: log not ready", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            info = self.plog.append(records, leader_epoch=node.term, origin=origin,
                                    verification_guard=verification_guard)
        except KafkaStorageError as exc:  # disk full or failing: answered KAFKA_STORAGE_ERROR, and
            self._go_offline("cannot append", exc)  # the partition's leadership moves away
            raise
        if info.duplicate:
            return info
        self.wake()
        mv = memoryview(records)
        try:
            for pos, h in iter_batches(records):
                size = h.batch_length + 12
                node.propose(mv[pos:pos + size], count=h.last_offset_delta + 1)
        except (NotLeader, ProposalDropped) as exc:  # checked above; kept for safety
            self.plog.truncate_to(info.first_offset)
            raise KafkaError(f"{self.group_id}: {exc}", ErrorCode.NOT_LEADER_OR_FOLLOWER) from None
        self.host.mark_dirty(self)
        return info

    def note_heard(self, member: int, term: int, now: float) -> None:
        """``member`` acknowledged ``term`` at loop time ``now`` (s): see :attr:`heard_at`."""
        self.heard_at[member] = (term, now)

    def lease_current(self, now: float, lease_s: float) -> bool:
        """The leader lease (Raft thesis §6.4.1, the CheckQuorum window of §6.2 in loop time):
        this member leads and a majority of the voters (itself included) acknowledged its
        current term within the last ``lease_s`` seconds before ``now``. Followers that heard
        from a leader within an election timeout do not vote for another (``raft.step``), so no
        other leader can have been elected meanwhile unless this broker stopped running (then
        the caller's own stall check applies: ``ClusterManager.ticked_within``). Loop time, not
        Raft ticks: a stopped process counts no ticks, but its loop clock runs on."""
        node = self.node
        if not node.is_leader or self.failed or self.closed:
            return False
        term, voters, me = node.term, node.voters, self.host.node_id
        since = now - lease_s
        heard = sum(1 for v in voters
                    if v == me or ((h := self.heard_at.get(v)) is not None and h[0] == term and h[1] >= since))
        return heard >= len(voters) // 2 + 1

    def wake(self) -> None:
        """End quiescence: the group ticks again (and a leader heartbeats) until it is idle for
        ``QUIESCE_AFTER_TICKS`` again (see ClusterManager._should_tick). The caller marks it
        dirty."""
        self.quiet = False
        self.stable_ticks = 0

    # ------------------------------------------------------------ Ready handling
    _sync_queue: SyncQueue | None = None
    """The broker's fsync thread (:class:`SyncQueue` of the host's loop), looked up once."""

    def process(self) -> None:
        """Take and handle one Ready if there is one and none is being persisted."""
        if self._persisting or self.closed or self.failed:
            return
        node = self.node
        if not node.has_ready():
            return
        rd = node.ready()
        if self._recovering_state and self._recovery_end_term is None and not node.recovering:
            self._recovery_end_term = rd.hard_state.term if rd.hard_state is not None else node.term
        plog = self.plog
        try:
            if rd.snapshot is not None:
                snap = rd.snapshot
                if snap.voters is not None:
                    # durable before the log that held the configuration is emptied
                    self._set_conf(ConfState(snap.voters, snap.learners), max(rd.commit_index, snap.offset))
                data = rd.snapshot.data
                internal_below = None
                if self.group_type == "partition" and isinstance(data, (bytes, bytearray, memoryview)) \
                        and len(data) == _DELTA.size:
                    internal_below = _DELTA.unpack(bytes(data))[0]
                plog.truncate_fully_and_start_at(rd.snapshot.offset + 1, internal_below)
                self.view.snapshot_term = rd.snapshot.term
                self.view.stable_end = rd.snapshot.offset + 1
            trunc = rd.truncate_to
            if trunc is not None:
                if rd.entries and rd.entries[0].offset == trunc:
                    # The entries replace the suffix: the log is cut below only from the first
                    # one it does not already hold (the loop below). The core may see a conflict
                    # where there is none: for the offsets of a compaction gap the epoch cache
                    # gives the epoch of the batch before the gap, an entry starting in the gap
                    # carries that of the batch after it (PartitionLogView.entries); cutting and
                    # rewriting would take committed records away for a moment.
                    self.view.stable_end = min(self.view.stable_end, trunc)
                else:
                    plog.truncate_to(trunc)
                    self.view.stable_end = min(self.view.stable_end, plog.log_end_offset)
            for e in rd.entries:
                leo = plog.log_end_offset
                if e.offset < leo:
                    # Same epoch at the entry's last offset: the same entry (one leader per
                    # epoch), so the same log up to there (Raft's log matching). Not checked at
                    # its first offset: that may be a compaction gap (above).
                    if e.end_offset <= leo and plog.leader_epoch_cache.epoch_for_offset(e.last_offset) == e.term:
                        continue  # already written (leader produce path, a no-op materialized, a resend)
                    plog.truncate_to(e.offset)
                self._write_entry(e)
            if trunc is not None and rd.entries and plog.log_end_offset > rd.entries[-1].end_offset:
                plog.truncate_to(rd.entries[-1].end_offset)  # the stale suffix after them
        except Exception as exc:  # storage failure: this replica stops; the others carry on
            self._go_offline("cannot persist Raft entries", exc)
            return
        hs = rd.hard_state
        vote_changed = hs is not None and (hs.term != self._saved_hs.term or hs.voted_for != self._saved_hs.voted_for)
        late = []
        if rd.messages:  # a leader's messages go now, the others once this Ready is durable
            early = []
            for m in rd.messages:
                (early if isinstance(m, _LEADER_MESSAGES) else late).append(m)
            if early:
                self.host.send(self.group_id, early)
        need_log_sync = bool(rd.entries or rd.snapshot is not None or rd.truncate_to is not None) and plog.config.durable
        if need_log_sync or vote_changed:
            self._persisting = True
            hs_to_sync = hs if vote_changed else None
            queue = self._sync_queue
            if queue is None:
                queue = self._sync_queue = SyncQueue.of(self.host.loop)
            queue.submit(lambda: self._sync(need_log_sync, hs_to_sync),
                         lambda took, exc: self._finish(rd, late, took, exc))
        else:
            self._finish(rd, late, None, None)

    def _sync(self, log_sync: bool, hs: HardState | None) -> float | None:
        """fsync the log and/or the hard state (worker thread); returns the log flush's seconds."""
        took = None
        if log_sync:
            started = time.perf_counter()
            self.plog.flush()
            took = time.perf_counter() - started
        if hs is not None:
            self.write_state(hs, sync=True)
        return took

    def _finish(self, rd: Ready, late: list, took: float | None, exc: BaseException | None) -> None:
        self._persisting = False
        if self.closed:
            return
        if exc is not None:
            self._go_offline("fsync failed", exc)
            return
        soft = rd.soft_state
        metrics = getattr(self.host, "metrics", None) if took is not None or soft is not None else None
        if metrics is not None:  # ClusterManager.metrics: the broker's, or None
            if took is not None:
                metrics.on_flush(took)
            if soft is not None:
                metrics.on_raft_soft_state(self.group_type, self._seen_role, self._seen_leader,
                                           soft.role.value, soft.leader_id)
                self._seen_role, self._seen_leader = soft.role.value, soft.leader_id
        if rd.entries:
            self.view.stable_end = rd.entries[-1].end_offset
        if late:
            self.host.send(self.group_id, late)
        if rd.hard_state is not None:
            if rd.hard_state.term != self._saved_hs.term or rd.hard_state.voted_for != self._saved_hs.voted_for:
                self._saved_hs = rd.hard_state
            if rd.hard_state.commit_index != self._saved_hs.commit_index:
                self._commit_dirty = True
        if rd.hard_state is not None or rd.entries or rd.snapshot is not None or rd.truncate_to is not None:
            self._keep_committed_conf()  # (else neither the commit index nor the log moved)
        if self.on_ready is not None:
            try:
                self.on_ready(rd)
            except Exception:
                log.exception("%s: Ready listener failed", self.group_id)
        node = self.node
        node.advance(rd)
        # Another Ready, now or after what this turn proposes: checked here rather than by a
        # process() call scheduled for nothing (a follower's Ready is usually its last). A
        # pending broadcast is left for process(), so proposals later in this turn join it.
        if node.bcast_entries or node.bcast_commit or node.has_ready():
            self.host.mark_dirty(self)

    def _keep_committed_conf(self) -> None:
        """Record the configuration in effect at the commit index (if its ``CONFIG`` batch is
        durable here) in the state file, fsynced, before the caller publishes the high
        watermark: retention and DeleteRecords stay below it, so the log start never passes a
        configuration the state file does not know (see the module docstring)."""
        node = self.node
        upto = min(node.commit_index, self.view.stable_end - 1)
        conf = node.conf_state_at(upto)
        if conf is None or not conf.voters:
            return
        try:
            self._set_conf(conf, upto)
        except OSError as exc:
            self._go_offline("cannot record the configuration", exc)

    def _set_conf(self, conf: ConfState, commit_index: int) -> None:
        """Make ``conf`` the configuration of the log start and write it durably (fsync; rare:
        once per configuration change). Raises OSError."""
        view = self.view
        if conf.voters == view.voters and conf.learners == view.learners:
            return
        view.voters, view.learners = conf.voters, conf.learners
        self._conf_dynamic = True
        hs = self._saved_hs
        self.write_state(HardState(hs.term, hs.voted_for, max(commit_index, hs.commit_index)), sync=True)

    def _go_offline(self, what: str, exc: BaseException) -> None:
        """A storage failure: this replica stops (until the broker restarts) and the others
        carry on. A leader first hands over with TimeoutNow (Raft thesis §3.10) to its most
        up-to-date voter, so the followers elect a new leader at once: behind a live broker,
        quiescent followers would otherwise never campaign (Kafka: a failed log dir takes the
        broker's replicas offline and the controller elects leaders elsewhere, KIP-112)."""
        log.error("%s: %s: %s; replica goes offline", self.group_id, what, exc)
        self.failed = True
        node = self.node
        if not node.is_leader:
            return
        others = {v: m for v, m in node.match_offsets().items() if v != self.host.node_id}
        if others:
            best = max(sorted(others), key=lambda v: others[v])
            log.info("%s: hands leadership to replica %d before going offline", self.group_id, best)
            self.host.send(self.group_id, [TimeoutNow(self.host.node_id, best, node.term)])

    def close(self) -> None:
        self.closed = True
        if not self.failed:
            try:
                self.write_state(self._saved_hs_with_commit(), sync=True)
            except OSError:
                pass
