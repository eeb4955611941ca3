"""The partition group registry of the replicated cluster: one Raft group per hosted replica
(voters = the replica assignment), opened and closed as the metadata image changes, each with
its :class:`~litemq.cluster.partition.ReplicatedPartition` in the broker's replica registry;
leadership changes reported to the broker; preferred-leader balance.

:class:`PartitionGroupRegistry` is one part of :class:`~litemq.cluster.manager.ClusterManager`;
it uses the manager's ``groups``, ``image``, ``host``, ``transport``, ``loop``,
``live_brokers``, ``mark_dirty`` and ``_heartbeat_now``. ElectLeaders (KIP-460, preferred) runs
here on each partition's leader (:meth:`PartitionGroupRegistry.elect_preferred`). Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging

from litemq.cluster.group import RaftGroup
from litemq.cluster.partition import ReplicatedPartition
from litemq.protocol.errors import ErrorCode
from litemq.storage.partition_metadata import read_topic_id, write_topic_id

log = logging.getLogger("litemq.cluster.manager")  # the manager's logger, as before the split

META_GROUP = "__cluster_metadata"
LEADER_BALANCE_MAX_LAG_OFFSETS = 10_000
"""A preferred replica at most this far behind may take leadership back (it catches up first)."""
ELECT_POLL_S = 0.02
"""How often ElectLeaders looks whether the preferred replica leads yet."""


def group_id_of(topic: str, index: int) -> str:
    return f"{topic}-{index}"


class PartitionGroupRegistry:
    """The Raft groups of the replicas this broker hosts (see the module docstring)."""

    def _balance_leaders(self) -> None:
        for gid, g in self.groups.items():
            if gid == META_GROUP or not g.node.is_leader or g.node.transferee is not None:
                continue
            p = self.host.replicas.partitions.get(getattr(g, "tp", None))
            if p is None or not p.replicas or p.replicas[0] == self.node_id:
                continue
            preferred = p.replicas[0]
            if (preferred not in g.node.voters or preferred not in self.live_brokers
                    or not self.transport.connected(preferred)):
                continue  # (not a voter yet: a replica joining by reassignment)
            # Close enough: the transfer itself brings it up to date before TimeoutNow (and gives
            # up after an election timeout), so under steady load it still happens.
            if g.node.match_offsets().get(preferred, -1) >= g.node.last_offset - LEADER_BALANCE_MAX_LAG_OFFSETS:
                log.info("%s: handing leadership back to preferred replica %d", gid, preferred)
                g.node.transfer_leadership(preferred)
                self.mark_dirty(g)

    async def elect_preferred(self, topic: str, index: int, timeout_s: float) -> tuple[int, str | None]:
        """ElectLeaders (KIP-460, preferred) for one partition whose leader is this broker: hand
        leadership to the preferred replica (the first of the assignment) by Raft leadership
        transfer (thesis §3.10) and wait, at most ``timeout_s`` seconds, until it leads.

        Returns ``(error code, message)``: NONE once the preferred replica leads;
        ELECTION_NOT_NEEDED when it already does; PREFERRED_LEADER_NOT_AVAILABLE when it is not
        live, not connected or not caught up within the timeout; NOT_LEADER_OR_FOLLOWER when
        this broker does not lead the partition; UNKNOWN_TOPIC_OR_PARTITION when it hosts no
        replica of it.
        """
        g = self.groups.get(group_id_of(topic, index))
        p = self.host.replicas.partitions.get((topic, index))
        if g is None or p is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        preferred = p.replicas[0] if p.replicas else None
        if g.node.leader_id == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        if not g.node.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if preferred not in self.live_brokers or not self.transport.connected(preferred):
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"preferred replica {preferred} is not live"
        if preferred not in g.node.voters:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, \
                f"preferred replica {preferred} is still joining the partition (reassignment)"
        deadline = self.loop.time() + timeout_s
        while g.node.leader_id != preferred:
            if g.node.is_leader and g.node.transferee is None:
                log.info("%s: ElectLeaders hands leadership to preferred replica %d", g.group_id, preferred)
                g.node.transfer_leadership(preferred)
                g.wake()
                self.mark_dirty(g)
            if self.loop.time() >= deadline:
                return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, \
                    f"preferred replica {preferred} did not take leadership within {timeout_s:.1f}s"
            await asyncio.sleep(ELECT_POLL_S)
        return ErrorCode.NONE, None

    def _reconcile_replicas(self, changed_topics=()) -> None:
        """Open a Raft group for every partition assigned to this broker; apply config changes."""
        host = self.host
        for info in self.image.topics.values():
            cfg = None
            for index, replicas in enumerate(info.assignments):
                if self.node_id not in replicas:
                    continue
                if group_id_of(info.name, index) not in self.groups:
                    self._open_replica(info, index, replicas)
                elif info.name in changed_topics:
                    cfg = cfg or host.log_config_for(info)
                    p = host.replicas.get(info.name, index)
                    if p is not None:
                        p.log.update_config(cfg)

    def _open_replica(self, info, index: int, replicas: list[int]) -> None:
        host = self.host
        cfg = host.log_config_for(info)
        plog = self._loaded_logs.pop((info.name, index), None) or host.log_manager.get(info.name, index)
        recorded = read_topic_id(plog.dir) if plog is not None else None
        if recorded not in (None, info.topic_id):
            # A directory of an earlier topic of the same name (deleted, then created again, and
            # this broker did not get to delete it): never the new topic's data.
            log.warning("%s-%d: the log directory belongs to an earlier topic %s of that name: deleting it",
                        info.name, index, recorded)
            host.log_manager.delete(info.name, index)
            plog, recorded = None, None
        if plog is None:
            plog = host.log_manager.create(info.name, index, cfg)
        else:
            plog.update_config(cfg)
        if recorded is None:
            try:
                write_topic_id(plog.dir, info.topic_id)
            except OSError as exc:
                log.warning("%s-%d: cannot record the topic id: %s", info.name, index, exc)
        p = ReplicatedPartition(info.name, index, plog, host.replicas, replicas)
        gid = group_id_of(info.name, index)
        voters = replicas
        move = self.image.reassignments.get((info.name, index))
        if move is not None and self.node_id not in move.original:
            # Joining by reassignment: start with an empty configuration (never campaigns, counts
            # in no quorum); the leader adds it as a learner and the CONFIG entry that does it (or
            # a snapshot) brings the configuration (cluster/replica_move.py).
            voters = []
        g = RaftGroup(self, gid, plog, voters, on_ready=p.on_ready, election_timeout_ticks=self._election_ticks,
                      recovering=self.replaced_disk)
        g.tp = (info.name, index)
        p.attach(g, on_leader=self._on_partition_leader)
        host.replicas.partitions[(info.name, index)] = p
        self.groups[gid] = g
        fresh = plog.log_end_offset == 0 and g.node.term == 0 and self.node_id in voters
        if fresh and replicas[0] == self.node_id and self.loop is not None:
            g.node.campaign()  # the preferred replica asks first: leaders start balanced
        if self.loop is not None:
            self.mark_dirty(g)

    def _drop_replica(self, topic: str, index: int, delete_log: bool) -> None:
        g = self.groups.pop(group_id_of(topic, index), None)
        if g is not None:
            g.close()
        self.host.replicas.remove(topic, index)
        if delete_log:
            self.host.log_manager.delete(topic, index)

    def _on_partition_leader(self, partition: ReplicatedPartition, leader: bool) -> None:
        # Report a new leadership to the metadata leader at once, not at the next heartbeat:
        # brokers hosting no replica of it learn leaders from the heartbeat answers.
        self._heartbeat_now.set()
        if leader:  # a new leader resumes a reassignment (or repairs its configuration)
            self._reconf_watch.add(group_id_of(partition.topic, partition.index))
        self.host.on_partition_leader(partition.topic, partition.index, leader)

