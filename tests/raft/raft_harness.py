"""A tiny hand-driven cluster for scenario tests: lossless, in-order, with explicit partitions.

Each node's durable state is a MemoryLog + HardState; ``pump`` handles Readies exactly as the
broker will (install snapshot, truncate, append, persist hard state, send, apply, advance).
"""

from __future__ import annotations

import random

from litemq.raft import HardState, MemoryLog, RaftConfig, RaftNode, Ready, Role, Snapshot


class Cluster:
    def __init__(self, ids=(1, 2, 3), voters=None, config: RaftConfig | None = None, logs=None,
                 hard_states=None, seed: int = 0):
        self.config = config or RaftConfig()
        self.seed = seed
        voters = frozenset(ids if voters is None else voters)
        self.logs: dict[int, MemoryLog] = {}
        self.hs: dict[int, HardState] = {}
        self.nodes: dict[int, RaftNode | None] = {}
        self.inbox: list = []
        self.blocked: set[tuple[int, int]] = set()
        self.applied: dict[int, list] = {}
        self.readies: dict[int, list[Ready]] = {}
        self.sent: list = []
        for i in ids:
            self.logs[i] = (logs or {}).get(i) or MemoryLog(Snapshot(-1, 0, voters if i in voters else frozenset()))
            self.hs[i] = (hard_states or {}).get(i, HardState())
            self.start(i)

    def start(self, i: int, applied: int | None = None) -> RaftNode:
        snap = self.logs[i].snapshot()
        self.nodes[i] = RaftNode(i, snap.voters or frozenset(), self.logs[i], self.config,
                                 random.Random(self.seed * 100 + i), self.hs[i], applied)
        self.applied.setdefault(i, [])
        self.readies.setdefault(i, [])
        return self.nodes[i]

    def crash(self, i: int) -> None:
        self.nodes[i] = None

    def add_node(self, i: int) -> RaftNode:
        self.logs[i] = MemoryLog(Snapshot(-1, 0, frozenset()))
        self.hs[i] = HardState()
        return self.start(i)

    # --- network ---
    def isolate(self, i: int) -> None:
        for j in self.nodes:
            if j != i:
                self.blocked |= {(i, j), (j, i)}

    def heal(self) -> None:
        self.blocked.clear()

    # --- driving ---
    def pump(self) -> None:
        progress = True
        while progress:
            progress = False
            for i, node in self.nodes.items():
                while node is not None and node.has_ready():
                    progress = True
                    rd = node.ready()
                    self.readies[i].append(rd)
                    log = self.logs[i]
                    if rd.snapshot is not None:
                        log.install_snapshot(rd.snapshot)
                    if rd.truncate_to is not None:
                        log.truncate_to(rd.truncate_to)
                    if rd.entries:
                        log.append(rd.entries)
                    if rd.hard_state is not None:
                        self.hs[i] = rd.hard_state
                    self.inbox.extend(rd.messages)
                    self.sent.extend(rd.messages)
                    self.applied[i].extend(rd.committed_entries)
                    node.advance(rd)

    def deliver(self, max_rounds: int = 10_000, drop=None) -> None:
        """Deliver until quiet. ``drop(m)`` returning True drops a message."""
        for _ in range(max_rounds):
            self.pump()
            if not self.inbox:
                return
            msgs, self.inbox = self.inbox, []
            for m in msgs:
                node = self.nodes.get(m.dst)
                if node is None or (m.src, m.dst) in self.blocked or (drop and drop(m)):
                    continue
                node.step(m)
        raise AssertionError("network did not quiesce")

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            for node in self.nodes.values():
                if node is not None:
                    node.tick()
            self.deliver()

    def leaders(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n is not None and n.role is Role.LEADER]

    def elect(self, i: int) -> RaftNode:
        """Make node ``i`` campaign and win (with PreVote if enabled)."""
        self.nodes[i].campaign()
        self.deliver()
        assert self.nodes[i].role is Role.LEADER, self.nodes[i].role
        return self.nodes[i]

    def wait_leader(self, max_ticks: int = 200) -> RaftNode:
        for _ in range(max_ticks):
            self.tick()
            ls = self.leaders()
            if ls:
                return self.nodes[ls[0]]
        raise AssertionError("no leader elected")
