"""Deterministic simulator of one Raft group: ``python -m litemq.raft.sim --seeds 5000``.

Everything is driven by one ``random.Random(seed)``: a virtual clock (a step is one time unit,
nodes tick every ``tick_steps`` steps), a network that drops, delays, duplicates and reorders
messages, symmetric and one-way partitions, crashes that lose whatever the caller had not
made durable yet (a Ready may be cut short after its entries were written but before its hard
state was, or before its messages were all sent), restarts from the durable state, replaced
disks (``p_replace_disk``: a node loses its log and hard state and restarts empty, one at a
time, as a recovering member unless ``recover_replaced_disks`` is off), client
proposals, leadership transfers, membership changes one server at a time (a spare joins as a
learner, is promoted once caught up, voters and learners are removed, the leader included) and
log compaction with snapshots. A failing seed is reported by number and reproduces with ``--seed N``.

Invariants checked after every step (``Violation`` on failure):

- Election Safety: at most one leader per term (paper §5.2).
- State Machine Safety / Log Matching: every node's log up to its commit index equals the
  global committed prefix; a committed entry is never truncated from any node's log; every
  node applies exactly the committed entries, in order (state digests agree per offset).
- Leader Completeness: a node that becomes leader holds every committed entry (paper §5.4).
- Monotonicity: a node's commit index (= high watermark - 1) never goes backwards while it
  runs; after a restart it starts from its persisted commit index, never lower; the persisted
  term never decreases and the persisted vote never changes within a term.
- One change at a time (thesis §4.1): in every node's log two consecutive configurations
  differ in the role of one server at most, and a leader's log never holds more than one
  ``CONFIG`` entry above the highest offset known committed anywhere.

``--digest`` prints, per seed, a CRC-32 of every Ready the nodes produced (entries, hard
state, messages, committed entries...) and one of the committed log, so that two versions of
the core can be shown to behave identically, seed for seed.

Liveness (after the faults): the network is healed (no loss, per-pair FIFO delivery like the
broker's one TCP connection per broker pair) and every node restarted; a leader must be
elected and a fresh proposal committed within ``liveness_commit_ticks``, and every voter
must hold it within ``liveness_catch_up_ticks`` more.
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import random
import sys
import time
import zlib
from collections import deque
from dataclasses import dataclass, field

from litemq.raft.config import RaftConfig
from litemq.raft.errors import RaftError
from litemq.raft.log import MemoryLog
from litemq.raft.membership import changed_members
from litemq.raft.node import RaftNode
from litemq.raft.ready import Ready
from litemq.raft.reconfigure import ConfStepKind, next_conf_step
from litemq.raft.types import ConfState, Entry, EntryKind, HardState, Role, Snapshot, decode_config

__all__ = ["SimConfig", "Simulation", "Violation", "config_for", "main", "reassign_config_for",
           "replace_disk_config_for", "run_seed"]


class Violation(AssertionError):
    """An invariant broke. ``seed`` reproduces it."""

    def __init__(self, seed: int, step: int, message: str, trace: list[str] | None = None) -> None:
        super().__init__(f"seed {seed} step {step}: {message}")
        self.seed = seed
        self.step = step
        self.trace = trace or []


@dataclass
class SimConfig:
    voters: int = 3
    """Initial voters (nodes 1..voters)."""
    spares: int = 1
    """Extra nodes that may join (as learners, then promoted) by membership changes."""
    steps: int = 2000
    tick_steps: int = 4
    raft: RaftConfig = field(default_factory=RaftConfig)
    p_drop: float = 0.05
    p_dup: float = 0.03
    max_delay_steps: int = 6
    p_long_delay: float = 0.02
    long_delay_steps: int = 60
    p_pump: float = 0.85
    p_propose: float = 0.25
    p_crash: float = 0.004
    p_restart: float = 0.02
    p_partition: float = 0.004
    p_heal: float = 0.01
    p_transfer: float = 0.002
    p_member: float = 0.003
    p_compact: float = 0.004
    p_replace_disk: float = 0.0
    """Per step: a node's disk is replaced (log and hard state lost, the node restarts empty;
    its messages still in flight are lost), unless another replaced disk is still catching up
    (with two at once a quorum could lose committed entries)."""
    recover_replaced_disks: bool = True
    """A replaced disk restarts as a recovering member (``RaftNode(recovering=True)``); off,
    it restarts as a plain empty member, which the invariants must catch."""
    liveness_commit_ticks: int = 100
    """Bound on ticks, once healed, until a leader is elected and a new proposal commits."""
    liveness_catch_up_ticks: int = 400
    """Further bound until every voter has caught up to that proposal."""
    reassign: bool = False
    """Instead of random membership changes, move the voters from the first ``voters`` nodes
    to the last ``voters`` ones (a partition reassignment: learners, catch-up, promotion,
    removals, the leader's too), cancelling and resuming at random; the move must be complete
    within ``reassign_ticks`` of the liveness phase."""
    p_cancel: float = 0.05
    """Per reassignment step: swap the target and the original voter set (cancel / redo)."""
    reassign_ticks: int = 600
    reassign_max_lag_offsets: int = 2


class _Node:
    """One simulated broker: durable state (log + hard state) survives crashes, the rest not."""

    __slots__ = ("id", "log", "hs", "raft", "digest", "applied", "applied_conf",
                 "last_commit", "restarts", "leader_terms_checked", "recovering")

    def __init__(self, node_id: int, voters: frozenset[int]) -> None:
        self.id = node_id
        self.log = MemoryLog(Snapshot(-1, 0, voters, 0))
        self.hs = HardState()
        self.raft: RaftNode | None = None
        self.digest = 0
        self.applied = -1
        self.applied_conf = ConfState(voters)
        self.last_commit = -1
        self.restarts = 0
        self.leader_terms_checked: set[int] = set()
        self.recovering = False
        """Durable: started on a replaced disk and not caught up yet (the broker's marker)."""


class Simulation:
    def __init__(self, seed: int, cfg: SimConfig | None = None, digest: bool = False) -> None:
        self.seed = seed
        self.ready_digest: int | None = 0 if digest else None
        """CRC-32 of the repr of every Ready handed out (``None``: not recorded)."""
        self.cfg = cfg = cfg or SimConfig()
        self.rng = random.Random(seed)
        self.now = 0
        self.step_no = 0
        initial = frozenset(range(1, cfg.voters + 1))
        self.ids = list(range(1, cfg.voters + cfg.spares + 1))
        self.nodes = {i: _Node(i, initial if i in initial else frozenset()) for i in self.ids}
        self.net: list = []
        self.seq = 0
        self.blocked: set[tuple[int, int]] = set()
        self.committed: dict[int, Entry] = {}
        self.digests: dict[int, int] = {-1: 0}
        self.leaders: dict[int, int] = {}
        self.proposals = 0
        self.max_committed = -1
        """Highest offset known committed on some node."""
        self.trace: deque[str] = deque(maxlen=200)
        self.lossy = True
        self.fifo: dict[tuple[int, int], int] = {}
        self.original = initial
        self.target = frozenset(self.ids[-cfg.voters:])
        """Reassignment mode: the voter set the group is moving to."""
        self.reassign_steps: list[str] = []
        self.replaced: tuple[int, int] | None = None
        """(node, highest committed offset then) of a replaced disk still catching up."""
        self.disks_replaced = 0
        for node in self.nodes.values():
            self._start(node)

    # ------------------------------------------------------------------ faults
    def fail(self, message: str) -> None:
        raise Violation(self.seed, self.step_no, message, list(self.trace))

    def _start(self, node: _Node) -> None:
        snap = node.log.snapshot()
        node.raft = RaftNode(
            node.id, snap.voters or frozenset(), node.log, self.cfg.raft,
            random.Random(self.seed * 7919 + node.id * 101 + node.restarts), node.hs,
            recovering=node.recovering,
        )
        node.digest = snap.data
        node.applied = snap.offset
        node.applied_conf = ConfState(snap.voters or frozenset(), snap.learners)
        node.last_commit = node.raft.commit_index
        if node.last_commit < node.hs.commit_index:
            self.fail(f"node {node.id} restarted below its persisted commit index")
        self._check_log_prefix(node)
        self.trace.append(f"{self.now} start {node.id} term={node.hs.term} commit={node.last_commit}")

    def crash(self, node: _Node) -> None:
        node.raft = None
        node.restarts += 1
        node.leader_terms_checked.clear()
        self.trace.append(f"{self.now} crash {node.id}")

    def restart(self, node: _Node) -> None:
        self._start(node)

    def replace_disk(self, node: _Node) -> None:
        """The node's disk is replaced: it stops, its messages in flight are lost (the disk
        change outlasts any network delay), and it starts with an empty log and hard state,
        knowing the group's first configuration, like a new node (later ones are in the log)."""
        if node.raft is not None:
            self.crash(node)
        node.log = MemoryLog(Snapshot(-1, 0, frozenset(range(1, self.cfg.voters + 1)), 0))
        node.hs = HardState()
        node.recovering = self.cfg.recover_replaced_disks
        self.net = [item for item in self.net if item[2].src != node.id]
        heapq.heapify(self.net)
        self.replaced = (node.id, self.max_committed)
        self.trace.append(f"{self.now} replace disk of {node.id} (recovering={node.recovering})")
        self._start(node)

    # ------------------------------------------------------------------ network
    def send(self, m) -> None:
        cfg, rng = self.cfg, self.rng
        copies = 1
        if self.lossy:
            if rng.random() < cfg.p_drop:
                return
            if rng.random() < cfg.p_dup:
                copies = 2
        for _ in range(copies):
            if self.lossy and rng.random() < cfg.p_long_delay:
                delay = rng.randint(1, cfg.long_delay_steps)
            else:
                delay = rng.randint(1, cfg.max_delay_steps)
            at = self.now + delay
            if not self.lossy:  # healed: one TCP connection per pair, in order
                pair = (m.src, m.dst)
                at = max(at, self.fifo.get(pair, 0))
                self.fifo[pair] = at
            self.seq += 1
            heapq.heappush(self.net, (at, self.seq, m))

    def deliver_due(self) -> None:
        net = self.net
        while net and net[0][0] <= self.now:
            _, _, m = heapq.heappop(net)
            node = self.nodes[m.dst]
            if node.raft is None or (m.src, m.dst) in self.blocked:
                continue
            node.raft.step(m)

    # ------------------------------------------------------------------ the caller's Ready loop
    def pump(self, node: _Node, crash_at: int | None = None) -> None:
        """Handle Readies like the broker will. ``crash_at`` cuts one Ready short:
        0 nothing persisted, 1 log written but not the hard state, 2 all durable but no message
        sent, 3 half the messages sent."""
        raft = node.raft
        while raft is not None and raft.has_ready():
            rd = raft.ready()
            if self.ready_digest is not None:
                self.ready_digest = zlib.crc32(repr((self.now, node.id, rd)).encode(), self.ready_digest)
            if crash_at == 0:
                return self.crash(node)
            self._persist_log(node, rd)
            if crash_at == 1:
                return self.crash(node)
            self._persist_hard_state(node, rd)
            if crash_at == 2:
                return self.crash(node)
            msgs = rd.messages
            if crash_at == 3:
                for m in msgs[: len(msgs) // 2]:
                    self.send(m)
                return self.crash(node)
            for m in msgs:
                self.send(m)
            self._apply(node, rd)
            raft.advance(rd)

    def _persist_log(self, node: _Node, rd: Ready) -> None:
        log = node.log
        if rd.snapshot is not None:
            removed = log.install_snapshot(rd.snapshot)
            # entries the snapshot covers are subsumed by it; only a discarded suffix counts
            self._check_removed(node, [e for e in removed if e.offset > rd.snapshot.offset])
            self.trace.append(f"{self.now} {node.id} install snapshot @{rd.snapshot.offset}")
        if rd.truncate_to is not None:
            self._check_removed(node, log.truncate_to(rd.truncate_to))
        if rd.entries:
            log.append(rd.entries)

    def _persist_hard_state(self, node: _Node, rd: Ready) -> None:
        hs = rd.hard_state
        if hs is None:
            return
        old = node.hs
        if hs.term < old.term:
            self.fail(f"node {node.id} persisted term went back {old.term} -> {hs.term}")
        if hs.term == old.term and old.voted_for is not None and hs.voted_for != old.voted_for:
            self.fail(f"node {node.id} changed its vote in term {hs.term}")
        if hs.commit_index < old.commit_index:
            self.fail(f"node {node.id} persisted commit index went back")
        if hs.commit_index >= node.log.log_end_offset:
            self.fail(f"node {node.id} persisted commit index {hs.commit_index} beyond its log")
        if not rd.must_sync and self.rng.random() < 0.5:
            return  # commit-index-only change written lazily: not durable, lost on a crash
        node.hs = hs
        if node.recovering and not node.raft.recovering:
            node.recovering = False  # the broker removes its marker with this hard state
            self.trace.append(f"{self.now} {node.id} recovered at term {hs.term} commit {hs.commit_index}")

    def _check_removed(self, node: _Node, removed: list[Entry]) -> None:
        committed = self.committed
        for e in removed:
            if committed.get(e.offset) == e:
                self.fail(f"node {node.id} removed committed entry {e}")

    def _apply(self, node: _Node, rd: Ready) -> None:
        if rd.snapshot is not None:
            snap = rd.snapshot
            want = self.digests.get(snap.offset)
            if want is not None and snap.data is not None and want != snap.data:
                self.fail(f"node {node.id} installed a snapshot @{snap.offset} with a wrong state")
            node.digest, node.applied = snap.data, snap.offset
            node.applied_conf = ConfState(snap.voters or frozenset(), snap.learners)
        for e in rd.committed_entries:
            if e.offset != node.applied + 1:
                self.fail(f"node {node.id} applied {e.offset} after {node.applied}")
            self._observe_committed(node, e)
            node.digest = zlib.crc32(b"%d:%d:%d:" % (e.offset, e.term, e.count) + bytes(e.payload), node.digest)
            node.applied = e.last_offset
            if e.kind == EntryKind.CONFIG:
                node.applied_conf = decode_config(e.payload)
            want = self.digests.setdefault(node.applied, node.digest)
            if want != node.digest:
                self.fail(f"node {node.id} state after applying {node.applied} differs")

    def _observe_committed(self, node: _Node, e: Entry) -> None:
        known = self.committed.setdefault(e.offset, e)
        if e.last_offset > self.max_committed:
            self.max_committed = e.last_offset
        if known != e:
            self.fail(f"node {node.id} has committed {e} but {known} was committed")

    # ------------------------------------------------------------------ invariants
    def _check_log_prefix(self, node: _Node) -> None:
        """A restarted node's durable log up to its commit index is the committed prefix."""
        raft = node.raft
        first = node.log.log_start_offset
        for e in raft.entries(first, raft.commit_index + 1):
            self._observe_committed(node, e)

    def check(self) -> None:
        for node in self.nodes.values():
            raft = node.raft
            if raft is None:
                continue
            c = raft.commit_index
            if c < node.last_commit:
                self.fail(f"node {node.id} commit index went back {node.last_commit} -> {c}")
            if c > node.last_commit:
                start = max(node.last_commit + 1, raft.raft_log.first_offset)
                if start <= c:
                    for e in raft.entries(start, c + 1):
                        self._observe_committed(node, e)
                node.last_commit = c
            self._check_configs(node)
            if raft.role is Role.LEADER:
                term = raft.term
                other = self.leaders.setdefault(term, node.id)
                if other != node.id:
                    self.fail(f"two leaders in term {term}: {other} and {node.id}")
                if term not in node.leader_terms_checked:
                    node.leader_terms_checked.add(term)
                    self.trace.append(f"{self.now} leader {node.id} term {term}")
                    first = raft.raft_log.first_offset
                    for off, e in self.committed.items():
                        if off >= first and raft.term_at(off) != e.term:
                            self.fail(f"leader {node.id} of term {term} lacks committed entry {e}")

    def _check_configs(self, node: _Node) -> None:
        """One change at a time: consecutive configurations in the node's log differ in one
        server's role at most; a leader holds at most one ``CONFIG`` entry above the highest
        offset known committed."""
        m = node.raft.membership
        prev = m.base[1]
        for off, conf in m.changes:
            if prev.voters and len(changed_members(prev, conf)) > 1:  # empty: a spare knew none
                self.fail(f"node {node.id}: config @{off} {conf} changes more than one server after {prev}")
            prev = conf
        if node.raft.role is Role.LEADER:
            pending = [off for off, _ in m.changes if off > self.max_committed]
            if len(pending) > 1:
                self.fail(f"leader {node.id} holds {len(pending)} uncommitted config entries {pending}")

    # ------------------------------------------------------------------ driver
    def live(self) -> list[_Node]:
        return [n for n in self.nodes.values() if n.raft is not None]

    def leader(self) -> _Node | None:
        best = None
        for n in self.live():
            if n.raft.role is Role.LEADER and (best is None or n.raft.term > best.raft.term):
                best = n
        return best

    def propose(self) -> Entry | None:
        leader = self.leader()
        if leader is None:
            return None
        self.proposals += 1
        try:
            return leader.raft.propose(b"p%d" % self.proposals, count=self.rng.randint(1, 3))
        except RaftError:
            return None

    def step(self, faults: bool = True) -> None:
        cfg, rng = self.cfg, self.rng
        self.now += 1
        self.step_no += 1
        if self.now % cfg.tick_steps == 0:
            for n in self.live():
                n.raft.tick()
        self.deliver_due()
        if faults and rng.random() < cfg.p_propose:
            self.propose()
        if faults:
            self._faults()
        for n in self.live():
            if not faults or rng.random() < cfg.p_pump:
                self.pump(n)
        self.check()

    def _faults(self) -> None:
        cfg, rng = self.cfg, self.rng
        r = rng.random
        if r() < cfg.p_crash:
            live = self.live()
            if live:
                node = rng.choice(live)
                self.pump(node, crash_at=rng.randrange(4))
                if node.raft is not None:
                    self.crash(node)
        for n in self.nodes.values():
            if n.raft is None and r() < cfg.p_restart:
                self.restart(n)
        if r() < cfg.p_partition:
            ids = self.ids[:]
            rng.shuffle(ids)
            if r() < 0.5:
                k = rng.randint(1, len(ids) - 1)
                a, b = ids[:k], ids[k:]
                self.blocked = {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}
                self.trace.append(f"{self.now} partition {sorted(a)} | {sorted(b)}")
            else:
                x, y = ids[0], ids[1]
                self.blocked.add((x, y))
                self.trace.append(f"{self.now} one-way block {x}->{y}")
        if self.blocked and r() < cfg.p_heal:
            self.blocked = set()
            self.trace.append(f"{self.now} heal")
        if r() < cfg.p_transfer:
            leader = self.leader()
            if leader is not None:
                others = sorted(leader.raft.voters - {leader.id})
                if others:
                    to = rng.choice(others)
                    self.trace.append(f"{self.now} transfer {leader.id} -> {to}")
                    leader.raft.transfer_leadership(to)
        if r() < cfg.p_member:
            if cfg.reassign:
                if r() < cfg.p_cancel:
                    self.target, self.original = self.original, self.target
                    self.trace.append(f"{self.now} reassignment now toward {sorted(self.target)}")
                self._reassign()
            else:
                self._membership()
        if r() < cfg.p_compact:
            live = self.live()
            if live:
                self._compact(rng.choice(live))
        if cfg.p_replace_disk:
            self._maybe_replace_disk()

    def _maybe_replace_disk(self) -> None:
        cfg, rng = self.cfg, self.rng
        if self.replaced is not None:
            node_id, target = self.replaced
            n = self.nodes[node_id]
            if n.raft is None or n.recovering or n.raft.commit_index < target:
                return
            self.replaced = None
        if rng.random() < cfg.p_replace_disk:
            self.disks_replaced += 1
            self.replace_disk(self.nodes[rng.choice(self.ids)])

    def _membership(self) -> None:
        """One single-server change, picked among those allowed: add a spare as a learner,
        promote a caught-up learner, remove a learner, remove a voter (the leader too), rarely
        add a spare directly as a voter or demote a voter to a learner. The voter count stays
        in ``[max(2, voters - 1), voters + spares]``."""
        leader = self.leader()
        if leader is None or not leader.raft.config_change_allowed():
            return
        raft, rng = leader.raft, self.rng
        voters, learners = raft.voters, raft.learners
        lo, hi = max(2, self.cfg.voters - 1), self.cfg.voters + self.cfg.spares
        spares = [i for i in self.ids if i not in voters and i not in learners]
        options: list[tuple[str, int]] = []
        if spares:
            options.append(("add learner", rng.choice(spares)))
        for lrn in sorted(learners):
            match = raft.match_offset(lrn)
            if len(voters) < hi and match is not None and match >= raft.last_offset - 2:
                options += [("promote learner", lrn)] * 2  # caught up: promote
            options.append(("remove learner", lrn))
        if len(voters) > lo:
            options.append(("remove voter", rng.choice(sorted(voters))))
            if rng.random() < 0.2:
                options.append(("demote voter", rng.choice(sorted(voters))))
        if spares and len(voters) < hi and rng.random() < 0.2:
            options.append(("add voter", rng.choice(spares)))
        if not options:
            return
        what, v = rng.choice(options)
        if what == "add learner":
            raft.propose_add_learner(v)
        elif what == "promote learner":
            raft.propose_promote_learner(v)
        elif what == "remove learner":
            raft.propose_remove_learner(v)
        elif what == "remove voter":
            raft.propose_remove_voter(v)
        elif what == "demote voter":
            raft.propose_config(voters - {v}, learners | {v})
        else:
            raft.propose_add_voter(v)
        self.trace.append(f"{self.now} {leader.id} {what} {v} -> {raft.conf_state}")

    def _reassign(self) -> ConfStepKind | None:
        """One step of the move toward ``self.target`` on the current leader
        (:func:`~litemq.raft.reconfigure.next_conf_step`), proposed even when the leader does not
        allow a change yet (as the broker's drivers do: a leader that skipped its no-op appends
        it when asked); the step's kind, ``None`` without a leader or when refused for now."""
        leader = self.leader()
        if leader is None:
            return None
        raft = leader.raft
        step = next_conf_step(raft.conf_state, self.target, raft.id, raft.match_offset, raft.last_offset,
                              self.cfg.reassign_max_lag_offsets)
        if step.conf is not None:
            try:  # asked even when not allowed yet: a leader that skipped its no-op appends it now
                raft.propose_config(step.conf.voters, step.conf.learners)
            except RaftError:
                return None
            self.reassign_steps.append(f"{step.kind.value} {step.node}")
            self.trace.append(f"{self.now} {leader.id} {step.kind.value} {step.node} -> {step.conf}")
        return step.kind

    def finish_reassignment(self) -> None:
        """Healed, no faults: the move toward ``self.target`` must complete (every member of
        the final configuration holding it) within ``reassign_ticks``."""
        cfg = self.cfg
        deadline = self.now + cfg.reassign_ticks * cfg.tick_steps
        while self.now < deadline:
            self.step(faults=False)
            if self._reassign() is ConfStepKind.DONE:
                leader = self.leader().raft
                members = [self.nodes[i].raft for i in sorted(leader.conf_state.members)]
                if all(n is not None and n.conf_state == leader.conf_state for n in members) \
                        and leader.commit_index >= leader.membership.offset:
                    return
        self.fail(f"reassignment to {sorted(self.target)} not done within {cfg.reassign_ticks} ticks")

    def _compact(self, node: _Node) -> None:
        """Metadata style: snapshot the state machine at its applied offset and drop the
        prefix. Partition style (``apply_entries=False``): retention moves the log start
        offset up to the high watermark; the snapshot has no data ("start afresh")."""
        if self.cfg.raft.apply_entries:
            upto, conf, data = node.applied, node.applied_conf, node.digest
        else:
            upto, conf, data = node.raft.commit_index, node.raft.conf_state_at(node.raft.commit_index), None
        if upto <= node.log.log_start_offset - 1 or node.log.term_at(upto) is None:
            return
        node.log.compact(Snapshot(upto, node.log.term_at(upto), conf.voters, data, conf.learners))
        self.trace.append(f"{self.now} {node.id} compact @{upto}")

    def check_liveness(self) -> None:
        """Heal everything and stop the faults and the load: a leader must be elected and a
        new entry committed within ``liveness_commit_ticks``, and every voter and learner must
        have it within ``liveness_catch_up_ticks`` more (followers may be far behind)."""
        self.blocked = set()
        self.lossy = False
        for n in self.nodes.values():
            if n.raft is None:
                self.restart(n)
        self.trace.append(f"{self.now} liveness phase")
        cfg = self.cfg
        commit_deadline = self.now + cfg.liveness_commit_ticks * cfg.tick_steps
        deadline = commit_deadline + cfg.liveness_catch_up_ticks * cfg.tick_steps
        probe: Entry | None = None
        committed = False
        while self.now < deadline:
            if not committed and self.now >= commit_deadline:
                self.fail(f"liveness: nothing committed within {cfg.liveness_commit_ticks} ticks of healing")
            self.step(faults=False)
            leader = self.leader()
            if leader is None:
                continue
            raft = leader.raft
            if probe is None or raft.term_at(probe.offset) != probe.term:
                probe = None
                try:
                    probe = raft.propose(b"liveness")
                except RaftError:
                    continue
            if raft.commit_index >= probe.last_offset:
                committed = True
            voters = [self.nodes[v] for v in sorted(raft.voters | raft.learners)]
            if all(
                v.raft is not None
                and v.raft.commit_index >= probe.last_offset
                and v.raft.term_at(probe.offset) == probe.term
                for v in voters
            ):
                return
        self.fail(f"liveness: voters not caught up within {cfg.liveness_catch_up_ticks} more ticks")

    def run(self) -> None:
        for _ in range(self.cfg.steps):
            self.step()
        self.check_liveness()
        if self.cfg.reassign:
            self.finish_reassignment()


    def committed_digest(self) -> int:
        """CRC-32 of the committed log (every committed entry, by offset)."""
        return zlib.crc32(repr(sorted(self.committed.items())).encode())


def run_seed(seed: int, cfg: SimConfig | None = None, digest: bool = False) -> Simulation:
    sim = Simulation(seed, cfg, digest)
    sim.run()
    return sim


def config_for(seed: int, steps: int = 2000) -> SimConfig:
    """Seeds alternate between 3-voter and 5-voter groups (one spare node, two for every
    seventh seed, to join as learners); every third seed sends one entry
    per Append (old-term entries then reach a quorum alone); every tenth runs without PreVote
    and CheckQuorum (safety must not depend on them), and every tenth like a partition
    (no committed entries handed back, retention instead of state machine snapshots, followers
    learn the commit index lazily: ``eager_commit_broadcast=False``); seeds
    2 and 3 modulo 4 skip a caught-up new leader's no-op (``noop_only_when_needed``)."""
    raft = RaftConfig()
    p_member = SimConfig.p_member
    if seed % 10 == 9:
        # Without the leader lease a removed server that missed its removal disrupts the
        # group forever (thesis §4.2.3), so these seeds keep the membership fixed.
        raft = RaftConfig(pre_vote=False, check_quorum=False)
        p_member = 0.0
    elif seed % 10 == 4:
        raft = RaftConfig(apply_entries=False, eager_commit_broadcast=False)  # as partition groups
    elif seed % 3 == 1:
        raft = RaftConfig(max_append_bytes=1, max_inflight_appends=16)
    elif seed % 3 == 2:
        raft = RaftConfig(max_append_bytes=16, max_inflight_appends=8)
    if seed % 4 >= 2:  # half the seeds: a caught-up new leader appends no no-op, as partitions do
        raft = dataclasses.replace(raft, noop_only_when_needed=True)
    return SimConfig(voters=5 if seed % 2 else 3, spares=1 + (seed % 7 == 3), steps=steps, raft=raft,
                     p_member=p_member)


def reassign_config_for(seed: int, steps: int = 2000) -> SimConfig:
    """:func:`config_for` in reassignment mode: 3 voters moving to a set sharing one server
    with them ({1,2,3} -> {3,4,5}) or none ({1,2,3} -> {4,5,6}, every third seed), 5 voters
    moving by two servers; membership steps are tried often (a move takes several)."""
    cfg = config_for(seed, steps)
    if seed % 10 == 9:  # no PreVote/CheckQuorum: a removed server would disrupt forever
        cfg.raft = RaftConfig()
    cfg.spares = 3 if cfg.voters == 3 and seed % 3 == 0 else 2
    cfg.reassign = True
    cfg.p_member = 0.03
    return cfg


def replace_disk_config_for(seed: int, steps: int = 2000) -> SimConfig:
    """:func:`config_for` with replaced disks (``p_replace_disk``), always on 5-voter groups
    (seed ``2k`` takes the settings of seed ``2k+1``): a replaced disk does not vote while it
    catches up, and a 3-voter group that a membership change brought down to 2 voters would
    then have no quorum left (safety, not a bug: the lost disk may have held the only other
    copy)."""
    cfg = config_for(seed | 1, steps)
    cfg.p_replace_disk = 0.005
    return cfg


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m litemq.raft.sim", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=300, help="number of seeds to run (from --start)")
    p.add_argument("--start", type=int, default=0, help="first seed")
    p.add_argument("--seed", type=int, default=None, help="run only this seed (reproduce a failure)")
    p.add_argument("--steps", type=int, default=2000, help="steps per seed")
    p.add_argument("--trace", action="store_true", help="print the event trace of a failure")
    p.add_argument("--reassign", action="store_true",
                   help="move the voters to other nodes (learners, promotion, removals) instead of random changes")
    p.add_argument("--replace-disks", action="store_true",
                   help="also replace disks (a node restarts empty, as a recovering member)")
    p.add_argument("--digest", action="store_true",
                   help="print per seed a CRC-32 of every Ready (messages included) and of the committed log")
    args = p.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    t0 = time.perf_counter()
    failures = 0
    commits = 0
    for seed in seeds:
        try:
            make = reassign_config_for if args.reassign else config_for
            if args.replace_disks:
                make = replace_disk_config_for
            sim = run_seed(seed, make(seed, args.steps), args.digest)
            commits += len(sim.committed)
            if args.digest:
                print(f"seed {seed} readies {sim.ready_digest:08x} committed {sim.committed_digest():08x} "
                      f"({len(sim.committed)} offsets, {sim.now} steps)")
        except Violation as v:
            failures += 1
            print(f"FAIL seed {seed}: {v}  (reproduce: python -m litemq.raft.sim --seed {seed} --trace)")
            if args.trace:
                print("\n".join(v.trace))
    n = len(seeds)
    print(f"{n} seeds, {n - failures} passed, {failures} failed, {commits} committed offsets, "
          f"{time.perf_counter() - t0:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
