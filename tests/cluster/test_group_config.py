"""Configuration changes (CONFIG entries) in a partition log: a Raft-internal KRAFT_VOTERS
control batch that takes no Kafka offset, read back as a CONFIG entry, and a restarted replica
that rebuilds its configuration (voters and learners) from its log and its state file, also
once retention moved the log start past the batch."""

from __future__ import annotations

import json
from types import SimpleNamespace

from litemq.cluster.group import RAFT_STATE_FILE, PartitionLogView, RaftGroup
from litemq.protocol.records import (
    CONTROL_KRAFT_VOTERS,
    RAFT_INTERNAL_KEY_VERSION,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    is_raft_internal_batch,
    iter_batches,
    raft_internal_record,
)
from litemq.raft import ConfState, Entry, EntryKind, encode_config
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog

CONF = ConfState(frozenset({1, 2, 3}), frozenset({4}))
LOG_CONFIG = LogConfig(segment_bytes=300)


def _data(offset: int, term: int = 1) -> Entry:
    batch = build_batch([Record(offset, 1000 + offset, None, b"v%d" % offset)], base_offset=offset,
                        partition_leader_epoch=term)
    return Entry(offset, term, batch, 1, EntryKind.DATA)


def _group(plog: PartitionLog, voters=(1, 2, 3), node_id: int = 1) -> RaftGroup:
    return RaftGroup(SimpleNamespace(node_id=node_id, loop=None), "t-0", plog, voters)


def _write(g: RaftGroup, entries) -> None:
    for e in entries:
        g._write_entry(e)  # exactly what a follower (or the leader's Ready) persists
    g.view.stable_end = g.plog.log_end_offset


def test_config_batch_takes_no_kafka_offset_and_clients_never_see_it(tmp_path):
    plog = PartitionLog.open(tmp_path / "t-0", LOG_CONFIG)
    g = _group(plog)
    config = Entry(1, 1, encode_config(CONF.voters, CONF.learners), 1, EntryKind.CONFIG)
    _write(g, [_data(0), config, _data(2)])
    t = plog.translator
    assert t.internal_offsets == (1,)
    assert (t.to_kafka(0), t.to_kafka(2), t.kafka_offset(3)) == (0, 1, 2)
    data = plog.read_for_clients(0, 1 << 20).to_bytes()
    assert [(r.offset, r.value) for r in decode_records(data)] == [(0, b"v0"), (1, b"v2")]
    assert not any(h.is_control for _, h in iter_batches(data))
    raw = plog.read_bytes(1, 1 << 20, max_offset=2)
    (pos, h), = list(iter_batches(raw))
    assert raft_internal_record(raw, pos, h) == (CONTROL_KRAFT_VOTERS, config.payload)
    # read back by the Raft core as the CONFIG entry it wrote
    got = g.view.entries(0, 3, 1 << 20)
    assert [(e.offset, e.kind) for e in got] == [(0, EntryKind.DATA), (1, EntryKind.CONFIG), (2, EntryKind.DATA)]
    assert got[1] == config
    plog.close()
    # the translator rebuilt on reopen agrees
    plog = PartitionLog.open(tmp_path / "t-0", LOG_CONFIG)
    assert plog.translator.internal_offsets == (1,) and plog.translator.to_kafka(2) == 1
    plog.close()


def test_kafkas_own_voters_batch_is_not_raft_internal():
    """Control key version 0 (as Kafka writes KRAFT_VOTERS) keeps its offset."""
    batch = build_control_batch(base_offset=0, partition_leader_epoch=1, control_type=CONTROL_KRAFT_VOTERS,
                                timestamp_ms=-1, value=b"x")
    (pos, h), = list(iter_batches(batch))
    assert not is_raft_internal_batch(batch, pos, h)
    ours = build_control_batch(base_offset=0, partition_leader_epoch=1, control_type=CONTROL_KRAFT_VOTERS,
                               timestamp_ms=-1, value=b"x", key_version=RAFT_INTERNAL_KEY_VERSION)
    assert is_raft_internal_batch(ours, pos, h)


