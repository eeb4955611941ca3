"""The leader: its tick (heartbeats, CheckQuorum, transfer timeout), its step function
(etcd ``tickHeartbeat``, ``stepLeader``), replication to each follower with etcd's
probe / replicate / snapshot progress (paper §5.3), proposals and leadership transfer
(thesis §3.10). Commit counting is :meth:`~litemq.raft.core.Raft.maybe_commit`.
"""

from __future__ import annotations

from typing import Any

from litemq.raft.core import Raft
from litemq.raft.errors import ConfigChangeInProgress, NotLeader, ProposalDropped
from litemq.raft.messages import Append, AppendResponse, Heartbeat, HeartbeatResponse, InstallSnapshot, Message, TimeoutNow
from litemq.raft.membership import check_single_change
from litemq.raft.raft_log import UNLIMITED
from litemq.raft.tracker import PROBE, REPLICATE, SNAPSHOT, Progress, quorum_active
from litemq.raft.types import ConfState, Entry, EntryKind, Role, encode_config

__all__ = [
    "flush_broadcast",
    "maybe_send_append",
    "propose",
    "propose_config",
    "step_leader",
    "tick_leader",
    "transfer_leadership",
]


def tick_leader(r: Raft) -> None:
    """One tick of the leader: once per election timeout CheckQuorum (thesis §6.2: step down
    without a quorum heard from) and abort an unfinished transfer; retry lost snapshots;
    heartbeat every ``heartbeat_interval_ticks``."""
    cfg = r.config
    r.heartbeat_elapsed += 1
    r.election_elapsed += 1
    if r.election_elapsed >= cfg.election_timeout_ticks:
        r.election_elapsed = 0
        if cfg.check_quorum:
            if not quorum_active(r.progress, r.voters, r.id):
                r.become_follower(r.term, None)  # CheckQuorum: step down
                return
            for v, pr in r.progress.items():
                pr.recent_active = v == r.id
        r.lead_transferee = None  # a transfer that did not finish in time is aborted
    for v, pr in r.progress.items():
        if pr.state == SNAPSHOT:
            pr.snapshot_ticks += 1
            if pr.snapshot_ticks >= cfg.election_timeout_ticks:
                pr.become_probe(pr.match + 1)  # lost snapshot: retry
    if r.heartbeat_elapsed >= cfg.heartbeat_interval_ticks:
        r.heartbeat_elapsed = 0
        for v, pr in r.progress.items():
            if v != r.id:
                r.send(Heartbeat(r.id, v, r.term, min(pr.match, r.commit_index), r.raft_log.first_offset))


def step_leader(r: Raft, m: Message) -> None:
    """A message of the current term (vote requests aside) received as the leader: append
    acknowledgements and rejections, heartbeat answers (each noting the follower's log start
    offset, see :class:`~litemq.raft.messages.AppendResponse`)."""
    pr = r.progress.get(m.src)
    if pr is None or m.src == r.id:
        return
    if isinstance(m, (AppendResponse, HeartbeatResponse)) and m.log_start_offset >= 0:
        pr.log_start_offset = m.log_start_offset  # the latest (one connection per pair: in order)
    if isinstance(m, AppendResponse):
        pr.recent_active = True
        if not m.success:
            _handle_reject(r, m.src, pr, m)
            return
        news = pr.ack(m.match_offset)
        if pr.state == SNAPSHOT and pr.match >= pr.snapshot_offset:
            pr.become_replicate()
        if news:
            if pr.state == PROBE:
                pr.become_replicate()
            r.maybe_commit()
            if r.role is not Role.LEADER:
                return
            if m.src == r.lead_transferee and pr.match == r.raft_log.last_offset:
                r.send(TimeoutNow(r.id, m.src, r.term))
        elif pr.state == PROBE:
            pr.probe_sent = False
        maybe_send_append(r, m.src, pr, send_if_empty=False)
    elif isinstance(m, HeartbeatResponse):
        pr.recent_active = True
        if pr.state == PROBE:
            pr.probe_sent = False
        elif pr.state == REPLICATE and len(pr.inflight) >= r.config.max_inflight_appends:
            pr.inflight.popleft()
        if pr.match < r.raft_log.last_offset:
            maybe_send_append(r, m.src, pr, send_if_empty=True)


def _handle_reject(r: Raft, to: int, pr: Progress, m: AppendResponse) -> None:
    """Fast backup: probe again from the follower's hint (etcd ``findConflictByTerm`` on
    both sides), unless the rejection is stale. A follower that lost its log (``log_lost``:
    a replaced disk) no longer holds what it acknowledged: forget its match point."""
    if m.log_lost and pr.match > m.hint_offset:
        pr.match = -1
        pr.become_probe(m.hint_offset + 1)
        maybe_send_append(r, to, pr, send_if_empty=True)
        return
    if m.reject_offset <= pr.match or pr.state == SNAPSHOT:
        return  # stale
    if pr.state == PROBE and m.reject_offset != pr.next - 1:
        return  # stale
    log = r.raft_log
    if m.hint_offset >= log.first_offset - 1:
        o = log.find_conflict_by_term(m.hint_offset, m.hint_term)
    else:
        o = m.hint_offset
    pr.become_probe(min(o + 1, m.reject_offset))
    maybe_send_append(r, to, pr, send_if_empty=True)


