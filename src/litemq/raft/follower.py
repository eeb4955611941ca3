"""The follower's step function (etcd ``stepFollower``) and the handling of what a leader
sends, shared with candidates that learn of a leader: appends with the consistency check,
fast backup and truncation of a conflicting suffix (paper §5.3), heartbeats, snapshots
(thesis §5), and TimeoutNow (thesis §3.10).
"""

from __future__ import annotations

from typing import Sequence

from litemq.raft.core import Raft
from litemq.raft.election import hup
from litemq.raft.messages import Append, AppendResponse, Heartbeat, HeartbeatResponse, InstallSnapshot, Message, TimeoutNow
from litemq.raft.types import ConfState, Entry

__all__ = ["entries_span_ok", "handle_append", "handle_snapshot", "maybe_end_recovery", "step_follower"]


def step_follower(r: Raft, m: Message) -> None:
    """A message of the current term (vote requests aside) received as a follower."""
    if isinstance(m, (Append, Heartbeat, InstallSnapshot)):
        r.election_elapsed = 0
        r.leader_id = m.src
        if not isinstance(m, InstallSnapshot) and m.log_start_offset > r.leader_log_start_offset:
            r.leader_log_start_offset = m.log_start_offset
        if isinstance(m, Append):
            handle_append(r, m)
            maybe_end_recovery(r, m.commit_index)
        elif isinstance(m, Heartbeat):
            # A heartbeat's commit index is min(the leader's match point for us, its commit):
            # a recovering node's match point may be its lost disk's, so it trusts it only up
            # to what an Append of this leader showed it shares.
            # It is capped by that match point, so it never ends a recovery (an Append's does).
            bound = r.recovery_match if r.recovering else r.raft_log.last_offset
            r.commit_to(min(m.commit_index, bound))
            r.send(HeartbeatResponse(r.id, m.src, r.term, r.raft_log.first_offset))
        else:
            handle_snapshot(r, m)
    elif isinstance(m, TimeoutNow):
        if r.promotable():
            hup(r, transfer=True)


def maybe_end_recovery(r: Raft, leader_commit: int) -> None:
    """A recovering node (a replaced disk) counts again once caught up with its leader: its
    commit index reaches ``leader_commit``, the leader's commit index as an Append carries it
    (a heartbeat's is capped by the leader's match point for us), an entry of its own term
    (so that commit covers every entry committed in earlier terms, paper §5.4.2), and no
    message of a later term was seen while recovering. It then records a vote for that
    leader in this term, so it never votes in a term it may have voted in before the disk
    was replaced (every such term it heard of is <= this one)."""
    if not r.recovering or r.recovery_term > r.term or leader_commit < 0:
        return
    if r.commit_index >= leader_commit and r.raft_log.term_at(leader_commit) == r.term:
        r.recovering = False
        r.voted_for = r.leader_id


def entries_span_ok(entries: Sequence[Entry], prev_offset: int) -> bool:
    """The entries of an Append are contiguous from ``prev_offset + 1`` (else: malformed)."""
    expected = prev_offset + 1
    for e in entries:
        if e.offset != expected or e.count < 1:
            return False
        expected = e.end_offset
    return True


def handle_append(r: Raft, m: Append) -> None:
    """Paper §5.3: accept the entries after a matching ``(prev_offset, prev_term)``,
    replacing a conflicting suffix, or reject with a fast-backup hint (etcd
    ``findConflictByTerm``)."""
    log = r.raft_log
    if m.prev_offset < r.commit_index:
        # Everything up to our commit index is settled: tell the leader where we are.
        r.send(AppendResponse(r.id, m.src, r.term, True, match_offset=r.commit_index,
                                log_start_offset=r.raft_log.first_offset))
        return
    if not entries_span_ok(m.entries, m.prev_offset):
        return  # malformed: drop
    if log.term_at(m.prev_offset) != m.prev_term:
        hint = log.find_conflict_by_term(m.prev_offset, m.prev_term)
        hint_term = log.term_at(hint)
        r.send(AppendResponse(
            r.id, m.src, r.term, False, reject_offset=m.prev_offset,
            hint_offset=hint, hint_term=hint_term if hint_term is not None else 0, log_lost=r.recovering,
            log_start_offset=log.first_offset,
        ))
        return
    entries = m.entries
    end = log.end_offset
    for i, e in enumerate(entries):
        if e.offset >= end:
            r.append(entries[i:])
            break
        t = log.term_at(e.offset)
        if t is not None and t != e.term:
            if e.offset <= r.commit_index:
                raise AssertionError(f"conflict at committed offset {e.offset}")
            r.append(entries[i:])  # truncates the conflicting suffix (paper §5.3)
            break
    last_new = entries[-1].last_offset if entries else m.prev_offset
    if r.recovering and last_new > r.recovery_match:
        r.recovery_match = last_new
    r.commit_to(min(m.commit_index, last_new))
    r.send(AppendResponse(r.id, m.src, r.term, True, match_offset=last_new, log_start_offset=log.first_offset))


def handle_snapshot(r: Raft, m: InstallSnapshot) -> None:
    """Thesis §5: install the leader's snapshot (for a partition: start afresh at its log
    start offset), or just commit to it if our log already has it (etcd fast-forward)."""
    snap = m.snapshot
    if snap.offset <= r.commit_index:
        r.send(AppendResponse(r.id, m.src, r.term, True, match_offset=r.commit_index,
                                log_start_offset=r.raft_log.first_offset))
        return
    if r.raft_log.term_at(snap.offset) == snap.term:
        # Our log already has it (etcd fast-forward): no need to throw anything away.
        r.commit_to(snap.offset)
    else:
        r.raft_log.install_snapshot(snap)
        r.commit_index = snap.offset
        conf = ConfState(snap.voters, snap.learners) if snap.voters is not None else r.membership.conf
        r.membership.restore(snap.offset, conf)
        r.voters, r.learners = conf.voters, conf.learners
    r.send(AppendResponse(r.id, m.src, r.term, True, match_offset=snap.offset,
                            log_start_offset=r.raft_log.first_offset))