def test_restarted_replica_rebuilds_its_configuration_from_the_log(tmp_path, monkeypatch):
    """... reading only the Raft-internal batches, never the whole log."""
    plog = PartitionLog.open(tmp_path / "t-0", LOG_CONFIG)
    g = _group(plog)
    config = Entry(101, 1, encode_config(CONF.voters, CONF.learners), 1, EntryKind.CONFIG)
    noop = Entry(200, 2, b"", 1, EntryKind.CONTROL)
    _write(g, [_data(o) for o in range(101)] + [config] + [_data(o) for o in range(102, 200)]
           + [noop, _data(201, 2)])
    g.close()
    plog.close()
    plog = PartitionLog.open(tmp_path / "t-0", LOG_CONFIG)
    reads = []
    original = PartitionLogView.entries

    def counted(self, start, end, max_bytes):
        got = original(self, start, end, max_bytes)
        reads.append(len(got))
        return got

    monkeypatch.setattr(PartitionLogView, "entries", counted)
    g = _group(plog)  # started with the assignment {1, 2, 3}: the log's CONFIG batch wins
    assert g.node.conf_state == CONF
    assert g.view.config_entries(0, 1000) == [config]
    assert reads and max(reads) == 1  # one batch at a time: the no-op and the config batch
    g.close()
    plog.close()


def test_configuration_survives_the_log_start_moving_past_its_batch(tmp_path):
    """The committed configuration is kept in the state file (fsynced before the high
    watermark covering it is published): once retention or DeleteRecords dropped the batch,
    a restart still knows it, and the snapshot a follower would install carries it."""
    d = tmp_path / "t-0"
    plog = PartitionLog.open(d, LOG_CONFIG)
    g = _group(plog)
    _write(g, [_data(0), Entry(1, 1, encode_config(CONF.voters, CONF.learners), 1, EntryKind.CONFIG)]
           + [_data(o) for o in range(2, 12)])
    g = _group(plog)  # a node that has the entries in its log (as one that received them)
    g.node.commit_to(11)  # committed (a follower learns it from its leader)
    g._keep_committed_conf()
    assert json.loads((d / RAFT_STATE_FILE).read_text())["conf"] == {"voters": [1, 2, 3], "learners": [4]}
    plog.roll()
    plog.delete_records_before(plog.log_end_offset)  # the CONFIG batch is gone
    g.close()
    plog.close()
    plog = PartitionLog.open(d, LOG_CONFIG)
    assert plog.log_start_offset == 12 and plog.translator.internal_offsets == ()
    g = _group(plog, voters=(1, 2, 3))
    assert g.node.conf_state == CONF
    snap = g.view.snapshot()
    assert (snap.offset, snap.voters, snap.learners) == (11, CONF.voters, CONF.learners)
    g.close()
    # without the recorded configuration the replica would fall back to the assignment
    state = json.loads((d / RAFT_STATE_FILE).read_text())
    del state["conf"]
    (d / RAFT_STATE_FILE).write_text(json.dumps(state))
    assert _group(plog).node.conf_state == ConfState(frozenset({1, 2, 3}))
    plog.close()


def test_a_later_config_in_the_log_wins_over_the_recorded_one(tmp_path):
    """State file: {1,2,3}+{4}; the log then promotes 4: the restart ends at the promotion."""
    d = tmp_path / "t-0"
    plog = PartitionLog.open(d, LOG_CONFIG)
    g = _group(plog)
    _write(g, [_data(0), Entry(1, 1, encode_config(CONF.voters, CONF.learners), 1, EntryKind.CONFIG)])
    g = _group(plog)
    g.node.commit_to(1)
    g._keep_committed_conf()
    _write(g, [Entry(2, 2, encode_config({1, 2, 3, 4}), 1, EntryKind.CONFIG), _data(3, 2)])
    g.close()
    plog.close()
    plog = PartitionLog.open(d, LOG_CONFIG)
    g = _group(plog)
    assert g.node.conf_state == ConfState(frozenset({1, 2, 3, 4}))
    assert g.node.conf_state_at(1) == CONF
    g.close()
    plog.close()


def test_an_unreadable_state_file_starts_the_replica_recovering(tmp_path):
    """A raft-state.json that cannot be read lost the term and vote: the replica must not start
    from term 0 with no vote (it could vote twice in a term); it starts recovering, as after a
    replaced disk, and records that, so a restart before it caught up still is."""
    for content in (b"{not json", b"\xff\xfe", b"[1, 2]"):
        d = tmp_path / f"t-{len(content)}"
        plog = PartitionLog.open(d, LOG_CONFIG)
        (d / RAFT_STATE_FILE).write_bytes(content)
        g = _group(plog)
        assert g.node.recovering, content
        assert json.loads((d / RAFT_STATE_FILE).read_text())["recovering"] is True
        g.close()
        assert _group(PartitionLog.open(d, LOG_CONFIG)).node.recovering
        plog.close()
    fresh = _group(PartitionLog.open(tmp_path / "new-0", LOG_CONFIG))  # no file: a new replica votes
    assert not fresh.node.recovering