def maybe_send_append(r: Raft, to: int, pr: Progress, send_if_empty: bool, shared: dict | None = None) -> None:
    """Send follower ``to`` the entries from ``pr.next`` (at most ``max_append_bytes``), or an
    empty Append if ``send_if_empty``, or InstallSnapshot when they are no longer in the log;
    nothing while ``pr`` is paused. ``shared``: a dict kept across the followers of one
    broadcast, so followers at the same ``next`` share one read of the log (same entries,
    previous offset and term)."""
    if pr.is_paused(r.config.max_inflight_appends):
        return
    log = r.raft_log
    end = log.end_offset
    nxt = pr.next if pr.next < end else end
    first = log.first_offset
    if nxt < first:
        _send_snapshot(r, to, pr)
        return
    found = shared.get(nxt) if shared is not None else None
    if found is None:
        entries = tuple(log.entries(nxt, UNLIMITED, r.config.max_append_bytes)) if nxt < end else ()
        if not entries and not send_if_empty:
            return
        prev = entries[0].offset - 1 if entries else nxt - 1
        found = (entries, prev, log.term_at(prev))
        if shared is not None:
            shared[nxt] = found
    entries, prev, prev_term = found
    if prev_term is None:
        _send_snapshot(r, to, pr)
        return
    r.send(Append(r.id, to, r.term, prev, prev_term, entries, r.commit_index, first))
    if pr.state == PROBE:
        pr.next = prev + 1
        pr.probe_sent = True
    elif entries:
        pr.next = entries[-1].end_offset
        pr.inflight.append(entries[-1].last_offset)


def _send_snapshot(r: Raft, to: int, pr: Progress) -> None:
    snap = r.raft_log.snapshot()
    pr.become_snapshot(snap.offset)
    r.send(InstallSnapshot(r.id, to, r.term, snap))


def flush_broadcast(r: Raft) -> None:
    """Send what accumulated since the last Ready (new entries, a new commit index) to every
    follower, in one Append each (etcd ``bcastAppend``)."""
    if r.role is not Role.LEADER or not (r.bcast_entries or r.bcast_commit):
        r.bcast_entries = r.bcast_commit = False
        return
    send_if_empty = r.bcast_commit
    r.bcast_entries = r.bcast_commit = False
    shared: dict = {}
    for v, pr in r.progress.items():
        if v != r.id:
            maybe_send_append(r, v, pr, send_if_empty, shared)


def propose(r: Raft, payload: Any, count: int, kind: EntryKind) -> Entry:
    """Append an entry of ``count`` offsets in the current term; raises :class:`NotLeader`
    or, during a leadership transfer, :class:`ProposalDropped`."""
    if r.role is not Role.LEADER:
        raise NotLeader(r.leader_id)
    if r.lead_transferee is not None:
        raise ProposalDropped(f"leadership transfer to {r.lead_transferee} in progress")
    e = Entry(r.raft_log.end_offset, r.term, payload, count, kind)
    r.append([e])
    r.bcast_entries = True
    return e


def propose_config(r: Raft, conf: ConfState) -> Entry:
    """Append a ``CONFIG`` entry for the whole new configuration ``conf`` (voters and
    learners). Raises ``ValueError`` unless it changes the role of exactly one server
    (:func:`~litemq.raft.membership.check_single_change`), :class:`NotLeader`,
    :class:`ProposalDropped` during a leadership transfer, and
    :class:`ConfigChangeInProgress` until the previous change and an entry of the leader's
    term are committed (thesis §4.1 and the 2015 raft-dev erratum)."""
    if r.role is not Role.LEADER:
        raise NotLeader(r.leader_id)
    check_single_change(r.membership.conf, conf)
    if r.raft_log.end_offset <= r.pending_config_offset and r.lead_transferee is None:
        r.append_noop()  # a leader that skipped its no-op (noop_only_when_needed) needs one now
        raise ConfigChangeInProgress("a new leader first commits an entry of its term")
    if r.commit_index < r.pending_config_offset or r.membership.uncommitted(r.commit_index):
        raise ConfigChangeInProgress("the previous configuration change is not committed yet")
    e = propose(r, encode_config(conf.voters, conf.learners), 1, EntryKind.CONFIG)
    r.pending_config_offset = e.offset
    return e


def transfer_leadership(r: Raft, to: int) -> None:
    """Thesis §3.10: stop accepting proposals, bring voter ``to`` up to date, then send it
    TimeoutNow (aborted by :func:`tick_leader` after an election timeout). Raises
    :class:`NotLeader`, or ``ValueError`` if ``to`` is not a voter.

    A leader that skipped its no-op (``noop_only_when_needed``) appends it first: ``to`` may
    hold uncommitted entries of an earlier term beyond this leader's log (a deposed leader's,
    which no entry of this term has overwritten yet), and its log, longer, would win the
    election TimeoutNow starts, bringing back records this leader never had and already
    answered for (an idempotent producer told a sequence gap resends them: duplicates). The
    no-op conflicts with them, so ``to`` drops them before it is up to date."""
    if r.role is not Role.LEADER:
        raise NotLeader(r.leader_id)
    if to == r.id:
        return
    if to not in r.progress or to not in r.voters:
        raise ValueError(f"{to} is not a voter")
    if r.lead_transferee == to:
        return
    if r.raft_log.end_offset <= r.pending_config_offset:
        r.append_noop()  # nothing of this term in the log yet (see the docstring)
    r.lead_transferee = to
    r.election_elapsed = 0
    pr = r.progress[to]
    if pr.match == r.raft_log.last_offset:
        r.send(TimeoutNow(r.id, to, r.term))
    else:
        maybe_send_append(r, to, pr, send_if_empty=True)
