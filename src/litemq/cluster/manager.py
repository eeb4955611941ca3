"""The cluster side of a broker: Raft groups, metadata, liveness, leadership.

One :class:`ClusterManager` per broker in a replicated cluster (``litemq serve --peers``):

- the **metadata group** (``__cluster_metadata``, voters = ``--peers``): its log is a
  PartitionLog under ``DATA_DIR/__cluster_metadata/log``; committed records are applied to a
  :class:`~litemq.cluster.image.MetadataImage` (brokers, topics, replica assignments, configs,
  producer-id blocks). Admin requests received by any broker are forwarded to the metadata
  leader (RPC ``admin``), which validates, proposes, waits for the commit and answers with the
  record's offset; the forwarding broker answers its client once it has applied that offset
  itself (read-your-writes). All of it is bounded by the request's own timeout (CreateTopics
  ``timeout_ms``, else ``ADMIN_TIMEOUT_MS``): while no leader is known (a cluster starting, an
  election) the forwarding broker waits for one, a leader that loses its leadership answers
  "retry" at once and the forwarding broker asks the new one, and only when the time is up does
  the client get REQUEST_TIMED_OUT (issue 12).
- one **partition group** per hosted replica (voters = the replica assignment; the first
  replica campaigns at creation so leaders start balanced). Term = leader epoch, commit
  index + 1 = high watermark (:class:`~litemq.cluster.partition.ReplicatedPartition`).
- **ticks**: every ``raft.tick.ms`` each group is ticked; elections after
  ``raft.election.timeout.ms`` (randomised up to 2x) of silence, with PreVote and CheckQuorum.
- **broker liveness**: every ``broker.heartbeat.interval.ms`` each broker sends the metadata
  leader a heartbeat with the partitions it leads (leadership is soft state, as DESIGN.md
  says); the answer carries the live brokers (heard from within ``broker.session.timeout.ms``;
  others are fenced: left out of Metadata responses) and the leader of every partition.
- **leader balance**: every ``leader.imbalance.check.interval.ms`` a leader that is not the
  preferred replica hands leadership back to it once it is live and caught up (Raft
  leadership transfer, thesis §3.10); on clean shutdown leaders hand over first.

Split by concern: this module is the metadata controller (metadata group, ticks, liveness,
RPC, views); :mod:`litemq.cluster.admin` the admin operations (validate, propose, forward to
the metadata leader, auto-creation, producer-id blocks); :mod:`litemq.cluster.partition_groups`
the partition group registry (open/close a Raft group per hosted replica, leader balance).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

from litemq import limits
from litemq.cluster.admin import ADMIN_TIMEOUT_MS, PRODUCER_ID_BLOCK_SIZE, ClusterAdmin
from litemq.cluster.disk_identity import clear_replaced_disk, detect_replaced_disk
from litemq.cluster.group import RaftGroup
from litemq.cluster.join import JoinRefused, join_cluster
from litemq.cluster.metadata_quorum import MetadataQuorum
from litemq.cluster.image import (ApplyResult, MetadataImage, decode_record, encode_record, endpoints_from_json,
                                  endpoints_to_json)
from litemq.cluster.partition_groups import (LEADER_BALANCE_MAX_LAG_OFFSETS, META_GROUP, PartitionGroupRegistry,
                                             group_id_of)
from litemq.cluster.reassignment import PartitionReassignments
from litemq.cluster.throttle import ReplicationThrottle
from litemq.cluster.transport import Transport
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.protocol.records import build_batch, decode_batch
from litemq.raft import AppendResponse, EntryKind, HeartbeatResponse, Ready, Role, VoteResponse
from litemq.storage.config import LogConfig
from litemq.storage.log import PartitionLog
from litemq.storage.manager import METADATA_DIR_NAME

if TYPE_CHECKING:
    from litemq.cluster.host import ClusterHost, RaftObserver

log = logging.getLogger(__name__)

METADATA_SEGMENT_BYTES = 8 * 1024 * 1024
QUIESCE_AFTER_TICKS = 3
PEER_SILENCE_TICKS = 3
"""A peer broker silent for this many ticks counts as gone for quiescent followers."""

__all__ = ["ClusterManager", "META_GROUP", "ADMIN_TIMEOUT_MS", "PRODUCER_ID_BLOCK_SIZE",
           "LEADER_BALANCE_MAX_LAG_OFFSETS", "group_id_of"]


class ClusterManager(ClusterAdmin, PartitionGroupRegistry, PartitionReassignments, MetadataQuorum):
    """Raft groups and cluster metadata of one broker (the metadata controller: metadata group,
    scheduling, liveness, RPC, views), with its admin operations (:class:`ClusterAdmin`),
    partition group registry (:class:`PartitionGroupRegistry`), partition reassignments
    (:class:`PartitionReassignments`) and the metadata quorum's membership: observers and
    AddRaftVoter/RemoveRaftVoter (:class:`MetadataQuorum`). Event-loop thread only."""

    def __init__(self, host: "ClusterHost") -> None:
        cfg = host.config
        self.host = host
        self.config = cfg
        self.node_id = cfg.node_id
        self.voters = cfg.quorum_voters()
        """The static metadata voters of ``--peers`` (node id -> RPC address; empty for a broker
        that joined with ``--join``). The voters in effect are ``self.meta.node.voters``."""
        self.bootstrap_servers = cfg.quorum_bootstrap_servers()
        if self.node_id not in self.voters and not self.bootstrap_servers:
            raise ValueError(f"node id {self.node_id} is not among the peers {sorted(self.voters)}")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.executor = host.executor
        self.image = MetadataImage()
        self.groups: dict[str, RaftGroup] = {}
        self.meta: RaftGroup | None = None
        self.transport: Transport | None = None
        self.applied_offset = -1
        self.live_brokers: set[int] = set(self.voters) | {self.node_id}
        self.leaders: dict[str, tuple[int, int]] = {}
        self._election_ticks = max(2, cfg.raft_election_timeout_ms // max(cfg.raft_tick_ms, 1))
        self._dirty: set[RaftGroup] = set()
        self._process_scheduled = False
        self._apply_waiters: list[tuple[int, asyncio.Future]] = []
        self._proposals: dict[int, tuple[int, asyncio.Future]] = {}
        """Metadata leader: offset of a proposed entry -> (term, future of its result)."""
        self._leader_waiters: list[asyncio.Future] = []
        """Futures completed when the metadata group's role or known leader changes."""
        self._heartbeat_now = asyncio.Event()
        self._beat_waiters: list[asyncio.Future] = []
        self._leader_metadata_commit = -1
        """The metadata leader's commit index in its last heartbeat answer."""
        """Futures completed when a heartbeat sent after they were added has been answered."""
        self._auto_creating: set[str] = set()
        self._last_seen: dict[int, float] = {}
        self._applied_by: dict[int, int] = {}
        """Metadata leader: each broker's applied metadata offset, from its heartbeats."""
        self._applied_by_waiters: list[asyncio.Future] = []
        self._leader_state_term = -1
        self._claims: dict[str, tuple[int, int]] = {}
        self._registering: set[int] = set()
        self._pid_next = 0
        self._pid_end = 0
        self._pid_fetch: asyncio.Task | None = None
        self._tasks: list[asyncio.Task] = []
        self._spawned: set[asyncio.Task] = set()
        self._stopping = False
        self._tick_no = 0
        self._last_tick_at: float | None = None
        """Loop time (s) at which the tick loop last ran; None before its first round."""
        self.lease_s = cfg.raft_election_timeout_ms / 1000
        """The leader lease (s): one election timeout (``RaftGroup.lease_current``)."""
        self.raft_messages_received = 0
        self._loaded_logs: dict[tuple[str, int], PartitionLog] = {}
        self._replay_until: int | None = None
        """While not None: the last metadata offset in this broker's log when it started; until it
        is applied, the replay rebuilds the image without acting on replicas (see
        _end_replay_when_caught_up)."""
        self._replayed: tuple[set, set, set] = (set(), set(), set())
        """(deleted partitions, changed partitions, changed topics) seen during the replay."""
        self._failed = False
        """This broker found its data dir belongs to another cluster and asked its host to stop."""
        self._foreign_peers: dict[int, str] = {}
        """Peer id -> the other cluster id its HELLO named (links refused)."""
        self.replaced_disk = False
        """The data dir is a replaced disk (cluster/disk_identity.py): Raft groups opened while
        it holds start recovering (no vote until caught up)."""
        self.rpc_ops: dict[str, Callable[[int, dict], Awaitable[dict]]] = {}
        """More broker-to-broker RPC ops by name, answered for brokers only (the broker's transaction
        RPCs ``write_txn_markers``/``verify_txn``, the HTTP layer's API forwarding)."""
        self.rpc_ops["elect_preferred"] = self._rpc_elect_preferred
        self._quorum_changing = False
        """Metadata leader: an AddRaftVoter/RemoveRaftVoter is running (one at a time, KIP-853)."""
        self._told_unregistered = False
        self._heartbeat_probe = 0  # which peer a heartbeat without a known leader goes to next
        self.incarnation = uuid.uuid4().hex
        """This broker process's id in its registration (new at each start): a broker unregistered
        while it runs (``broker decommission``) does not register again until it restarts."""
        self._reconf_watch: set[str] = set()
        """Partition groups whose leader may have to change their configuration (reassignment)."""
        self._completing: set[tuple] = set()
        """Metadata leader: (topic, partition, target) of moves whose end is being committed."""
        self.throttle: ReplicationThrottle | None = None
        """The replication throttles (set at start; configured from the image on each tick)."""
        self._throttle_applied = -2

    # ================================================================== lifecycle
    async def start(self, loaded_logs: dict[tuple[str, int], PartitionLog]) -> None:
        """Open the metadata log, replay it, open the hosted replicas, connect to peers."""
        self.loop = asyncio.get_running_loop()
        self._loaded_logs = dict(loaded_logs)
        meta_dir = Path(self.config.data_dir) / METADATA_DIR_NAME / "log"
        meta_dir.mkdir(parents=True, exist_ok=True)
        meta_cfg = LogConfig.from_kafka_configs(
            {"segment.bytes": str(METADATA_SEGMENT_BYTES), "retention.ms": "-1", "retention.bytes": "-1",
             "cleanup.policy": "delete"}, base=self.host.default_log_config)
        plog = await self.loop.run_in_executor(self.executor, PartitionLog.open, meta_dir, meta_cfg)
        snapshot = self._read_snapshot_file()
        if snapshot is not None:
            offset, term, data = snapshot
            if plog.log_start_offset <= offset:  # crashed between writing it and cutting the log
                if plog.log_end_offset <= offset:
                    plog.truncate_fully_and_start_at(offset + 1)
                else:
                    plog.delete_records_before(offset + 1)
            self.image = MetadataImage.from_json(json.loads(data))
            snapshot = (term, data)
        from litemq.security.tls import rpc_client_context

        identity = self.host.identity
        host, port = self.config.rpc_listen_host, self.config.rpc_listen_port
        meta_voters, meta_learners, peers = set(self.voters), set(), dict(self.voters)
        if self.bootstrap_servers:  # KRaft's controller.quorum.bootstrap.servers: join as an observer
            self.transport = Transport(self, host, port, self.voters)
            await self.transport.start()
            # A first start waits for the cluster; a restart (metadata on disk) asks once and
            # goes on with the configuration and addresses it recorded (its quorum may need it).
            fresh = plog.log_end_offset == 0 and snapshot is None
            try:
                joined = await join_cluster(self.bootstrap_servers, self._registration(),
                                            rpc_client_context(self.config), self.loop,
                                            limits.CLUSTER_JOIN_TIMEOUT_MS / 1000 if fresh else 0)
            except JoinRefused:
                raise
            except ValueError as exc:
                if fresh:
                    raise
                log.warning("%s; starting from the recorded metadata quorum", exc)
                joined = None
            if joined is not None:
                if joined.cluster_id and identity.cluster_id and joined.cluster_id != identity.cluster_id:
                    raise ValueError(f"Invalid cluster.id in: {identity.path}. Expected {joined.cluster_id} (the "
                                     f"cluster of {joined.via}), but read {identity.cluster_id}")
                peers.update(joined.peers)
                for n, addr in joined.peers.items():
                    self.transport.add_peer(n, addr)
                if not meta_voters:
                    meta_voters = set(joined.voters)
                if self.node_id not in meta_voters:
                    meta_learners = {self.node_id}  # an observer until AddRaftVoter (a recorded conf wins)
        self.replaced_disk = await self.loop.run_in_executor(
            self.executor, detect_replaced_disk, Path(self.config.data_dir), self.node_id, identity.directory_id,
            identity.created, peers, rpc_client_context(self.config))
        self._replay_until = plog.log_end_offset - 1
        self.meta = RaftGroup(self, META_GROUP, plog, meta_voters, apply_entries=True,
                              on_ready=self._on_meta_ready, election_timeout_ticks=self._election_ticks,
                              snapshot=snapshot, recovering=self.replaced_disk, learners=meta_learners)
        self.groups[META_GROUP] = self.meta
        self.applied_offset = self.meta.node.applied
        for _ in range(100_000):  # replay what is known committed (no network needed)
            if self.meta._persisting or not self.meta.node.has_ready():
                break
            self.meta.process()
        # meta.properties against the metadata log of this data dir (InconsistentDataDirError)
        self.host.identity.bind_cluster_id(self.image.cluster_id)
        self.host.on_broker_configs_changed()  # the replayed dynamic broker configs
        self._reconcile_replicas()
        self._end_replay_when_caught_up()
        if self.transport is None:
            self.transport = Transport(self, host, port, self.voters)
            await self.transport.start()
        self._sync_peers()
        self.throttle = ReplicationThrottle(self.node_id, self.loop, self.transport.send, self._step, self._in_sync)
        if self.meta.node.term == 0 and self.voters and self.node_id == min(self.voters):
            self.meta.node.campaign()  # a fresh cluster: the lowest id asks first
        self.mark_dirty(self.meta)
        self._tasks = [self.loop.create_task(self._tick_loop()),
                       self.loop.create_task(self._heartbeat_loop()),
                       self.loop.create_task(self._maintenance_loop())]
        log.info("broker %d joined cluster (metadata voters %s, learners %s, rpc %s:%d)", self.node_id,
                 sorted(self.meta.node.voters), sorted(self.meta.node.learners), host, self.transport.listen_port)

    async def stop(self) -> None:
        """Hand over leaderships (briefly), then stop ticking and close the groups."""
        self._stopping = True
        await self._hand_over_leadership(timeout_s=2.0)
        for t in self._tasks:
            t.cancel()
        if self.transport is not None:
            await self.transport.stop()
        for g in list(self.groups.values()):
            g.close()
        if self.meta is not None:
            await self.loop.run_in_executor(self.executor, self.meta.plog.close)

    async def _hand_over_leadership(self, timeout_s: float) -> None:
        led = []
        for g in self.groups.values():
            node = g.node
            if not node.is_leader:
                continue
            others = {v: m for v, m in node.match_offsets().items() if v != self.node_id and v in self.live_brokers}
            if not others:
                continue
            target = max(others, key=lambda v: others[v])
            try:
                node.transfer_leadership(target)
                led.append(g)
                self.mark_dirty(g)
            except Exception:
                pass
        deadline = self.loop.time() + timeout_s
        while led and self.loop.time() < deadline:
            await asyncio.sleep(0.05)
            led = [g for g in led if g.node.is_leader]

    # ================================================================== scheduling
    def mark_dirty(self, group: RaftGroup) -> None:
        self._dirty.add(group)
        if not self._process_scheduled:
            self._process_scheduled = True
            self.loop.call_soon(self._process_dirty)

    def _process_dirty(self) -> None:
        self._process_scheduled = False
        dirty, self._dirty = self._dirty, set()
        for g in dirty:
            g.process()

    def send(self, group_id: str, messages) -> None:
        t = self.transport
        if t is None:
            return
        th = self.throttle if self.throttle is not None and self.throttle.active() else None
        for m in messages:
            if th is None or not th.hold_outgoing(group_id, m):  # replication throttle (throttle.py)
                t.send(m.dst, group_id, m)

    def on_raft(self, peer_id: int, items) -> None:
        """Raft messages received from ``peer_id`` (one frame, possibly many groups)."""
        self.raft_messages_received += len(items)
        th = self.throttle if self.throttle is not None and self.throttle.active() else None
        for group_id, msg in items:
            if th is None or not th.hold_incoming(peer_id, group_id, msg):
                self._step(peer_id, group_id, msg)

    def _in_sync(self, group_id: str, broker: int) -> bool:
        """``broker`` is a voter of ``group_id`` (the throttle's ISR; a learner catching up is not)."""
        g = self.groups.get(group_id)
        return g is None or broker in g.node.voters

    def _step(self, peer_id: int, group_id: str, msg) -> None:
        """One received Raft message into its group (now, or when the follower throttle lets it)."""
        g = self.groups.get(group_id)
        if g is None or g.closed:
            return  # not created here yet (metadata still catching up): the leader retries
        g.node.step(msg)
        g.last_msg_tick = self._tick_no
        heartbeat_answer = isinstance(msg, HeartbeatResponse)
        if (heartbeat_answer or isinstance(msg, AppendResponse) or (isinstance(msg, VoteResponse) and msg.granted
                                                                     and not msg.pre_vote)) \
                and msg.term == g.node.term:
            g.note_heard(peer_id, msg.term, self.loop.time())  # it acknowledges this term (leader lease)
        if (heartbeat_answer or isinstance(msg, AppendResponse)) and g.on_follower_answer is not None:
            g.on_follower_answer(msg)  # the follower's log start offset (a partition's low watermark)
        if not heartbeat_answer:  # the only thing a quiet leader can ignore
            g.wake()
        self.mark_dirty(g)

    async def _tick_loop(self) -> None:
        interval = self.config.raft_tick_ms / 1000
        self._last_tick_at = self.loop.time()
        while True:
            await asyncio.sleep(interval)
            self._tick_no += 1
            now = self.loop.time()
            gap_s, self._last_tick_at = now - self._last_tick_at, now
            stalled = gap_s > self.lease_s
            if stalled:  # (a paused process, or a loop blocked that long): followers may have elected
                log.warning("the Raft tick loop did not run for %.1f s: partition leaders confirm their "
                            "leadership with their followers before their coordinators act again", gap_s)
            for g in list(self.groups.values()):
                if not g.closed and g.quiet and g.node.is_leader:
                    self._renew_quiet_lease(g, now, stalled)
                if not g.closed and self._should_tick(g):
                    g.node.tick()
                    if self._first_campaign_lost(g):
                        g.node.campaign()
                    self.mark_dirty(g)
            if self._reconf_watch:
                self._drive_reconfigurations()
            if self._throttle_applied != self.applied_offset:  # configs may have changed
                self._throttle_applied = self.applied_offset
                self.throttle.configure(self.image.broker_configs,
                                        {t: i.configs for t, i in self.image.topics.items()})
            self.transport.keepalive()

    def _first_campaign_lost(self, g: RaftGroup) -> bool:
        """A new partition's preferred replica still pre-candidate in term 0: its first
        pre-vote went to replicas that had not created the group yet (they drop messages for
        unknown groups), so it asks again every tick instead of after an election timeout,
        before another replica's timer fires and a leader change follows at the next balance.
        A pre-vote changes no term, so asking again costs nothing."""
        if g.tp is None or g.node.term != 0 or g.node.role is not Role.PRE_CANDIDATE:
            return False
        p = self.host.replicas.get(*g.tp)
        return p is not None and bool(p.replicas) and p.replicas[0] == self.node_id

    def on_peer_connected(self, peer_id: int) -> None:
        """A broker-to-broker link to ``peer_id`` came up (called by the transport).

        While no metadata leader is known, the lowest voter id asks for votes now rather than
        after an election timeout: in a starting cluster its first campaign went to peers that
        were not up yet, and nobody asks again for 1-2 election timeouts. PreVote makes this
        harmless when a leader exists (its followers, in their lease, ignore the request)."""
        node = self.meta.node if self.meta is not None else None
        if (node is None or self._stopping or peer_id not in self.voters or self.node_id != min(self.voters)
                or node.leader_id is not None or node.is_leader):
            return
        node.campaign()
        self.mark_dirty(self.meta)

    def ticked_within(self, seconds: float) -> bool:
        """The tick loop ran within the last ``seconds`` (loop time): this broker was not stalled
        (paused, its loop blocked) for that long. Until the first tick after a stall runs, what
        a leader last heard is older than it looks: followers may have elected another leader
        meanwhile, and backlogged bytes read since refresh ``peer_alive`` (leader lease)."""
        last = self._last_tick_at
        return last is not None and self.loop.time() - last <= seconds

    def _renew_quiet_lease(self, g: RaftGroup, now: float, stalled: bool) -> None:
        """A quiet leader's lease (no Raft message flows): its followers do not campaign while
        they hear this broker (``_should_tick``), and it hears theirs, so each voter whose broker
        is alive counts as heard now (``RaftGroup.heard_at``). After a stall, or once a majority
        of the voters' brokers is silent, that no longer holds: the group wakes, heartbeats and
        must hear its followers again in Raft messages (CheckQuorum steps it down otherwise)."""
        voters = g.node.voters
        alive = [v for v in voters if self.peer_alive(v)]
        if stalled or len(alive) < len(voters) // 2 + 1:
            g.wake()
            self.mark_dirty(g)
            return
        term = g.node.term
        for v in alive:
            g.note_heard(v, term, now)

    def peer_alive(self, node_id: int) -> bool:
        """This broker, or a peer that is connected and was heard from within
        ``PEER_SILENCE_TICKS`` ticks (keepalives arrive every tick)."""
        if node_id == self.node_id:
            return True
        heard = self.transport.last_heard.get(node_id)
        return (self.transport.connected(node_id) and heard is not None
                and self.loop.time() - heard <= PEER_SILENCE_TICKS * self.config.raft_tick_ms / 1000)

    def _should_tick(self, g: RaftGroup) -> bool:
        """Quiescence: an idle partition group costs nothing per tick.

        A leader whose followers all match its log end, know its commit index and (those on
        live brokers) reported its log start offset stops ticking (so it sends no heartbeats)
        after ``QUIESCE_AFTER_TICKS`` unchanged ticks, unless its owner holds it awake (a
        DeleteRecords waiting for the followers' log starts); any proposal or received message
        wakes it. A follower stops ticking once its leader has gone quiet
        (no message for the group for two ticks) as long as the leader's *broker* is connected
        and heard from (broker-pair keepalives every tick); when that broker goes silent every
        such follower ticks again and elects a new leader after the usual election timeout.
        A leader quiesces only while a majority of its voters' brokers is alive (the quiet
        leader lease, ``_renew_quiet_lease``, which wakes it when that ends).
        The metadata group always ticks."""
        if not self.config.raft_quiesce_enable or g is self.meta:
            return True
        node = g.node
        if node.is_leader:
            if g.quiet:
                return False
            last = node.last_offset
            matches = node.match_offsets()
            start = g.view.log_start_offset
            starts = node.member_log_start_offsets()
            sig = (last, node.commit_index, tuple(sorted(matches.items())), start)
            if (node.commit_index == last and node.transferee is None and sig == g.last_sig and not g.hold_awake
                    and all(m == last for m in matches.values())
                    and all(starts.get(v, start) == start or not self.peer_alive(v) for v in matches)
                    and sum(1 for v in node.voters if self.peer_alive(v)) >= len(node.voters) // 2 + 1):
                g.stable_ticks += 1
                if g.stable_ticks >= QUIESCE_AFTER_TICKS:
                    g.quiet = True
                    return False
            else:
                g.stable_ticks = 0
            g.last_sig = sig
            return True
        leader = node.leader_id
        if leader is None or node.role is not Role.FOLLOWER:
            return True
        if self._tick_no - g.last_msg_tick <= 2:
            return True  # the leader still talks to this group
        return not self.peer_alive(leader)  # the leader's broker went silent: time to elect

    async def _maintenance_loop(self) -> None:
        """Commit-index checkpoints (every second) and preferred-leader balancing (every
        ``leader.imbalance.check.interval.ms``, which may be shorter than a second)."""
        last_balance = last_checkpoint = self.loop.time()
        while True:
            balance_s = self.config.leader_imbalance_check_interval_ms / 1000
            await asyncio.sleep(min(1.0, balance_s) if self.config.auto_leader_rebalance_enable else 1.0)
            if self.config.auto_leader_rebalance_enable and self.loop.time() - last_balance >= balance_s:
                last_balance = self.loop.time()
                self._balance_leaders()
            if self.loop.time() - last_checkpoint < 0.99:  # (asyncio may wake a sleep a hair early)
                continue
            last_checkpoint = self.loop.time()
            for g in list(self.groups.values()):
                g.checkpoint_commit()
            self._reconcile_observers()
            if (self.replaced_disk and not self.meta.node.recovering
                    and self.applied_offset >= self.meta.node.commit_index):
                self.replaced_disk = False  # every replica of the old disk is open, recovering or not
                await self.loop.run_in_executor(self.executor, clear_replaced_disk, Path(self.config.data_dir))

    # ================================================================== metadata group
    def _on_meta_ready(self, rd: Ready) -> None:
        peers_changed = False  # a snapshot or a registration may name a new broker's RPC address
        if rd.snapshot is not None and rd.snapshot.data is not None:
            peers_changed = True
            self.image = MetadataImage.from_json(json.loads(rd.snapshot.data))
            self.meta.view.snapshot_data = rd.snapshot.data
            self._write_snapshot_file(rd.snapshot.offset, rd.snapshot.term, rd.snapshot.data)
            self.applied_offset = rd.snapshot.offset
            self.host.on_broker_configs_changed()
            self._reconcile_replicas()
        for e in rd.committed_entries:
            if e.kind == EntryKind.DATA:
                try:
                    _, records = decode_batch(e.payload, 0)
                    recs = [decode_record(r.value) for r in records if r.value is not None]
                except Exception as exc:
                    log.error("metadata offset %d: undecodable entry skipped: %s", e.offset, exc)
                    recs = []
                result = ApplyResult()
                for rec in recs:
                    result = self.image.apply(rec)
                    self._apply_side_effects(result)
                    peers_changed = peers_changed or rec.get("type") == "register_broker"
                    if rec.get("type") in ("create_topic", "create_partitions") and not self.meta.node.is_leader:
                        self._heartbeat_now.set()  # the leader answers the creation once all applied it
                proposed = self._proposals.pop(e.last_offset, None)
                if proposed is not None and not proposed[1].done():
                    # Same offset and term: our entry (Raft log matching); else another leader's.
                    proposed[1].set_result({"error": result.error, "message": result.message, "offset": e.last_offset}
                                           if proposed[0] == e.term else {"retry": True})
            self.applied_offset = e.last_offset
        self._end_replay_when_caught_up()
        if self.image.cluster_id and self.image.cluster_id != self.host.identity.cluster_id and not self._failed:
            self._bind_cluster_id()
        if peers_changed and self.transport is not None:
            self._sync_peers()
        if rd.soft_state is not None:
            self._on_meta_role(rd.soft_state.role)
            waiters, self._leader_waiters = self._leader_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
            self._heartbeat_now.set()  # tell a new leader about this broker at once
        if self._proposals:
            self._drop_lost_proposals()
        if self.applied_offset - self.meta.view.log_start_offset >= self.config.metadata_snapshot_interval_entries:
            self._take_snapshot()
        if self._apply_waiters:
            keep = []
            for off, fut in self._apply_waiters:
                if fut.done():
                    continue
                if off <= self.applied_offset:
                    fut.set_result(None)
                else:
                    keep.append((off, fut))
            self._apply_waiters = keep

    def _drop_lost_proposals(self) -> None:
        """Answer "retry" for every proposal that can no longer commit as proposed: this broker
        lost the metadata leadership (or a new term began), or the log was applied past it
        without it (a snapshot). The forwarding broker then proposes again through the new
        leader instead of waiting for its timeout."""
        node = self.meta.node
        for offset, (term, fut) in list(self._proposals.items()):
            if not node.is_leader or term != node.term or offset <= self.applied_offset:
                del self._proposals[offset]
                if not fut.done():
                    fut.set_result({"retry": True})

    def _leader_state(self) -> None:
        """Start this term's liveness view as metadata leader (once per term): every voter and
        registered broker counts as just seen. Called lazily, because requests can reach a new
        leader before the Ready announcing its role is handled."""
        term = self.meta.node.term
        if self._leader_state_term != term:
            self._leader_state_term = term
            now = self.loop.time()
            self._last_seen = {n: now for n in set(self.image.brokers) | set(self.voters)}
            self._claims = {}

    def _on_meta_role(self, role: Role) -> None:
        if role is Role.LEADER:
            self._leader_state()
            log.info("broker %d is the metadata leader (term %d)", self.node_id, self.meta.node.term)
            if not self.image.cluster_id:
                self._spawn(self._admin_local("init", {"cluster_id": uuid.uuid4().hex[:22]}))

    def _bind_cluster_id(self) -> None:
        """The image names a cluster id meta.properties does not have yet (a new data dir
        learnt it from the metadata log): store it; a different stored one stops the broker."""
        try:
            self.host.identity.bind_cluster_id(self.image.cluster_id)
        except (OSError, ValueError) as exc:
            self._failed = True
            self.host.fail(str(exc))

    def local_cluster_id(self) -> str:
        """Transport owner: the cluster id of this broker's HELLO ("" while unknown)."""
        return self.image.cluster_id or self.host.identity.cluster_id or ""

    def on_foreign_cluster(self, peer_id: int, cluster_id: str) -> None:
        """Transport owner: broker ``peer_id`` belongs to cluster ``cluster_id``, not ours, and
        the link was refused. When a majority of the metadata voters name that same other
        cluster, this broker is the foreign one (its data dir belongs to another cluster): it
        stops with Kafka's ``Invalid cluster.id`` message (exit status 1)."""
        if self._foreign_peers.get(peer_id) != cluster_id:
            log.error("broker %s belongs to cluster %s, this broker (%d) to cluster %s: refusing its connection "
                      "(a data dir of another cluster?)", peer_id, cluster_id, self.node_id, self.local_cluster_id())
        self._foreign_peers[peer_id] = cluster_id
        voters = self.meta.node.voters if self.meta is not None else set(self.voters)
        others = sorted(n for n, c in self._foreign_peers.items() if c == cluster_id and n in voters)
        if voters and len(others) >= len(voters) // 2 + 1 and not self._failed:
            self._failed = True
            self.host.fail(f"Invalid cluster.id in: {self.host.identity.path}. Expected {cluster_id} (the cluster "
                           f"of metadata voters {','.join(map(str, others))}), but read {self.local_cluster_id()}")

    def _take_snapshot(self) -> None:
        """Snapshot the image at the applied offset and cut the metadata log before it
        (thesis §5.1); followers further behind get the image by InstallSnapshot."""
        offset = self.applied_offset
        term = self.meta.node.term_at(offset)
        if term is None:
            return
        data = json.dumps(self.image.to_json(), separators=(",", ":")).encode()
        try:
            self._write_snapshot_file(offset, term, data)
        except OSError as exc:
            log.warning("cannot write the metadata snapshot: %s", exc)
            return
        view = self.meta.view
        view.snapshot_term, view.snapshot_data = term, data
        self.meta.plog.delete_records_before(offset + 1)
        log.info("metadata snapshot at offset %d (term %d, %d bytes); log start now %d", offset, term, len(data),
                 self.meta.plog.log_start_offset)

    def _read_snapshot_file(self) -> tuple[int, int, bytes] | None:
        path = Path(self.config.data_dir) / METADATA_DIR_NAME / "snapshot.json"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        head, _, data = raw.partition(b"\n")
        meta = json.loads(head)
        return int(meta["offset"]), int(meta["term"]), data

    def _write_snapshot_file(self, offset: int, term: int, data: bytes) -> None:
        path = Path(self.config.data_dir) / METADATA_DIR_NAME / "snapshot.json"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(json.dumps({"offset": offset, "term": term}).encode() + b"\n" + data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def _apply_side_effects(self, result: ApplyResult) -> None:
        if result.error:
            return
        if result.broker_configs_changed:
            self.host.on_broker_configs_changed()
        if self._replay_until is not None:
            deleted, partitions, topics = self._replayed
            deleted.update(result.deleted)
            partitions.update(result.changed_partitions)
            topics.update(result.changed_topics)
            return
        for topic, index in result.deleted:
            self._drop_replica(topic, index, delete_log=True)
        if result.created or result.changed_topics:
            self._reconcile_replicas(result.changed_topics)
        for topic, index in result.changed_partitions:
            self._on_partition_changed(topic, index)

    def _end_replay_when_caught_up(self) -> None:
        """End the start-up replay once the metadata log this broker had when it started is
        applied (or what is left of it, when a new leader truncated its tail), and act on the
        image as it is then.

        A replayed record is history whose effects on this broker's replicas already happened,
        or are superseded by later records: a partition moved away and back ([2] -> [3] -> [2])
        or a topic deleted and created again must not lose the replica this broker hosts now
        (Kafka's brokers act on the image they caught up to). So the replay only rebuilds the
        image; then the replicas the image no longer places here are deleted, and the others
        are opened or told their replica set."""
        if self._replay_until is None:
            return
        if self.applied_offset < min(self._replay_until, self.meta.plog.log_end_offset - 1):
            return
        self._replay_until = None
        (deleted, partitions, topics), self._replayed = self._replayed, (set(), set(), set())
        gone = sorted(tp for tp in deleted | partitions if self.node_id not in self.image.replicas(*tp))
        for topic, index in gone:
            loaded = self._loaded_logs.pop((topic, index), None)
            if group_id_of(topic, index) in self.groups or loaded is not None:
                log.info("%s-%d: not a replica here in the metadata image: deleting the local replica", topic, index)
                self._drop_replica(topic, index, delete_log=True)
        self._reconcile_replicas(sorted(topics))
        for topic, index in sorted(partitions):
            if self.node_id in self.image.replicas(topic, index):
                self._on_partition_changed(topic, index)

    # ================================================================== proposals
    def _spawn(self, coro) -> None:
        task = self.loop.create_task(coro)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)

    async def wait_applied_everywhere(self, offset: int, timeout_s: float) -> bool:
        """Metadata leader: until every live broker reported (heartbeat ``applied``) that it
        applied the metadata log up to ``offset``, at most ``timeout_s`` seconds; whether they
        all did."""
        deadline = self.loop.time() + timeout_s
        while True:
            behind = [n for n in self._live_ids() if n != self.node_id and self._applied_by.get(n, -1) < offset]
            remaining = deadline - self.loop.time()
            if not behind:
                return True
            if remaining <= 0:
                log.info("metadata offset %d: brokers %s did not report it applied within %.1fs",
                         offset, behind, timeout_s)
                return False
            fut = self.loop.create_future()
            self._applied_by_waiters.append(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except asyncio.TimeoutError:
                pass

    async def wait_applied(self, offset: int, timeout_s: float) -> None:
        """Until this broker applied the metadata log up to ``offset``.

        Raises:
            KafkaError(REQUEST_TIMED_OUT): not within ``timeout_s``.
        """
        if self.applied_offset >= offset:
            return
        fut = self.loop.create_future()
        self._apply_waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            raise KafkaError(f"metadata offset {offset} not applied within {timeout_s:.1f}s",
                             ErrorCode.REQUEST_TIMED_OUT) from None

    def _meta_propose(self, rec: dict) -> tuple[int, int]:
        payload = bytearray(build_batch([(None, encode_record(rec))]))
        info = self.meta.leader_append(payload)
        return info.last_offset, self.meta.node.term

    async def _propose_and_wait(self, rec: dict, timeout_s: float) -> dict:
        """Propose ``rec`` as metadata leader and wait until it is applied here.

        Returns ``{"error", "message", "offset"}`` once applied, or ``{"retry": True}`` as soon
        as it cannot commit as proposed (leadership lost, see :meth:`_drop_lost_proposals`) or
        when ``timeout_s`` passes first."""
        try:
            offset, term = self._meta_propose(rec)
        except KafkaError:
            return {"retry": True}
        fut = self.loop.create_future()
        self._proposals[offset] = (term, fut)
        try:
            return await asyncio.wait_for(fut, max(timeout_s, 0.0))
        except asyncio.TimeoutError:
            return {"retry": True}
        finally:
            if self._proposals.get(offset, (None, None))[1] is fut:
                del self._proposals[offset]

    # ================================================================== liveness
    def _live_ids(self) -> list[int]:
        if self.meta.node.is_leader:
            self._leader_state()
            now = self.loop.time()
            timeout = self.config.broker_session_timeout_ms / 1000
            # Kafka places replicas on registered, unfenced brokers only; a static voter (--peers)
            # counts from the start of the term, before its first heartbeat registers it, unless
            # it was unregistered (decommissioned)
            registered, gone = self.image.brokers, self.image.unregistered
            live = {n for n, t in self._last_seen.items()
                    if now - t <= timeout and (n in registered or (n in self.voters and n not in gone))}
            if self.node_id in registered or self.node_id not in gone:
                live.add(self.node_id)
            return sorted(live)
        return sorted(self.live_brokers)

    def _handle_heartbeat(self, req: dict) -> dict:
        self._leader_state()
        node = int(req["node_id"])
        now = self.loop.time()
        self._last_seen[node] = now
        self._applied_by[node] = int(req.get("applied", -1))
        waiters, self._applied_by_waiters = self._applied_by_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        for gid, epoch in dict(req.get("leaders") or {}).items():
            cur = self._claims.get(gid)
            if cur is None or int(epoch) >= cur[1]:
                self._claims[gid] = (node, int(epoch))
        if req.get("reassignments"):
            self._complete_reassignments(req["reassignments"])
        host, port = str(req["host"]), int(req["port"])
        endpoints = endpoints_from_json(req.get("endpoints"))  # absent from brokers older than listeners
        known = self.image.brokers.get(node)
        directory_id = req.get("directory_id")  # absent from brokers older than meta.properties
        rack = req.get("rack")  # broker.rack (KIP-392); None: no rack or an older broker
        rack = None if rack is None else str(rack)
        rpc = tuple(req["rpc"]) if req.get("rpc") else None  # absent from brokers older than observers
        roles = str(req.get("roles") or "broker,controller")
        incarnation = req.get("incarnation")
        if known is None and incarnation and self.image.unregistered.get(node) == incarnation:
            pass  # unregistered while this very process runs (decommissioned): it stays out until it restarts
        elif (known is None or known.host != host or known.port != port or known.endpoints != endpoints
                or known.directory_id != directory_id or known.rack != rack
                or (rpc is not None and known.rpc != rpc) or known.roles != roles
                or (incarnation and known.incarnation != incarnation)) and node not in self._registering:
            self._registering.add(node)

            async def register():
                try:
                    await self._admin_local("register_broker", {"node_id": node, "host": host, "port": port,
                                                                "endpoints": endpoints_to_json(endpoints),
                                                                "directory_id": directory_id, "rack": rack,
                                                                "rpc": rpc, "roles": roles,
                                                                "incarnation": incarnation})
                finally:
                    self._registering.discard(node)
            self._spawn(register())
        live = self._live_ids()
        live_set = set(live)
        return {"live": live, "leaders": {g: [n, e] for g, (n, e) in self._claims.items() if n in live_set},
                "metadata_commit": self.meta.node.commit_index,
                "registered": node in self.image.brokers or node in self._registering}

    async def _heartbeat_loop(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while True:
            self._heartbeat_now.clear()
            beat_waiters, self._beat_waiters = self._beat_waiters, []
            leaders = {gid: g.node.term for gid, g in self.groups.items()
                       if gid != META_GROUP and g.node.is_leader}
            req = {"op": "heartbeat", **self._registration(), "leaders": leaders, "applied": self.applied_offset,
                   "reassignments": self._reassignment_reports()}
            leader = self.meta.node.leader_id
            resp = None
            try:
                if leader == self.node_id:
                    resp = self._handle_heartbeat(req)
                elif leader is not None:
                    resp = await self.transport.rpc(leader, req, max(interval * 2, 0.5))
                else:
                    resp = await self._heartbeat_without_leader(req, max(interval * 2, 0.5))
            except (ConnectionError, asyncio.TimeoutError):
                resp = None
            if resp and resp.get("registered") is False and not self._told_unregistered:
                self._told_unregistered = True  # Kafka: heartbeats fail with BROKER_ID_NOT_REGISTERED
                log.warning("broker %d is not registered (unregistered while running, e.g. decommissioned): it gets "
                            "no replica and is left out of Metadata until it restarts", self.node_id)
            if resp and "live" in resp:
                self.live_brokers = set(int(n) for n in resp["live"]) | {self.node_id}
                self.leaders = {g: (int(v[0]), int(v[1])) for g, v in resp["leaders"].items()}
                self._leader_metadata_commit = int(resp.get("metadata_commit", -1))
            for fut in beat_waiters:
                if not fut.done():
                    fut.set_result(None)
            # Next beat after the interval, or at once when a metadata leader appears or changes
            # (a starting cluster registers every broker as soon as it has a leader).
            try:
                await asyncio.wait_for(self._heartbeat_now.wait(), interval)
            except asyncio.TimeoutError:
                pass

    async def _heartbeat_without_leader(self, req: dict, timeout_s: float) -> dict | None:
        """A heartbeat while this broker knows no metadata leader: to the next broker it has an
        address of (in turn, one a beat), then to the leader that one names, if any.

        The metadata leader sends its log only to voters and registered brokers, so a broker that
        left the quorum and was unregistered while it was down (``remove-controller``, then
        ``broker decommission``) would never hear of a leader again after a restart; its heartbeat
        registers it again, and the leader then adds it as an observer (KRaft's brokers find the
        leader through ``controller.quorum.bootstrap.servers`` the same way). During an election
        it costs one RPC a beat, answered NOT_CONTROLLER.

        Returns:
            the leader's answer, a non-leader's NOT_CONTROLLER answer, or None (no peer known).
        Raises:
            ConnectionError, asyncio.TimeoutError: the asked broker is not reachable.
        """
        candidates = sorted(n for n in self.transport.peers if n != self.node_id)
        if not candidates:
            return None
        target = candidates[self._heartbeat_probe % len(candidates)]
        self._heartbeat_probe += 1
        resp = await self.transport.rpc(target, req, timeout_s)
        hint = resp.get("leader_id") if isinstance(resp, dict) and resp.get("error") else None
        if isinstance(hint, int) and hint not in (self.node_id, target) and hint in self.transport.peers:
            resp = await self.transport.rpc(hint, req, timeout_s)
        return resp

    async def refresh_leaders(self, timeout_s: float) -> None:
        """Heartbeat the metadata leader now (out of turn) and wait for its answer, which
        carries the live brokers, every partition's leader and the leader's metadata commit
        index, then until this broker applied the metadata log up to that index: at most
        ``timeout_s`` seconds in all (a read index, Raft thesis §6.4, for Metadata).

        A broker learns the leaders of partitions it hosts no replica of only from these
        answers; Metadata calls this when it would answer a partition without a leader, so a
        topic created (or a leader elected) a moment ago is not reported leaderless for up to
        one heartbeat interval (Kafka's brokers get leaders in the same metadata records)."""
        if self.meta.node.leader_id is None or timeout_s <= 0:
            return
        deadline = self.loop.time() + timeout_s
        fut = self.loop.create_future()
        self._beat_waiters.append(fut)
        self._heartbeat_now.set()
        try:
            await asyncio.wait_for(fut, timeout_s)
            await self.wait_applied(self._leader_metadata_commit, deadline - self.loop.time())
        except (asyncio.TimeoutError, KafkaError):
            pass
        finally:
            if not fut.done():
                fut.cancel()

    # ================================================================== RPC
    async def on_rpc(self, peer_id: int | None, req: dict) -> dict:
        op = req.get("op")
        if op == "heartbeat":
            if not self.meta.node.is_leader:  # names the leader it knows, for a broker that knows none
                return {"error": ErrorCode.NOT_CONTROLLER, "message": "not the metadata leader",
                        "leader_id": self.meta.node.leader_id}
            return self._handle_heartbeat(req)
        if op == "admin":
            if peer_id is None or peer_id < 0:
                return {"error": ErrorCode.INVALID_REQUEST, "message": "admin over RPC is for brokers"}
            timeout_ms = req.get("timeout_ms", ADMIN_TIMEOUT_MS)  # what the forwarding broker has left
            if not isinstance(timeout_ms, int):
                return {"error": ErrorCode.INVALID_REQUEST, "message": "admin timeout_ms is not an integer"}
            return await self._admin_local(str(req.get("action")), dict(req.get("args") or {}), timeout_ms / 1000)
        if op == "status":
            return self.status()
        if op == "join":  # a new broker (cluster/join.py): from a tool connection, it is no peer yet
            return await self._rpc_join(req)
        extra = self.rpc_ops.get(op) if isinstance(op, str) else None
        if extra is not None:
            if peer_id is None or peer_id < 0:
                return {"error": ErrorCode.INVALID_REQUEST, "message": f"{op} over RPC is for brokers"}
            return await extra(peer_id, req)
        return {"error": ErrorCode.INVALID_REQUEST, "message": f"unknown op {op!r}"}

    async def _rpc_elect_preferred(self, peer_id: int, req: dict) -> dict:
        """RPC ``elect_preferred`` {topic, partition, timeout_ms}: ElectLeaders forwarded by the
        broker that received it to this broker, the partition's leader."""
        try:
            topic, index, timeout_ms = str(req["topic"]), int(req["partition"]), int(req["timeout_ms"])
        except (KeyError, TypeError, ValueError) as exc:
            return {"error": ErrorCode.INVALID_REQUEST, "message": f"bad elect_preferred request: {exc}"}
        code, message = await self.elect_preferred(topic, index, max(timeout_ms, 0) / 1000)
        return {"error": int(code), "message": message}

    # ================================================================== views
    def leader_of(self, topic: str, index: int) -> tuple[int, int]:
        """(leader node id, leader epoch) as this broker knows it; (-1, -1) when none is live."""
        gid = group_id_of(topic, index)
        g = self.groups.get(gid)
        if g is not None and g.node.leader_id is not None:
            leader, epoch = g.node.leader_id, g.node.term
        else:
            leader, epoch = self.leaders.get(gid, (-1, -1))
        if leader != self.node_id and leader not in self.live_brokers:
            return -1, -1
        return leader, epoch

    @property
    def metrics(self) -> "RaftObserver | None":
        """Where the Raft groups report fsync times and role changes: the host's metrics (None
        before the broker created them)."""
        return getattr(self.host, "metrics", None)

    def metadata_leader(self) -> int:
        leader = self.meta.node.leader_id if self.meta is not None else None
        return -1 if leader is None else leader

    def live_broker_endpoints(self, listener_name: str | None = None) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every live broker on ``listener_name`` (each broker's default
        listener when None); brokers that do not advertise that listener are left out, as Kafka
        leaves them out of a Metadata response."""
        return self._broker_endpoints(self.live_brokers | {self.node_id}, listener_name)

    def fenced_broker_endpoints(self, listener_name: str | None = None) -> list[tuple[int, str, int]]:
        """(node id, host, port) on ``listener_name`` of every registered broker that is not live
        (Kafka: fenced by its controller; DescribeCluster v2 with IncludeFencedBrokers, KIP-1073)."""
        return self._broker_endpoints(set(self.image.brokers) - self.live_brokers - {self.node_id}, listener_name)

    def _broker_endpoints(self, node_ids, listener_name: str | None) -> list[tuple[int, str, int]]:
        """(node id, host, port) on ``listener_name`` of each of ``node_ids``, by id: this broker's
        own advertised endpoint, the others' from their registrations; a broker without that
        listener (or registration) is left out."""
        out = []
        for n in sorted(node_ids):
            b = self.image.brokers.get(n)
            if n == self.node_id:
                ep = self.host.advertised_endpoints().get(listener_name) if listener_name else \
                    self.host.advertised()
            else:
                ep = b.endpoint(listener_name) if b is not None else None
            if ep is not None:
                out.append((n, *ep))
        return out

    def controller_id(self) -> int:
        """The ``controller_id`` of Metadata and DescribeCluster answers: the metadata leader
        when the same answer lists it (live and registered), else this broker. Never -1 and
        never a broker the client cannot find: clients send admin requests to it, any broker
        forwards them to the metadata leader (KIP-590), and while a cluster starts the leader
        may be unknown or unregistered (Kafka in KRaft mode answers a random live broker;
        librdkafka waits for a controller it can find until its request times out)."""
        leader = self.metadata_leader()
        if leader >= 0 and any(n == leader for n, _, _ in self.live_broker_endpoints()):
            return leader
        return self.node_id

    def status(self) -> dict:
        node = self.meta.node
        parts = []
        for (topic, index), p in sorted(self.host.replicas.partitions.items()):
            g = getattr(p, "group", None)
            if g is None:
                continue
            n = g.node
            lag = {}
            if n.is_leader:
                last = n.last_offset
                lag = {str(v): max(0, p.kafka_offset(last + 1) - p.kafka_offset(m + 1))
                       for v, m in n.match_offsets().items() if v != self.node_id}
            parts.append({"topic": topic, "partition": index, "replicas": p.replicas, "role": n.role.value,
                          "leader_id": n.leader_id, "leader_epoch": n.term,
                          "log_start_offset": p.kafka_log_start_offset, "log_end_offset": p.kafka_log_end_offset,
                          "high_watermark": p.kafka_high_watermark, "lag": lag,
                          "raft_log_end_offset": p.log_end_offset,  # Raft-internal batches included
                          "raft_voters": sorted(n.voters), "raft_learners": sorted(n.learners),
                          "recovering": n.recovering,
                          "quiet": g.quiet if n.is_leader else not self._should_tick(g)})
        return {
            "node_id": self.node_id,
            "cluster_id": self.image.cluster_id,
            "directory_id": self.host.identity.directory_id,
            "metadata": {"leader_id": node.leader_id, "term": node.term, "commit_index": node.commit_index,
                         "applied_offset": self.applied_offset, "voters": sorted(node.voters),
                         "learners": sorted(node.learners), "recovering": node.recovering},
            "replaced_disk": self.replaced_disk,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "directory_id": b.directory_id,
                         "rack": b.rack, "rpc": list(b.rpc) if b.rpc else None, "roles": b.roles,
                         "live": b.node_id in self.live_brokers or b.node_id == self.node_id}
                        for b in sorted(self.image.brokers.values(), key=lambda b: b.node_id)],
            "partitions": parts,
            # every partition of the metadata with its replicas, hosted here or not (``cluster
            # status`` lists those no answering broker hosts, e.g. all replicas down, as offline)
            "assignments": {t.name: t.assignments for t in self.image.topics.values()},
            "dropped_raft_messages": self.transport.dropped_messages if self.transport else 0,
            "raft_frames_received": self.transport.frames_received if self.transport else 0,
            "raft_messages_received": self.raft_messages_received,
        }
